// memlock: is the locked-memory limit of the process that ran mrcheck enough for NCCL's registrations?
//
// ibv_reg_mr / ibv_reg_mr_iova2 charge every pinned page to the process's pinned_vm and fail with ENOMEM once
// it passes the SOFT RLIMIT_MEMLOCK, unless the caller has CAP_IPC_LOCK (docs/facts/memlock.md §3, ib_umem_get). NCCL
// registers its host buffers (and, through nvidia_peermem, its GPU buffers) this way, so a soft limit below
// the site's memlock_min (default unlimited, as Slurm's own FAQ recommends: faq.shtml#memlock) is a fail.
// srun propagates the submitting shell's soft limit to the tasks by default (PropagateResourceLimits=ALL,
// docs/facts/memlock.md §1), which is why a low limit on a login node matters even without an HCA there.
#include <mrcheck/checks.h>
#include <mrcheck/memlock_chain.h>
#include <mrcheck/memlock_hop.h>

#include <fmt/format.h>

namespace mrcheck {

namespace {

std::string show(const result<memlock_limit>& m, bool hard) {
  if (!m) return "unknown";
  return format_bytes(hard ? m->hard : m->soft);
}

std::string chain_table(const std::vector<process_fact>& chain) {
  std::string out;
  for (const auto& p : chain) {
    out += fmt::format("{:>8} {:<16} soft {:<12} hard {:<12}{}\n", p.pid, escape_line(p.comm, 16),
                       show(p.memlock, false), show(p.memlock, true), p.lowered ? "  <- lowered here" : "");
  }
  return out;
}

std::string show(const memlock_limit& m) {
  return fmt::format("soft {} hard {}", format_bytes(m.soft), format_bytes(m.hard));
}

}  // namespace

check_result check_memlock(const node_facts& f, const config& c) {
  check_result r;
  r.id = "memlock";
  if (f.chain.empty()) {
    r.result = verdict::error;
    r.summary = fmt::format("could not read the process chain: {}",
                            f.chain_status.is_ok() ? "empty" : f.chain_status.message());
    return r;
  }
  const process_fact& start = f.chain.front();
  r.detail = chain_table(f.chain);
  if (!start.memlock) {
    r.result = verdict::error;
    r.summary = fmt::format("could not read the limit of pid {} ({}): {}", start.pid, escape_line(start.comm, 16),
                            start.memlock.error().message());
    return r;
  }
  const memlock_limit m = *start.memlock;
  if (m.soft >= c.memlock_min) {
    r.result = verdict::pass;
    r.summary = fmt::format("{} ({}) memlock soft {} >= required {}", escape_line(start.comm, 16), start.pid,
                            format_bytes(m.soft), format_bytes(c.memlock_min));
    return r;
  }
  r.result = verdict::fail;
  r.summary = fmt::format("{} ({}) memlock soft {} < required {}", escape_line(start.comm, 16), start.pid,
                          format_bytes(m.soft), format_bytes(c.memlock_min));
  // The hop is the one picking rule's (memlock_hop.h: the nearest drop still in force); every other process
  // that lowered a limit is listed after it, as they explain why raising it there may hit a hard limit.
  auto drop = [&](std::size_t i) {
    const auto& p = f.chain[i];
    const auto& parent = f.chain[i + 1];
    return fmt::format("{} ({}) soft {} hard {}, parent {} ({}) soft {} hard {}", escape_line(p.comm, 16), p.pid,
                       show(p.memlock, false), show(p.memlock, true), escape_line(parent.comm, 16), parent.pid,
                       show(parent.memlock, false), show(parent.memlock, true));
  };
  auto hop = pick_lowering_hop(f.chain);
  for (std::size_t i = 0; i + 1 < f.chain.size(); ++i) {
    if (f.chain[i].lowered && i != hop) r.detail += fmt::format("also lowered at {}\n", drop(i));
  }
  if (hop) {
    r.summary += fmt::format("; lowered at {}", drop(*hop));
  } else if (f.chain.size() > 1) {
    r.summary += fmt::format("; inherited unchanged from pid {}", f.chain.back().pid);
  }
  if (m.hard < c.memlock_min) {
    r.hint = fmt::format(
        "the hard limit is {} too: raise it where the session starts (/etc/security/limits.conf "
        "'* - memlock unlimited' for PAM logins, LimitMEMLOCK=infinity for a systemd unit), log in again; for a "
        "Slurm job add PropagateResourceLimitsExcept=MEMLOCK to slurm.conf or use srun --mr-check",
        format_bytes(m.hard));
  } else {
    r.hint = fmt::format(
        "'ulimit -l {}' in this shell (the hard limit allows it); srun passes this shell's soft limit to the "
        "tasks unless slurm.conf has PropagateResourceLimitsExcept=MEMLOCK",
        c.memlock_min == k_unlimited ? std::string("unlimited") : std::to_string(c.memlock_min / 1024));
  }
  return r;
}

// The plugin's memlock verdict for a Slurm task (memlock_chain.h), from its prediction and enforcement.
check_result judge_memlock(const memlock_prediction& p, std::uint64_t required, const enforcement* enf) {
  check_result c;
  c.id = "memlock";
  memlock_limit final_limit = enf && enf->attempted ? enf->start : p.start;
  if (final_limit.soft >= required) {
    c.result = verdict::pass;
    c.summary = fmt::format("task starts with memlock {} (required {})", show(final_limit), format_bytes(required));
    if (enf && enf->attempted && final_limit != p.start) {
      c.summary += fmt::format("; enforce=yes raised it from {}", show(p.start));
      if (p.hop != memlock_hop::none) c.summary += fmt::format(" (lowered by {})", p.cause);
    }
    return c;
  }
  c.result = verdict::fail;
  std::string prefix;
  if (enf && enf->attempted && !enf->problem.empty()) prefix = enf->problem + "; ";
  c.summary = fmt::format("{}task will start with memlock soft {} < required {}; lowered at {}: {}", prefix,
                          format_bytes(final_limit.soft), format_bytes(required), hop_info(p.hop).label, p.cause);
  c.hint = p.fix;
  if (enf && enf->hard_refused) {
    c.hint += "; or give slurmstepd CAP_SYS_RESOURCE so enforce=yes can raise the hard limit";
  }
  return c;
}

}  // namespace mrcheck
