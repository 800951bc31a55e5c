// One model of "which hop lowered RLIMIT_MEMLOCK", used by every path that names one: the
// memlock check (src/checks/memlock.cpp), the plugin's prediction (src/step/predict.cpp), the diagnosis
// evidence (src/explain/causes/diagnosis.cpp), the probe's report (src/checks/mr_report.cpp) and the admins' record
// (src/admin/admin_record.cpp).
//
// Picking: the NEAREST drop whose value is still in force. From the process that runs with the limit, walk
// towards pid 1 over the processes that have that same soft limit; the last of them, when its parent had more,
// set it. Not the farthest drop: a farther drop may have been raised again or lowered further later, and
// fixing it leaves the job failing exactly as before while the nearer one is in place; the nearest is the one
// whose value the process runs with, so it is the one to fix first (older drops stay visible in the chain
// table). Only the soft limit counts: the kernel compares pinned pages with the soft limit
// (docs/facts/memlock.md §3). When no process in the chain lowered it (the value is the same up to the
// oldest one, or an unreadable limit or a raise interrupts the walk), nothing is picked: the limit came from
// before the chain (the kernel default, a process that exec'd, a propagated value applied at exec).
#pragma once

#include <mrcheck/facts.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mrcheck {

// The hop of a Slurm job's chain that set the task's limit below the site's minimum.
enum class memlock_hop {
  none,            // nothing lowered it (or it is not below the minimum)
  submit_host,     // the soft limit of a process on the submit host, propagated by srun/sbatch
  job_script,      // the batch script (or an enclosing job step) lowered it before the inner srun
  submit_unknown,  // propagated, but no (valid) submit record says which process lowered it
  slurmd,          // slurmd's own limit (started outside its unit, LimitMEMLOCK missing)
  step_daemon,     // slurmstepd has less than slurmd: PAM (UsePAM pam_limits) or a wrapper of slurmstepd
  task_setup,      // the task has less than slurmstepd before exec: a container or another plugin
  enforced,        // not a lowering: this plugin raised it (enforce=yes)
};

// Everything mrcheck says about a hop, in one row per hop (src/facts/memlock_hop.cpp).
struct memlock_hop_info {
  memlock_hop hop;
  std::string_view id;     // JSON and the verbose table: "submit_host", "slurmd", ...
  std::string_view label;  // the verdict: "lowered at <label>: <cause>"
  std::string_view token;  // AdminComment: "memlock=64KiB (<token>)"; "" for none/enforced
  std::string_view fix;    // the fix; "{host}" stands for the submit host
};
const memlock_hop_info& hop_info(memlock_hop h);
std::string_view to_string(memlock_hop h);  // hop_info(h).id
// hop_info(h).fix with "{host}" replaced by `host` ("the submit host" when empty).
std::string hop_fix(memlock_hop h, std::string_view host = {});

// The picking rule above over soft limits, nearest process first (index 0 = the process that runs with the
// limit, i + 1 = the parent of i); nullopt = unknown. Returns the index of the process that set it.
std::optional<std::size_t> pick_lowering_hop(std::span<const std::optional<std::uint64_t>> soft);
// The same over a chain read from /proc (read_chain, node_facts::chain).
std::optional<std::size_t> pick_lowering_hop(const std::vector<process_fact>& chain);

// "pid 4242 (bash), soft 64 KiB (its parent pid 4000 (sshd) had soft 8 MiB)"; when the process itself has less
// than its parent: "the process itself (pid N (comm), soft S): set between fork and exec by its launcher (...)",
// `who` naming it ("the probe itself"). "" when nothing was picked.
std::string describe_lowering_hop(const std::vector<process_fact>& chain, std::string_view who = "the process itself");

}  // namespace mrcheck
