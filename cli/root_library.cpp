// B4 (SECURITY.md): root's `mrcheck probe nccl` loads a library only through a descriptor it checked. Every prefix
// of the path as given must be root's (no link a user placed or could replace), then the path is resolved once
// (realpath), then opened again from `/` one component at a time with O_NOFOLLOW: every directory
// on the way and the file itself must be root's and not writable by group or others (a sticky directory
// excepted for the directories), and a component that became a link since is refused. The ranks then load
// `/proc/PID/fd/N` of this process, the file that was checked, never the path again: a link swapped between
// the check and the load changes nothing.
#include "root_library.h"

#include <mrcheck/units.h>

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

namespace mrcheck::cli {

namespace {

std::string not_roots(const std::string& what, const struct stat& st) {
  return fmt::format("{} is not root's alone (owner uid {}, mode {:o})", escape_line(what, 300), st.st_uid,
                     st.st_mode & 07777);
}

// A directory (or a link) on the way that only root can change: root's, and not writable by group or others
// unless sticky (where no one may replace another's entry).
bool roots_alone_on_the_way(const struct stat& st) {
  return st.st_uid == 0 && ((st.st_mode & (S_IWGRP | S_IWOTH)) == 0 || (st.st_mode & S_ISVTX) != 0);
}

// The path as given, before it is resolved: each prefix, as the kernel sees it (lstat), must be root's and, a
// directory, not writable by group or others unless sticky. A link in a directory of a user's (pointing at root's
// own library at the moment of the check) is refused here: what it points at is the user's choice, however
// harmless its target is now.
status check_given_path(const std::string& path) {
  std::string full = path;
  if (!path.starts_with('/')) {
    char cwd[PATH_MAX];
    if (!::getcwd(cwd, sizeof cwd)) return status::from_errno("getcwd", errno);
    full = std::string(cwd) + "/" + path;
  }
  for (std::size_t at = full.find('/', 1);; at = full.find('/', at + 1)) {
    std::string prefix = full.substr(0, at);
    struct stat st {};
    if (::lstat(prefix.c_str(), &st) != 0) return status::from_errno("lstat " + escape_line(prefix, 300), errno);
    // A link's own mode bits mean nothing (lrwxrwxrwx): only its owner counts.
    bool ok = S_ISLNK(st.st_mode) ? st.st_uid == 0 : roots_alone_on_the_way(st);
    if (!ok) return status::error(not_roots(prefix, st));
    if (at == std::string::npos) return status::ok();
  }
}

}  // namespace

result<int> open_root_library(const std::string& path) {
  if (auto given = check_given_path(path); !given.is_ok()) return given;
  char buf[PATH_MAX];
  if (!::realpath(path.c_str(), buf)) return status::from_errno("resolve " + escape_line(path, 300), errno);
  std::string real = buf;
  int dir = ::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return status::from_errno("open /", errno);
  std::string walked;
  std::size_t at = 1;
  for (;;) {
    struct stat st {};
    if (::fstat(dir, &st) != 0 || !roots_alone_on_the_way(st)) {
      ::close(dir);
      return status::error(not_roots(walked.empty() ? "/" : walked, st));
    }
    std::size_t slash = real.find('/', at);
    bool last = slash == std::string::npos;
    std::string part = real.substr(at, last ? std::string::npos : slash - at);
    walked += "/" + part;
    int next = ::openat(dir, part.c_str(), (last ? O_RDONLY : O_PATH | O_DIRECTORY) | O_NOFOLLOW | O_CLOEXEC);
    int e = errno;
    ::close(dir);
    if (next < 0) return status::from_errno("open " + escape_line(walked, 300) + " (no link followed)", e);
    if (last) {
      if (::fstat(next, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH))) {
        ::close(next);
        return status::error(not_roots(walked, st));
      }
      return next;
    }
    dir = next;
    at = slash + 1;
  }
}

std::string loadable_path(int fd) { return fmt::format("/proc/{}/fd/{}", ::getpid(), fd); }

}  // namespace mrcheck::cli
