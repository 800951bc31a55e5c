// propagate_limits: by default (PropagateResourceLimits=ALL) srun/sbatch send the login shell's soft
// RLIMIT_MEMLOCK to every task, so a login node with the 8 MiB default caps the job whatever slurmd has.
// The documented fix is PropagateResourceLimitsExcept=MEMLOCK (docs/facts/memlock.md §1, Slurm FAQ #memlock).
#include "checks/matrix_checks.h"

#include <fmt/format.h>

namespace mrcheck::matrix {

check_result check_propagate_limits(const matrix_rules& r, const matrix_facts* extra) {
  constexpr std::string_view id = "propagate_limits";
  if (r.propagate_limits == rule_action::off) return skipped(id, "rule off");
  if (!extra) return skipped(id, "slurm.conf not read");
  if (!extra->slurm_conf)
    return skipped(id, fmt::format("slurm.conf not read: {}", clean(extra->slurm_conf.error().message(), 160)));
  const auto& c = *extra->slurm_conf;
  std::string setting = c.propagate_except ? fmt::format("PropagateResourceLimitsExcept={}", clean(*c.propagate_except))
                        : c.propagate      ? fmt::format("PropagateResourceLimits={}", clean(*c.propagate))
                                           : std::string("PropagateResourceLimits unset (default ALL)");
  std::string detail = fmt::format("{}: {}", clean(c.path, 160), setting);
  if (c.memlock_propagated) {
    return make(id, verdict_for(r.propagate_limits),
                fmt::format("MEMLOCK propagated from the submit host ({})", setting), detail,
                "set PropagateResourceLimitsExcept=MEMLOCK in slurm.conf and reconfigure");
  }
  return make(id, verdict::pass, fmt::format("MEMLOCK not propagated ({})", setting), detail);
}

}  // namespace mrcheck::matrix
