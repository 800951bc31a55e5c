// Multi-node NVLink (MNNVL, GB200/GB300 NVL72) readiness: what each GPU's NVML reports about its NVLink fabric,
// the node's IMEX service, and the IMEX channel devices a job needs. Since NCCL 2.27.3 a node whose GPUs report a
// fabric but whose IMEX set-up is wrong fails every communicator (docs/facts/mnnvl.md §1); a node without a fabric
// (an H100 or H200 box) skips all of this and says so.
//
// NVML is loaded with dlopen("libnvidia-ml.so.1") in a child process (read_gpu_fabric_isolated): an NVML that is
// missing, crashes or hangs gives one clear line and changes no other fact. Under --root, a dump's
// .mrcheck/fabric.json stands in for NVML (the fixtures in tests/fixtures/mnnvl_*).
#pragma once

#include <mrcheck/check.h>
#include <mrcheck/status.h>
#include <mrcheck/sysroot.h>

#include <nlohmann/json_fwd.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mrcheck {

inline constexpr std::string_view k_nvml_library = "libnvidia-ml.so.1";
inline constexpr std::string_view k_fabric_json = "/.mrcheck/fabric.json";
inline constexpr std::string_view k_imex_channels_dir = "/dev/nvidia-caps-imex-channels";
inline constexpr std::string_view k_imex_nodes_config = "/etc/nvidia-imex/nodes_config.cfg";

// nvmlGpuFabricState_t (docs/facts/mnnvl.md §2).
enum class fabric_state : std::uint8_t { not_supported = 0, not_started = 1, in_progress = 2, completed = 3 };
std::string_view to_string(fabric_state s);

// One GPU's nvmlDeviceGetGpuFabricInfoV.
struct gpu_fabric {
  unsigned index = 0;
  fabric_state state = fabric_state::not_supported;
  int status = 0;  // nvmlReturn_t, meaningful once state is completed
  unsigned clique_id = 0;
  std::array<std::uint8_t, 16> cluster_uuid{};
  unsigned health_mask = 0;
  int query_error = 0;  // the call's own nvmlReturn_t (0: answered); NOT_SUPPORTED (3) = no fabric
  bool uuid_zero() const;
  std::string uuid_string() const;  // "8c6b2a1e-...", 36 characters
  // NVML answered and the GPU is in a fabric (whatever its state): the GPUs the mnnvl checks judge.
  bool in_fabric() const { return query_error == 0 && state != fabric_state::not_supported; }
  // The degraded-bandwidth field of the health mask (bits 0-1): 1 = degraded.
  bool degraded_bandwidth() const { return (health_mask & 0x3u) == 1u; }
};

// What NVML said: the GPUs, or why it could not be asked.
struct fabric_facts {
  result<std::vector<gpu_fabric>> gpus = status::error("not read");
  std::string library;  // the file dlopen opened (loaded_library_path), "" when unknown
};

// Asks NVML in this process (the caller isolates it: read_gpu_fabric_isolated). `library` as dlopen takes it.
fabric_facts query_gpu_fabric(const std::string& library);
// The same in a forked child that writes fabric_to_json on a pipe, killed after `timeout`: a crash or a hang of
// NVML is this call's error, "NVML (libnvidia-ml.so.1) crashed (killed by SIGSEGV)" / "... did not answer
// within 5 s". The caller must have no other thread inside the dynamic loader (mrcheck-prolog reads the matrix
// facts after its library thread has ended).
fabric_facts read_gpu_fabric_isolated(const std::string& library,
                                      std::chrono::milliseconds timeout = std::chrono::milliseconds{5000});

nlohmann::json fabric_to_json(const fabric_facts& f);
fabric_facts fabric_from_json(const nlohmann::json& j);

// The node's IMEX service: the daemon (a process whose comm is "nvidia-imex"), its nodes file, the channel
// devices on the node (/dev/nvidia-caps-imex-channels/channelN). Read through `root`; the process list only
// with `scan_processes` (collect_mnnvl_facts: only where a GPU reports a fabric).
struct imex_facts {
  std::optional<int> daemon_pid;
  bool nodes_config = false;       // k_imex_nodes_config exists
  std::vector<unsigned> channels;  // the N of every channelN, sorted
  bool channels_dir = false;       // k_imex_channels_dir exists
};
imex_facts read_imex_facts(const sysroot& root, bool scan_processes = true);

// Everything the mnnvl check reads.
struct mnnvl_facts {
  fabric_facts fabric;
  imex_facts imex;
  bool nvidia_loaded = false;  // the NVIDIA driver is loaded: NVML was asked
  std::string not_asked;       // why NVML's answer is not known and that is no fault (a --root tree without it)
};
// Whether the node has IMEX at all: /etc/nvidia-imex, /usr/bin/nvidia-imex or the channel directory. Without it
// MNNVL cannot work here, and NVML is not asked: asking costs a fork and nvmlInit, 22-29 ms on the project's H100
// (docs/facts/mnnvl.md §4), where the whole prolog takes about 6 ms.
bool imex_installed(const sysroot& root);
// On the host: NVML in a child, only where the NVIDIA driver is loaded and IMEX is installed; under --root:
// .mrcheck/fabric.json.
mnnvl_facts collect_mnnvl_facts(const sysroot& root, bool nvidia_loaded);

// Whether a task on this node needs an IMEX channel: the node is configured for an IMEX domain (its nodes file)
// or has channel devices of its own. The plugin then reads the task's view after its exec (read_task_imex).
bool node_serves_imex(const imex_facts& node);

// The IMEX channel devices a task sees: read_imex_facts() of its mount namespace (sysroot::open_process_root, no
// process scan) and which of them the caller may open read-write (faccessat with the real ids: the plugin's post-exec
// watcher runs as the job user). `read` is false when the task's root could not be opened (it has exited).
struct task_imex_view {
  bool read = false;
  imex_facts seen;
  std::vector<unsigned> usable;
};
task_imex_view read_task_imex(int pid);

}  // namespace mrcheck
