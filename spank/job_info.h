// The only reader of spank_t besides plugin.cpp: every spank_get_item / spank_getenv value read once into the
// core's plain structs (pyxis' job_get_info). Failures are logged with spank_strerror and leave a field empty.
#pragma once

extern "C" {
#include <slurm/spank.h>
}

#include <mrcheck/memlock_chain.h>

#include <optional>
#include <string>

namespace mrcheck::spank_glue {

// Which tool runs the plugin in local/allocator context: srun, sbatch or salloc.
std::string submit_tool(spank_context_t ctx);

// S_SLURM_VERSION_MAJOR/MINOR/MICRO (valid in every context): the string, or nullptr.

// MRCHECK_CHECKS from the job env (remote) - the cheap gate read before anything else.
std::optional<std::string> job_getenv(spank_t sp, const char* name);

// Everything the node side needs. `with_env` copies S_JOB_ENV (for probe children only).
task_facts read_task_facts(spank_t sp, bool with_env);

// The submit side's inputs (srun/sbatch/salloc read their own environment: S_JOB_ENV is NULL there).
submit_inputs read_submit_inputs(spank_context_t ctx);

}  // namespace mrcheck::spank_glue
