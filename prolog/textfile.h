// mrcheck-prolog's Prometheus textfile: one gauge per check for node_exporter's textfile collector, so a
// drained or degraded node shows on the dashboards admins already watch, not only in `sinfo -R`.
//
// Format: the Prometheus text exposition format 0.0.4 (HELP and TYPE lines, label values escaped:
// backslash, double quote and line feed), which the textfile collector reads from *.prom files in its
// --collector.textfile.directory. The file is replaced atomically (a temporary in the same directory, then
// rename), the pattern node_exporter's documentation gives, so the collector never reads half a file.
#pragma once

#include <mrcheck/check.h>
#include <mrcheck/status.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mrcheck {

struct node_facts;
class sysroot;

// The gauge value of a verdict: -1 skip (not applicable here), 0 pass, 1 warn, 2 fail, 3 error (the
// checker broke; says nothing about the node).
int prometheus_status_value(verdict v);

// A label value as the exposition format wants it inside double quotes: '\' -> "\\", '"' -> "\"",
// line feed -> "\n". Every other byte is kept (the format is UTF-8; check ids are ASCII anyway).
std::string prometheus_label_value(std::string_view v);

// The text exposition format, one metric family at a time: family() writes HELP and TYPE, sample() one line with
// its labels escaped. A new metric is one family() and its sample() calls in prometheus_textfile().
class exposition {
 public:
  using labels = std::vector<std::pair<std::string_view, std::string>>;
  void family(std::string_view name, std::string_view type, std::string_view help);
  void sample(std::string_view name, const labels& l, std::string_view value);
  const std::string& text() const { return out_; }

 private:
  std::string out_;
};

// The first three families: mrcheck_check_status{check="<id>"} per check in report order, mrcheck_status (the
// worst verdict, as report::overall), mrcheck_last_run_timestamp_seconds = `now_unix`.
std::string prometheus_textfile(const report& r, std::int64_t now_unix);

// What the whole file says besides the report (docs/prometheus.md lists every series and label).
struct textfile_input {
  std::int64_t now_unix = 0;
  std::string node;                    // Slurm's node name (label `node`)
  std::string mode;                    // prolog | healthcheck
  std::string hpc_job;                 // the job of a prolog run, as DCGM-exporter's hpc_job label; "" when none
  const node_facts* facts = nullptr;   // per-device info series (RDMA devices, ports, GPUs) when set
  std::vector<std::string> gpu_uuids;  // parallel to facts->gpus (read_gpu_uuids); "" where unknown
};

// Each GPU's UUID ("GPU-8c1f...") from the NVIDIA driver's /proc/driver/nvidia/gpus/<BDF>/information
// ("GPU UUID:" line), the value DCGM-exporter puts in its UUID label; "" where the file or line is missing.
// Read here, only for the textfile's label (node_facts has no UUID).
std::vector<std::string> read_gpu_uuids(const sysroot& root, const node_facts& f);

// The whole file: the three families above, then mrcheck_check_state{check,state} (one series per verdict,
// 1 for the check's), mrcheck_build_info, mrcheck_run_info and the per-device info series.
std::string prometheus_textfile(const report& r, const textfile_input& in);

// Writes `content` to PATH atomically: creates PATH.<pid>.tmp in PATH's directory (O_EXCL|O_NOFOLLOW, 0644;
// the collector only reads names ending in .prom), writes it, renames it over PATH. Refused, with nothing
// written: a relative PATH, a PATH that is a symlink or not a regular file, a directory that is missing,
// not a directory or (when running as root, `euid` == 0) writable by group or others without being root's
// and sticky - whoever can write there could swap the file under root. The temporary is removed on
// failure.
status write_textfile(const std::string& path, std::string_view content, uid_t euid);

}  // namespace mrcheck
