// The NCCL pair's ranks as a scripted program (tests/unit/fake_nccl_rank.cpp) instead of NCCL, for CI without a
// GPU, through the pair's one test seam (nccl_pair_options::spawn). Built into the test library
// mrcheck_test_doubles only, never into a shipped program.
#pragma once

#include <mrcheck/child.h>

#include <array>
#include <string>

namespace mrcheck {

struct stand_in_ranks {
  std::string program;              // absolute path of the stand-in
  std::array<std::string, 2> spec;  // per rank, e.g. "log=/path/nccl.log,action=pass"
};

// Starts each rank child as the pair asks, with one change: its `SELF probe nccl --rank R ...` runs as
// `PROGRAM --spec SPEC[R] --rank R ...`, a real process with the pipes, limits and group the pair gave it. A
// command line of another shape (no `probe nccl` after the program, no `--rank 0|1`) is an error, not a guess.
child_spawner stand_in_spawner(const stand_in_ranks& ranks);

}  // namespace mrcheck
