// The interface between spank_mrcheck.so (the loader Slurm loads, shim.cpp) and mrcheck_spank_core.so (the
// checks, plugin.cpp). Both are built from one tree and installed side by side; `abi` and `version` let the
// loader refuse a core of another version (a half-finished upgrade) instead of calling into it.
#pragma once

extern "C" {
#include <slurm/spank.h>
}

#define MRCHECK_CORE_ABI 1u
#define MRCHECK_CORE_FILE "mrcheck_spank_core.so"
#define MRCHECK_CORE_SYMBOL "mrcheck_spank_core_v1"

extern "C" {

// Every entry is noexcept in effect (the core catches everything) and follows the SPANK hook's rules.
struct mrcheck_core_hooks {
  unsigned abi;         // MRCHECK_CORE_ABI
  const char* version;  // MRCHECK_VERSION of the core's build
  // Loads the configuration (plugstack arguments, config=) into fresh per-process state. The loader has
  // already checked the Slurm version, logged the load line and registered --mr-check. sp may be null (the
  // loader can first need the core in the option callback, which has no handle).
  int (*init)(spank_t sp, int ac, char** av);
  int (*option)(int val, const char* optarg, int remote);
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
