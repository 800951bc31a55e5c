#include <mrcheck/private_dir.h>

#include <mrcheck/units.h>

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace mrcheck {

dir_handle& dir_handle::operator=(dir_handle&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

dir_handle::~dir_handle() {
  if (fd_ >= 0) ::close(fd_);
}

result<dir_handle> open_private_dir(const std::string& path, uid_t owner, std::string_view what) {
  std::string shown = escape_line(path, 128);
  if (path.empty() || path.front() != '/') return status::error(fmt::format("{} '{}' is not absolute", what, shown));
  // O_NOFOLLOW on the directory itself; the checks below run on what was opened, not on the path again.
  dir_handle d(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (d.fd() < 0) return status::from_errno(fmt::format("{} {}", what, shown), errno);
  struct stat st {};
  if (::fstat(d.fd(), &st) != 0) return status::from_errno(fmt::format("{} {}: fstat", what, shown), errno);
  if ((st.st_uid != 0 && st.st_uid != owner) || (st.st_mode & (S_IWGRP | S_IWOTH))) {
    return status::error(
        fmt::format("{} {} must be owned by {} and not writable by group or others "
                    "(owner uid {}, mode {:o}): refused",
                    what, shown, owner == 0 ? std::string("root") : fmt::format("uid {} or root", owner), st.st_uid,
                    st.st_mode & 07777));
  }
  return d;
}

result<dir_handle> make_dir_at(const dir_handle& parent, const std::string& name, mode_t mode) {
  bool made = ::mkdirat(parent.fd(), name.c_str(), mode) == 0;
  if (!made && errno != EEXIST) return status::from_errno(fmt::format("mkdir {}", escape_line(name, 128)), errno);
  dir_handle d(::openat(parent.fd(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (d.fd() < 0) return status::from_errno(fmt::format("open directory {}", escape_line(name, 128)), errno);
  if (made && ::fchmod(d.fd(), mode) != 0) {
    return status::from_errno(fmt::format("chmod {}", escape_line(name, 128)), errno);
  }
  return d;
}

status write_file_at(const dir_handle& dir, const std::string& name, std::string_view body, mode_t mode, bool replace) {
  std::string shown = escape_line(name, 128);
  std::string tmp = replace ? fmt::format(".{}.{}.tmp", name, ::getpid()) : name;
  if (replace) ::unlinkat(dir.fd(), tmp.c_str(), 0);  // a killed run's leftover with our pid; O_EXCL refuses the rest
  int fd = ::openat(dir.fd(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return status::from_errno(fmt::format("create {}", escape_line(tmp, 128)), errno);
  int werr = ::fchmod(fd, mode) == 0 ? 0 : errno;
  const char* p = body.data();
  std::size_t left = body.size();
  while (!werr && left > 0) {
    ssize_t w = ::write(fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      werr = w < 0 ? errno : EIO;
      break;
    }
    p += w;
    left -= static_cast<std::size_t>(w);
  }
  if (!werr && replace && ::fsync(fd) != 0) werr = errno;
  if (::close(fd) != 0 && !werr) werr = errno;
  if (!werr && replace && ::renameat(dir.fd(), tmp.c_str(), dir.fd(), name.c_str()) != 0) werr = errno;
  if (werr) {
    ::unlinkat(dir.fd(), tmp.c_str(), 0);
    return status::from_errno(fmt::format("write {}", shown), werr);
  }
  return status::ok();
}

result<std::string> read_file_at(const dir_handle& dir, const std::string& name, uid_t owner, std::size_t max) {
  std::string shown = escape_line(name, 128);
  int fd = ::openat(dir.fd(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return status::from_errno(fmt::format("open {}", shown), errno);
  struct stat sb {};
  if (::fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_uid != owner || (sb.st_mode & (S_IWGRP | S_IWOTH)) ||
      sb.st_size > static_cast<off_t>(max)) {
    ::close(fd);
    return status::error(
        fmt::format("{} is not a regular file of uid {}, private and at most {} bytes", shown, owner, max));
  }
  std::string text(static_cast<std::size_t>(sb.st_size), '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      return status::from_errno(fmt::format("read {}", shown), e);
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  text.resize(got);
  return text;
}

}  // namespace mrcheck
