#include <mrcheck/log.h>

#include <unistd.h>

namespace mrcheck {

void stderr_log::write(log_level level, std::string_view line) noexcept {
  if (level != log_level::user && level != log_level::error && static_cast<int>(level) > static_cast<int>(min_)) {
    return;
  }
  // One write() per line so lines from parallel ranks or tasks do not interleave.
  std::string buf;
  try {
    buf.reserve(line.size() + 1);
    buf.append(line);
    buf.push_back('\n');
  } catch (...) {
    return;
  }
  const char* p = buf.data();
  size_t left = buf.size();
  while (left > 0) {
    ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n <= 0) return;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

void vector_log::write(log_level level, std::string_view line) noexcept {
  try {
    lines_.push_back({level, std::string(line)});
  } catch (...) {
  }
}

bool vector_log::contains(std::string_view needle) const {
  for (const auto& e : lines_) {
    if (e.line.find(needle) != std::string::npos) return true;
  }
  return false;
}

}  // namespace mrcheck
