// A probe run in a child of its own with a timeout (`probe mr`, `probe rdma`): a hang or a crash inside
// libibverbs or libcuda is reported, not suffered. The child is this program again, with the caller's arguments
// less --timeout and plus --isolated-child (cmd_probe_mr.cpp, cmd_probe_rdma.cpp).
#pragma once

#include "commands.h"

#include <mrcheck/child.h>
#include <mrcheck/status.h>

#include <chrono>
#include <string>
#include <string_view>

namespace mrcheck::cli {

// Runs `mrcheck probe PROBE ARGS... --isolated-child` to its exit or `timeout`; an error when it cannot start.
result<child_outcome> run_self_isolated(std::string_view probe, const args& original,
                                        std::chrono::milliseconds timeout);

// The last "calling ..." step line of the child's stderr: where it hung or crashed ("" when none).
std::string last_call(std::string_view err);

}  // namespace mrcheck::cli
