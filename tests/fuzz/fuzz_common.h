// Shared by the fuzz targets: invariant checks that fail loudly (libFuzzer records the input as a crash) and
// the small helpers the harnesses need to feed text to parsers that want a file.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace mrcheck::fuzz {

// A broken invariant is a finding: print what broke and abort so libFuzzer saves the input.
[[noreturn]] inline void broken(const char* what, std::string_view detail = {}) {
  std::fprintf(stderr, "mrcheck: fuzz: invariant broken: %s: %.*s\n", what, static_cast<int>(detail.size()),
               detail.data());
  std::abort();
}

#define MRCHECK_FUZZ_REQUIRE(cond, detail)                 \
  do {                                                     \
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

// The harness's own checks need no coverage feedback (the parsers' coverage guides the search); they run on every
// byte of every output, where per-byte comparison hooks only slow the run down.
#define MRCHECK_FUZZ_CHECKER __attribute__((no_sanitize("coverage"), noinline))

// Printable ASCII only (0x20-0x7e): what every string meant for a log line, a drain reason, an AdminComment or
// a user's terminal must be once it has been through escape_line().
MRCHECK_FUZZ_CHECKER inline bool printable_ascii(std::string_view s) {
  for (unsigned char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

// Same, but newlines allowed (multi-line human text such as findings_to_text()).
MRCHECK_FUZZ_CHECKER inline bool printable_lines(std::string_view s) {
  for (unsigned char c : s) {
    if (c != '\n' && (c < 0x20 || c > 0x7e)) return false;
  }
  return true;
}

// Writes all of `content` at offset 0 of `fd` and cuts the file there: one pwrite() for the usual input, and the
// pages of the last input are reused rather than freed and faulted in again (page faults and syscalls are what
// a harness costs in a VM, far more than the parsers).
inline void rewrite_fd(int fd, std::string_view content, const char* what) {
  std::size_t off = 0;
  while (off < content.size()) {
    ssize_t n = ::pwrite(fd, content.data() + off, content.size() - off, static_cast<off_t>(off));
    if (n <= 0) broken("pwrite failed", what);
    off += static_cast<std::size_t>(n);
  }
  if (::ftruncate(fd, static_cast<off_t>(content.size())) != 0) broken("ftruncate failed", what);
}

// A file that lives only in memory, for the parsers that take a path: no disk I/O, nothing left behind. Each
// slot is one memfd made on first use and rewritten for every later input (memfd_create and close per input
// were a large share of a run), so two memfiles alive at once need two slots.
class memfile {
 public:
  explicit memfile(std::string_view content, int slot = 0) {
    if (slot < 0 || slot >= k_slots) broken("memfile slot out of range");
    static int fds[k_slots] = {-1, -1, -1, -1};
    int& fd = fds[slot];
    if (fd < 0) {
      fd = memfd_create("mrcheck-fuzz", MFD_CLOEXEC);
      if (fd < 0) broken("memfd_create failed");
    }
    fd_ = fd;
    rewrite_fd(fd_, content, "memfd");
    // Readers of fd() start at the beginning; readers of path() open their own description anyway.
    if (::lseek(fd_, 0, SEEK_SET) != 0) broken("lseek on memfd failed");
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  memfile(const memfile&) = delete;
  memfile& operator=(const memfile&) = delete;
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

 private:
  static constexpr int k_slots = 4;
  int fd_ = -1;
  std::string path_;
};

// A real file at a fixed path (in a private_dir) that the harness rewrites for every input: opened once, then
// pwrite + ftruncate, instead of an ofstream's open, write and close per input. Parsers open it by path.
class disk_file {
 public:
  explicit disk_file(const std::filesystem::path& p) : path_(p) {
    fd_ = ::open(p.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd_ < 0) broken("open failed", p.native());
  }
  disk_file(const disk_file&) = delete;
  disk_file& operator=(const disk_file&) = delete;
  void set(std::string_view content) const { rewrite_fd(fd_, content, path_.c_str()); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

}  // namespace mrcheck::fuzz
