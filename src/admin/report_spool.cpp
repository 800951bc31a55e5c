// report_dir=: the per-node JSON report of a step, written by the root collector. The directory is the
// admin's: it must be root's and closed to others, and nothing in it is followed, so a user can never make
// root write (or overwrite) a file elsewhere.
#include <mrcheck/admin_record.h>

#include <mrcheck/atomic_file.h>
#include <mrcheck/units.h>

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace mrcheck {

namespace {

bool safe_component(std::string_view s) {
  if (s.empty() || s.size() > 64 || s == "." || s == "..") return false;
  return std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
           c == '.';
  });
}

}  // namespace

status write_node_report(const std::string& dir, std::uint32_t job_id, std::string_view step, std::string_view node,
                         const std::string& json) {
  if (dir.empty() || dir.front() != '/')
    return status::error(fmt::format("report_dir '{}' is not absolute", escape_line(dir, 128)));
  std::string step_part(step);
  std::replace(step_part.begin(), step_part.end(), ' ', '_');
  if (!safe_component(step_part) || !safe_component(node)) {
    return status::error(fmt::format("report_dir: unsafe file name part '{}' / '{}'", escape_line(step_part, 32),
                                     escape_line(node, 64)));
  }
  // O_NOFOLLOW on the directory itself; the checks below run on what was opened, not on the path again.
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0) return status::from_errno(fmt::format("report_dir {}", escape_line(dir, 128)), errno);
  struct stat st {};
  if (::fstat(dfd, &st) != 0) {
    int e = errno;
    ::close(dfd);
    return status::from_errno(fmt::format("report_dir {}: fstat", escape_line(dir, 128)), e);
  }
  if (st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH))) {
    ::close(dfd);
    return status::error(
        fmt::format("report_dir {} must be owned by root and not writable by group or others "
                    "(owner uid {}, mode {:o}): refused",
                    escape_line(dir, 128), st.st_uid, st.st_mode & 07777));
  }
  std::string name = fmt::format("job{}.{}.{}.json", job_id, step_part, node);
  auto s = write_file_at(dfd, name, json + "\n", 0644, false, fmt::format("report_dir {}", escape_line(dir, 128)));
  ::close(dfd);
  if (!s) return s;
  return status::ok();
}

}  // namespace mrcheck
