// `mrcheck explain` as one call: a log in, its findings (what the program itself called fatal, with cause and fix),
// the path note and the container notes out, as text or as the JSON of docs/schema/explain.schema.json.
//
// explain_log() reads the log once, line by line in bounded memory (scan_fd, include/mrcheck/nccl_log.h): each line
// is classified once and handed to the listeners that asked for its words (failure events and ranks in the scanner,
// the container evidence, the path lines). Node facts are read only when there is something to judge with them.
// The front end (cli/cmd_explain.cpp) only parses options and prints.
#pragma once

#include <mrcheck/container_runtime.h>
#include <mrcheck/nccl_log.h>
#include <mrcheck/nccl_probe.h>
#include <mrcheck/status.h>
#include <mrcheck/sysroot.h>

#include <nlohmann/json_fwd.hpp>

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace mrcheck {

// ---- Explaining: groups + node evidence -> findings (what `mrcheck explain` prints) ----

// Where the node evidence came from, so a finding can say how far it applies.
struct evidence_origin {
  std::string hostname;    // the node the evidence describes ("" unknown)
  bool from_root = false;  // read from a --root tree (a dump of the node chosen by the user): applies as is
  container_runtime log_runtime = container_runtime::none;  // a runtime the log itself names (pyxis:, Apptainer)
};

// Evidence for explain: collect_facts() on `root` (libraries loaded only on the host), plus CAP_IPC_LOCK from
// /proc/<pid>/status, the rdma-core flavour from /var/lib/dpkg/status and container markers. Never fails;
// unreadable facts stay unset.
node_evidence explain_evidence(const sysroot& root, evidence_origin& origin);
// A runtime named in the log (pyxis:, Apptainer, podman lines) sets the evidence's runtime when the node facts
// found none: the fix text is then that runtime's.
void apply_container_log(const container_log_scan& scan, node_evidence& e);

struct finding {
  nccl_group group;
  diagnosis diag;
  bool evidence_applies = true;  // false: the node facts were not used (the failures are not known to be this node's)
};

// One finding per group, in order of first line. Node evidence is used only with a --root tree (origin.from_root)
// or when every host the group names is this host; otherwise (another host, or a log that names none) the finding
// is made from the log alone (plus a runtime the log names), `confirmed` is cleared and an evidence line says which
// command supplies the failing node's facts. An ENOMEM of a call creating an HCA object the log also shows the
// device refusing ("limits exceeded") is diagnosed as that limit.
std::vector<finding> explain_groups(const nccl_log_scanner& scanner, const node_evidence& evidence,
                                    const evidence_origin& origin);
// The groups that are failures: what the program itself called fatal. "NET/IB : No device found" (an INFO line)
// only when the job asked for InfiniBand (asked_for_ib()) or is multi-node on nodes whose facts show HCAs; the
// program's generic "it failed" lines (system_error) only when nothing more precise is in the log, or a crash.
std::vector<const nccl_group*> failure_groups(const nccl_log_scanner& scanner, const node_evidence& evidence,
                                              const evidence_origin& origin);

// ---- The path NCCL took, from its INFO lines (NCCL_DEBUG=INFO): a silent fallback the node could avoid ----
// GPUDirect RDMA off and sockets instead of InfiniBand never print an error (docs/facts/verbs-and-nccl.md §4).
// The lines scan_fd() shows its observer that carry NCCL's transport and GPUDirect lines go, as they come, to
// nccl_log_reader (src/nccl/log_parse.cpp), one of the line reader's listeners: at most 4096 lines and 1 MiB of
// them; past that they are counted.
struct nccl_path_scan {
  nccl_log_reader reader;
  std::size_t bytes = 0;  // of the lines read, newlines counted
  std::size_t kept = 0;
  std::size_t skipped = 0;      // relevant lines past the caps
  std::set<std::string> hosts;  // from NCCL's "host:pid:tid" headers, at most 16
  void feed(std::string_view line);
};
struct path_note {
  std::string what;  // "gdr_off" | "sockets"
  std::string text;  // what NCCL did, why, and what this node could do instead
  std::string fix;
  bool evidence_applies = false;  // the node facts are of the node that wrote the log
};
// A note when the log shows NCCL staging GPU data through host memory (NET/IB channels without /GDRDMA) or using
// sockets, and the node facts show the node could do better (a registered nvidia_peermem client or DMA-BUF with
// the open GPU modules; RDMA devices). Facts of another node (not origin.from_root, and a log host that is not
// this host) make the note say which node to check instead. None when the log has no such lines, when NCCL's
// own reason is the PCI distance (the topology), or when the facts show nothing better.
// `evidence` is asked only when the log shows a fallback (so a clean log reads no node facts); `origin` is read
// after it.
std::optional<path_note> judge_path(const nccl_path_scan& scan, const std::function<const node_evidence&()>& evidence,
                                    const evidence_origin& origin);

// The note for a "No device found" that is no failure (failure_groups() left it out): NCCL used sockets.
std::optional<path_note> no_device_note(const nccl_log_scanner& scanner, const std::vector<finding>& findings);

// "0-3,5,7-8"; "" for none.
std::string format_ranks(const std::set<int>& ranks);

// Human text: one block per finding, the cause and the call first, then why, evidence (errno, limits,
// versions, resources), fix, and the fallback with its cost last.
std::string findings_to_text(const std::vector<finding>& findings, std::string_view source,
                             const nccl_log_scanner& scanner);
// The stable JSON documented in cli/cmd_explain.cpp.
nlohmann::json findings_to_json(const std::vector<finding>& findings, std::string_view source,
                                const nccl_log_scanner& scanner, const evidence_origin& origin);

// ---- The front door ----

struct explain_options {
  std::string source = "-";  // how the output names the log (a file name, "-" for stdin); escaped when printed
};

struct explain_report {
  std::string source;  // escaped
  nccl_log_scanner scanner;
  container_log_scan containers;
  evidence_origin origin;
  std::vector<finding> findings;  // in order of first line; empty: no failure (exit 0)
  std::optional<path_note> path;
};

// Explains the log read from `fd` (to EOF) with the facts of `root` (this node when root.is_host()). Error status
// only when read() fails; whatever the bytes are (binary, invalid UTF-8, a line of gigabytes, a truncated file)
// the report is made, in time linear in the log and memory bounded by the scanner's caps.
status explain_log(int fd, const sysroot& root, const explain_options& opts, explain_report& out);

// The findings, the container notes and the path note, as `mrcheck explain` prints them.
std::string explain_text(const explain_report& r);
// The JSON documented at the top of cli/cmd_explain.cpp (schema_version included).
nlohmann::json explain_json(const explain_report& r);

}  // namespace mrcheck
