// RLIMIT_STACK and RLIMIT_NOFILE along the job's chain (include/mrcheck/limit_chain.h says the model).
#include <mrcheck/limit_chain.h>

#include <mrcheck/units.h>

#include <fmt/format.h>

#include <array>

namespace mrcheck {

namespace {

constexpr std::array<rlimit_kind_info, 2> k_kinds = {{
    {rlimit_kind::stack, "stack", "SLURM_RLIMIT_STACK", "STACK", "ulimit -s", true},
    {rlimit_kind::nofile, "nofile", "SLURM_RLIMIT_NOFILE", "NOFILE", "ulimit -n", false},
}};

std::string fmt_value(rlimit_kind k, const memlock_limit& v, bool hard) {
  return format_limit(k, hard ? v.hard : v.soft);
}

// The part of the task's chain up to and including slurmstepd (its own ancestors are init).
std::vector<const process_fact*> stepd_part(const std::vector<process_fact>& chain) {
  std::vector<const process_fact*> out;
  for (std::size_t i = 1; i < chain.size(); ++i) {
    out.push_back(&chain[i]);
    if (is_slurm_daemon(chain[i].comm, "slurmstepd")) break;
  }
  return out;
}

std::string fix_text(rlimit_kind k, const config& c) {
  const auto& i = rlimit_info(k);
  if (k == rlimit_kind::stack) {
    return fmt::format("`{} 8192` (or any finite size up to {}) before srun/sbatch, not `{} unlimited`", i.ulimit,
                       format_limit(k, c.stack_max), i.ulimit);
  }
  return fmt::format("raise `{}` to at least {} (up to the hard limit) before srun/sbatch", i.ulimit, c.nofile_min);
}

// Which hop set a bad start value: srun's propagation, else the node's daemons, else the task's setup.
limit_verdict_hop name_hop(const limit_prediction& p, const limit_inputs& in, const config& c) {
  const auto& info = rlimit_info(in.kind);
  limit_verdict_hop h;
  if (p.propagation_applies && limit_bad(in.kind, p.start.soft, c)) {
    std::string host = in.submit_host.empty() ? std::string("the submit host") : escape_line(in.submit_host, 64);
    h.hop = "srun's propagation";
    h.owner = fix_owner::job;
    h.cause = fmt::format("{}={}{} from the shell that ran srun/sbatch on {} ({}), applied by slurmstepd ({})",
                          info.env, p.propagated->user_requested ? "U" : "", p.propagated->value, host,
                          format_limit(in.kind, p.propagated->value),
                          p.propagated->user_requested ? std::string("srun --propagate") : in.propagate_setting);
    h.fix = fix_text(in.kind, c) +
            fmt::format(" (the site may exclude {} from PropagateResourceLimits)", info.conf_name);
    return h;
  }
  auto bad_at = [&](const process_fact* proc) {
    if (!proc) return false;
    const auto& v = limit_of(*proc, in.kind);
    return v && limit_bad(in.kind, v->soft, c);
  };
  const process_fact* slurmd = in.slurmd && *in.slurmd ? &**in.slurmd : nullptr;
  auto stepd = in.task_chain ? stepd_part(*in.task_chain) : std::vector<const process_fact*>{};
  const process_fact* stepd_proc = stepd.empty() ? nullptr : stepd.back();
  h.owner = fix_owner::node;
  if (bad_at(slurmd)) {
    h.hop = "slurmd";
    h.cause = fmt::format("slurmd pid {} on {} runs with soft {}", slurmd->pid, in.node,
                          fmt_value(in.kind, *limit_of(*slurmd, in.kind), false));
    h.fix = fmt::format("set Limit{}= in slurmd's systemd unit (or what starts slurmd), then restart slurmd",
                        in.kind == rlimit_kind::stack ? "STACK" : "NOFILE");
  } else if (bad_at(stepd_proc)) {
    h.hop = "slurmstepd";
    h.cause = fmt::format("slurmstepd pid {} on {} runs with soft {}", stepd_proc->pid, in.node,
                          fmt_value(in.kind, *limit_of(*stepd_proc, in.kind), false));
    h.fix = fmt::format("with UsePAM=1 fix `{}` in /etc/security/limits.conf; otherwise what starts slurmstepd",
                        in.kind == rlimit_kind::stack ? "stack" : "nofile");
  } else {
    h.hop = "the task's setup";
    h.owner = fix_owner::site;
    h.cause = fmt::format(
        "the task on {} has soft {} before exec, unlike slurmstepd (another SPANK plugin or a "
        "container runtime set it)",
        in.node, fmt_value(in.kind, p.start, false));
    h.fix = "find the plugstack.conf plugin or the runtime that sets it";
  }
  return h;
}

void node_rows(limit_prediction& p, const limit_inputs& in) {
  limit_row sd;
  sd.where = in.node;
  if (in.slurmd && *in.slurmd) {
    sd.what = fmt::format("slurmd pid {}", (*in.slurmd)->pid);
    const auto& v = limit_of(**in.slurmd, in.kind);
    if (v)
      sd.value = *v;
    else
      sd.note = "unreadable: " + v.error().message();
  } else {
    sd.what = "slurmd";
    sd.note = in.slurmd ? "unreadable: " + in.slurmd->error().message() : "not read";
  }
  p.rows.push_back(std::move(sd));
  auto stepd = in.task_chain ? stepd_part(*in.task_chain) : std::vector<const process_fact*>{};
  for (auto it = stepd.rbegin(); it != stepd.rend(); ++it) {
    limit_row row;
    row.where = in.node;
    row.what = fmt::format("{} pid {}", escape_line((*it)->comm, 32), (*it)->pid);
    const auto& v = limit_of(**it, in.kind);
    if (v)
      row.value = *v;
    else
      row.note = "unreadable: " + v.error().message();
    p.rows.push_back(std::move(row));
  }
}

}  // namespace

const rlimit_kind_info& rlimit_info(rlimit_kind k) { return k == rlimit_kind::stack ? k_kinds[0] : k_kinds[1]; }

const result<memlock_limit>& limit_of(const process_fact& p, rlimit_kind k) {
  return k == rlimit_kind::stack ? p.stack : p.nofile;
}

std::string format_limit(rlimit_kind k, std::uint64_t v) {
  if (v == k_unlimited) return "unlimited";
  return rlimit_info(k).bytes ? format_bytes(v) : std::to_string(v);
}

bool limit_bad(rlimit_kind k, std::uint64_t soft, const config& c) {
  return k == rlimit_kind::stack ? soft > c.stack_max : soft < c.nofile_min;
}

std::string limit_rule(rlimit_kind k, const config& c) {
  return k == rlimit_kind::stack ? "stack_max " + format_limit(k, c.stack_max)
                                 : "nofile_min " + format_limit(k, c.nofile_min);
}

std::optional<std::string> enforce_limit_value(const limit_prediction& p, const config& c, std::string& problem) {
  if (!p.known || !limit_bad(p.kind, p.start.soft, c)) return std::nullopt;
  const std::uint64_t want = p.kind == rlimit_kind::stack ? c.stack_max : c.nofile_min;
  if (want > p.start.hard) {
    problem = fmt::format("cannot enforce: {} is above the task's hard limit {}", limit_rule(p.kind, c),
                          format_limit(p.kind, p.start.hard));
    return std::nullopt;
  }
  return "U" + format_propagated_limit(want);
}

limit_prediction predict_task_limit(const limit_inputs& in, const config& c) {
  const auto& info = rlimit_info(in.kind);
  limit_prediction p;
  p.kind = in.kind;
  p.made = true;
  memlock_limit now;
  if (in.task_chain && !in.task_chain->empty()) {
    const auto& v = limit_of(in.task_chain->front(), in.kind);
    if (v) {
      p.known = true;
      now = *v;
    } else {
      p.notes.push_back(fmt::format("the task's own limit: {}", v.error().message()));
    }
  } else {
    p.notes.push_back("the task's process chain could not be read");
  }
  if (in.propagated) {
    auto v = parse_propagated_limit(*in.propagated, info.env);
    if (v)
      p.propagated = *v;
    else
      p.notes.push_back(v.error().message() + " (slurmstepd ignores it)");
  }
  p.propagation_applies = p.propagated && (in.conf_propagates || p.propagated->user_requested);
  p.start = now;
  // set_user_limits(): the propagated value, cut to the hard limit (with `U` a value above it is refused).
  if (p.propagation_applies) {
    std::uint64_t v = p.propagated->value;
    if (v <= now.hard)
      p.start.soft = v;
    else if (!p.propagated->user_requested)
      p.start.soft = now.hard;
  }
  node_rows(p, in);
  limit_row task{in.node, in.batch_step ? "batch script (before exec)" : "task (before exec)", std::nullopt, ""};
  if (p.known) task.value = now;
  p.rows.push_back(task);
  limit_row at{in.node, "task at exec (predicted)", std::nullopt, ""};
  if (p.known) at.value = p.start;
  if (!p.propagated)
    at.note = fmt::format("no {} arrived: keeps slurmstepd's limit", info.env);
  else if (p.propagation_applies)
    at.note = fmt::format("{} applied (srun's propagation)", info.env);
  else
    at.note = fmt::format("{} not applied ({})", info.env, in.propagate_setting);
  p.rows.push_back(std::move(at));
  if (p.known && limit_bad(in.kind, p.start.soft, c)) p.hop = name_hop(p, in, c);
  return p;
}

}  // namespace mrcheck
