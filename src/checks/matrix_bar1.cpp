// bar1: GPUDirect RDMA maps GPU memory for the HCA through the GPU's BAR1 aperture; a BAR1 smaller than the
// GPU's memory caps what can be registered at once (docs/facts/kernel-and-drivers.md §5: the largest prefetchable
// 64-bit BAR, not always resource line 1). GPU memory comes from NVML when the facts have it, else from the rules'
// per-device table; a GPU in neither is reported, not guessed.
#include "checks/matrix_checks.h"

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
  std::vector<std::string> detail, small, ok, unknown;
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
    if (!mem) {
      unknown.push_back(fmt::format("{}: memory unknown (no NVML, device id not in gpu_memory)", name));
      detail.push_back(fmt::format("{}: BAR1 {}", name, format_bytes(g.bar1_bytes)));
      continue;
    }
    std::string line = fmt::format("{}: BAR1 {} (resource line {}), memory {} ({})", name, format_bytes(g.bar1_bytes),
                                   g.bar1_resource_line, format_bytes(*mem), mem_src);
    detail.push_back(line);
    if (g.bar1_bytes < *mem) {
      small.push_back(fmt::format("{} BAR1 {} < memory {}", clean(g.pci_bdf, 32), format_bytes(g.bar1_bytes), format_bytes(*mem)));
    } else {
      ok.push_back(fmt::format("BAR1 {} >= memory {}", format_bytes(g.bar1_bytes), format_bytes(*mem)));
    }
  }
  for (const auto& u : unknown) detail.push_back(u);
  if (!small.empty()) {
    return make(k_id, verdict_for(r.bar1), small.front(), join(detail, "\n"),
                "enable large BAR1 / Resizable BAR (Above 4G decoding) in the BIOS, or set the GPU's BAR1 mode with the vendor tool");
  }
  if (ok.empty()) return skipped(k_id, unknown.empty() ? "nothing to compare" : unknown.front());
  return make(k_id, verdict::pass, fmt::format("{} GPU(s): {}", ok.size(), ok.front()), join(detail, "\n"));
}

}  // namespace mrcheck::matrix
