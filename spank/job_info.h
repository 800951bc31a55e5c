// The SPANK adapter: the only reader of spank_t's items and of the job's environment. Every spank_get_item and
// spank_getenv the core uses is read here, with one getter and one buffer size, into plain data (pyxis'
// job_get_info); plugin.cpp works on that data only. Failures are logged with spank_strerror
// and leave a field at its default.
#pragma once

extern "C" {
#include <slurm/spank.h>
}

#include <mrcheck/step.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mrcheck::spank_glue {

// Which tool runs the plugin in local/allocator context: srun, sbatch or salloc.
std::string submit_tool(spank_context_t ctx);

// The step's SPANK items and job environment, as read in slurmstepd (and its task children). Plain data.
struct spank_items {
  std::uint32_t job_id = 0;
  std::uint32_t step_id = 0;
  bool batch_step = false;   // step_id is SLURM_BATCH_SCRIPT
  bool extern_step = false;  // step_id is SLURM_EXTERN_CONT
  std::uint32_t node_id = 0;
  std::uint32_t nnodes = 0;                   // 0 in the batch step (slurmstepd_job.c leaves it unset)
  std::uint32_t local_task_count = 1;         // S_JOB_LOCAL_TASK_COUNT
  std::optional<int> local_task_id;           // S_TASK_ID: only in a task's hooks
  std::optional<std::string> nodename;        // SLURMD_NODENAME of the job env
  std::optional<std::string> env_checks;      // MRCHECK_CHECKS
  std::optional<std::string> rlimit_memlock;  // SLURM_RLIMIT_MEMLOCK
  std::optional<std::string> rlimit_stack;    // SLURM_RLIMIT_STACK
  std::optional<std::string> rlimit_nofile;   // SLURM_RLIMIT_NOFILE
  std::optional<std::string> submit_raw;      // MRCHECK_SUBMIT
  std::string submit_host;                    // SLURM_SUBMIT_HOST
  std::vector<std::string> argv;  // S_JOB_ARGV, its first 8 words: a container launcher (docs/containers.md)
};
spank_items read_spank_items(spank_t sp);

// The core's task facts from the items (plus the host name, slurmstepd's SLURM_CONF, the task's pid). `sp`
// only for S_JOB_ENV when `with_env` (the probe children's environment).
task_facts make_task_facts(const spank_items& it, spank_t sp, bool with_env);

// The submit side's inputs (srun/sbatch/salloc read their own environment: S_JOB_ENV is NULL there).
submit_inputs read_submit_inputs(spank_context_t ctx);

}  // namespace mrcheck::spank_glue
