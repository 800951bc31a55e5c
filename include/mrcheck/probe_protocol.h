// The protocol between the SPANK plugin (src/limits/plugin_engine.cpp, real_probe_runner) and the probe it
// runs, `mrcheck probe GROUP --json` (cli/cmd_probe_mr.cpp, cli/cmd_probe_nccl.cpp). Both ends include it.
//
//   argv    HELPER probe mr --json --verbs-library LIB      |  HELPER probe nccl --json
//   env     probe_environment() (memlock_chain.h): no LD_*, only what NCCL, CUDA and verbs read
//   stdout  one JSON report {"verdict", "checks": [...], ...}; the plugin accepts only the check ids of the group
//           (probe_check_ids), each once, with bounded fields
//   exit    k_probe_exit_pass (pass or warn), k_probe_exit_fail, k_probe_exit_error; anything else, a signal or
//           the timeout is the probe breaking (a hang or crash in the driver is a FAIL about the node)
#pragma once

#include <cstddef>
#include <string_view>

namespace mrcheck {

inline constexpr std::string_view k_probe_command = "probe";
inline constexpr std::string_view k_probe_json_flag = "--json";
inline constexpr std::string_view k_probe_verbs_library_flag = "--verbs-library";
inline constexpr int k_probe_exit_pass = 0;
inline constexpr int k_probe_exit_fail = 1;
inline constexpr int k_probe_exit_error = 2;
// What the plugin reads of the probe's stdout and stderr.
inline constexpr std::size_t k_probe_output_max = 256 * 1024;

}  // namespace mrcheck
