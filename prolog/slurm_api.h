// Every libslurm call mrcheck makes, in one place, and every difference between the Slurm releases mrcheck
// supports (22.05, 24.11, 26.05; docs/slurm-releases.md). Only slurm_api.cpp includes <slurm/slurm.h>: the
// rest of the prolog sees plain values. The SPANK side's differences sit beside the plugin (spank/shim.cpp,
// slurm_spank_init_failure_mode).
//
// Each function makes one controller RPC at most and returns Slurm's error code: 0 on success, else an errno
// or an ESLURM_* value (text from error_text()). They block on slurmctld as long as libslurm retries it:
// callers run them in a child with a deadline (slurm_control.cpp) or under alarm() (admin_collect.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mrcheck::prolog::slurm_api {

// slurm_init(nullptr): reads slurm.conf (SLURM_CONF or the built-in path). Call once before anything else.
void init();

// Slurm's text for an error code, and whether it means "try again" (slurmctld unreachable or slow) rather
// than an answer from slurmctld.
std::string error_text(int code);
bool transient(int code);

// The "no such node" answer of load_node for a node slurmctld does not know.
int invalid_node_name();

struct node_state {
  bool drain = false;
  bool down = false;
  std::string reason;  // as slurmctld has it, may be empty
};
int load_node(const std::string& name, node_state& out);

enum class node_change { drain, resume };
int update_node(const std::string& name, node_change change, const std::string& reason);

// The job's AdminComment (empty when unset) and its replacement: slurm_load_job + slurm_update_job.
int load_admin_comment(std::uint32_t job, std::string& out);
int set_admin_comment(std::uint32_t job, const std::string& text);

// The step's node list as slurmctld has it (slurm_job_step_layout_get: one REQUEST_STEP_LAYOUT), node index
// order. Never the job's SLURM_STEP_NODELIST, which the job user's srun writes.
int load_step_nodelist(std::uint32_t job, std::uint32_t step, std::string& out);

// A Slurm host list ("n[1-3],m") expanded, at most `max` names; empty when it does not parse.
std::vector<std::string> expand_hostlist(const std::string& list, std::size_t max);

// The address slurm.conf gives a node (NodeAddr), else the name itself.
std::string node_address(const std::string& name);

}  // namespace mrcheck::prolog::slurm_api
