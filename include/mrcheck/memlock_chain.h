// RLIMIT_MEMLOCK along the real job chain: submit host -> srun/sbatch -> slurmd -> slurmstepd -> task.
//
// The plugin (spank/) feeds these functions plain values it read once; nothing here sees spank_t. The model
// is Slurm 22.05's (docs/facts/memlock.md §1-§2): the task's hard limit is inherited from slurmd through slurmstepd;
// its soft limit is re-applied by slurmstepd's set_user_limits() right before execve from SLURM_RLIMIT_MEMLOCK
// (the submit host's soft limit), when MEMLOCK is propagated by slurm.conf or the value carries the `U`
// prefix (`srun --propagate`), capped at the hard limit.
#pragma once

#include <mrcheck/check.h>
#include <mrcheck/config.h>
#include <mrcheck/facts.h>
#include <mrcheck/memlock_hop.h>
#include <mrcheck/slurm_conf.h>
#include <mrcheck/status.h>
#include <mrcheck/sysroot.h>

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mrcheck {

// ---- slurm.conf ----------------------------------------------------------------------------------------

// The few slurm.conf keys that decide the task's limit, as the compute node's slurmstepd reads them.
struct slurm_conf_facts {
  bool memlock_propagated = true;  // Slurm's default is PropagateResourceLimits=ALL
  std::string propagate_setting = "PropagateResourceLimits not set (default ALL)";  // with file:line when set
  std::string task_prolog;                                                          // TaskProlog= ("" = none)
  std::string slurmd_pid_file = "/run/slurmd.pid";                                  // SlurmdPidFile= (may hold %n / %h)
  bool use_pam = false;  // UsePAM=1: pam_limits applies limits.conf to slurmstepd
  // UnkillableStepTimeout= (seconds, Slurm's default 60): how long slurmstepd waits for a cancelled step's
  // processes before slurmctld drains the node "Kill task failed". The probes of a step stay below it.
  std::chrono::seconds unkillable_step_timeout{60};
  std::vector<std::string> problems;  // includes that could not be read, cycles (slurm_conf.h)
};

// Reads slurm.conf at `path` (through `root`) with the one slurm.conf reader (slurm_conf.h) and keeps what
// decides the task's limit. Error if the main file cannot be read or the propagation setting is not one
// Slurm accepts (memlock_propagation_of); problems with includes are kept in `problems`.
result<slurm_conf_facts> read_slurm_conf_facts(const sysroot& root, const std::string& path);

// "/run/slurmd-%n.pid" with %n = node name, %h = host name.
std::string expand_slurmd_pid_file(std::string_view pattern, std::string_view node, std::string_view host);

// ---- SLURM_RLIMIT_MEMLOCK ------------------------------------------------------------------------------

struct propagated_limit {
  std::uint64_t value = 0;      // k_unlimited for RLIM_INFINITY
  bool user_requested = false;  // the `U` prefix: srun --propagate, applied whatever slurm.conf says
  bool canonical = false;       // written the way srun writes it: [U] and plain decimal digits
};
// The value as slurmstepd reads it (docs/slurm-rlimit-memlock.md): an optional `U`, then C strtoul() in base
// 10 with nothing after the number, so "" and "U" are 0, leading blanks and a sign are allowed, "-1" wraps to
// RLIM_INFINITY, "-18446744073709486080" is 64 KiB and an overflow is RLIM_INFINITY. Error exactly where
// slurmstepd ignores the variable ("64K", "0x10", "65536 ", " ").
result<propagated_limit> parse_propagated_limit(std::string_view text);
// set_user_limits()' _set_limit(): the soft limit a task with limits `cur` gets from a value that applies
// (PropagateResourceLimits covers MEMLOCK, or the `U` prefix). Without `U` a value above the hard limit is
// cut to it; with `U` setrlimit() refuses it and the soft limit stays.
std::uint64_t slurmstepd_soft(const propagated_limit& v, const memlock_limit& cur);
// The decimal form slurmstepd parses with strtoul (RLIM_INFINITY as its unsigned value).
std::string format_propagated_limit(std::uint64_t value);

// ---- the submit side's record --------------------------------------------------------------------------

// One process of the submit chain as srun/sbatch saw it.
struct submit_hop {
  pid_t pid = 0;
  std::string comm;
  std::optional<memlock_limit> memlock;  // nullopt: could not be read
  bool operator==(const submit_hop&) const = default;
};

// What srun/sbatch/salloc recorded about itself, carried to the node in the job environment as
// MRCHECK_SUBMIT. UNTRUSTED on the node (the user can forge it): it only changes what is reported, never
// what is enforced, and it is bounded and validated when decoded.
struct submit_record {
  std::string tool;                 // srun | sbatch | salloc
  std::string host;                 // short host name of the submit host
  std::optional<std::string> sent;  // the SLURM_RLIMIT_MEMLOCK value it sends; nullopt = not sent
  std::string job_id;               // SLURM_JOB_ID of the enclosing job when run inside one ("" = login shell)
  std::vector<submit_hop> chain;    // the tool itself first, then its ancestors
  bool operator==(const submit_record&) const = default;
};

inline constexpr std::size_t k_submit_record_max = 1024;
inline constexpr std::size_t k_submit_max_hops = 16;

// Builds the record from a chain read by read_chain() (tool first). Keeps at most k_submit_max_hops.
submit_record make_submit_record(std::string tool, std::string host, std::optional<std::string> sent,
                                 std::string job_id, const std::vector<process_fact>& chain);
// A compact single-line form of at most k_submit_record_max bytes (older ancestors are dropped to fit).
std::string encode_submit_record(const submit_record& r);
// Strict inverse of encode_submit_record; refuses anything longer than k_submit_record_max, unknown
// versions, bad numbers and more than k_submit_max_hops hops.
result<submit_record> decode_submit_record(std::string_view text);

// ---- prediction ----------------------------------------------------------------------------------------

// memlock_hop, its table (id, label, AdminComment token, fix) and the picking rule: memlock_hop.h.

struct memlock_inputs {
  std::string node;                                         // SLURMD_NODENAME / host name
  std::string job;                                          // "job 12 step 0" / "job 12 batch"
  bool batch_step = false;                                  // the task is the batch script itself
  result<process_fact> slurmd = status::error("not read");  // via SlurmdPidFile
  std::vector<process_fact> task_chain;                     // the task process first (before exec), slurmstepd, ...
  memlock_limit task_now;                                   // getrlimit() in the task before exec
  std::optional<std::string> propagated;                    // SLURM_RLIMIT_MEMLOCK of the job env, raw
  result<slurm_conf_facts> conf = status::error("not read");
  std::optional<std::string> submit_raw;  // MRCHECK_SUBMIT of the job env, raw (untrusted)
  std::string submit_host;                // SLURM_SUBMIT_HOST of the job env ("" = unknown)
};

// One row of the chain table.
struct chain_row {
  std::string where;  // host
  std::string what;   // "bash pid 4242", "slurmd pid 800", "task 0 at exec (predicted)"
  std::optional<memlock_limit> memlock;
  std::string note;  // "lowered soft", "sends SLURM_RLIMIT_MEMLOCK=65536", ...
};

struct memlock_prediction {
  memlock_limit start;               // what the task will start with
  bool propagation_applies = false;  // SLURM_RLIMIT_MEMLOCK will be applied by set_user_limits()
  std::optional<propagated_limit> propagated;
  std::optional<std::string> propagated_text;  // SLURM_RLIMIT_MEMLOCK as it arrived (enforce rewrites odd ones)
  std::optional<submit_record> submit;         // decoded and valid
  std::string submit_problem;                  // why MRCHECK_SUBMIT was ignored ("" = fine or absent)
  memlock_hop hop = memlock_hop::none;         // what lowered it (when below the minimum)
  std::string cause;                           // "bash pid 4242 on login1 set soft 64 KiB"
  std::string fix;                             // the fix for that hop (hop_fix, plus what this chain adds)
  std::vector<chain_row> rows;
  std::vector<std::string> notes;      // facts that could not be read, for the verbose table
  std::string propagate_setting_text;  // slurm_conf_facts::propagate_setting in force
  bool use_pam = false;
};

// Predicts the limit the task starts with and, when it is below `required` (bytes, k_unlimited allowed),
// names the hop that lowered it and the fix. Pure: reads nothing.
memlock_prediction predict_task_memlock(const memlock_inputs& in, std::uint64_t required);

// ---- enforcement ---------------------------------------------------------------------------------------

// getrlimit/setrlimit for RLIMIT_MEMLOCK of this process, behind an interface so tests can inject EPERM.
class rlimit_ops {
 public:
  virtual ~rlimit_ops() = default;
  virtual result<memlock_limit> get() = 0;
  virtual status set(const memlock_limit& l) = 0;  // errno kept in status::err()
};
rlimit_ops& real_rlimit_ops();

struct enforcement {
  bool attempted = false;
  memlock_limit before;
  memlock_limit after;                   // this process's limit after setrlimit
  memlock_limit start;                   // what the task will start with after set_user_limits()
  bool hard_refused = false;             // EPERM raising the hard limit: no CAP_SYS_RESOURCE
  std::optional<std::string> env_value;  // new SLURM_RLIMIT_MEMLOCK to write into the job env
  std::string problem;                   // "" or why it could not reach `required`
};

// Raises this process's hard and soft RLIMIT_MEMLOCK to at least `required` (never lowers), and says which
// SLURM_RLIMIT_MEMLOCK value the caller must write so set_user_limits() does not lower it again. When the
// hard limit cannot be raised (EPERM), the soft limit still goes as high as the hard limit allows.
enforcement enforce_memlock(rlimit_ops& ops, std::uint64_t required, const memlock_prediction& before);

// ---- verdict -------------------------------------------------------------------------------------------

// The memlock check's result: pass when the task starts with soft >= required, else fail naming the hop
// and its fix, and (after a refused enforcement) "cannot enforce: ...".
check_result judge_memlock(const memlock_prediction& p, std::uint64_t required, const enforcement* enf);

// The chain table, one line per row, each "mrcheck: memlock: ..." (for verbose and the CLI).
std::vector<std::string> chain_table_lines(const memlock_prediction& p);

// ---- after exec ----------------------------------------------------------------------------------------

// What the task really runs with after exec differs from the prediction: who changed it. `at_exec` is the
// limit read right after exec, `later` a later change by the running program (a wrapper script's ulimit).
struct post_exec_observation {
  memlock_limit predicted;
  std::optional<memlock_limit> at_exec;
  std::optional<memlock_limit> later;
  std::string later_comm;   // comm of the task when `later` was read
  std::string task_prolog;  // TaskProlog= in force ("" = none)
  bool batch_step = false;  // the task is the batch script: a later change is the script's own ulimit
};
// nullopt when the task runs with what was predicted; else a warn/fail result naming the override.
std::optional<check_result> judge_post_exec(const post_exec_observation& o, std::uint64_t required);

// ---- the plugin's per-step logic -----------------------------------------------------------------------
// spank/ reads spank_t once into these plain values (spank/job_info.cpp) and applies what comes back
// (setenv, log lines, return code). Everything here is testable without Slurm.

// Which checks run: the user's --mr-check (or MRCHECK_CHECKS inherited from sbatch) on top of the site's
// default_checks. `off` removes the site's defaults only when allow_user_off=yes. An invalid user value is
// an error (srun/sbatch refuse it before launch; the node side falls back to the site's defaults).
struct check_request {
  bool option_seen = false;               // --mr-check was given (or set through SLURM_SPANK_...)
  std::optional<std::string> option;      // its value; nullopt = bare option (NULL, "" or "(null)" optarg)
  std::optional<std::string> env_checks;  // MRCHECK_CHECKS from the environment (sbatch -> inner srun)
};
result<check_groups> effective_checks(const config& c, const check_request& req);

// Normalises a SPANK optarg: NULL, "" and "(null)" mean the bare option.
std::optional<std::string> normalize_optarg(const char* optarg);

// ---- submit side (srun, sbatch, salloc) ----
struct submit_inputs {
  std::string tool;    // srun | sbatch | salloc
  std::string host;    // short host name
  std::string job_id;  // SLURM_JOB_ID when inside a job
  pid_t self = 0;      // getpid()
  check_request request;
};
struct submit_plan {
  check_groups checks;                                      // what will run (nothing: do nothing at all)
  std::vector<std::pair<std::string, std::string>> setenv;  // MRCHECK_CHECKS, MRCHECK_SUBMIT
};
// Error: the user's request is refused (bad LIST, off not allowed); the message is for the user's terminal.
result<submit_plan> plan_submit(const config& c, const submit_inputs& in, const sysroot& root);

// ---- node side (slurmstepd, in the task process) ----
struct task_facts {
  std::string node;  // SLURMD_NODENAME (or the host name)
  std::string host;  // host name, for SlurmdPidFile's %h
  std::uint32_t job_id = 0;
  std::uint32_t step_id = 0;
  bool batch_step = false;
  bool extern_step = false;
  int local_task_id = 0;
  pid_t task_pid = 0;  // getpid() in the task child (S_TASK_PID is 0 there)
  check_request request;
  std::optional<std::string> rlimit_memlock;  // SLURM_RLIMIT_MEMLOCK of the job env
  std::optional<std::string> submit_raw;      // MRCHECK_SUBMIT of the job env
  std::string submit_host;                    // SLURM_SUBMIT_HOST of the job env
  std::string slurm_conf_path;                // this slurmstepd's SLURM_CONF (or /etc/slurm/slurm.conf)
  std::vector<std::string> job_env;           // for probe children
  std::vector<std::string> job_argv;          // S_JOB_ARGV, at most its first 4: is the program a container launcher
};

// What task_init_privileged found and did, carried to task_init in the same process.
struct node_state {
  bool active = false;  // some check runs on this step
  check_groups checks;
  std::string request_problem;  // the user's request was invalid here (site defaults used)
  std::string conf_problem;     // the plugin's own config was bad (set by the caller)
  memlock_prediction prediction;
  std::optional<enforcement> enf;
  std::uint64_t required = k_unlimited;
  std::string task_prolog;
  // Facts that are the same for every task of the step: slurm.conf and slurmd's limits. Read once per step
  // in slurmstepd before the tasks fork (prefetch_step_facts from remote init_post_opt, as root), so each
  // task child does not read them again; node_privileged reads them itself when that did not happen.
  bool step_read = false;
  result<slurm_conf_facts> step_conf = status::error("not read");
  result<process_fact> step_slurmd = status::error("not read");
};

// Reads the step-constant facts into `st` (slurm.conf at `slurm_conf_path`, slurmd through SlurmdPidFile
// with %n = node, %h = host).
void prefetch_step_facts(const sysroot& root, const std::string& slurm_conf_path, const std::string& node,
                         const std::string& host, node_state& st);

// task_init_privileged (root): predict, enforce. Returns the SLURM_RLIMIT_MEMLOCK value to write into the job
// env (enforce=yes), if any.
std::optional<std::string> node_privileged(const config& c, const task_facts& t, const sysroot& root, rlimit_ops& ops,
                                           node_state& st);

// Runs `mrcheck probe <group> --json` as a child and returns its checks (mr_host, dmabuf, nccl_pair, ...), or
// one `error` result named after the group when it crashed, timed out or printed no report. A seam for tests.
using probe_runner = std::function<std::vector<check_result>(const std::string& group, const task_facts& t,
                                                             const memlock_limit& limits)>;

// How long all the probes of one task may take together (issue 21). The probes run in slurmstepd's task
// child, which no signal of a cancel reaches (proctrack skips processes named slurmstepd): if they could run
// past UnkillableStepTimeout, a cancelled step would drain the node. `total` is the sum of the timeouts of the
// probes that run, cut to leave a margin below UnkillableStepTimeout; `warning` is set when it had to be cut.
struct probe_budget {
  std::chrono::milliseconds total{0};
  std::string warning;  // "" when the site's timeouts fit
};
inline constexpr std::chrono::seconds k_unkillable_margin{10};
probe_budget plan_probe_budget(const config& c, const check_groups& g, const result<slurm_conf_facts>& conf);

// The probe child's whole environment (issue 21): the job's variables that NCCL, CUDA and verbs read
// (NCCL_*, CUDA_*, NVIDIA_*, IBV_*, RDMAV_*, MLX4_*/MLX5_*, the fake libibverbs' MRCHECK_FAKE_IBV_*), the few
// SLURM_* the probes read, HOME; PATH fixed, SLURM_CONF slurmstepd's own. Never LD_* or any other
// variable of the job's, and no NCCL_*_PLUGIN that names a path: a job user's library must not load in it.
std::vector<std::string> probe_environment(const std::vector<std::string>& job_env, const std::string& slurm_conf);

// The check ids each probe group may report (a report with any other id is refused as a whole).
std::span<const std::string_view> probe_check_ids(std::string_view group);

// `mrcheck probe GROUP --json` as a child, its report validated (known ids, each once, bounded
// fields). With a budget, every probe gets at most what is left of it; once a probe was killed from outside
// (a cancel), no further probe runs.
probe_runner real_probe_runner(const config& c, std::chrono::milliseconds budget = std::chrono::hours(24));

struct task_verdict {
  report rep;
  int rc = 0;                            // what task_init returns: -1 ends the task
  std::vector<std::string> user_lines;   // for slurm_spank_log (the user's stderr)
  std::vector<std::string> admin_lines;  // for slurm_info (slurmd log)
  bool watch_post_exec = false;          // start the post-exec watcher
};
// task_init (job user): verdicts, probes, what to print.
task_verdict node_task(const config& c, const task_facts& t, node_state& st, const probe_runner& probe);

// Forks a short-lived watcher (double fork, as the current user) that waits for `task` to exec, reads its
// /proc/PID/limits right after exec and for a short while after, and writes one line to `fd` when the task
// runs with something other than `predicted` (TaskProlog override, wrapper). Bounded: exits when the task
// exits or after `window`. Returns at once.
// `done` runs in the watcher once it has judged (the verdict, or nullopt when the task runs as predicted) with
// `record_fd` (if >= 0) open in the watcher as the descriptor it is given: the admins' record is sent from
// there, so that it carries the verdict after exec.
using post_exec_done = std::function<void(const std::optional<check_result>& verdict, int record_fd)>;
status spawn_post_exec_watcher(pid_t task, const memlock_limit& predicted, std::uint64_t required,
                               const std::string& task_prolog, bool batch_step, int fd,
                               std::chrono::milliseconds window, const post_exec_done& done = {}, int record_fd = -1);
// The watcher's body, exposed for tests: observes `task` (blocking, bounded).
post_exec_observation observe_post_exec(pid_t task, const memlock_limit& predicted, const std::string& task_prolog,
                                        std::chrono::milliseconds window);

}  // namespace mrcheck
