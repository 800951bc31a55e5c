// nccl: the NCCL the job loads at least the minimum: the job's own (a wheel, a venv, LD_LIBRARY_PATH) when the
// caller found it (node_facts::job_nccl_source), else the system's (ncclGetVersion); skip when absent.
#include "checks/matrix_checks.h"

#include <fmt/format.h>

namespace mrcheck::matrix {

check_result check_nccl(const node_facts& f, const matrix_rules& r) {
  constexpr std::string_view id = "nccl";
  if (r.nccl == rule_action::off) return skipped(id, "rule off");
  if (!f.job_nccl_source.empty()) {
    std::string sys = f.nccl_version ? fmt::format("system ncclGetVersion = {}", *f.nccl_version)
                                     : "system NCCL: " + clean(f.nccl_version.error().message(), 128);
    if (!f.job_nccl_version) {
      return make(id, verdict::warn,
                  fmt::format("the job's NCCL {}: {}", clean(f.job_nccl_source, 200),
                              clean(f.job_nccl_version.error().message(), 200)),
                  sys, "reinstall that NCCL (its wheel or package) or take it off the job's library path");
    }
    auto v = nccl_version_from_int(*f.job_nccl_version);
    std::string detail = fmt::format("the job's: {} = {}\n{}", clean(f.job_nccl_source, 300), *f.job_nccl_version, sys);
    if (r.nccl_min && v < *r.nccl_min) {
      return make(id, verdict_for(r.nccl),
                  fmt::format("the job's NCCL {} < {} ({})", v.to_string(), r.nccl_min->to_string(),
                              clean(f.job_nccl_source, 200)),
                  detail,
                  fmt::format("upgrade the job's NCCL to {} or newer (e.g. pip install -U nvidia-nccl-cu12)",
                              r.nccl_min->to_string()));
    }
    return make(id, verdict::pass,
                fmt::format("the job's NCCL {}{} ({})", v.to_string(),
                            r.nccl_min ? " >= " + r.nccl_min->to_string() : std::string(),
                            clean(f.job_nccl_source, 200)),
                detail);
  }
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
