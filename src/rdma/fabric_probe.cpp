// The mnnvl_handle facts (mr_probe.h: probe_fabric_handle): on a node whose GPUs report a multi-node NVLink fabric,
// one fabric-handle buffer made, exported and imported as NCCL's MNNVL check does ([NCCL@v2.27.3-1] src/mnnvl.cc),
// and the IMEX channels this process sees. The judging is src/checks/mnnvl_handle.cpp.
#include <mrcheck/fabric.h>
#include <mrcheck/log.h>
#include <mrcheck/mr_probe.h>
#include <mrcheck/units.h>

#include <fmt/format.h>

#include <unistd.h>

namespace mrcheck {

namespace {

// NCCL's buffer for the check: CUDA_IPC_MIN, 2 MiB ([NCCL@v2.27.3-1] src/include/comm.h), rounded up to the
// allocation granularity by the allocation itself.
constexpr std::size_t k_fabric_bytes = 2u << 20;

// NCCL's condition for trying MNNVL at all (docs/facts/mnnvl.md §1): a fabric COMPLETED with a non-zero cluster UUID.
// The first such GPU, or null.
const gpu_fabric* multi_node_gpu(const std::vector<gpu_fabric>& gpus) {
  for (const auto& g : gpus) {
    if (g.query_error == 0 && g.state == fabric_state::completed && g.status == 0 && !g.uuid_zero()) return &g;
  }
  return nullptr;
}

// Why a node is not one NCCL would use MNNVL on, in words.
std::string why_no_fabric(const std::vector<gpu_fabric>& gpus) {
  std::size_t in_fabric = 0;
  for (const auto& g : gpus) in_fabric += g.in_fabric() ? 1 : 0;
  if (in_fabric == 0)
    return fmt::format("NVML asked {} GPU{}: none in a fabric", gpus.size(), gpus.size() == 1 ? "" : "s");
  return fmt::format("{} of {} GPUs report an NVLink fabric, none completed with a cluster UUID (see mnnvl)", in_fabric,
                     gpus.size());
}

}  // namespace

fabric_probe_result probe_fabric_handle(const fabric_facts& nvml, gpu_memory* gpu, const std::string& cuda_problem,
                                        bool cuda_problem_skip, log_sink& sink) {
  fabric_probe_result f;
  f.asked = true;
  if (!nvml.gpus) {
    const std::string why = nvml.gpus.error().message();
    f.no_fabric = why.starts_with("not asked") ? "NVML " + why : "NVML could not be asked: " + why;
    return f;
  }
  const gpu_fabric* g = multi_node_gpu(*nvml.gpus);
  if (g == nullptr) {
    f.no_fabric = why_no_fabric(*nvml.gpus);
    return f;
  }
  f.node_fabric = true;
  f.fabric_line = fmt::format("GPU {}: clique {:#x} of cluster {}", g->index, g->clique_id, g->uuid_string());
  const task_imex_view own = read_task_imex(static_cast<int>(::getpid()));
  f.channels_dir = own.seen.channels_dir;
  f.channels = own.seen.channels;
  f.usable = own.usable;
  if (gpu == nullptr) {
    f.cuda_problem = cuda_problem.empty() ? std::string("CUDA was not set up") : cuda_problem;
    f.cuda_problem_skip = cuda_problem_skip;
    return f;
  }
  f.cuda_device = gpu->device();
  f.pci_bdf = gpu->pci_bdf();
  f.handle_attr = gpu->fabric_handle_supported();
  if (!f.handle_attr) return f;
  log(sink, log_level::verbose, "mnnvl_handle: calling cuMemCreate(CU_MEM_HANDLE_TYPE_FABRIC, {}) on GPU {}",
      format_bytes(k_fabric_bytes), f.cuda_device);
  f.attempt = gpu->try_fabric_handle(k_fabric_bytes);
  return f;
}

}  // namespace mrcheck
