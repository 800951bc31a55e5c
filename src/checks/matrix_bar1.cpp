// bar1: GPUDirect RDMA maps GPU memory for the HCA through the GPU's BAR1 aperture; a BAR1 smaller than the
// GPU's memory caps what can be registered at once (docs/facts/kernel-and-drivers.md §5: the largest prefetchable
// 64-bit BAR, not always resource line 1). GPU memory comes from NVML when the facts have it, else from the rules'
// per-device table; a GPU in neither is reported, not guessed.
// Graded: a BAR1 below what NCCL registers on the GPU (bar1.min, by default NCCL's GPU buffers for this
// node's NICs, estimate_nccl_registration) cannot work at all: the bar1.too_small action (fail). A BAR1 that only
// falls short of the GPU's memory: the bar1 action (warn). etc/README.rules.md gives the sources.
#include "checks/matrix_checks.h"

#include <mrcheck/mr_probe.h>
#include <mrcheck/units.h>

#include <fmt/format.h>

namespace mrcheck::matrix {

namespace {
constexpr std::string_view k_id = "bar1";

std::string normalize_id(std::string_view id) {
  std::string s(id);
  for (char& c : s) {
    if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
  }
  if (!s.starts_with("0x")) s = "0x" + s;
  return s;
}
}  // namespace

check_result check_bar1(const node_facts& f, const matrix_rules& r) {
  if (r.bar1 == rule_action::off) return skipped(k_id, "rule off");
  if (!f.gpus) return skipped(k_id, fmt::format("GPUs not read: {}", clean(f.gpus.error().message(), 128)));
  if (f.gpus->empty()) return skipped(k_id, "no NVIDIA GPU");
  // What one rank registers on its GPU, the floor below which BAR1 cannot hold NCCL's buffers.
  std::optional<std::uint64_t> need = r.bar1_min;
  std::string need_from = "bar1.min";
  const int nics = f.rdma_devices.is_ok() ? static_cast<int>(f.rdma_devices->size()) : 0;
  if (!need && nics > 0) {
    nccl_estimate est = estimate_nccl_registration(nccl_env{}, nics);
    need = est.gpu_bytes;
    need_from = fmt::format("NCCL's GPU buffers for {} NIC{} ({})", nics, nics == 1 ? "" : "s", est.formula);
  }
  std::vector<std::string> detail, small, ok, unknown, too_small;
  std::vector<std::string> small_dev, too_small_dev;  // the GPU of each entry of small / too_small
  for (const auto& g : *f.gpus) {
    std::string name = fmt::format("{} ({})", clean(g.pci_bdf, 32), clean(g.device_id, 16));
    std::optional<std::uint64_t> mem = g.memory_bytes;
    std::string mem_src = "NVML";
    if (!mem) {
      auto it = r.gpu_memory.find(normalize_id(g.device_id));
      if (it != r.gpu_memory.end()) {
        mem = it->second;
        mem_src = "rules table";
      }
    }
    if (g.bar1_bytes == 0) {
      unknown.push_back(fmt::format("{}: BAR1 not found", name));
      continue;
    }
    if (need && g.bar1_bytes < *need) {
      too_small.push_back(fmt::format("{} BAR1 {} < {} that NCCL registers on the GPU", clean(g.pci_bdf, 32),
                                      format_bytes(g.bar1_bytes), format_bytes(*need)));
      too_small_dev.push_back(clean(g.pci_bdf, 32));
    }
    if (!mem) {
      unknown.push_back(fmt::format("{}: memory unknown (no NVML, device id not in gpu_memory)", name));
      detail.push_back(fmt::format("{}: BAR1 {}", name, format_bytes(g.bar1_bytes)));
      continue;
    }
    std::string line = fmt::format("{}: BAR1 {} (resource line {}), memory {} ({})", name, format_bytes(g.bar1_bytes),
                                   g.bar1_resource_line, format_bytes(*mem), mem_src);
    detail.push_back(line);
    if (g.bar1_bytes < *mem) {
      small.push_back(
          fmt::format("{} BAR1 {} < memory {}", clean(g.pci_bdf, 32), format_bytes(g.bar1_bytes), format_bytes(*mem)));
      small_dev.push_back(clean(g.pci_bdf, 32));
    } else {
      ok.push_back(fmt::format("BAR1 {} >= memory {}", format_bytes(g.bar1_bytes), format_bytes(*mem)));
    }
  }
  for (const auto& u : unknown) detail.push_back(u);
  if (need) detail.push_back(fmt::format("needed for NCCL: {} ({})", format_bytes(*need), need_from));
  if (!too_small.empty() && r.bar1_too_small != rule_action::off) {
    return on_device(
        make(k_id, verdict_for(r.bar1_too_small), too_small.front(), join(detail, "\n"),
             "GPUDirect RDMA cannot map NCCL's buffers through this BAR1: enable large BAR1 / Resizable BAR (Above 4G "
             "decoding) in the BIOS or the GPU's BAR1 mode; until then NCCL_NET_GDR_LEVEL=LOC stages GPU data "
             "through host memory"),
        too_small_dev);
  }
  if (!small.empty()) {
    return on_device(make(k_id, verdict_for(r.bar1), small.front(), join(detail, "\n"),
                          "enable large BAR1 / Resizable BAR (Above 4G decoding) in the BIOS, or set the GPU's BAR1 "
                          "mode with the vendor tool"),
                     small_dev);
  }
  if (ok.empty()) return skipped(k_id, unknown.empty() ? "nothing to compare" : unknown.front());
  return make(k_id, verdict::pass, fmt::format("{} GPU(s): {}", ok.size(), ok.front()), join(detail, "\n"));
}

}  // namespace mrcheck::matrix
