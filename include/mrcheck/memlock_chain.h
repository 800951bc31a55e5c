// RLIMIT_MEMLOCK along the real job chain: submit host -> srun/sbatch -> slurmd -> slurmstepd -> task.
//
// The plugin (spank/) feeds these functions plain values it read once; nothing here sees spank_t. The model
// is Slurm 22.05's (docs/facts/memlock.md §1-§2): the task's hard limit is inherited from slurmd through slurmstepd;
// its soft limit is re-applied by slurmstepd's set_user_limits() right before execve from SLURM_RLIMIT_MEMLOCK
// (the submit host's soft limit), when MEMLOCK is propagated by slurm.conf or the value carries the `U`
// prefix (`srun --propagate`), capped at the hard limit.
//
// These are the memlock model's values and its verdict (judge_memlock, src/checks/memlock.cpp); the functions that
// predict, enforce and record, implemented in src/step/, are declared in memlock_step.h, and the step engine that
// applies them at each hook in step.h.
#pragma once

#include <mrcheck/check.h>
#include <mrcheck/config.h>
#include <mrcheck/facts.h>
#include <mrcheck/memlock_hop.h>
#include <mrcheck/slurm_conf.h>  // slurm_conf_facts, propagated_limit
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

// ---- enforcement ---------------------------------------------------------------------------------------

struct enforcement {
  bool attempted = false;
  memlock_limit before;
  memlock_limit after;                   // this process's limit after setrlimit
  memlock_limit start;                   // what the task will start with after set_user_limits()
  bool hard_refused = false;             // EPERM raising the hard limit: no CAP_SYS_RESOURCE
  std::optional<std::string> env_value;  // new SLURM_RLIMIT_MEMLOCK to write into the job env
  std::string problem;                   // "" or why it could not reach `required`
};

// ---- verdict -------------------------------------------------------------------------------------------

// The memlock check's result: pass when the task starts with soft >= required, else fail naming the hop
// and its fix, and (after a refused enforcement) "cannot enforce: ...".
check_result judge_memlock(const memlock_prediction& p, std::uint64_t required, const enforcement* enf);

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

}  // namespace mrcheck
