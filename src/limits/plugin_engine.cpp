// The plugin's per-step logic over plain values (spank/ adapts spank_t). Which hook does what, and why:
//   srun/sbatch init_post_opt -> plan_submit: refuse a bad request before launch, record the submit chain.
//   slurmstepd task_init_privileged (root, task child) -> node_privileged: predict + enforce.
//   slurmstepd task_init (job user, task child) -> node_task: verdicts, probes, the user's one line.
#include <mrcheck/memlock_chain.h>

#include <mrcheck/child.h>
#include <mrcheck/units.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>

namespace mrcheck {

namespace {

std::string limit_env(std::uint64_t v) { return format_propagated_limit(v); }

}  // namespace

std::optional<std::string> normalize_optarg(const char* optarg) {
  if (optarg == nullptr) return std::nullopt;
  std::string_view v(optarg);
  if (v.empty() || v == "(null)") return std::nullopt;
  return std::string(v);
}

result<check_groups> effective_checks(const config& c, const check_request& req) {
  const check_groups& site = c.default_checks;
  std::optional<check_groups> user;
  if (req.option_seen) {
    auto g = req.option ? parse_check_groups(std::string_view(*req.option)) : parse_check_groups(std::nullopt);
    if (!g) return status::error("--mr-check: " + g.error().message());
    user = *g;
  } else if (req.env_checks) {
    auto g = parse_check_groups(std::string_view(*req.env_checks));
    if (!g) return status::error("MRCHECK_CHECKS: " + g.error().message());
    user = *g;
  }
  if (!user) return site;
  if (user->off) {
    if (!c.allow_user_off && site.any()) {
      return status::error(fmt::format("--mr-check=off refused: this site runs '{}' on every step (allow_user_off=no)",
                                       site.to_string()));
    }
    return check_groups{};
  }
  check_groups g = site;
  g.memlock = g.memlock || user->memlock;
  g.mr = g.mr || user->mr;
  g.nccl = g.nccl || user->nccl;
  g.verbose = g.verbose || user->verbose;
  return g;
}

result<submit_plan> plan_submit(const config& c, const submit_inputs& in, const sysroot& root) {
  auto g = effective_checks(c, in.request);
  if (!g) return g.error();
  submit_plan plan;
  plan.checks = *g;
  // sbatch/salloc options do not reach the sruns inside the job (facts.md §1.3): carry the user's request in
  // the job environment; the node side validates it again.
  if (in.tool != "srun" && (in.request.option_seen || in.request.env_checks)) {
    plan.setenv.emplace_back("MRCHECK_CHECKS", g->any() ? g->to_string() : std::string("off"));
  }
  if (!g->any()) return plan;
  std::vector<process_fact> chain;
  if (auto ch = read_chain(root, in.self)) chain = std::move(*ch);
  std::optional<std::string> sent;
  if (!chain.empty() && chain.front().memlock) sent = limit_env(chain.front().memlock->soft);
  auto rec = make_submit_record(in.tool, in.host, sent, in.job_id, chain);
  plan.setenv.emplace_back("MRCHECK_SUBMIT", encode_submit_record(rec));
  return plan;
}

void prefetch_step_facts(const sysroot& root, const std::string& slurm_conf_path, const std::string& node,
                         const std::string& host, node_state& st) {
  st.step_read = true;
  st.step_conf = read_slurm_conf_facts(root, slurm_conf_path);
  std::string pid_file =
      expand_slurmd_pid_file(st.step_conf ? st.step_conf->slurmd_pid_file : "/run/slurmd.pid", node, host);
  auto pid_text = root.read_value(pid_file);
  if (!pid_text) {
    st.step_slurmd = pid_text.error().with_context("slurmd pid file");
    return;
  }
  pid_t pid = 0;
  auto [p, ec] = std::from_chars(pid_text->data(), pid_text->data() + pid_text->size(), pid);
  if (ec != std::errc() || pid <= 0) {
    st.step_slurmd = status::error(fmt::format("slurmd pid file {}: no pid", pid_file));
    return;
  }
  // slurmd alone, not its ancestors: the prediction compares slurmd with slurmstepd and the task.
  auto proc = read_process(root, pid);
  if (!proc) {
    st.step_slurmd = proc.error();
  } else if (proc->comm != "slurmd") {
    st.step_slurmd = status::error(fmt::format("pid {} from {} is '{}', not slurmd (stale pid file)", pid, pid_file,
                                               escape_line(proc->comm, 32)));
  } else {
    st.step_slurmd = std::move(*proc);
  }
}

std::optional<std::string> node_privileged(const config& c, const task_facts& t, const sysroot& root,
                                           rlimit_ops& ops, node_state& st) {
  auto g = effective_checks(c, t.request);
  if (!g) {
    st.request_problem = g.error().message();
    st.checks = c.default_checks;
  } else {
    st.checks = *g;
  }
  if (!st.checks.any() || t.extern_step) return std::nullopt;
  st.active = true;
  st.required = c.memlock_min;

  memlock_inputs in;
  in.node = t.node;
  in.job = t.batch_step ? fmt::format("job {} batch", t.job_id) : fmt::format("job {} step {}", t.job_id, t.step_id);
  in.batch_step = t.batch_step;
  if (!st.step_read) prefetch_step_facts(root, t.slurm_conf_path, t.node, t.host, st);
  in.conf = st.step_conf;
  in.slurmd = st.step_slurmd;
  if (in.conf) st.task_prolog = in.conf->task_prolog;
  if (auto ch = read_chain(root, t.task_pid)) in.task_chain = std::move(*ch);
  auto now = ops.get();
  if (now) {
    in.task_now = *now;
  } else if (!in.task_chain.empty() && in.task_chain.front().memlock) {
    in.task_now = *in.task_chain.front().memlock;
  }
  in.propagated = t.rlimit_memlock;
  in.submit_raw = t.submit_raw;
  in.submit_host = t.submit_host;
  st.prediction = predict_task_memlock(in, st.required);
  if (st.checks.memlock && c.enforce) {
    st.enf = enforce_memlock(ops, st.required, st.prediction);
    return st.enf->env_value;
  }
  return std::nullopt;
}

probe_runner real_probe_runner(const config& c) {
  return [c](const std::string& group, const task_facts& t, const memlock_limit& limits) -> std::vector<check_result> {
    check_result r;
    r.id = group;
    r.result = verdict::error;
    child_spec spec;
    spec.argv = {c.helper_path(), "probe", group, "--json"};
    // The site's verbs_library= must reach the probe child, or it registers through a different library.
    if (group == "mr") {
      spec.argv.push_back("--verbs-library");
      spec.argv.push_back(c.verbs_library);
      // The probe isolates its verbs calls in a child of its own (cli/cmd_probe_mr.cpp); its deadline comes a
      // tenth (at least 1 s) before ours, so that a hang is reported with the call it hung in.
      const std::chrono::milliseconds outer = c.probe_timeout;
      const std::chrono::milliseconds margin = std::max(outer / 10, std::chrono::milliseconds(1000));
      const std::chrono::milliseconds inner =
          outer > 2 * margin ? outer - margin : std::max(outer / 2, std::chrono::milliseconds(1));
      spec.argv.push_back("--timeout");
      spec.argv.push_back(fmt::format("{}ms", inner.count()));
    }
    spec.env = t.job_env;
    spec.timeout = group == "nccl" ? c.nccl_timeout : c.probe_timeout;
    // The task's limits after set_user_limits(), not this process's: a probe under other limits proves nothing.
    spec.rlimits.push_back(child_rlimit{RLIMIT_MEMLOCK, limits.soft == k_unlimited ? RLIM_INFINITY : limits.soft,
                                        limits.hard == k_unlimited ? RLIM_INFINITY : limits.hard});
    auto out = run_child(spec);
    if (!out) {
      r.summary = fmt::format("probe {} could not start: {}", group, out.error().message());
      return {r};
    }
    // Contract of `mrcheck probe`: exit 0 pass/warn, 1 fail, 2 error; the report JSON on stdout.
    if (out->timed_out || out->signaled || !out->exited || out->exit_code > 2) {
      // A registration that hangs or crashes would hang or crash NCCL's init in the job too: that is a
      // finding about the node (on_fail), not the checker breaking (on_error). An exec failure or a
      // malformed report stays an error.
      if (out->timed_out || out->signaled) r.result = verdict::fail;
      std::string err = escape_line(out->err.substr(out->err.size() > 300 ? out->err.size() - 300 : 0), 300);
      r.summary = fmt::format("probe {} ({}) {}{}{}", group, escape_line(c.helper_path(), 128), out->describe(),
                              err.empty() ? "" : ": ", err);
      return {r};
    }
    report rep;
    std::string error;
    nlohmann::json j = nlohmann::json::parse(out->out, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !report_from_json(j, rep, error) || rep.checks.empty()) {
      r.summary = fmt::format("probe {} ({}) printed no valid report{}", group, out->describe(),
                              error.empty() ? "" : ": " + escape_line(error, 200));
      return {r};
    }
    return rep.checks;
  };
}

task_verdict node_task(const config& c, const task_facts& t, node_state& st, const probe_runner& probe) {
  task_verdict v;
  if (!st.active) return v;
  bool first = t.local_task_id == 0;
  if (st.checks.memlock) v.rep.checks.push_back(judge_memlock(st.prediction, st.required, st.enf ? &*st.enf : nullptr));
  memlock_limit start = st.enf ? st.enf->start : st.prediction.start;
  if (first) {
    for (const char* group : {"mr", "nccl"}) {
      if ((group[0] == 'm' && !st.checks.mr) || (group[0] == 'n' && !st.checks.nccl)) continue;
      for (auto& ch : probe(group, t, start)) v.rep.checks.push_back(std::move(ch));
    }
  }
  for (auto& ch : v.rep.checks) {
    if (ch.result == verdict::fail && c.on_fail == fail_policy::warn) ch.result = verdict::warn;
    if (ch.result == verdict::error && c.on_error == fail_policy::fail) ch.result = verdict::fail;
  }
  if (v.rep.overall() == verdict::fail) v.rc = -1;
  if (first || st.checks.verbose) {
    if (st.checks.verbose) {
      std::string who = t.batch_step ? fmt::format("job {} batch", t.job_id)
                                     : fmt::format("job {} step {} task {}", t.job_id, t.step_id, t.local_task_id);
      v.user_lines.push_back(fmt::format("mrcheck: memlock: chain on {} ({}), required {}:", escape_line(t.node, 64),
                                         who, format_bytes(st.required)));
      for (auto& l : chain_table_lines(st.prediction)) v.user_lines.push_back(std::move(l));
      if (st.enf) {
        v.user_lines.push_back(fmt::format("mrcheck: memlock: enforce=yes: process soft {} hard {} -> soft {} hard {}{}",
                                           format_bytes(st.enf->before.soft), format_bytes(st.enf->before.hard),
                                           format_bytes(st.enf->after.soft), format_bytes(st.enf->after.hard),
                                           st.enf->env_value ? ", SLURM_RLIMIT_MEMLOCK=" + *st.enf->env_value : ""));
      }
      for (const auto& ch : v.rep.checks) {
        if (ch.result == verdict::pass || ch.result == verdict::skip) {
          v.user_lines.push_back(fmt::format("mrcheck: {}: {}: {}", ch.id, to_string(ch.result), ch.summary));
        }
      }
    }
    if (!st.request_problem.empty()) {
      // parse_check_groups() already escaped every user byte it quotes (escaping again would show `\x5c`):
      // only bound it here. hostile_option_test checks that no control byte reaches the user.
      v.user_lines.push_back(fmt::format("mrcheck: WARN: {}; running the site's checks",
                                         std::string_view(st.request_problem).substr(0, 200)));
    }
    if (!st.conf_problem.empty()) {
      v.user_lines.push_back(fmt::format("mrcheck: ERROR: plugin configuration: {}", escape_line(st.conf_problem, 300)));
    }
    for (auto& l : failure_lines(v.rep)) v.user_lines.push_back(escape_line(l, 1500));
  }
  for (const auto& ch : v.rep.checks) {
    if (first || ch.result != verdict::pass) {
      v.admin_lines.push_back(fmt::format("mrcheck: {}: {}: job {} step {} task {}: {}", ch.id, to_string(ch.result),
                                          t.job_id, t.step_id, t.local_task_id, escape_line(ch.summary, 600)));
    }
  }
  // Only the running task's /proc/PID/limits shows a TaskProlog's or a wrapper's override, so a watcher reads
  // it after exec (local task 0). It costs ~4 % of `srun -n 2 true` on the 2-core test VM (bench/plugin:
  // its fork in the task's path), so it runs where an override matters most: a TaskProlog is configured, the
  // site enforces (a wrapper must not silently undo the raise), or the user asked for verbose. A task that
  // ends here never execs: nothing to watch.
  v.watch_post_exec = st.checks.memlock && first && v.rc == 0 &&
                      (!st.task_prolog.empty() || st.enf.has_value() || st.checks.verbose);
  return v;
}

}  // namespace mrcheck
