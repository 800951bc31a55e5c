// Which limit the task starts with, and which hop of the chain lowered it. The rules are Slurm 22.05's
// (docs/facts/memlock.md §1-§2): hard = inherited from slurmd via slurmstepd; soft = SLURM_RLIMIT_MEMLOCK capped at the
// hard limit when propagation applies, else what the task process already has.
#include <mrcheck/build_config.h>
#include <mrcheck/memlock_step.h>
#include <mrcheck/step.h>

#include <mrcheck/units.h>

#include <fmt/format.h>

#include <algorithm>

namespace mrcheck {

namespace {

// Index of the submit chain's process that set the soft limit srun sent (memlock_hop.h: the nearest drop
// still in force); nullopt when the recorded chain does not show one.
std::optional<std::size_t> lowering_hop(const submit_record& r) {
  std::vector<std::optional<std::uint64_t>> soft;
  for (const auto& h : r.chain)
    soft.push_back(h.memlock ? std::optional<std::uint64_t>(h.memlock->soft) : std::nullopt);
  return pick_lowering_hop(soft);
}

// The record says what srun's own soft limit was; what arrives may carry the `U` prefix of --propagate.
bool same_value(const std::optional<std::string>& sent, const std::optional<std::string>& arrived) {
  if (!arrived) return true;  // nothing propagated: the record is context only
  if (!sent) return false;
  auto a = parse_propagated_limit(*sent);
  auto b = parse_propagated_limit(*arrived);
  return a && b && a->value == b->value;
}

void submit_rows(memlock_prediction& p) {
  const auto& r = *p.submit;
  for (std::size_t i = r.chain.size(); i-- > 0;) {
    const auto& h = r.chain[i];
    chain_row row;
    row.where = r.host;
    row.what = fmt::format("{} pid {}", escape_line(h.comm, 32), h.pid);
    row.memlock = h.memlock;
    if (h.memlock && i + 1 < r.chain.size() && r.chain[i + 1].memlock) {
      const auto& parent = *r.chain[i + 1].memlock;
      if (h.memlock->soft < parent.soft) row.note = "lowered soft";
      if (h.memlock->hard < parent.hard) row.note += row.note.empty() ? "lowered hard" : ", hard";
    }
    if (i == 0) {
      std::string sends = r.sent ? fmt::format("sends SLURM_RLIMIT_MEMLOCK={}", escape_line(*r.sent, 32))
                                 : std::string("does not send SLURM_RLIMIT_MEMLOCK");
      row.note = row.note.empty() ? sends : row.note + "; " + sends;
    }
    p.rows.push_back(std::move(row));
  }
}

// The part of the task's chain up to and including slurmstepd (its own ancestors are init).
std::vector<const process_fact*> stepd_part(const memlock_inputs& in) {
  std::vector<const process_fact*> out;
  for (std::size_t i = 1; i < in.task_chain.size(); ++i) {
    out.push_back(&in.task_chain[i]);
    if (is_slurm_daemon(in.task_chain[i].comm, "slurmstepd")) break;
  }
  return out;
}

void name_submit_hop(memlock_prediction& p, const memlock_inputs& in) {
  const auto& prop = *p.propagated;
  std::string sent = fmt::format("SLURM_RLIMIT_MEMLOCK={}{}", prop.user_requested ? "U" : "", prop.value);
  std::string how = prop.user_requested ? std::string("srun --propagate asked for it") : p.propagate_setting_text;
  if (p.submit) {
    const auto& r = *p.submit;
    auto idx = lowering_hop(r);
    if (idx) {
      const auto& h = r.chain[*idx];
      bool parent_is_stepd = *idx + 1 < r.chain.size() && is_slurm_daemon(r.chain[*idx + 1].comm, "slurmstepd");
      if (!r.job_id.empty() && (parent_is_stepd || *idx + 1 >= r.chain.size())) {
        p.hop = memlock_hop::job_script;
        p.cause = fmt::format("the job script ({} pid {} in job {} on {}) set soft {} before {} ({}; {})",
                              escape_line(h.comm, 32), h.pid, r.job_id, r.host, format_bytes(h.memlock->soft), r.tool,
                              sent, how);
        p.fix = hop_fix(p.hop);
        return;
      }
      p.hop = memlock_hop::submit_host;
      if (*idx == 0 && *idx + 1 < r.chain.size()) {
        const auto& parent = r.chain[1];
        // The shell's `ulimit -l` and an exec of srun in the same process look alike here: say only what is seen.
        p.cause = fmt::format(
            "{} pid {} on {} runs with soft {}, lower than its parent {} pid {} (a `ulimit -l` "
            "in the shell that ran it, or its launcher; submit-host propagation: {}; {})",
            r.tool, h.pid, r.host, format_bytes(h.memlock->soft), escape_line(parent.comm, 32), parent.pid, sent, how);
      } else {
        p.cause = fmt::format("{} pid {} on {} set soft {} (submit-host propagation by {}: {}; {})",
                              escape_line(h.comm, 32), h.pid, r.host, format_bytes(h.memlock->soft), r.tool, sent, how);
      }
      p.fix = hop_fix(p.hop, r.host);
      if (prop.user_requested) p.fix = "do not pass MEMLOCK to srun --propagate, " + p.fix;
      return;
    }
  }
  p.hop = memlock_hop::submit_unknown;
  std::string host = in.submit_host.empty() ? std::string("the submit host") : escape_line(in.submit_host, 64);
  p.cause = fmt::format("the submit side's soft limit {} was propagated from {} ({}; {})", format_bytes(prop.value),
                        host, sent, how);
  p.fix = hop_fix(p.hop);
}

void name_node_hop(memlock_prediction& p, const memlock_inputs& in, std::uint64_t required, bool hard) {
  auto value = [&](const memlock_limit& m) { return hard ? m.hard : m.soft; };
  std::string_view which = hard ? "hard" : "soft";
  auto stepd = stepd_part(in);
  const process_fact* stepd_proc = stepd.empty() ? nullptr : stepd.back();
  if (in.slurmd && in.slurmd->memlock && value(*in.slurmd->memlock) < required) {
    p.hop = memlock_hop::slurmd;
    p.cause = fmt::format(
        "slurmd pid {} on {} runs with {} {} (started outside its systemd unit, or the unit "
        "lacks LimitMEMLOCK=infinity)",
        in.slurmd->pid, in.node, which, format_bytes(value(*in.slurmd->memlock)));
    p.fix = hop_fix(p.hop);
    return;
  }
  if (stepd_proc && stepd_proc->memlock && value(*stepd_proc->memlock) < required) {
    bool slurmd_known = in.slurmd && in.slurmd->memlock;
    if (!slurmd_known) {
      p.hop = memlock_hop::slurmd;
      p.cause =
          fmt::format("slurmstepd pid {} on {} inherited {} {} from slurmd (slurmd's own limit could not be read)",
                      stepd_proc->pid, in.node, which, format_bytes(value(*stepd_proc->memlock)));
      p.fix = hop_fix(p.hop);
      return;
    }
    p.hop = memlock_hop::step_daemon;
    p.cause = fmt::format("slurmstepd pid {} on {} has {} {}, less than slurmd's {}{}", stepd_proc->pid, in.node, which,
                          format_bytes(value(*stepd_proc->memlock)), format_bytes(value(*in.slurmd->memlock)),
                          p.use_pam ? " (UsePAM=1: pam_limits applied /etc/security/limits.conf)" : "");
    p.fix = hop_fix(p.hop);
    return;
  }
  p.hop = memlock_hop::task_setup;
  p.cause = fmt::format(
      "the task on {} has {} {} before exec, lower than slurmstepd's (a container runtime or "
      "another SPANK plugin lowered it)",
      in.node, which, format_bytes(value(in.task_now)));
  p.fix = hop_fix(p.hop);
}

// The node's rows, after the submit side's: slurmd, slurmstepd's part of the task's chain, the task before exec and
// the limits it is predicted to start with.
void node_rows(memlock_prediction& p, const memlock_inputs& in, const slurm_conf_facts& conf) {
  {
    chain_row row;
    row.where = in.node;
    if (in.slurmd) {
      row.what = fmt::format("slurmd pid {}", in.slurmd->pid);
      if (in.slurmd->memlock) row.memlock = *in.slurmd->memlock;
    } else {
      row.what = "slurmd";
      row.note = "unreadable: " + in.slurmd.error().message();
    }
    p.rows.push_back(std::move(row));
  }
  auto stepd = stepd_part(in);
  for (auto it = stepd.rbegin(); it != stepd.rend(); ++it) {
    chain_row row;
    row.where = in.node;
    row.what = fmt::format("{} pid {}", escape_line((*it)->comm, 32), (*it)->pid);
    if ((*it)->memlock) row.memlock = *(*it)->memlock;
    p.rows.push_back(std::move(row));
  }
  {
    chain_row row;
    row.where = in.node;
    row.what = in.batch_step ? "batch script (before exec)" : "task (before exec)";
    row.memlock = in.task_now;
    p.rows.push_back(std::move(row));
  }
  {
    chain_row row;
    row.where = in.node;
    row.what = "task at exec (predicted)";
    row.memlock = p.start;
    if (!p.propagated) {
      row.note = fmt::format("no SLURM_RLIMIT_MEMLOCK arrived (here: {}): keeps slurmstepd's limit",
                             conf.propagate_setting);
    } else if (p.propagation_applies) {
      row.note = fmt::format("SLURM_RLIMIT_MEMLOCK={}{} applied ({})", p.propagated->user_requested ? "U" : "",
                             p.propagated->value,
                             p.propagated->user_requested ? "srun --propagate" : conf.propagate_setting);
    } else {
      row.note = fmt::format("SLURM_RLIMIT_MEMLOCK not applied ({})", conf.propagate_setting);
    }
    p.rows.push_back(std::move(row));
  }
}

}  // namespace

memlock_prediction predict_task_memlock(const memlock_inputs& in, std::uint64_t required) {
  memlock_prediction p;
  slurm_conf_facts conf;
  if (in.conf) {
    conf = *in.conf;
    for (const auto& pr : conf.problems) p.notes.push_back(fmt::format("slurm.conf: {}", pr));
  } else {
    p.notes.push_back(fmt::format("slurm.conf unreadable ({}); assuming Slurm's default PropagateResourceLimits=ALL",
                                  in.conf.error().message()));
  }
  p.propagate_setting_text = conf.propagate_setting;
  p.use_pam = conf.use_pam;
  if (in.propagated) {
    p.propagated_text = in.propagated;
    auto v = parse_propagated_limit(*in.propagated);
    if (v) {
      p.propagated = *v;
    } else {
      p.notes.push_back(v.error().message() + " (slurmstepd ignores it)");
    }
  }
  p.propagation_applies = p.propagated && (conf.memlock_propagated || p.propagated->user_requested);
  p.start.hard = in.task_now.hard;
  p.start.soft = p.propagation_applies ? slurmstepd_soft(*p.propagated, in.task_now) : in.task_now.soft;

  if (in.submit_raw) {
    auto r = decode_submit_record(*in.submit_raw);
    if (!r) {
      p.submit_problem = r.error().message();
    } else if (!same_value(r->sent, in.propagated)) {
      // A record from another srun (an inherited variable) or a forged one: it does not describe this step.
      p.submit_problem = "MRCHECK_SUBMIT does not match the SLURM_RLIMIT_MEMLOCK that arrived; ignored";
    } else {
      p.submit = std::move(*r);
    }
    if (!p.submit_problem.empty()) p.notes.push_back(p.submit_problem);
  }

  // The table, oldest hop first.
  if (p.submit) submit_rows(p);
  node_rows(p, in, conf);

  if (p.start.soft >= required) return p;
  if (p.start.hard < required) {
    name_node_hop(p, in, required, /*hard=*/true);
  } else if (p.propagation_applies && p.propagated->value < required) {
    name_submit_hop(p, in);
  } else {
    name_node_hop(p, in, required, /*hard=*/false);
  }
  return p;
}

std::vector<std::string> chain_table_lines(const memlock_prediction& p) {
  std::vector<std::string> out;
  out.push_back(
      fmt::format("mrcheck: memlock: {:<12} {:<34} {:>12} {:>12}  {}", "host", "process", "soft", "hard", "note"));
  for (const auto& r : p.rows) {
    std::string soft = r.memlock ? format_bytes(r.memlock->soft) : "?";
    std::string hard = r.memlock ? format_bytes(r.memlock->hard) : "?";
    out.push_back(fmt::format("mrcheck: memlock: {:<12} {:<34} {:>12} {:>12}  {}", escape_line(r.where, 12),
                              escape_line(r.what, 34), soft, hard, escape_line(r.note, 200)));
  }
  for (const auto& n : p.notes) out.push_back("mrcheck: memlock: note: " + escape_line(n, 300));
  if (p.hop != memlock_hop::none) {
    out.push_back(fmt::format("mrcheck: memlock: lowered by {}: {}", to_string(p.hop), escape_line(p.cause, 400)));
  }
  return out;
}

}  // namespace mrcheck
