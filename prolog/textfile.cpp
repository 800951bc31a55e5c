#include "prolog/textfile.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace mrcheck {

int prometheus_status_value(verdict v) {
  switch (v) {
    case verdict::skip: return -1;
    case verdict::pass: return 0;
    case verdict::warn: return 1;
    case verdict::fail: return 2;
    case verdict::error: return 3;
  }
  return 3;
}

std::string prometheus_label_value(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string prometheus_textfile(const report& r, std::int64_t now_unix) {
  std::string out;
  out +=
      "# HELP mrcheck_check_status Verdict of each mrcheck-prolog check in its last run: -1 skip (not applicable), "
      "0 pass, 1 warn, 2 fail, 3 error (the checker itself broke).\n"
      "# TYPE mrcheck_check_status gauge\n";
  for (const auto& c : r.checks) {
    out += fmt::format("mrcheck_check_status{{check=\"{}\"}} {}\n", prometheus_label_value(c.id),
                       prometheus_status_value(c.result));
  }
  out +=
      "# HELP mrcheck_status Worst verdict of mrcheck-prolog's last run (skips ignored): 0 pass, 1 warn, 2 fail, "
      "3 error.\n"
      "# TYPE mrcheck_status gauge\n";
  out += fmt::format("mrcheck_status {}\n", prometheus_status_value(r.overall()));
  out +=
      "# HELP mrcheck_last_run_timestamp_seconds Unix time of mrcheck-prolog's last run.\n"
      "# TYPE mrcheck_last_run_timestamp_seconds gauge\n";
  out += fmt::format("mrcheck_last_run_timestamp_seconds {}\n", now_unix);
  return out;
}

status write_textfile(const std::string& path, std::string_view content, uid_t euid) {
  auto what = [&](std::string_view why) { return fmt::format("textfile {}: {}", path, why); };
  if (path.empty() || path.front() != '/') return status::error(what("not an absolute path"));
  if (path.back() == '/') return status::error(what("names a directory, not a file"));
  // Built in one step: GCC 12 at -O2 reports a false -Wrestrict for `dir = "/"` after a substr() (CI is -Werror).
  const std::size_t slash = path.rfind('/');
  const std::string dir = slash == 0 ? std::string("/") : path.substr(0, slash);

  struct stat ds {};
  if (::stat(dir.c_str(), &ds) != 0) return status::from_errno(what("directory"), errno);
  if (!S_ISDIR(ds.st_mode)) return status::error(what("its directory is not a directory"));
  // Root writes here, so only root may create names in the directory: where anyone else can (group or world
  // write, sticky or not, or a directory of another owner), a user can plant the name first (a symlink, a
  // directory, the temporary name) and the metrics are never written again (issue 21, finding 6).
  if (euid == 0 && (ds.st_mode & (S_IWGRP | S_IWOTH))) {
    return status::error(
        what(fmt::format("its directory is writable by group or others (mode {:o}), so a user could "
                         "create the file's name first: refused; use a directory only root can write "
                         "(node_exporter's textfile directory)",
                         ds.st_mode & 07777)));
  }
  if (euid == 0 && ds.st_uid != 0) {
    return status::error(what(fmt::format("its directory belongs to uid {}, not root: refused", ds.st_uid)));
  }
  struct stat ps {};
  if (::lstat(path.c_str(), &ps) == 0) {
    if (S_ISLNK(ps.st_mode)) return status::error(what("is a symlink: refused"));
    if (!S_ISREG(ps.st_mode)) return status::error(what("exists and is not a regular file: refused"));
  } else if (errno != ENOENT) {
    return status::from_errno(what("lstat"), errno);
  }

  std::string tmp = fmt::format("{}.{}.tmp", path, ::getpid());
  // O_EXCL|O_NOFOLLOW: a name planted in the directory (a symlink to /etc/shadow) is never followed.
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return status::from_errno(what(fmt::format("create {}", tmp)), errno);
  std::size_t off = 0;
  int err = 0;
  // The umask must not make the file unreadable for node_exporter, which usually runs as its own user.
  if (::fchmod(fd, 0644) != 0) err = errno;
  while (err == 0 && off < content.size()) {
    ssize_t n = ::write(fd, content.data() + off, content.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      err = errno;
      break;
    }
    off += static_cast<std::size_t>(n);
  }
  // No fsync: the file is rewritten at every run (ext4's auto_da_alloc also flushes a file renamed over
  // another); a crash costs one run's metrics, an fsync at every job start costs the prolog's time.
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    return status::from_errno(what(fmt::format("write {}", tmp)), err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return status::from_errno(what(fmt::format("rename {}", tmp)), e);
  }
  return status::ok();
}

}  // namespace mrcheck
