// slurm.conf as Slurm 22.05's own parser reads it (src/common/parse_config.c, slurm_rlimits_info.c), in one
// place for every part of mrcheck that needs it: the plugin (memlock_chain.h) and the prolog's matrix
// (matrix.h) decide limit propagation with the same rule (fuzz finding F4).
#pragma once

#include <mrcheck/status.h>
#include <mrcheck/sysroot.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mrcheck {

// Where slurm.conf is, for every part of mrcheck (the report, the dump, the prolog, the fleet, the plugin, the
// munge settings): on the host, $SLURM_CONF of this process when it is an absolute path, else the default path
// below; in a tree captured with `mrcheck dump` (`--root`), always the default path, since no environment comes
// with a tree and a dump never copies slurm.conf (it may hold AccountingStoragePass). A relative $SLURM_CONF is
// not followed: Slurm would resolve it against whatever directory the caller runs in.
inline constexpr std::string_view k_default_slurm_conf = "/etc/slurm/slurm.conf";
std::string slurm_conf_path(const sysroot& root);

// One `Key=Value` of slurm.conf: the value (quotes removed) and where it was set ("/etc/slurm/slurm.conf:12").
struct slurm_conf_setting {
  std::string value;
  std::string where;
};

// The top-level settings of a slurm.conf and the files it includes. Lines that start with NodeName=,
// PartitionName=, DownNodes=, FrontendName= or NodeSet= describe one object each and are not kept.
struct slurm_conf_settings {
  std::string path;                                    // the main file
  std::map<std::string, slurm_conf_setting> settings;  // key in lower case (Slurm's keys are case-insensitive)
  std::vector<std::string> files;                      // every file read, the main file first
  // What Slurm itself would refuse or could not read: a missing include, an include cycle, a line too deep.
  // The settings read elsewhere are still kept.
  std::vector<std::string> problems;

  // The last setting of `key` (any case); nullptr when not set.
  const slurm_conf_setting* find(std::string_view key) const;
};

// Parses slurm.conf text as Slurm 22.05 does: `\` at the end of a line continues it; `#` starts a comment
// unless escaped as `\#`; `\x` stands for x; keys are case-insensitive and the last setting wins; a value is
// either "quoted, with spaces" or a run without spaces. `include FILE` (case-insensitive, at the start of
// a line) names one file - no glob - relative to the including file's directory, with %c replaced by the
// lower-cased ClusterName set before it. This text-only form does not follow includes: each is a problem.
void parse_slurm_conf_text(std::string_view text, const std::string& file, slurm_conf_settings& out);

// Reads PATH (at most 16 MiB, as every include) through the sysroot and parses it with its includes (depth
// at most 8, each file once). Error only when the main file cannot be read.
result<slurm_conf_settings> read_slurm_conf_settings(const sysroot& root, const std::string& path);

// Whether srun/sbatch propagate the submit host's RLIMIT_MEMLOCK to tasks, by Slurm's parse_rlimits():
// PropagateResourceLimitsExcept (when set) wins over PropagateResourceLimits; unset means ALL. NONE and ALL
// are whole values; otherwise a list of CPU, FSIZE, DATA, STACK, CORE, RSS, NPROC, NOFILE, MEMLOCK, AS (an
// RLIMIT_ prefix allowed; separated by commas or blanks). Names are compared regardless of case (Slurm 22.05
// compares them case-sensitively and refuses the whole file otherwise; the intent is clear either way). Error
// for anything else - NONE or ALL inside a list, an unknown name - naming the setting and where it is.
struct memlock_propagation {
  bool propagated = true;
  std::string setting = "PropagateResourceLimits not set (default ALL)";  // with file:line when set
};
result<memlock_propagation> memlock_propagation_of(const slurm_conf_settings& conf);
// The rule above for one value. `except`: the value of PropagateResourceLimitsExcept.
result<bool> memlock_propagated_by(std::string_view list, bool except);
// The same rule for another limit's name ("STACK", "NOFILE"); the list's errors are the same.
result<bool> limit_propagated_by(std::string_view list, bool except, std::string_view name);

// ---- what mrcheck reads from slurm.conf -----------------------------------------------------------------

// The few slurm.conf keys mrcheck judges by, as the compute node's slurmstepd reads them: the task's limits
// (the plugin, memlock_chain.h and limit_chain.h) and limit propagation (the prolog's and the report's
// `propagate_limits` rule, matrix.h). The one value type over the reader above.
struct slurm_conf_facts {
  std::string path;                             // the main file
  std::optional<std::string> propagate;         // PropagateResourceLimits= as written (unset: Slurm's ALL)
  std::optional<std::string> propagate_except;  // PropagateResourceLimitsExcept= as written
  bool memlock_propagated = true;               // Slurm's default is PropagateResourceLimits=ALL
  bool stack_propagated = true;                 // the same for STACK and NOFILE (include/mrcheck/limit_chain.h)
  bool nofile_propagated = true;
  std::string propagate_setting = "PropagateResourceLimits not set (default ALL)";  // with file:line when set
  std::string task_prolog;                                                          // TaskProlog= ("" = none)
  std::string slurmd_pid_file = "/run/slurmd.pid";                                  // SlurmdPidFile= (may hold %n / %h)
  bool use_pam = false;  // UsePAM=1: pam_limits applies limits.conf to slurmstepd
  // UnkillableStepTimeout= (seconds, Slurm's default 60): how long slurmstepd waits for a cancelled step's
  // processes before slurmctld drains the node "Kill task failed". The probes of a step stay below it.
  std::chrono::seconds unkillable_step_timeout{60};
  // The reader's problems (includes that could not be read, cycles), then values of the keys above that are
  // not what Slurm takes (an UnkillableStepTimeout that is not a number).
  std::vector<std::string> problems;
};

// The facts of settings the reader gave. Error if the propagation setting is not one Slurm accepts
// (memlock_propagation_of).
result<slurm_conf_facts> slurm_conf_facts_of(slurm_conf_settings conf);
// Reads slurm.conf at `path` (through `root`) with the one slurm.conf reader (slurm_conf.h) and keeps what
// mrcheck judges by. Error if the main file cannot be read or the propagation setting is not one Slurm
// accepts; problems with includes are kept in `problems`.
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
// `name` only names the variable in the error (SLURM_RLIMIT_STACK, ...: slurmstepd reads them all alike).
result<propagated_limit> parse_propagated_limit(std::string_view text, std::string_view name = "SLURM_RLIMIT_MEMLOCK");
// The decimal form slurmstepd parses with strtoul (RLIM_INFINITY as its unsigned value).
std::string format_propagated_limit(std::uint64_t value);

}  // namespace mrcheck
