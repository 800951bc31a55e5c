// `mrcheck probe nccl` with its ranks started by a test (the pair's one test seam, nccl_pair_options::spawn),
// for the test program tests/doubles/probe_nccl_stand_in.cpp only: the shipped command, cmd_probe_nccl
// (commands.h), is this with the ranks started as processes of the mrcheck binary, and no option reaches it.
#pragma once

#include "commands.h"

#include <mrcheck/child.h>

namespace mrcheck::cli {

// `spawn` empty: as cmd_probe_nccl.
int probe_nccl_with_spawner(const args& a, const child_spawner& spawn);

}  // namespace mrcheck::cli
