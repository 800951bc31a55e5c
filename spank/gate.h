// The idle gate on the SPANK side, for the loader (shim.cpp, libc only, -fno-exceptions -fno-rtti) and the core
// (plugin.cpp) alike: header-only, libc only, nothing from libstdc++. The decision itself is
// mrcheck_step_may_check (include/mrcheck/step_gate.h), which the step engine asks too; this adds its one
// SPANK input, whether MRCHECK_CHECKS is set.
#pragma once

extern "C" {
#include <slurm/spank.h>
}

#include <mrcheck/step_gate.h>

#include <stdlib.h>

// MRCHECK_CHECKS is set for this step: the job's environment in slurmstepd (only whether it is there: a value
// too long for the buffer counts), the process's own in srun/sbatch/salloc (S_JOB_ENV is NULL there).
static inline bool mrcheck_env_checks_set(spank_t sp, spank_context_t ctx) {
  if (ctx != S_CTX_REMOTE) return getenv("MRCHECK_CHECKS") != nullptr;
  char buf[8];
  spank_err_t rc = spank_getenv(sp, "MRCHECK_CHECKS", buf, sizeof buf);
  return rc == ESPANK_SUCCESS || rc == ESPANK_NOSPACE;
}
