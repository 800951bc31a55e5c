// report_dir=: the per-node JSON report of a step, written by the root collector. The directory is the
// admin's: it must be root's and closed to others, and nothing in it is followed, so a user can never make
// root write (or overwrite) a file elsewhere.
#include <mrcheck/admin_record.h>

#include <mrcheck/private_dir.h>
#include <mrcheck/units.h>

#include <fmt/format.h>

#include <algorithm>

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
  std::string step_part(step);
  std::replace(step_part.begin(), step_part.end(), ' ', '_');
  if (!safe_component(step_part) || !safe_component(node)) {
    return status::error(fmt::format("report_dir: unsafe file name part '{}' / '{}'", escape_line(step_part, 32),
                                     escape_line(node, 64)));
  }
  auto d = open_private_dir(dir, 0, "report_dir");
  if (!d) return d.error();
  std::string name = fmt::format("job{}.{}.{}.json", job_id, step_part, node);
  if (auto w = write_file_at(*d, name, json + "\n", 0644, true); !w) {
    return status::error(fmt::format("report_dir {}: {}", escape_line(dir, 128), w.message()));
  }
  return status::ok();
}

}  // namespace mrcheck
