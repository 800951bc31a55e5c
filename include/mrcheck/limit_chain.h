// RLIMIT_STACK and RLIMIT_NOFILE along the job's chain, beside memlock (memlock_chain.h): the same hops (the
// submit shell, srun's propagation, slurmd, slurmstepd, the task's setup, the task), a simpler model.
//
// Slurm propagates every limit the way it propagates MEMLOCK (docs/facts/limits.md §1): srun/sbatch send their
// soft limit as SLURM_RLIMIT_STACK / SLURM_RLIMIT_NOFILE, and slurmstepd's set_user_limits() applies it to the
// task's soft limit (capped at the hard one) when PropagateResourceLimits covers it or the value carries the `U`
// of `srun --propagate`. Otherwise the task keeps what it inherits from slurmd through slurmstepd.
//
// The rules (mrcheck.conf): `stack_max`, a finite ceiling on the soft stack limit (`unlimited` is the value that
// crashes NCCL 2.27.x's multi-node NVLink set-up; docs/facts/limits.md §2), and `nofile_min`, a floor on the soft
// open-files limit (docs/facts/limits.md §3). Each verdict names the hop that set the limit and who fixes it
// (fix_owner, check.h): srun's propagation from the job's shell is the job's; slurmd's and slurmstepd's limits
// are the node's; a lower limit set between slurmstepd and the task (another plugin) is the site's.
#pragma once

#include <mrcheck/check.h>
#include <mrcheck/config.h>
#include <mrcheck/facts.h>
#include <mrcheck/slurm_conf.h>
#include <mrcheck/status.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mrcheck {

enum class rlimit_kind : std::uint8_t { stack, nofile };

struct rlimit_kind_info {
  rlimit_kind kind;
  std::string_view id;         // the check id: "stack", "nofile"
  std::string_view env;        // "SLURM_RLIMIT_STACK"
  std::string_view conf_name;  // the name in PropagateResourceLimits: "STACK"
  std::string_view ulimit;     // the shell's option: "ulimit -s" (KiB), "ulimit -n"
  bool bytes;                  // the value is bytes (printed as KiB/MiB), else a count
};
const rlimit_kind_info& rlimit_info(rlimit_kind k);

// The process's limit of that kind (process_fact::stack / ::nofile).
const result<memlock_limit>& limit_of(const process_fact& p, rlimit_kind k);
// "8 MiB", "unlimited", "256".
std::string format_limit(rlimit_kind k, std::uint64_t v);
// Whether a soft limit breaks the rule: stack above stack_max, nofile below nofile_min.
bool limit_bad(rlimit_kind k, std::uint64_t soft, const config& c);
// The rule as text: "stack_max 1 GiB", "nofile_min 1024".
std::string limit_rule(rlimit_kind k, const config& c);

// One row of the table, oldest hop first.
struct limit_row {
  std::string where;  // host
  std::string what;   // "slurmd pid 800", "task at exec (predicted)"
  std::optional<memlock_limit> value;
  std::string note;
};

// What set the task's limit, when it breaks the rule.
struct limit_verdict_hop {
  std::string hop;  // "srun's propagation", "slurmd", "slurmstepd", "the task's setup", "the calling shell"...
  fix_owner owner = fix_owner::none;
  std::string cause;  // the facts
  std::string fix;
};

struct limit_prediction {
  rlimit_kind kind = rlimit_kind::stack;
  bool made = false;    // predict_task_limit() made it (the registry judges only what was predicted)
  bool known = false;   // the task's start value could be read
  memlock_limit start;  // what the task starts with
  bool propagation_applies = false;
  std::optional<propagated_limit> propagated;  // SLURM_RLIMIT_<X>, parsed as slurmstepd does
  std::vector<limit_row> rows;
  std::vector<std::string> notes;        // facts that could not be read, a malformed SLURM_RLIMIT_<X>
  std::optional<limit_verdict_hop> hop;  // set when start breaks the rule
};

struct limit_inputs {
  rlimit_kind kind = rlimit_kind::stack;
  std::string node;
  bool batch_step = false;
  const result<process_fact>* slurmd = nullptr;           // via SlurmdPidFile
  const std::vector<process_fact>* task_chain = nullptr;  // the task process first, slurmstepd, ...
  std::optional<std::string> propagated;                  // SLURM_RLIMIT_<X> of the job env, raw (untrusted)
  bool conf_propagates = true;                            // PropagateResourceLimits covers it
  std::string propagate_setting;                          // the setting in force, for the text
  std::string submit_host;                                // SLURM_SUBMIT_HOST ("" = unknown)
};

// Pure: reads nothing.
limit_prediction predict_task_limit(const limit_inputs& in, const config& c);
// The verdict of check `stack` / `nofile` for a Slurm task.
check_result judge_task_limit(const limit_prediction& p, const config& c);
// The verdict for the calling process's chain (`mrcheck report`): the nearest process that changed the limit
// to its current value, its owner the job's when that process is not root's, else the node's.
check_result judge_chain_limit(rlimit_kind k, const std::vector<process_fact>& chain, const config& c);
// enforce=yes: the SLURM_RLIMIT_<X> value ("U1073741824", `U` so slurmstepd applies it whatever
// PropagateResourceLimits says) that brings the task's start within the rule: stack_max for a stack above it,
// nofile_min for open files below it. nullopt when the start is within the rule or unknown, or when the rule's
// value is above the task's hard limit (slurmstepd would refuse it): then `problem` says so.
std::optional<std::string> enforce_limit_value(const limit_prediction& p, const config& c, std::string& problem);
// The table, "mrcheck: <id>: ..." lines (verbose, `mrcheck chain`).
std::vector<std::string> limit_table_lines(const limit_prediction& p);

}  // namespace mrcheck
