// The step engine's API: what the SPANK plugin (spank/) asks at each hook, as plain values, and the probe runner
// and post-exec watcher it starts. The memlock model it applies (prediction, enforcement, the verdict) is
// memlock_chain.h; slurm.conf and SLURM_RLIMIT_MEMLOCK are read by slurm_conf.h. Implemented in src/step/.
#pragma once

#include <mrcheck/check.h>
#include <mrcheck/config.h>
#include <mrcheck/fabric.h>
#include <mrcheck/facts.h>
#include <mrcheck/limit_chain.h>
#include <mrcheck/memlock_chain.h>
#include <mrcheck/memlock_step.h>
#include <mrcheck/slurm_conf.h>
#include <mrcheck/status.h>
#include <mrcheck/sysroot.h>

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mrcheck {

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
  std::optional<std::string> rlimit_stack;    // SLURM_RLIMIT_STACK of the job env (limit_chain.h)
  std::optional<std::string> rlimit_nofile;   // SLURM_RLIMIT_NOFILE of the job env
  std::optional<std::string> submit_raw;      // MRCHECK_SUBMIT of the job env
  std::string submit_host;                    // SLURM_SUBMIT_HOST of the job env
  std::string slurm_conf_path;                // this slurmstepd's SLURM_CONF (or /etc/slurm/slurm.conf)
  std::vector<std::string> job_env;           // for probe children
  std::vector<std::string> job_argv;          // S_JOB_ARGV, at most its first 8: is the program a container launcher
};

// What task_init_privileged found and did, carried to task_init in the same process.
struct node_state {
  bool active = false;  // some check runs on this step
  check_groups checks;
  std::string request_problem;  // the user's request was invalid here (site defaults used)
  std::string conf_problem;     // the plugin's own config was bad (set by the caller)
  memlock_prediction prediction;
  std::optional<enforcement> enf;
  limit_prediction stack;  // RLIMIT_STACK and RLIMIT_NOFILE of the task (limit_chain.h)
  limit_prediction nofile;
  // enforce=yes: SLURM_RLIMIT_STACK / SLURM_RLIMIT_NOFILE values to write into the job env (predict_task_limits).
  std::vector<std::pair<std::string, std::string>> limit_env;
  std::uint64_t required = k_unlimited;
  std::string task_prolog;
  // The node's IMEX set-up where it serves an IMEX domain (node_serves_imex, fabric.h): the post-exec watcher then
  // judges the channel devices the task sees (imex_channel). Read with the step's facts.
  std::optional<imex_facts> imex;
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

// RLIMIT_STACK and RLIMIT_NOFILE of the task from the chain read for memlock (`m`) into st.stack, st.nofile;
// under enforce=yes, the SLURM_RLIMIT_<X>=U<value> that brings each within its rule into st.limit_env.
void predict_task_limits(const config& c, const task_facts& t, const memlock_inputs& m, node_state& st);

// task_init_privileged (root): predict, enforce. Returns the SLURM_RLIMIT_MEMLOCK value to write into the job
// env (enforce=yes), if any.
// (st.limit_env: the SLURM_RLIMIT_STACK / SLURM_RLIMIT_NOFILE values.)
std::optional<std::string> node_privileged(const config& c, const task_facts& t, const sysroot& root, rlimit_ops& ops,
                                           node_state& st);

// Runs `mrcheck probe <group> --json` as a child and returns its checks (mr_host, dmabuf, nccl_pair, ...), or
// one `error` result named after the group when it crashed, timed out or printed no report. A seam for tests.
using probe_runner = std::function<std::vector<check_result>(const std::string& group, const task_facts& t,
                                                             const memlock_limit& limits)>;

// How long all the probes of one task may take together (docs/slurm-step-kill.md). The probes run in slurmstepd's task
// child, which no signal of a cancel reaches (proctrack skips processes named slurmstepd): if they could run
// past UnkillableStepTimeout, a cancelled step would drain the node. `total` is the sum of the timeouts of the
// probes that run, cut to leave a margin below UnkillableStepTimeout; `warning` is set when it had to be cut.
struct probe_budget {
  std::chrono::milliseconds total{0};
  std::string warning;  // "" when the site's timeouts fit
};
inline constexpr std::chrono::seconds k_unkillable_margin{10};
probe_budget plan_probe_budget(const config& c, const check_groups& g, const result<slurm_conf_facts>& conf);

// The probe child's whole environment (SECURITY.md): the job's variables that NCCL, CUDA and verbs read
// (NCCL_*, CUDA_*, NVIDIA_*, IBV_*, RDMAV_*, MLX4_*/MLX5_*, the fake libibverbs' MRCHECK_FAKE_IBV_*), the few
// SLURM_* the probes read, HOME; PATH fixed, SLURM_CONF slurmstepd's own. Never LD_* or any other
// variable of the job's, and no NCCL_*_PLUGIN that names a path: a job user's library must not load in it.
std::vector<std::string> probe_environment(const std::vector<std::string>& job_env, const std::string& slurm_conf);

// The check ids each probe group may report (a report with any other id is refused as a whole): the registry's
// rows of origin probe in that group (src/checks/registry.cpp).
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

// What the post-exec watcher watches and judges (send_task_record fills it from the node's state).
struct post_exec_watch {
  pid_t task = 0;
  memlock_limit predicted;  // the task's limit as predicted (or enforced) at task_init
  std::uint64_t required = 0;
  std::string task_prolog;
  bool batch_step = false;
  int fd = 2;  // where a finding is written: the task's stderr
  std::chrono::milliseconds window{3000};
  std::optional<imex_facts> node_imex;  // set: judge imex_channel too, on the task's view after its exec
};
// Forks a short-lived watcher (double fork, as the current user) that waits for `task` to exec, reads its
// /proc/PID/limits right after exec and for a short while after, and writes one line to `fd` when the task
// runs with something other than `predicted` (TaskProlog override, wrapper); with `node_imex`, it then reads the
// IMEX channels in the task's mount namespace (read_task_imex) and writes a line when the task has none it may
// use. Bounded: exits when the task exits or after `window`. Returns at once.
// `done` runs in the watcher once it has judged (the verdicts: a memlock finding when the task does not run as
// predicted, imex_channel's verdict) with `record_fd` (if >= 0) open in the watcher as the descriptor it is
// given: the admins' record is sent from there, so that it carries the verdicts after exec.
using post_exec_done = std::function<void(const std::vector<check_result>& verdicts, int record_fd)>;
status spawn_post_exec_watcher(const post_exec_watch& w, const post_exec_done& done = {}, int record_fd = -1);
// The watcher's body, exposed for tests: observes `task` (blocking, bounded). `exec_fd` (closed here), when
// >= 0, is the read end of a pipe whose only write end the task holds close-on-exec: its end-of-file is the
// exec itself. `at_exec`, when set, runs once the exec is seen and the task still runs, before the window: what
// must be read of the task itself (its mount namespace) while it is there, a task shorter than the window
// included (tests/e2e/plugin_l_imex_channel_test.sh).
post_exec_observation observe_post_exec(pid_t task, const memlock_limit& predicted, const std::string& task_prolog,
                                        std::chrono::milliseconds window, int exec_fd = -1,
                                        const std::function<void()>& at_exec = {});

// ---- task_init below the SPANK calls (src/step/task_step.cpp) ---------------------------------------------
// spank/plugin.cpp reads the items, calls run_task_step, prints its lines, calls send_task_record, prints what
// that returns. What lies above this layer (the task's container, the admins' record message) or outside this
// process (the record pipe, the watcher) comes in through task_step_io.

// The probe groups of this node's step: whether task_init runs probes at all.
bool task_runs_probes(const node_state& st);

struct task_step_io {
  // The verdict: node_task (spank/engine.h swaps it in tests).
  std::function<task_verdict(const config&, const task_facts&, node_state&, const probe_runner&)> task = node_task;
  // Where a task that runs probes runs them: `host` itself (empty), or inside the task's container
  // (container_runner.h). `budget` is all the probes' (plan_probe_budget); `stopped` is set when a probe was killed from outside.
  std::function<probe_runner(probe_runner host, std::chrono::milliseconds budget, std::shared_ptr<bool> stopped)>
      place_probes;
  // The host's probes: empty is real_probe_runner_stop (probe_stop.h); a test's.
  std::function<probe_runner(const config&, std::chrono::milliseconds budget, std::shared_ptr<bool> stopped)>
      host_probes;
  // The record pipe's write end for this task, -1 when it sends none (admin_collector::take_record_fd, src/admin/collector.cpp). Always asked,
  // once, after the verdict: the task keeps no end of the pipe it does not write.
  std::function<int(const task_facts&)> take_record_fd;
  // Writes the admins' record of `rep` to `fd` (admin_record.h's message); also run in the post-exec watcher.
  std::function<void(int fd, const task_facts&, const node_state&, const report&)> send_record;
  // spawn_post_exec_watcher (a test's may fail).
  std::function<status(const post_exec_watch&, const post_exec_done&, int)> spawn_watcher = spawn_post_exec_watcher;
};

struct task_step_outcome {
  task_verdict verdict;  // its user_lines (slurm_spank_log), admin_lines (slurm_info) and rc are task_init's
  bool stopped = false;  // a probe was killed from outside: the step is being cancelled
};
// The probes (within their budget, where the task is) and the verdict.
task_step_outcome run_task_step(const config& c, const task_facts& t, node_state& st, const task_step_io& io);

// A cancelled step's record: what the probes did not finish is no finding about the node, so the probe groups'
// checks (mr, nccl, container*) are left out; nullopt when what is left found nothing (no record: node 0 then
// reports the step as cancelled and this node as "no report", not as a FAIL of a node never judged).
std::optional<report> cancelled_step_record(const report& rep);

// The admins' record after the lines are printed: at once; with the verdict after exec, from the post-exec
// watcher; or, for a cancelled step, only what cancelled_step_record keeps. Returns the lines for slurm_error.
std::vector<std::string> send_task_record(const task_step_outcome& o, const task_facts& t, const node_state& st,
                                          const task_step_io& io);

}  // namespace mrcheck
