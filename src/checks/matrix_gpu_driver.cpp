// gpu_driver: the NVIDIA kernel driver is loaded when there is a GPU, is at least the minimum, and is of the
// flavour the site requires (DMA-BUF GPUDirect needs the open kernel modules; docs/facts/verbs-and-nccl.md §4).
#include "checks/matrix_checks.h"

#include <fmt/format.h>

namespace mrcheck::matrix {

namespace {
constexpr std::string_view k_id = "gpu_driver";

std::string_view flavour_name(nvidia_flavour f) {
  switch (f) {
    case nvidia_flavour::open: return "open";
    case nvidia_flavour::proprietary: return "proprietary";
    case nvidia_flavour::unknown: return "unknown-flavour";
  }
  return "unknown-flavour";
}
}  // namespace

check_result check_gpu_driver(const node_facts& f, const matrix_rules& r) {
  if (r.gpu_driver == rule_action::off) return skipped(k_id, "rule off");
  if (!f.nvidia) {
    if (has_gpus(f)) {
      return make(k_id, verdict_for(r.gpu_driver), fmt::format("{} NVIDIA GPU(s) but no driver loaded", f.gpus->size()),
                  fmt::format("/proc/driver/nvidia/version: {}", clean(f.nvidia.error().message(), 160)),
                  "load the NVIDIA driver (modprobe nvidia; check dmesg for why it did not load)");
    }
    return skipped(k_id, "no NVIDIA driver and no NVIDIA GPU");
  }
  const auto& drv = *f.nvidia;
  std::string desc = fmt::format("{} {}", flavour_name(drv.flavour), clean(drv.version, 32));
  std::string detail = fmt::format("{}", clean(drv.raw, 200));
  auto v = leading_version(drv.version);
  if (!v)
    return make(k_id, verdict::error, fmt::format("cannot parse driver version '{}'", clean(drv.version, 32)), detail);
  if (r.gpu_driver_min && *v < *r.gpu_driver_min) {
    return make(k_id, verdict_for(r.gpu_driver), fmt::format("driver {} < {}", desc, r.gpu_driver_min->to_string()),
                detail, fmt::format("install NVIDIA driver {} or newer", r.gpu_driver_min->to_string()));
  }
  if (r.gpu_driver_flavour == flavour_rule::open && drv.flavour != nvidia_flavour::open) {
    return make(
        k_id, verdict_for(r.gpu_driver), fmt::format("driver {} is not the open kernel module", desc), detail,
        "install the open GPU kernel modules (nvidia-open / nvidia-driver-XXX-open); DMA-BUF GPUDirect needs them");
  }
  if (r.gpu_driver_flavour == flavour_rule::proprietary && drv.flavour != nvidia_flavour::proprietary) {
    return make(k_id, verdict_for(r.gpu_driver), fmt::format("driver {} is not the proprietary kernel module", desc),
                detail, "install the proprietary NVIDIA kernel module, or set gpu_driver.flavour any");
  }
  return make(k_id, verdict::pass,
              r.gpu_driver_min ? fmt::format("driver {} >= {}", desc, r.gpu_driver_min->to_string())
                               : fmt::format("driver {}", desc),
              detail);
}

}  // namespace mrcheck::matrix
