// node_control over libslurm (docs/facts/slurm-prolog.md §2): slurm_load_node_single to read the node's state and
// reason, slurm_update_node with NODE_STATE_DRAIN + reason or NODE_RESUME to change it. Each call runs in a forked
// child that the parent kills at its timeout: libslurm retries an unreachable slurmctld on its own schedule
// (MessageTimeout), and a Prolog must not outlive its budget waiting for it.
#pragma once

#include "../src/matrix/node_action.h"

#include <memory>

namespace mrcheck::prolog {

// nullptr when the binary was built without libslurm (no Slurm headers, e.g. the GPU machine).
std::unique_ptr<node_control> make_slurm_control();

}  // namespace mrcheck::prolog
