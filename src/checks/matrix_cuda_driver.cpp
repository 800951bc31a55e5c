// cuda_driver: the CUDA driver API version (cuDriverGetVersion) at least the minimum, where libcuda is
// installed; skip when it is not (a node without GPUs, or a --root replay).
#include "checks/matrix_checks.h"

#include <fmt/format.h>

namespace mrcheck::matrix {

check_result check_cuda_driver(const node_facts& f, const matrix_rules& r) {
  constexpr std::string_view id = "cuda_driver";
  if (r.cuda_driver == rule_action::off) return skipped(id, "rule off");
  if (!f.cuda_driver_version) {
    return skipped(id, fmt::format("CUDA driver not found: {}", clean(f.cuda_driver_version.error().message(), 128)));
  }
  auto v = cuda_version_from_int(*f.cuda_driver_version);
  std::string detail = fmt::format("cuDriverGetVersion = {}", *f.cuda_driver_version);
  if (r.cuda_driver_min && v < *r.cuda_driver_min) {
    return make(id, verdict_for(r.cuda_driver),
                fmt::format("CUDA driver {} < {}", v.to_string(), r.cuda_driver_min->to_string()), detail,
                fmt::format("install an NVIDIA driver that provides CUDA {} or newer", r.cuda_driver_min->to_string()));
  }
  return make(id, verdict::pass,
              r.cuda_driver_min ? fmt::format("CUDA driver {} >= {}", v.to_string(), r.cuda_driver_min->to_string())
                                : fmt::format("CUDA driver {}", v.to_string()),
              detail);
}

}  // namespace mrcheck::matrix
