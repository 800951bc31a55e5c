#include <mrcheck/sysroot.h>

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
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

fs::path sysroot::host_path(std::string_view path) const {
  if (is_host()) return fs::path(path);
  std::string_view rel = path;
  while (!rel.empty() && rel.front() == '/') rel.remove_prefix(1);
  return root_ / rel;
}

void sysroot::record(access a, std::string_view path) const {
  if (recorder_) recorder_(a, std::string(path));
}

result<std::string> sysroot::read(std::string_view path, std::size_t max) const {
  auto hp = host_path(path);
  int fd = ::open(hp.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
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
  std::error_code ec;
  std::vector<std::string> names;
  fs::directory_iterator it(host_path(path), ec);
  if (ec) return status::from_errno(fmt::format("list {}", path), ec.value());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) return status::from_errno(fmt::format("list {}", path), ec.value());
    names.push_back(it->path().filename().string());
    if (names.size() > 100000) return status::error(fmt::format("list {}: more than 100000 entries", path));
  }
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
  return ::lstat(host_path(path).c_str(), &st) == 0 || ::stat(host_path(path).c_str(), &st) == 0;
}

}  // namespace mrcheck
