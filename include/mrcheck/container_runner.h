// The plugin's probe runner for a task in a container (src/container/runner.cpp). Separate from container.h
// because it needs the plugin engine's types (memlock_chain.h).
#pragma once

#include <mrcheck/container.h>
#include <mrcheck/step.h>

#include <memory>

namespace mrcheck {

// `mr` and `nccl` for a task that is in its container (the helper runs there) or is about to enter one (the
// `host` runner's probes now, and a watcher checks the container after the task starts). The probes of one task
// share `budget` (plan_probe_budget) as the host's do. `verbose`: the watcher prints its PASS lines too (the
// runner's own verdicts go through the engine, which decides). `c` and `st` must outlive the runner. `stopped`
// (may be null) is set when the probe inside was killed from outside, as real_probe_runner_stop does for the
// host's (probe_stop.h): the step is being cancelled, and what the probe did not finish is no finding.
probe_runner container_probe_runner(const config& c, const container_state& st, const task_location& loc,
                                    probe_runner host, std::chrono::milliseconds budget, bool verbose,
                                    std::shared_ptr<bool> stopped = nullptr);

}  // namespace mrcheck
