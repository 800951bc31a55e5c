// real_probe_runner (memlock_chain.h) that also tells its caller when a probe was killed from outside (a SIGKILL
// or SIGTERM that was not our timeout): the step is being ended (scancel), and what the probes did not finish
// is no finding about the node (docs/slurm-step-kill.md; tests/e2e/admin_netns_test.sh). The plugin then sends no
// record of its own for the probes.
#pragma once

#include <mrcheck/step.h>

#include <chrono>
#include <memory>

namespace mrcheck {

probe_runner real_probe_runner_stop(const config& c, std::chrono::milliseconds budget, std::shared_ptr<bool> stopped);

}  // namespace mrcheck
