// The admins' record of a checked job step: one line per step in the job's AdminComment, written
// once per step from the step's node 0, plus a JSON report per node and step in report_dir=.
//
// Flow (src/admin/collector.cpp, prolog/admin_collect.cpp): the task child of local task 0 hands its node
// record to a root collector on its node over a pipe; collectors of nodes 1..N-1 hand theirs to node 0's
// collector over TCP (admin_handoff_*); node 0's collector builds the step record, reads the job's
// admin_comment, appends, and writes it back with one slurm_update_job. Nothing here sees Slurm.
//
// Every string that reaches AdminComment goes through admin_escape(): printable ASCII only, bounded, and
// the record's own separators ('|' between records, ';' between items) escaped, so a job name, host name,
// environment value or probe message can never add a record, an item or a line.
#pragma once

#include <mrcheck/check.h>
#include <mrcheck/munge_auth.h>
#include <mrcheck/status.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mrcheck {

struct memlock_prediction;
struct node_state;
struct task_facts;

// One check of one node, as the step record shows it.
struct node_check {
  std::string id;  // memlock, mr_host, nccl_pair, ... ([a-z0-9_], at most 32 bytes)
  verdict result = verdict::skip;
  std::string token;  // "memlock=64KiB (submit-host propagation)", "mr_host (ENOMEM ...)"
  bool operator==(const node_check&) const = default;
};

// What one node says about one step.
struct node_record {
  std::uint32_t node_id = 0;  // S_JOB_NODEID
  std::string node;           // SLURMD_NODENAME
  std::vector<node_check> checks;
  bool operator==(const node_record&) const = default;
};

inline constexpr std::size_t k_node_record_max = 8 * 1024;  // encoded, one line
inline constexpr std::size_t k_node_checks_max = 32;
inline constexpr std::size_t k_token_max = 96;
// The accounting database stores AdminComment in a TEXT column (65535 bytes); slurmctld 22.05 sets no
// length limit of its own for it (job_mgr.c _update_job).
inline constexpr std::size_t k_admin_comment_slurm_max = 65535;

// Escapes untrusted text for AdminComment: escape_line() plus '|' and ';' as \xNN, cut to `max` bytes.
std::string admin_escape(std::string_view text, std::size_t max);

// The node's record from what the plugin's task callbacks computed: for memlock the task's starting soft
// limit and the hop that lowered it ("memlock=64KiB (submit-host propagation)"), for other checks the id and
// a short escaped summary. `rep` is the task's report (after on_fail/on_error mapping).
node_record make_node_record(std::uint32_t node_id, std::string_view node, const node_state& st, const report& rep);

// One line of JSON, at most k_node_record_max bytes (summaries are cut to fit).
std::string encode_node_record(const node_record& r);
// Strict inverse: refuses over-long input, unknown verdicts, bad ids, too many checks. Tokens are
// re-escaped, so a record written by a process the job user could tamper with stays harmless.
result<node_record> decode_node_record(std::string_view line);

// "step 3", "batch" (0xfffffffb), "interactive" (0xfffffffa).
std::string step_label(std::uint32_t step_id);

// The step's record, one line:
//   "mrcheck: step 3: FAIL memlock=64KiB (submit-host propagation) on node2; pass on 2 nodes"
//   "mrcheck: step 0: pass on 3 nodes"
//   "mrcheck: step 1: pass on 2 nodes; no report from node3"
// Items worst first; nodes with the same finding grouped; node lists bounded ("+5 more").
// `names[i]` names node id i for "no report" (missing names read "node index i"); `records` may come in any
// order; a record with a node id >= nnodes or a duplicate id is ignored.
// `cancelled`: node 0's own task ended before it reported; the record then starts with "cancelled".
std::string format_step_record(std::string_view step, std::uint32_t nnodes, const std::vector<node_record>& records,
                               const std::vector<std::string>& names, bool cancelled = false);

// True when `admin_comment` is jobstats' job summary ("JS1:" then base64 of gzipped JSON, written whole by its
// EpilogSlurmctld): mrcheck never changes it (docs/jobstats.md).
bool is_jobstats_summary(std::string_view admin_comment);

// Appends `record` to the job's current admin_comment. Records are separated by " | "; text that is not
// mrcheck's is kept byte for byte; a jobstats summary (is_jobstats_summary) is never changed (nullopt). When the result would exceed `max` bytes, mrcheck's oldest step records are
// folded, oldest first, into one summary record ("mrcheck: 4 earlier steps: 1 FAIL, 3 pass"); if it still
// does not fit, the new record is cut. Returns nullopt when even that cannot fit (others' text fills it).
std::optional<std::string> append_admin_comment(std::string_view existing, std::string_view record, std::size_t max);

// ---- report_dir ----------------------------------------------------------------------------------------

// Writes `json` as <dir>/job<J>.<step>.<node>.json, as root, atomically (temp file + rename), mode 0644.
// Refuses a dir that is not absolute, is a symlink, is not a directory, is not owned by root or is writable
// by group or others (so no user can point it, or a link in it, elsewhere); the file is opened with
// O_NOFOLLOW|O_EXCL. `node` must already be a safe file name component (node names are checked).
status write_node_report(const std::string& dir, std::uint32_t job_id, std::string_view step, std::string_view node,
                         const std::string& json);

// ---- slurmstepd -> collector control channel ------------------------------------------------------------

// The collector's fd 3 (admin_protocol.h): one end of an AF_UNIX SOCK_SEQPACKET socketpair whose other end
// slurmstepd's main process keeps; the step's task children inherit it until task_init (local task 0) or exec.
// Two messages travel on it: local task 0's record pipe (its read end, SCM_RIGHTS) and slurmstepd's "all local
// tasks have ended". Both senders are non-blocking (MSG_DONTWAIT | MSG_NOSIGNAL): a full or closed socket is an
// error status, never a wait or a SIGPIPE.
status admin_send_record_pipe(int control_fd, int pipe_read_fd);
status admin_send_tasks_ended(int control_fd);

struct admin_control_message {
  enum class kind {
    none,         // nothing to read now (EAGAIN)
    record_pipe,  // `fd` is the record pipe's read end (close-on-exec), owned by the caller
    tasks_ended,  // every local task of the step has ended
    closed,       // every sender's end is closed: no more messages (read as tasks_ended)
    invalid,      // a message of neither form, or a descriptor that is not a pipe's read end: ignored
  };
  kind what = kind::none;
  int fd = -1;
  std::string problem;  // for invalid: what was wrong
};

// Reads one message from `control_fd` without waiting. A received descriptor is accepted only when it is
// the only one, the message says "pipe", and it is a FIFO open for reading only; every other received
// descriptor is closed here.
admin_control_message admin_read_control(int control_fd);

// ---- node -> node 0 handoff -----------------------------------------------------------------------------

// Node 0's listener: binds the first free port of the (job, step) sequence (the NCCL node-pair's port
// function with an admin salt, so the two never meet). Owned fd, closed by the destructor.
class admin_listener {
 public:
  admin_listener() = default;
  admin_listener(const admin_listener&) = delete;
  admin_listener& operator=(const admin_listener&) = delete;
  admin_listener(admin_listener&& o) noexcept : fd_(o.fd_), port_(o.port_) { o.fd_ = -1; }
  ~admin_listener();
  int fd() const { return fd_; }
  std::uint16_t port() const { return port_; }
  static result<admin_listener> open(std::uint64_t job_id, std::uint64_t step_id, int attempts = 0);

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

// Accepts one connection on `l` and reads one node record, all within `timeout`. Only a peer whose source
// port is below 1024, that says the hello of this job.step, whose record comes inside a MUNGE credential of root
// (uid 0, gid 0) for this purpose ("admin-handoff"), cluster, job, step and connection (include/mrcheck/munge_auth.h),
// and whose address is one that `node_addrs[record's node index]` resolves to is accepted: `node_addrs` are the
// step's nodes' addresses as Slurm has them (NodeAddr), by node index; a record for an index past them is refused.
// Node 0 answers with a credential of its own, so the sender knows root's listener took it. Anything else is an
// error status naming the peer (the caller logs it and goes on accepting until its deadline); munged unreachable:
// an error that starts "admin handoff: could not authenticate".
result<node_record> admin_accept_record(const admin_listener& l, std::uint64_t job_id, std::uint64_t step_id,
                                        std::chrono::milliseconds timeout, const std::vector<std::string>& node_addrs,
                                        const munge_settings& auth);

// Sends `r` to node 0 at `host` (name or address): walks the port sequence until a listener of this job.step
// answers or `deadline` passes. Binds a source port below 1024 (needs root), on `source` (this node's address
// as Slurm has it, so node 0 knows the peer) when that is an address of this host. A listener whose
// credential is not root's of this job step is refused (one line in `refused`) and the walk goes on; the record
// counts as delivered only on node 0's credential-carried "ok".
status admin_send_record(const std::string& host, const std::string& source, std::uint64_t job_id,
                         std::uint64_t step_id, const node_record& r, std::chrono::steady_clock::time_point deadline,
                         const munge_settings& auth, std::vector<std::string>& refused, int attempts = 0);

inline constexpr std::uint64_t k_admin_port_salt = 0x6d72636b61646d00ULL;  // "mrckadm\0"

}  // namespace mrcheck
