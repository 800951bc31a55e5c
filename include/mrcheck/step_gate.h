// The one idle gate of a step: may this process check anything at all? Asked by the loader
// (spank/shim.cpp: load the core or stay idle), by the core (spank/plugin.cpp: every hook before it reads
// anything) and by the step engine (src/step/plugin_engine.cpp: effective_checks). A step that nobody asked
// to check costs nothing (bench/plugin/README.md), so all three must agree: one function, in C, because the
// loader is libc only (-fno-exceptions -fno-rtti, no libstdc++ at run time) and includes nothing from the C++ core.
#pragma once

#ifdef __cplusplus
#define MRCHECK_STEP_GATE_FN constexpr inline
extern "C" {
#else
#define MRCHECK_STEP_GATE_FN static inline
#endif

// What the user asked: --mr-check was given (any value, `off` included), or MRCHECK_CHECKS is set (the job's
// environment in slurmstepd, srun's/sbatch's own in them: an enclosing `sbatch --mr-check` set it).
MRCHECK_STEP_GATE_FN int mrcheck_user_asked(int option_seen, int env_checks_set) {
  return option_seen || env_checks_set;
}

// The gate: the user asked, or the site checks every step (`site_default`: the configuration has a non-empty
// default_checks; the loader, which does not parse the configuration, passes "may have one"). 0: idle.
MRCHECK_STEP_GATE_FN int mrcheck_step_may_check(int option_seen, int env_checks_set, int site_default) {
  return mrcheck_user_asked(option_seen, env_checks_set) || site_default;
}

#ifdef __cplusplus
}
#endif
#undef MRCHECK_STEP_GATE_FN
