// Shared by the fuzz targets: invariant checks that fail loudly (libFuzzer records the input as a crash) and
// the small helpers the harnesses need to feed text to parsers that want a file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>
#include <sys/mman.h>
#include <unistd.h>

namespace mrcheck::fuzz {

// A broken invariant is a finding: print what broke and abort so libFuzzer saves the input.
[[noreturn]] inline void broken(const char* what, std::string_view detail = {}) {
  std::fprintf(stderr, "mrcheck: fuzz: invariant broken: %s: %.*s\n", what, static_cast<int>(detail.size()),
               detail.data());
  std::abort();
}

#define MRCHECK_FUZZ_REQUIRE(cond, detail) \
  do {                                     \
    if (!(cond)) ::mrcheck::fuzz::broken(#cond, (detail)); \
  } while (0)

// MRCHECK_FUZZ_STRICT=1 turns on checks of properties the code does not meet yet (README.md, "Findings"): they
// stay off by default so CI fuzzing is green until the fix lands, and on for whoever works on the fix.
inline bool strict() {
  static const bool on = std::getenv("MRCHECK_FUZZ_STRICT") != nullptr;
  return on;
}

// A private directory made with mkdtemp(TEMPLATE) for the harnesses that need real files, removed when the
// fuzzer exits normally (-max_total_time, -runs, a replay), so CI runs leave nothing behind in /tmp. A crash
// keeps it, next to its reproducer.
inline std::filesystem::path private_dir(std::string tmpl) {
  static std::vector<std::filesystem::path> dirs;
  if (mkdtemp(tmpl.data()) == nullptr) broken("mkdtemp failed", tmpl);
  if (dirs.empty()) {
    std::atexit([] {
      std::error_code ec;
      for (const auto& d : dirs) std::filesystem::remove_all(d, ec);
    });
  }
  dirs.emplace_back(tmpl);
  return dirs.back();
}

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Printable ASCII only (0x20-0x7e): what every string meant for a log line, a drain reason, an AdminComment or
// a user's terminal must be once it has been through escape_line().
inline bool printable_ascii(std::string_view s) {
  for (unsigned char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

// Same, but newlines allowed (multi-line human text such as findings_to_text()).
inline bool printable_lines(std::string_view s) {
  for (unsigned char c : s) {
    if (c != '\n' && (c < 0x20 || c > 0x7e)) return false;
  }
  return true;
}

// A file that lives only in memory, for the parsers that take a path: no disk I/O, nothing left behind.
class memfile {
 public:
  explicit memfile(std::string_view content) {
    fd_ = memfd_create("mrcheck-fuzz", MFD_CLOEXEC);
    if (fd_ < 0) broken("memfd_create failed");
    std::size_t off = 0;
    while (off < content.size()) {
      ssize_t n = ::write(fd_, content.data() + off, content.size() - off);
      if (n <= 0) broken("write to memfd failed");
      off += static_cast<std::size_t>(n);
    }
    // Readers of fd() start at the beginning; readers of path() open their own description anyway.
    if (::lseek(fd_, 0, SEEK_SET) != 0) broken("lseek on memfd failed");
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~memfile() {
    if (fd_ >= 0) ::close(fd_);
  }
  memfile(const memfile&) = delete;
  memfile& operator=(const memfile&) = delete;
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace mrcheck::fuzz
