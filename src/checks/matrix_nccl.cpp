// nccl: the system NCCL (ncclGetVersion) at least the minimum, where it is installed; skip when absent (jobs
// often bring their own NCCL in a container or a Python wheel, which this cannot see).
#include "checks/matrix_checks.h"

#include <fmt/format.h>

namespace mrcheck::matrix {

check_result check_nccl(const node_facts& f, const matrix_rules& r) {
  constexpr std::string_view id = "nccl";
  if (r.nccl == rule_action::off) return skipped(id, "rule off");
  if (!f.nccl_version)
    return skipped(id, fmt::format("NCCL not found: {}", clean(f.nccl_version.error().message(), 128)));
  auto v = nccl_version_from_int(*f.nccl_version);
  std::string detail = fmt::format("ncclGetVersion = {}", *f.nccl_version);
  if (r.nccl_min && v < *r.nccl_min) {
    return make(id, verdict_for(r.nccl), fmt::format("NCCL {} < {}", v.to_string(), r.nccl_min->to_string()), detail,
                fmt::format("install NCCL {} or newer (libnccl2)", r.nccl_min->to_string()));
  }
  return make(id, verdict::pass,
              r.nccl_min ? fmt::format("NCCL {} >= {}", v.to_string(), r.nccl_min->to_string())
                         : fmt::format("NCCL {}", v.to_string()),
              detail);
}

}  // namespace mrcheck::matrix
