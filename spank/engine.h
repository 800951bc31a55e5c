// The core functions the SPANK hooks call, behind one table so a test can swap in a core that throws
// (tests/spank/hooks_test.cpp) and check that every hook still returns per policy.
#pragma once

#include <mrcheck/memlock_step.h>
#include <mrcheck/step.h>

#include <unistd.h>

namespace mrcheck::spank_glue {

struct engine {
  result<config> (*load_config)(std::span<const std::string_view>, std::string_view) = parse_config_args;
  result<submit_plan> (*submit)(const config&, const submit_inputs&, const sysroot&) = plan_submit;
  std::optional<std::string> (*privileged)(const config&, const task_facts&, const sysroot&, rlimit_ops&,
                                           node_state&) = node_privileged;
  task_verdict (*task)(const config&, const task_facts&, node_state&, const probe_runner&) = node_task;
  // Ends the task child before exec when a task hook fails (slurmstepd's own _exit(1)); a test records it.
  void (*end_task)(int status) = ::_exit;
};
engine& current_engine();

}  // namespace mrcheck::spank_glue
