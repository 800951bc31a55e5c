// gpudirect: on a node with both an HCA and an NVIDIA GPU, NCCL registers GPU memory with the HCA either
// through nvidia_peermem (PeerDirect, needs an OFED/NVIDIA ib_core) or through DMA-BUF (open GPU kernel
// modules, kernel >= 5.12, rdma-core with ibv_reg_dmabuf_mr, CUDA driver >= 11.7). Without either, NCCL falls
// back to host bounce buffers or fails GPU registrations with EFAULT (docs/facts/verbs-and-nccl.md §2, §4).
#include "checks/matrix_checks.h"

#include <fmt/format.h>

#include <algorithm>

namespace mrcheck::matrix {

namespace {
constexpr std::string_view k_id = "gpudirect";
constexpr std::string_view k_dmabuf_symbol = "ibv_reg_dmabuf_mr@IBVERBS_1.12";
}  // namespace

check_result check_gpudirect(const node_facts& f, const matrix_rules& r) {
  if (r.gpudirect == rule_action::off) return skipped(k_id, "rule off");
  if (!has_rdma_devices(f)) return skipped(k_id, "no RDMA device");
  if (!has_gpus(f) && !f.nvidia) return skipped(k_id, "no NVIDIA GPU");
  if (!f.nvidia) return skipped(k_id, "no NVIDIA driver loaded (see gpu_driver)");

  std::vector<std::string> detail;
  // nvidia_peermem: the files NCCL itself tests (net_ib.cc ibGdrSupportInitOnce).
  const auto& clients = f.memory_peer_clients;
  bool nv_client = std::find(clients.begin(), clients.end(), "nv_mem") != clients.end() ||
                   std::find(clients.begin(), clients.end(), "nv_mem_nc") != clients.end();
  const kmodule_fact* peermem = loaded_module(f, "nvidia_peermem");
  const kmodule_fact* legacy = loaded_module(f, "nv_peer_mem");
  bool peermem_ok = nv_client || (peermem && peermem->version) || legacy;
  detail.push_back(fmt::format("nvidia_peermem: {}; memory_peers: {}{}", peermem ? "loaded" : "not loaded",
                               f.memory_peers ? "present" : "absent (inbox ib_core has no PeerDirect)",
                               nv_client ? ", nv_mem client registered" : ""));

  std::vector<std::string> dmabuf_missing;
  if (f.nvidia->flavour != nvidia_flavour::open) dmabuf_missing.push_back("driver is not the open kernel module");
  if (f.kernel_release) {
    auto kv = leading_version(*f.kernel_release);
    if (!kv || *kv < r.dmabuf_kernel_min) {
      dmabuf_missing.push_back(
          fmt::format("kernel {} < {}", clean(*f.kernel_release), r.dmabuf_kernel_min.to_string()));
    }
  }
  if (f.libibverbs) {
    auto it = f.libibverbs->symbols.find(std::string(k_dmabuf_symbol));
    if (it == f.libibverbs->symbols.end() || !it->second)
      dmabuf_missing.push_back("libibverbs lacks ibv_reg_dmabuf_mr");
  } else {
    detail.push_back("libibverbs symbols not checked (not loaded)");
  }
  if (f.cuda_driver_version) {
    auto cv = cuda_version_from_int(*f.cuda_driver_version);
    if (cv < r.dmabuf_cuda_min) {
      dmabuf_missing.push_back(fmt::format("CUDA driver {} < {}", cv.to_string(), r.dmabuf_cuda_min.to_string()));
    }
  }
  bool dmabuf_ok = dmabuf_missing.empty();
  detail.push_back(dmabuf_ok ? "DMA-BUF: possible"
                             : fmt::format("DMA-BUF: not possible ({})", join(dmabuf_missing, "; ")));

  if (peermem_ok || dmabuf_ok) {
    std::string how = peermem_ok && dmabuf_ok ? "nvidia_peermem and DMA-BUF"
                      : peermem_ok            ? "nvidia_peermem"
                                              : "DMA-BUF";
    return make(k_id, verdict::pass, fmt::format("GPUDirect RDMA via {}", how), join(detail, "\n"));
  }
  return make(
      k_id, verdict_for(r.gpudirect), fmt::format("no nvidia_peermem and no DMA-BUF ({})", dmabuf_missing.front()),
      join(detail, "\n"),
      f.memory_peers
          ? "modprobe nvidia_peermem (and load it at boot), or switch to the open GPU kernel modules for DMA-BUF"
          : "install the open GPU kernel modules for DMA-BUF (inbox RDMA cannot load nvidia_peermem), or install "
            "OFED/DOCA for nvidia_peermem");
}

}  // namespace mrcheck::matrix
