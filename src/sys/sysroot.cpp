#include <mrcheck/sysroot.h>

#include <fmt/format.h>

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>

namespace mrcheck {

namespace fs = std::filesystem;

result<sysroot> sysroot::open(const fs::path& dir) {
  std::error_code ec;
  if (dir.empty()) return status::error("root directory: empty path");
  auto abs = fs::absolute(dir, ec);
  if (ec) return status::from_errno(fmt::format("root directory {}", dir.string()), ec.value());
  if (!fs::is_directory(abs, ec)) {
    return status::error(fmt::format("root directory {}: does not exist or is not a directory", dir.string()));
  }
  auto canon = fs::canonical(abs, ec);
  if (ec) return status::from_errno(fmt::format("root directory {}", dir.string()), ec.value());
  return sysroot(canon);
}

result<sysroot> sysroot::open_process_root(int pid) {
  const fs::path link = fmt::format("/proc/{}/root", pid);
  std::error_code ec;
  if (!fs::is_directory(link, ec)) {
    return status::from_errno(fmt::format("root directory of process {}", pid), ec ? ec.value() : ENOTDIR);
  }
  return sysroot(link);
}

fs::path sysroot::host_path(std::string_view path) const {
  if (is_host()) return fs::path(path);
  std::string_view rel = path;
  while (!rel.empty() && rel.front() == '/') rel.remove_prefix(1);
  return root_ / rel;
}

// B9 (SECURITY.md): a dump tree is read beneath its root, and no link leaves it. openat2(RESOLVE_IN_ROOT) resolves
// every link of the tree as if the tree were `/` (an absolute link or `../` stays inside, as on the node the dump
// came from); magic links (/proc/self/fd/N) are refused. Where the kernel has no openat2 (before 5.6), each
// component is opened with O_NOFOLLOW: a link anywhere on the path is refused.
namespace {

// Before openat2: one component at a time from `root`, each with O_NOFOLLOW, `..` refused.
long open_walk(int root, std::string_view rel, int flags) {
  int dir = ::dup(root);
  while (dir >= 0) {
    while (rel.starts_with('/')) rel.remove_prefix(1);
    std::size_t slash = rel.find('/');
    std::string part(rel.substr(0, slash));
    bool last = slash == std::string_view::npos;
    rel = last ? std::string_view() : rel.substr(slash);
    if (part.empty() || part == ".") {
      if (last) return dir;
      continue;
    }
    if (part == "..") {
      ::close(dir);
      errno = EXDEV;
      return -1;
    }
    int next = ::openat(dir, part.c_str(), (last ? flags : O_PATH | O_DIRECTORY) | O_NOFOLLOW | O_CLOEXEC);
    int e = errno;
    ::close(dir);
    errno = e;
    if (last || next < 0) return next;
    dir = next;
  }
  return -1;
}

int open_beneath(const fs::path& root_dir, std::string_view path, int flags) {
  while (path.starts_with('/')) path.remove_prefix(1);
  const std::string rel = path.empty() ? std::string(".") : std::string(path);
  int root = ::open(root_dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) return -1;
  struct open_how how {};
  how.flags = static_cast<std::uint64_t>(flags | O_CLOEXEC);
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  long fd = ::syscall(SYS_openat2, root, rel.c_str(), &how, sizeof how);
  // No openat2 (before 5.6; EPERM: a seccomp filter that forbids it): every link refused instead.
  if (fd < 0 && (errno == ENOSYS || errno == EPERM)) fd = open_walk(root, rel, flags);
  int e = errno;
  ::close(root);
  errno = e;
  return static_cast<int>(fd);
}

int sysroot_open_in_root(const sysroot& r, std::string_view path, int flags) {
  if (r.is_host()) return ::open(std::string(path).c_str(), flags);
  return open_beneath(r.root(), path, flags);
}

}  // namespace

void sysroot::record(access a, std::string_view path) const {
  if (recorder_) recorder_(a, std::string(path));
}

result<std::string> sysroot::read(std::string_view path, std::size_t max) const {
  int fd = sysroot_open_in_root(*this, path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return status::from_errno(fmt::format("read {}", path), errno);
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    return status::from_errno(fmt::format("read {}", path), EISDIR);
  }
  if (::fstat(fd, &st) == 0 && !S_ISREG(st.st_mode)) {
    // FIFOs, devices and sockets are never facts; refusing them keeps a hostile tree from blocking us.
    ::close(fd);
    return status::error(fmt::format("read {}: not a regular file", path));
  }
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return status::from_errno(fmt::format("read {}", path), err);
    }
    if (n == 0) break;
    if (out.size() + static_cast<std::size_t>(n) > max) {
      ::close(fd);
      return status::error(fmt::format("read {}: larger than {} bytes, refusing to truncate", path, max));
    }
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  record(access::file, path);
  return out;
}

result<std::string> sysroot::read_value(std::string_view path) const {
  auto r = read(path);
  if (!r) return r;
  std::string& s = r.value();
  while (!s.empty() &&
         (s.back() == '\n' || s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\0')) {
    s.pop_back();
  }
  return r;
}

result<std::vector<std::string>> sysroot::list(std::string_view path) const {
  std::vector<std::string> names;
  int fd = sysroot_open_in_root(*this, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR* d = fd >= 0 ? ::fdopendir(fd) : nullptr;
  if (!d) {
    int e = errno;
    if (fd >= 0) ::close(fd);
    return status::from_errno(fmt::format("list {}", path), e);
  }
  while (struct dirent* ent = ::readdir(d)) {
    std::string_view n = ent->d_name;
    if (n == "." || n == "..") continue;
    names.emplace_back(n);
    if (names.size() > 100000) {
      ::closedir(d);
      return status::error(fmt::format("list {}: more than 100000 entries", path));
    }
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  record(access::dir, path);
  return names;
}

result<std::vector<std::string>> sysroot::list_matching(std::string_view path,
                                                        const std::function<bool(std::string_view)>& keep) const {
  sysroot quiet = *this;
  quiet.recorder_ = nullptr;
  auto names = quiet.list(path);
  if (!names) return names;
  std::erase_if(*names, [&keep](const std::string& n) { return !keep(n); });
  std::string dir(path);
  if (!dir.ends_with('/')) dir += '/';
  for (const auto& n : *names) record(access::name, dir + n);
  return names;
}

result<std::string> sysroot::read_link(std::string_view path) const {
  std::error_code ec;
  auto target = fs::read_symlink(host_path(path), ec);
  if (ec) return status::from_errno(fmt::format("readlink {}", path), ec.value());
  record(access::link, path);
  return target.string();
}

bool sysroot::exists(std::string_view path) const {
  struct stat st {};
  if (!is_host()) {
    // The name itself (a link counts), or what it leads to inside the tree.
    if (::lstat(host_path(path).c_str(), &st) == 0) return true;
    int fd = sysroot_open_in_root(*this, path, O_PATH | O_CLOEXEC);
    if (fd >= 0) ::close(fd);
    return fd >= 0;
  }
  return ::lstat(host_path(path).c_str(), &st) == 0 || ::stat(host_path(path).c_str(), &st) == 0;
}

}  // namespace mrcheck
