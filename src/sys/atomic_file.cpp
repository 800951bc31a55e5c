// Writes and reads relative to a directory descriptor, never following a symlink (include/mrcheck/atomic_file.h).
#include <mrcheck/atomic_file.h>

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace mrcheck {

status write_file_at(int dfd, const std::string& name, std::string_view body, mode_t mode, bool sync,
                     std::string_view what) {
  std::string tmp = fmt::format(".{}.{}.tmp", name, ::getpid());
  ::unlinkat(dfd, tmp.c_str(), 0);  // a leftover of a killed run with our pid; O_EXCL refuses anything else
  int fd = ::openat(dfd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return status::from_errno(fmt::format("{}: create {}", what, tmp), errno);
  const char* p = body.data();
  std::size_t left = body.size();
  int werr = 0;
  while (left > 0) {
    ssize_t w = ::write(fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      werr = w < 0 ? errno : EIO;
      break;
    }
    p += w;
    left -= static_cast<std::size_t>(w);
  }
  if (!werr && sync && ::fsync(fd) != 0) werr = errno;
  if (::close(fd) != 0 && !werr) werr = errno;
  if (!werr && ::renameat(dfd, tmp.c_str(), dfd, name.c_str()) != 0) werr = errno;
  if (werr) {
    ::unlinkat(dfd, tmp.c_str(), 0);
    return status::from_errno(fmt::format("{}: write {}", what, name), werr);
  }
  return status::ok();
}

result<std::string> read_file_at(int dfd, const std::string& name, uid_t owner, std::size_t max,
                                 std::string_view what) {
  int fd = ::openat(dfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return status::from_errno(fmt::format("{}: open {}", what, name), errno);
  struct stat sb {};
  if (::fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_uid != owner || (sb.st_mode & (S_IWGRP | S_IWOTH)) ||
      sb.st_size > static_cast<off_t>(max)) {
    ::close(fd);
    return status::error(
        fmt::format("{}: {} is not a regular file of uid {}, private and at most {} bytes", what, name, owner, max));
  }
  std::string text(static_cast<std::size_t>(sb.st_size), '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      return status::from_errno(fmt::format("{}: read {}", what, name), e);
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  text.resize(got);
  return text;
}

}  // namespace mrcheck
