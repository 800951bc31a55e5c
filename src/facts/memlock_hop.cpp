// The memlock hop table and the one picking rule (include/mrcheck/memlock_hop.h says why nearest).
#include <mrcheck/memlock_hop.h>

#include <mrcheck/build_config.h>
#include <mrcheck/units.h>

#include <fmt/format.h>

#include <array>

namespace mrcheck {

namespace {

#define MRCHECK_FIX_PROPAGATION "set PropagateResourceLimitsExcept=MEMLOCK in slurm.conf so tasks get slurmd's limit"

constexpr std::array<memlock_hop_info, 8> k_hops = {{
    {memlock_hop::none, "none", "no hop", "", ""},
    {memlock_hop::submit_host, "submit_host", "submit-host propagation", "submit-host propagation",
     MRCHECK_FIX_PROPAGATION ", or raise memlock on {host} (/etc/security/limits.conf, no `ulimit -l` in shell rc "
                             "files)"},
    {memlock_hop::job_script, "job_script", "the job script", "job script",
     "remove or raise `ulimit -l` in the job script, or " MRCHECK_FIX_PROPAGATION},
    {memlock_hop::submit_unknown, "submit_propagation", "submit-host propagation", "submit-host propagation",
     MRCHECK_FIX_PROPAGATION ", or raise `ulimit -l` where srun/sbatch runs"},
    {memlock_hop::slurmd, "slurmd", "slurmd", "slurmd limit",
     "start slurmd from its systemd unit with LimitMEMLOCK=infinity (drop-in: " MRCHECK_INSTALL_DATADIR
     "/mrcheck/systemd/slurmd.service.d/mrcheck-memlock.conf), then restart slurmd"},
    {memlock_hop::step_daemon, "slurmstepd", "slurmstepd", "slurmstepd limit",
     "with UsePAM=1 raise memlock for job users in /etc/security/limits.conf (e.g. `* - memlock unlimited`); "
     "otherwise find what starts slurmstepd with a lower limit (a wrapper around slurmd or slurmstepd)"},
    {memlock_hop::task_setup, "task_setup", "the task's setup", "task setup",
     "raise the memlock limit in the container runtime or the plugin that sets it"},
    {memlock_hop::enforced, "enforced", "enforce=yes", "", ""},
}};

#undef MRCHECK_FIX_PROPAGATION

}  // namespace

const memlock_hop_info& hop_info(memlock_hop h) {
  for (const auto& i : k_hops) {
    if (i.hop == h) return i;
  }
  return k_hops[0];
}

std::string_view to_string(memlock_hop h) { return hop_info(h).id; }

std::string hop_fix(memlock_hop h, std::string_view host) {
  std::string fix(hop_info(h).fix);
  constexpr std::string_view k_host = "{host}";
  if (auto at = fix.find(k_host); at != std::string::npos) {
    fix.replace(at, k_host.size(), host.empty() ? std::string_view("the submit host") : host);
  }
  return fix;
}

std::optional<std::size_t> pick_lowering_hop(std::span<const std::optional<std::uint64_t>> soft) {
  if (soft.empty() || !soft[0]) return std::nullopt;
  const std::uint64_t value = *soft[0];
  for (std::size_t i = 0; i + 1 < soft.size(); ++i) {
    if (!soft[i] || *soft[i] != value) return std::nullopt;  // left the stretch without a drop
    const auto& parent = soft[i + 1];
    if (!parent) return std::nullopt;          // cannot tell who set it
    if (*parent > value) return i;             // this process has less than its parent
    if (*parent < value) return std::nullopt;  // raised here: no drop is in force
  }
  return std::nullopt;  // the same value up to the oldest process: inherited
}

std::optional<std::size_t> pick_lowering_hop(const std::vector<process_fact>& chain) {
  std::vector<std::optional<std::uint64_t>> soft;
  soft.reserve(chain.size());
  for (const auto& p : chain) soft.push_back(p.memlock ? std::optional<std::uint64_t>(p.memlock->soft) : std::nullopt);
  return pick_lowering_hop(soft);
}

std::string describe_lowering_hop(const std::vector<process_fact>& chain, std::string_view who) {
  auto i = pick_lowering_hop(chain);
  if (!i) return "";
  const process_fact& hop = chain[*i];
  const process_fact& parent = chain[*i + 1];  // the rule only picks a process whose parent is known
  std::string from = fmt::format(" (its parent pid {} ({}) had soft {})", parent.pid, escape_line(parent.comm, 32),
                                 format_bytes(parent.memlock->soft));
  if (*i == 0) {
    return fmt::format("{} (pid {} ({}), soft {}): set between fork and exec by its launcher{}", who, hop.pid,
                       escape_line(hop.comm, 32), format_bytes(hop.memlock->soft), from);
  }
  return fmt::format("pid {} ({}), soft {}{}", hop.pid, escape_line(hop.comm, 32), format_bytes(hop.memlock->soft),
                     from);
}

}  // namespace mrcheck
