// slurmd_memlock: every task's hard RLIMIT_MEMLOCK is slurmd's (fork/exec inheritance), and an unpropagated
// soft limit is slurmd's soft. A slurmd started outside its systemd unit keeps the kernel default 8 MiB and
// no task can ever register more (docs/facts/memlock.md §2).
#include <mrcheck/build_config.h>
#include <mrcheck/units.h>
#include "checks/matrix_checks.h"

#include <fmt/format.h>

namespace mrcheck::matrix {

namespace {
constexpr std::string_view k_id = "slurmd_memlock";
constexpr std::string_view k_fix =
    "start slurmd from its systemd unit with LimitMEMLOCK=infinity (install " MRCHECK_INSTALL_DATADIR
    "/mrcheck/systemd/slurmd.service.d/mrcheck-memlock.conf as "
    "/etc/systemd/system/slurmd.service.d/mrcheck-memlock.conf), systemctl daemon-reload, "
    "restart slurmd";
}  // namespace

check_result check_slurmd_memlock(const node_facts& f, const matrix_rules& r) {
  if (r.slurmd_memlock == rule_action::off) return skipped(k_id, "rule off");
  const process_fact* slurmd = f.slurmd ? &*f.slurmd : nullptr;
  std::string source = "pid file";
  if (!slurmd) {
    // In a Prolog or HealthCheckProgram slurmd is an ancestor of this process.
    for (const auto& p : f.chain) {
      if (is_slurm_daemon(p.comm, "slurmd")) {
        slurmd = &p;
        source = "ancestor";
        break;
      }
    }
  }
  if (!slurmd) {
    return skipped(k_id, fmt::format("slurmd not found ({}; not an ancestor)", clean(f.slurmd.error().message(), 128)));
  }
  if (!slurmd->memlock) {
    return make(k_id, verdict::error, fmt::format("slurmd pid {} limits unreadable", slurmd->pid),
                clean(slurmd->memlock.error().message(), 160));
  }
  const auto& m = *slurmd->memlock;
  std::string detail = fmt::format("slurmd pid {} ({}): memlock soft {}, hard {}", slurmd->pid, source,
                                   format_bytes(m.soft), format_bytes(m.hard));
  std::string want = format_bytes(r.slurmd_memlock_min);
  if (m.hard < r.slurmd_memlock_min) {
    return make(k_id, verdict_for(r.slurmd_memlock),
                fmt::format("slurmd hard memlock {} < {}", format_bytes(m.hard), want), detail, std::string(k_fix));
  }
  if (m.soft < r.slurmd_memlock_min) {
    // Tasks get slurmd's soft limit when MEMLOCK is not propagated: a warning, the hard limit lets them raise it.
    return make(k_id, verdict::warn, fmt::format("slurmd soft memlock {} < {}", format_bytes(m.soft), want), detail,
                std::string(k_fix));
  }
  return make(k_id, verdict::pass, fmt::format("slurmd memlock {}", format_bytes(m.hard)), detail);
}

}  // namespace mrcheck::matrix
