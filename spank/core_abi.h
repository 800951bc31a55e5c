// The interface between spank_mrcheck.so (the loader Slurm loads, shim.cpp) and mrcheck_spank_core.so (the
// checks, plugin.cpp). Both are built from one tree and installed side by side; `abi` and `version` let the
// loader refuse a core of another version (a half-finished upgrade) instead of calling into it.
#pragma once

extern "C" {
#include <slurm/spank.h>
}

#define MRCHECK_CORE_ABI 2u
#define MRCHECK_CORE_FILE "mrcheck_spank_core.so"
#define MRCHECK_CORE_SYMBOL "mrcheck_spank_core_v1"

extern "C" {

// The --mr-check value: held by the loader only (its option callback runs in every process, the core is not
// loaded yet in slurmstepd's), read by the core through the pointer init gets. Never freed while the core runs.
struct mrcheck_step_option {
  int seen;           // the option was given (its callback ran)
  const char* value;  // its value as given: NULL for the bare option (Slurm's "" and "(null)" mean the same)
};

// Every entry is noexcept in effect (the core catches everything) and follows the SPANK hook's rules.
struct mrcheck_core_hooks {
  unsigned abi;         // MRCHECK_CORE_ABI
  const char* version;  // MRCHECK_VERSION of the core's build
  // Loads the configuration (plugstack arguments, config=) into fresh per-process state. The loader has
  // already checked the Slurm version, logged the load line and registered --mr-check. sp may be null (the
  // loader can first need the core in the option callback, which has no handle). `option` is the loader's.
  int (*init)(spank_t sp, int ac, char** av, const struct mrcheck_step_option* option);
  // srun/sbatch/salloc, from the option callback: validates the option the loader now holds (a bad LIST, or
  // `off` where the site forbids it, stops the launch). slurmstepd never calls it.
  int (*check_option)(void);
  int (*init_post_opt)(spank_t sp, int ac, char** av);
  int (*task_init_privileged)(spank_t sp, int ac, char** av);
  int (*task_init)(spank_t sp, int ac, char** av);
  int (*user_init)(spank_t sp, int ac, char** av);
  int (*task_post_fork)(spank_t sp, int ac, char** av);
  int (*task_exit)(spank_t sp, int ac, char** av);
  int (*exit)(spank_t sp, int ac, char** av);
};

// Defined by the core (plugin.cpp); what the loader looks up with dlsym.
const mrcheck_core_hooks* mrcheck_spank_core_v1();
using mrcheck_core_entry = const mrcheck_core_hooks* (*)();
}
