// What a rank child reads and writes: its arguments and the line I/O of its control pipes (rank_io.h). Used by
// the rank (`mrcheck probe nccl --rank`) and by the tests' stand-in for it (tests/unit/fake_nccl_rank.cpp).
#include "nccl/rank_io.h"

#include <mrcheck/nccl_log.h>

#include <fmt/format.h>

#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <optional>
#include <string>

namespace mrcheck {
namespace {

std::optional<std::uint64_t> to_u64(std::string_view s) {
  std::uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

}  // namespace

result<nccl_rank_args> parse_nccl_rank_args(const std::vector<std::string>& a) {
  nccl_rank_args r;
  for (std::size_t i = 0; i < a.size(); i += 2) {
    std::string_view k = a[i];
    if (i + 1 >= a.size()) return status::error(fmt::format("{} needs a value", escape_line(k, 32)));
    std::string_view v = a[i + 1];
    auto number = [&](int lo, int hi, int& into) -> bool {
      auto n = to_u64(v);
      if (!n || *n < static_cast<std::uint64_t>(lo) || *n > static_cast<std::uint64_t>(hi)) return false;
      into = static_cast<int>(*n);
      return true;
    };
    bool ok = true;
    if (k == "--rank") {
      ok = number(0, 1, r.rank);
    } else if (k == "--nranks") {
      ok = number(2, 2, r.nranks);
    } else if (k == "--device") {
      ok = number(0, 1023, r.device);
    } else if (k == "--ctl-fd") {
      ok = number(3, 1023, r.ctl_fd);
    } else if (k == "--id-fd") {
      ok = number(3, 1023, r.id_fd);
    } else if (k == "--release-fd") {
      ok = number(3, 1023, r.release_fd);
    } else if (k == "--count") {
      auto c = to_u64(v);
      if (!c || *c == 0 || *c > (1ULL << 30)) return status::error("--count must be 1 .. 2^30");
      r.count = *c;
    } else if (k == "--nccl-library") {
      r.nccl_library = std::string(v);
    } else {
      return status::error(fmt::format("unknown rank option '{}'", escape_line(k, 32)));
    }
    if (!ok) return status::error(fmt::format("bad value for {}", k));
  }
  return r;
}

}  // namespace mrcheck

namespace mrcheck::detail {

void write_all(int fd, std::string_view s) {
  const char* p = s.data();
  std::size_t n = s.size();
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

void control_writer::line(std::string_view text) const {
  std::string s(text);
  s.push_back('\n');
  write_all(fd_, s);
}

bool read_line(int fd, std::string& out, std::size_t max) {
  out.clear();
  for (;;) {
    char c;
    ssize_t r = ::read(fd, &c, 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    if (c == '\n') return true;
    if (out.size() >= max) return false;
    out.push_back(c);
  }
}

}  // namespace mrcheck::detail
