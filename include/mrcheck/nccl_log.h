// Finding NCCL failures in a log: a job's stdout/stderr, a Slurm output file, or captured NCCL output.
//
// Two levels:
//  - parse_nccl_line(): stateless, one line in, at most one event out. For code that already holds lines
//    (the form table's tests feed each row's sample line through it, tests/unit/explain_forms_test.cpp).
//  - nccl_log_scanner: stateful, fed line by line (or a whole fd with scan_fd()); adds what one line cannot
//    know (the rank a process announced earlier, "unhandled system error" tied to the warning before it) and
//    groups repeats by (kind, call, errno, completion status), listing ranks and hosts.
//
// Memory is bounded whatever the input: a line is examined on its first `max_line` bytes, and every table
// (groups, ranks and hosts per group, the pid -> rank map, recent warnings) has a fixed cap; what goes past
// a cap is counted, never stored. Binary input is fine: bytes are never interpreted beyond ASCII matching,
// and every string kept is passed through escape_line().
//
// Recognised (NCCL 2.x, any prefix before them: srun -l "N: ", "[rankN]:", OpenMPI "[1,N]<stdout>:",
// pdsh "host: ", timestamps, and NCCL's own "host:pid:tid [dev] file.cc:line NCCL WARN"):
//   Call to <fn> failed[ with error <strerror>| : <strerror>]   errno by glibc text, "-12", "12", "errno 12"
//   <ibv_fn>(...) failed: <strerror> / (errno N)                UCX, mscclpp and similar wrappers
//   Failed to register memory / Unable to register memory ... RC: -12, Error: <strerror>   (NCCL, aws-ofi-nccl)
//   NET/IB : Got completion [from peer <p>] with error <N> / status=<N>   (N is an ibv_wc_status, not an errno)
//   Duplicate GPU detected : rank A and rank B ...
//   NET/IB : No device found
//   DMA-BUF / dmabuf failures
//   unhandled system error / ncclSystemError / unhandled cuda error / ncclInternalError / "internal error - please
//   report" / ncclCommInitRank failed                         attached to the failure before it, if any
// and, beyond NCCL's NET/IB (docs/transports.md):
//   NET/OFI Couldn't enable endpoint / open AV / open CQ ... RC: -N, fi_getinfo() call failed   (aws-ofi-nccl)
//   libfabric:...:efa:mr:efa_mr_regattr():N<warn> Unable to register MR: <strerror>, ... create extended CQ ...
//   Libfabric error: (-N) <strerror>                             (the EFA provider's abort message)
//   infiniband efa_0: Failed to register mr [-12] / Failed to process command REG_MR ... err -12   (dmesg)
//   UCX ERROR ...: ibv_create_cq() failed: ... (current: 64 kbytes)   the limit the process printed is kept
//   Socket creation failed : <strerror>
// A WARN line outside these that NCCL then fails on (NCCL's "file:line -> N" return trace from the same thread, or
// a terminal line above with no recognised failure before it) becomes a fatal_warning: CUDA out of memory in
// NCCL's allocators, a topology error, a failed connect. A WARN that NCCL recovers from stays unreported.
#pragma once

#include <mrcheck/diagnosis.h>
#include <mrcheck/status.h>
#include <mrcheck/sysroot.h>

#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace mrcheck {

// One failure found on one line.
struct nccl_event {
  failure what;             // kind, call, err (0 = not printed), wc_status, peer
  std::string host;         // from NCCL's "host:pid:tid" or a pdsh "host: " prefix; "" unknown
  std::optional<long> pid;  // from "host:pid:tid"
  std::optional<int> rank;  // from a launcher prefix, or the rank NCCL reported for this process
  std::string text;         // the line from the message on, escaped, at most 300 bytes
};

// Stateless: the failure on this line, if any. `line` is one line without its newline; only its first 64 KiB
// are looked at. Ranks come only from prefixes on the line itself ("3: ", "[rank3]:", "[1,3]<stdout>:", or
// the first rank of "Duplicate GPU detected : rank A and ...").
std::optional<nccl_event> parse_nccl_line(std::string_view line);

// Extracts an errno from the text after "failed" (or any message tail): a glibc strerror text ("Cannot
// allocate memory"), "errno 12", "errno=12", "error -12", "error 12", "RC: -12". 0 when none is found.
int errno_in_text(std::string_view text);

// Repeats of one failure: same kind, call, errno and completion status.
struct nccl_group {
  failure what;
  std::uint64_t count = 0;           // events in this group
  std::vector<std::uint64_t> lines;  // 1-based line numbers, the first k_max_lines_kept
  std::set<int> ranks;               // distinct ranks seen (capped)
  std::set<std::string> hosts;       // distinct hosts seen (capped)
  std::set<std::string> processes;   // distinct "host:pid" (capped), to count processes without ranks
  bool ranks_capped = false;
  bool hosts_capped = false;
  std::string example;               // the first event's text
  std::vector<std::string> context;  // system_error only: the WARN lines that preceded it (escaped)
  std::uint64_t consequences = 0;    // "unhandled system error" / "Failed to register memory" lines
                                     // attributed to this failure
  std::uint64_t first_line = 0;
};

class nccl_log_scanner {
 public:
  struct limits {
    std::size_t max_line = 64 * 1024;  // bytes of a line that are examined
    std::size_t max_groups = 256;
    std::size_t max_ranks = 4096;        // per group
    std::size_t max_hosts = 1024;        // per group
    std::size_t max_processes = 4096;    // per group
    std::size_t max_pid_ranks = 65536;   // host:pid -> rank entries remembered
    std::size_t recent_warnings = 8;     // unrecognised WARN lines kept as context
    std::uint64_t attach_window = 5000;  // lines within which a consequence is tied to an earlier failure
  };
  static constexpr std::size_t k_max_lines_kept = 32;

  nccl_log_scanner() = default;
  explicit nccl_log_scanner(limits l) : limits_(l) {}

  // Feeds the next line (no trailing newline; a trailing '\r' is ignored). `truncated` says the caller cut the
  // line (it was longer than max_line). Returns the event found on it, already counted in groups(); nullopt
  // for ordinary lines and for consequence lines that were attached to an earlier failure.
  std::optional<nccl_event> feed_line(std::string_view line, bool truncated = false);

  // Groups in order of their first line. The pointers stay valid until the next feed_line().
  std::vector<const nccl_group*> groups() const;

  std::uint64_t lines() const { return lines_; }
  std::uint64_t bytes() const { return bytes_; }
  std::uint64_t truncated_lines() const { return truncated_; }
  std::uint64_t dropped_events() const { return dropped_; }  // events past max_groups
  const limits& caps() const { return limits_; }
  // What the cheap rejection found on the last line fed: anchors of the container evidence
  // (src/explain/causes/container_runtime.cpp), "NET/IB". scan_fd() shows its observer only such lines.
  bool last_line_container() const { return (last_class_ & 8u) != 0; }
  bool last_line_net_ib() const { return (last_class_ & 16u) != 0; }
  // "RDMA ", "DMA-BUF is": NCCL's GPUDirect lines, which the path note reads (src/explain/path_note.cpp).
  bool last_line_path() const { return (last_class_ & 32u) != 0; }
  // What the job asked for: NCCL_NET=IB or NCCL_IB_HCA in NCCL's environment lines (or an env dump in the log). A
  // "NET/IB : No device found" is a failure only then (or with node facts showing HCAs in a multi-node job).
  bool asked_for_ib() const { return asked_ib_; }
  // NCCL's INFO "Stack size limit (unlimited) is unsafe": its line, 0 when none. A later crash is put down to it.
  std::uint64_t stack_unsafe_line() const { return stack_unsafe_line_; }
  // The log says the registered memory is GPU memory (NCCL's GDRDMA path, "GPU Direct RDMA Enabled").
  bool log_says_gpu_memory() const { return log_gpu_; }

 private:
  void note_rank(std::string_view line);
  nccl_group* group_for(const failure& f, std::uint64_t line);
  void add(nccl_group& g, const nccl_event& e, std::uint64_t line);
  void fill_rank(nccl_event& e) const;
  bool note_warning(std::string_view line);            // true: the line promoted a pending WARN (promoted_)
  static constexpr std::uint64_t k_trace_window = 50;  // lines between a WARN and NCCL's trace (or echo) of it

  limits limits_;
  std::uint64_t lines_ = 0;
  std::uint64_t bytes_ = 0;
  std::uint64_t truncated_ = 0;
  std::uint64_t dropped_ = 0;
  std::vector<nccl_group> groups_;                 // at most max_groups
  std::unordered_map<std::string, int> pid_rank_;  // "host:pid" -> rank
  struct pending_warn {
    std::string text;    // the WARN message, escaped
    std::string thread;  // "host:pid:tid" from NCCL's header; "" when the line had none
    std::uint64_t line = 0;
    nccl_event event;  // what the line becomes if NCCL fails on it
  };
  // Pending WARN -> fatal_warning group; promoted_ holds the event, the result is nullptr when it was dropped
  // (past max_groups).
  const nccl_event* promote(std::size_t index);
  nccl_event promoted_;
  std::deque<pending_warn> recent_warn_;     // unrecognised WARN lines (at most recent_warnings)
  std::optional<std::size_t> last_failure_;  // index into groups_ of the last real failure
  std::uint64_t last_failure_line_ = 0;
  std::unordered_set<std::size_t> seen_processes_;  // hashes of "host:pid" whose rank announcement was read
  unsigned last_class_ = 0;                         // forms::classify() of the last line
  std::map<std::string, std::pair<int, std::uint64_t>> errno_traces_;  // thread -> (errno, line) of "-> N (text)"
  void note_env(std::string_view line);
  std::optional<nccl_event> no_event(std::string_view line, std::string_view thread, std::string_view message,
                                     unsigned cls);
  std::optional<nccl_event> record(nccl_event ev, std::string_view thread, std::string_view message);
  std::optional<nccl_event> last_error_line(std::string_view line);
  std::optional<nccl_event> form_line(std::string_view line, unsigned cls, bool after_last_error);
  bool asked_ib_ = false;
  bool log_gpu_ = false;
  std::uint64_t stack_unsafe_line_ = 0;
  std::string last_failure_thread_;  // "host:pid:tid" of the last failure: its thread's next WARNs retell it
  std::uint64_t last_error_at_ = 0;  // the line of a framework's "Last error:" (the next line is NCCL's last WARN)
};

// Reads `fd` to EOF through the scanner: a fixed 256 KiB read buffer, lines handed over in place, one line of at
// most max_line bytes copied only when it spans two reads (the rest of a longer line is skipped, counted in
// truncated_lines()). EINTR is retried. Error status with the errno if read() fails; the lines read before it stay
// in the scanner. `also` sees, with its 1-based number, each line whose cheap rejection found an anchor of the
// container evidence, "NET/IB" or a GPUDirect line (last_line_container(), last_line_net_ib(), last_line_path());
// src/explain/causes/container_runtime.cpp and src/explain/path_note.cpp read them.
using line_observer = std::function<void(std::string_view line, std::size_t number)>;
status scan_fd(int fd, nccl_log_scanner& scanner, const line_observer& also = {});

}  // namespace mrcheck
