// The protocol between the SPANK plugin (src/step/plugin_engine.cpp, real_probe_runner) and the probe it
// runs, `mrcheck probe GROUP --json` (cli/cmd_probe_mr.cpp, cli/cmd_probe_nccl.cpp, cli/cmd_probe_rdma.cpp). Both ends include it.
//
//   argv    HELPER probe mr|rdma --json --verbs-library LIB --timeout T  |  HELPER probe nccl --json
//   env     probe_environment() (memlock_chain.h): no LD_*, only what NCCL, CUDA and verbs read
//   stdout  one JSON report {"verdict", "checks": [...], ...}; the plugin accepts only the check ids of the group
//           (probe_check_ids), each once, with bounded fields
//   exit    k_probe_exit_pass (pass or warn), k_probe_exit_fail, k_probe_exit_error, k_probe_exit_skip (every
//           check skipped: nothing was tested, `probe mr` and `probe rdma`; the report's verdict is "skip"); anything else, a signal or
//           the timeout is the probe breaking (a hang or crash in the driver is a FAIL about the node)
//
// And between the plugin (src/container/enter.cpp, run_ctprobe) and the container helper it runs inside a job's
// container, `mrcheck-ctprobe [--reg-bytes N] [--nccl]` (src/container/ctprobe.c; docs/containers.md):
//   env     probe_environment() as above
//   stdout  "key=value" lines, each key of k_ctprobe_keys at most once, `ctprobe=` always, `end=1` last; values
//           without control bytes (the helper escapes them as \xNN) and at most 4 KiB. parse_ctprobe_output()
//           refuses anything else as a whole: the image's libraries run in the helper and may print on its stdout.
//   exit    0 when it ran to the end, 2 on bad arguments; 127 with "mrcheck: child: ..." on stderr when it
//           could not be started (spawn_child: no loader in the image, the task's namespaces gone)
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
inline constexpr int k_probe_exit_skip = 3;
// What the plugin reads of the probe's stdout and stderr.
inline constexpr std::size_t k_probe_output_max = 256 * 1024;

inline constexpr std::string_view k_ctprobe_keys[] = {"ctprobe",
                                                      "ids",
                                                      "memlock",
                                                      "dev_infiniband",
                                                      "sys_infiniband",
                                                      "mellanox_visible_devices",
                                                      "dpkg_libibverbs1",
                                                      "verbs",
                                                      "verbs_iova2",
                                                      "verbs_dmabuf",
                                                      "providers",
                                                      "devices",
                                                      "reg",
                                                      "nccl",
                                                      "nccl_cuda",
                                                      "nccl_net_plugin",
                                                      "cuda_driver",
                                                      "markers",
                                                      "containerenv",
                                                      "end"};
// A line: the longest key, '=', a value cut at 4096 bytes before escaping plus one last escape (4 bytes).
inline constexpr std::size_t k_ctprobe_line_max = 32 + 1 + 4096 + 4;
inline constexpr std::size_t k_ctprobe_output_max = 128 * 1024;

}  // namespace mrcheck
