// The plugin's per-step logic over plain values (spank/ adapts spank_t). Which hook does what, and why:
//   srun/sbatch init_post_opt -> plan_submit: refuse a bad request before launch, record the submit chain.
//   slurmstepd task_init_privileged (root, task child) -> node_privileged: predict + enforce.
//   slurmstepd task_init (job user, task child) -> node_task: verdicts, probes, the user's one line.
#include <mrcheck/memlock_step.h>
#include <mrcheck/step.h>

#include <mrcheck/check_registry.h>
#include <mrcheck/child.h>
#include <mrcheck/job_nccl.h>
#include <mrcheck/probe_protocol.h>
#include <mrcheck/probe_stop.h>
#include <mrcheck/step_gate.h>
#include <mrcheck/units.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <memory>

namespace mrcheck {

namespace {

std::string limit_env(std::uint64_t v) { return format_propagated_limit(v); }

constexpr std::size_t k_user_lines_max = 40;
constexpr std::size_t k_admin_lines_max = 12;
constexpr std::size_t k_line_max = 2000;

void cap_lines(std::vector<std::string>& lines, std::size_t max) {
  for (auto& l : lines) {
    if (l.size() > k_line_max) l.resize(k_line_max);
  }
  if (lines.size() <= max) return;
  std::size_t dropped = lines.size() - (max - 1);
  lines.resize(max - 1);
  lines.push_back(fmt::format("mrcheck: {} more lines not shown (per-step limit)", dropped));
}

}  // namespace

std::optional<std::string> normalize_optarg(const char* optarg) {
  if (optarg == nullptr) return std::nullopt;
  std::string_view v(optarg);
  if (v.empty() || v == "(null)") return std::nullopt;
  return std::string(v);
}

result<check_groups> effective_checks(const config& c, const check_request& req) {
  const check_groups& site = c.default_checks;
  // The idle gate the loader and the SPANK hooks ask too (include/mrcheck/step_gate.h): nothing runs.
  if (!mrcheck_step_may_check(req.option_seen, req.env_checks.has_value(), site.any())) return check_groups{};
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
  g.rdma = g.rdma || user->rdma;
  g.verbose = g.verbose || user->verbose;
  return g;
}

result<submit_plan> plan_submit(const config& c, const submit_inputs& in, const sysroot& root) {
  auto g = effective_checks(c, in.request);
  if (!g) return g.error();
  submit_plan plan;
  plan.checks = *g;
  // sbatch/salloc options do not reach the sruns inside the job (docs/facts/slurm-spank.md §3): carry the user's
  // request in the job environment; the node side validates it again.
  if (in.tool != "srun" && mrcheck_user_asked(in.request.option_seen, in.request.env_checks.has_value())) {
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
  if (auto imex = read_imex_facts(root, false); node_serves_imex(imex)) st.imex = std::move(imex);
  std::string pid_file = expand_slurmd_pid_file(st.step_conf ? st.step_conf->slurmd_pid_file : "/run/slurmd.pid", node,
                                                host);
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
  } else if (!is_slurm_daemon(proc->comm, "slurmd")) {
    st.step_slurmd = status::error(
        fmt::format("pid {} from {} is '{}', not slurmd (stale pid file)", pid, pid_file, escape_line(proc->comm, 32)));
  } else {
    st.step_slurmd = std::move(*proc);
  }
}

std::optional<std::string> node_privileged(const config& c, const task_facts& t, const sysroot& root, rlimit_ops& ops,
                                           node_state& st) {
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
  predict_task_limits(c, t, in, st);
  // enforce=yes holds for every step the plugin checks, whichever groups: an `mr` or `nccl` step runs its probes
  // (and its task) under the enforced limit, not under the one the site's policy is there to replace
  // (tests/container/container_test.sh found probes at 8 MiB under memlock_min=128M enforce=yes when only `mr`
  // was asked).
  if (c.enforce) {
    st.enf = enforce_memlock(ops, st.required, st.prediction);
    return st.enf->env_value;
  }
  return std::nullopt;
}

probe_budget plan_probe_budget(const config& c, const check_groups& g, const result<slurm_conf_facts>& conf) {
  using std::chrono::milliseconds;
  probe_budget b;
  if (g.mr) b.total += c.probe_timeout;
  if (g.nccl) b.total += c.nccl_timeout;
  if (g.rdma) b.total += c.probe_timeout;
  std::chrono::seconds unkillable = conf ? conf->unkillable_step_timeout : std::chrono::seconds(60);
  milliseconds limit = unkillable > 2 * k_unkillable_margin ? milliseconds(unkillable - k_unkillable_margin)
                                                            : milliseconds(unkillable) / 2;
  if (b.total > limit) {
    b.warning = fmt::format(
        "configuration: the probes of a step may take {} s (probe_timeout {} s{}{}), which could reach "
        "UnkillableStepTimeout={} s: a step cancelled while they run would drain the node; they are cut to {} s "
        "in total (lower probe_timeout/nccl_timeout or raise UnkillableStepTimeout)",
        b.total.count() / 1000, c.probe_timeout.count() / 1000, g.mr && g.rdma ? " for mr and again for rdma" : "",
        g.nccl ? fmt::format(" + nccl_timeout {} s", c.nccl_timeout.count() / 1000) : std::string(), unkillable.count(),
        limit.count() / 1000);
    b.total = limit;
  }
  return b;
}

namespace {

bool has_prefix(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

constexpr std::string_view k_probe_env_prefixes[] = {"NCCL_", "CUDA_", "NVIDIA_", "IBV_", "RDMAV_", "MLX4_", "MLX5_",
#ifdef MRCHECK_TEST_PROBE_ENV
                                                     // Test builds only (CMakeLists.txt, MRCHECK_TEST_PROBE_ENV): the
                                                     // fake libibverbs's settings (tests/fakes/README.md).
                                                     "MRCHECK_FAKE_IBV_"
#endif
};
// SLURM_RLIMIT_MEMLOCK only for the probe's explanation of where its limit came from (its limits are set by us).
constexpr std::string_view k_probe_env_names[] = {"HOME",
                                                  "SLURM_JOB_ID",
                                                  "SLURM_STEP_ID",
                                                  "SLURM_NODEID",
                                                  "SLURM_STEP_NODELIST",
                                                  "SLURM_JOB_NODELIST",
                                                  "SLURM_RLIMIT_MEMLOCK"};
constexpr std::size_t k_probe_summary_max = 600;
constexpr std::size_t k_probe_hint_max = 300;
constexpr std::size_t k_probe_detail_max = 4000;

// Cuts `s` to at most `max` bytes, not inside a UTF-8 sequence.
void cut(std::string& s, std::size_t max) {
  if (s.size() <= max) return;
  std::size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  s.resize(n);
}

// The probe's report is the job user's word (their NCCL_* settings, their GPU, a library the site chose): it is
// taken only in a known shape. Error text for the verdict, or "" when the report is acceptable; `checks` are
// bounded in place.
std::string validate_probe_report(std::string_view group, std::vector<check_result>& checks) {
  auto ids = probe_check_ids(group);
  if (checks.empty()) return "no checks";
  if (checks.size() > ids.size()) return fmt::format("{} checks, at most {} expected", checks.size(), ids.size());
  std::vector<std::string_view> seen;
  for (auto& ch : checks) {
    if (std::find(ids.begin(), ids.end(), ch.id) == ids.end()) {
      return fmt::format("unknown check id '{}'", escape_line(ch.id, 40));
    }
    if (std::find(seen.begin(), seen.end(), ch.id) != seen.end()) {
      return fmt::format("check id '{}' twice", ch.id);
    }
    seen.push_back(ch.id);
    // Bounded here; escaped at each sink (escape_line for lines, admin_escape for the record, JSON's own
    // escaping with ensure_ascii for report_dir), so that nothing is escaped twice.
    cut(ch.summary, k_probe_summary_max);
    cut(ch.hint, k_probe_hint_max);
    cut(ch.detail, k_probe_detail_max);
  }
  return "";
}

// The probe child of `group` for task t: `mrcheck probe` as the helper, with the job's settings it needs, the
// time left of the step's budget and the task's memlock limits.
child_spec probe_child_spec(const config& c, const std::string& group, const task_facts& t, const memlock_limit& limits,
                            std::chrono::milliseconds left) {
  child_spec spec;
  spec.argv = {c.helper_path(), std::string(k_probe_command), group, std::string(k_probe_json_flag)};
  // The site's verbs_library= must reach the probe child, or it registers through a different library.
  if (group == "mr" || group == "rdma") {
    spec.argv.push_back(std::string(k_probe_verbs_library_flag));
    spec.argv.push_back(c.verbs_library);
    // The probe isolates its verbs calls in a child of its own (cli/cmd_probe_mr.cpp); its deadline comes a
    // tenth (at least 1 s) before ours, so that a hang is reported with the call it hung in.
    const std::chrono::milliseconds outer = std::min<std::chrono::milliseconds>(c.probe_timeout, left);
    const std::chrono::milliseconds margin = std::max(outer / 10, std::chrono::milliseconds(1000));
    const std::chrono::milliseconds inner = outer > 2 * margin ? outer - margin
                                                               : std::max(outer / 2, std::chrono::milliseconds(1));
    spec.argv.push_back("--timeout");
    spec.argv.push_back(fmt::format("{}ms", inner.count()));
  }
  spec.max_output = k_probe_output_max;
  spec.env = probe_environment(t.job_env, t.slurm_conf_path);
  // The NCCL pair runs with the job's NCCL (found by the probe, as the job user, from these; include/mrcheck/
  // job_nccl.h): its command and library settings travel under other names, never as LD_* themselves.
  if (group == "nccl") {
    for (auto& e : job_nccl_env_for_probe(t.job_argv, t.job_env)) spec.env.push_back(std::move(e));
  }
  spec.timeout = std::min(group == "nccl" ? c.nccl_timeout : c.probe_timeout, left);
  // The task's limits after set_user_limits(), not this process's: a probe under other limits proves nothing.
  spec.rlimits.push_back(child_rlimit{RLIMIT_MEMLOCK, limits.soft == k_unlimited ? RLIM_INFINITY : limits.soft,
                                      limits.hard == k_unlimited ? RLIM_INFINITY : limits.hard});
  return spec;
}

}  // namespace

std::span<const std::string_view> probe_check_ids(std::string_view group) {
  static const std::vector<std::string_view> mr = check_ids(check_origin::probe, check_group::mr);
  static const std::vector<std::string_view> nccl = check_ids(check_origin::probe, check_group::nccl);
  if (group == "mr") return mr;
  if (group == "nccl") return nccl;
  static const std::vector<std::string_view> rdma = check_ids(check_origin::probe, check_group::rdma);
  if (group == "rdma") return rdma;
  return {};
}

std::vector<std::string> probe_environment(const std::vector<std::string>& job_env, const std::string& slurm_conf) {
  std::vector<std::string> env = {"PATH=/usr/bin:/bin", "SLURM_CONF=" + slurm_conf};
  for (const auto& e : job_env) {
    auto eq = e.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    std::string_view key(e.data(), eq);
    std::string_view value(e.data() + eq + 1, e.size() - eq - 1);
    bool keep = std::any_of(std::begin(k_probe_env_prefixes), std::end(k_probe_env_prefixes),
                            [&](std::string_view p) { return has_prefix(key, p); }) ||
                std::find(std::begin(k_probe_env_names), std::end(k_probe_env_names), key) !=
                    std::end(k_probe_env_names);
    // NCCL_NET_PLUGIN, NCCL_TUNER_PLUGIN, ...: a name is looked up in the system's library path; a path would load
    // a file of the user's into the probe.
    if (keep && has_prefix(key, "NCCL_") && key.ends_with("PLUGIN") && value.find('/') != std::string_view::npos) {
      keep = false;
    }
    if (keep) env.push_back(e);
  }
  return env;
}

probe_runner real_probe_runner(const config& c, std::chrono::milliseconds budget) {
  return real_probe_runner_stop(c, budget, nullptr);
}

probe_runner real_probe_runner_stop(const config& c, std::chrono::milliseconds budget, std::shared_ptr<bool> stopped) {
  using clock = std::chrono::steady_clock;
  struct shared {
    clock::time_point deadline;
    bool stopped = false;  // a probe was killed from outside: the step is being ended
  };
  auto sh = std::make_shared<shared>();
  sh->deadline = clock::now() + budget;
  return [c, sh, stopped](const std::string& group, const task_facts& t,
                          const memlock_limit& limits) -> std::vector<check_result> {
    // A probe that gives no report of its own is judged under the first check of its group (mr_host, nccl_pair):
    // every verdict id is a registry row, and "nccl" there is the NCCL version check.
    check_result r;
    auto ids = probe_check_ids(group);
    r.id = ids.empty() ? group : std::string(ids.front());
    r.result = verdict::error;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(sh->deadline - clock::now());
    if (sh->stopped || left.count() <= 0) {
      r.incomplete = true;
      r.summary = sh->stopped
                      ? fmt::format("probe {} not run: the previous probe was killed from outside (the step is ending)",
                                    group)
                      : fmt::format("probe {} not run: the step's probe time (below UnkillableStepTimeout) is used up",
                                    group);
      return {r};
    }
    child_spec spec = probe_child_spec(c, group, t, limits, left);
    auto out = run_child(spec);
    if (!out) {
      r.summary = fmt::format("probe {} could not start: {}", group, out.error().message());
      return {r};
    }
    if (out->killed_from_outside()) {
      r.incomplete = true;
      sh->stopped = true;
      if (stopped) *stopped = true;
    }
    // The contract of `mrcheck probe` (probe_protocol.h): exit pass/warn, fail or error; the report JSON on stdout.
    if (out->timed_out || out->signaled || !out->exited ||
        (out->exit_code > k_probe_exit_error && out->exit_code != k_probe_exit_skip)) {
      // A registration that hangs or crashes would hang or crash NCCL's init in the job too: that is a
      // finding about the node (on_fail), not the checker breaking (on_error). An exec failure or a
      // malformed report stays an error.
      if (out->timed_out || out->signaled) r.result = verdict::fail;
      std::string err = escape_line(out->err.substr(out->err.size() > 300 ? out->err.size() - 300 : 0), 300);
      r.summary = fmt::format("probe {} ({}) {}{}{}{}", group, escape_line(c.helper_path(), 128), out->describe(),
                              out->left_behind ? fmt::format(" ({} process(es) it started killed)", out->left_behind)
                                               : "",
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
    if (auto bad = validate_probe_report(group, rep.checks); !bad.empty()) {
      r.summary = fmt::format("probe {} ({}) printed a report that is refused: {}", group, out->describe(), bad);
      return {r};
    }
    return rep.checks;
  };
}

task_verdict node_task(const config& c, const task_facts& t, node_state& st, const probe_runner& probe) {
  task_verdict v;
  if (!st.active) return v;
  bool first = t.local_task_id == 0;
  memlock_limit start = st.enf ? st.enf->start : st.prediction.start;
  task_memlock tm{&st.prediction, st.required, st.enf ? &*st.enf : nullptr, &st.stack, &st.nofile};
  check_inputs in;
  in.task = &tm;
  in.cfg = &c;
  in.probe = [&](check_group g) { return probe(std::string(to_string(g)), t, start); };
  v.rep = run_checks(plugin_selection(st.checks, first), in);
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
      for (const auto* p : {&st.stack, &st.nofile}) {
        for (auto& l : limit_table_lines(*p)) v.user_lines.push_back(std::move(l));
      }
      if (st.enf) {
        v.user_lines.push_back(
            fmt::format("mrcheck: memlock: enforce=yes: process soft {} hard {} -> soft {} hard {}{}",
                        format_bytes(st.enf->before.soft), format_bytes(st.enf->before.hard),
                        format_bytes(st.enf->after.soft), format_bytes(st.enf->after.hard),
                        st.enf->env_value ? ", SLURM_RLIMIT_MEMLOCK=" + *st.enf->env_value : ""));
      }
      for (const auto& ch : v.rep.checks) {
        if (ch.result == verdict::pass || ch.result == verdict::skip) {
          v.user_lines.push_back(fmt::format("mrcheck: {}: {}: {}", escape_line(ch.id, 32), to_string(ch.result),
                                             escape_line(ch.summary, 600)));
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
      v.user_lines.push_back(
          fmt::format("mrcheck: ERROR: plugin configuration: {}", escape_line(st.conf_problem, 300)));
    }
    for (auto& l : failure_lines(v.rep)) v.user_lines.push_back(escape_line(l, 1500));
  }
  for (const auto& ch : v.rep.checks) {
    if (first || ch.result != verdict::pass) {
      v.admin_lines.push_back(fmt::format("mrcheck: {}: {}: job {} step {} task {}: {}", escape_line(ch.id, 32),
                                          to_string(ch.result), t.job_id, t.step_id, t.local_task_id,
                                          escape_line(ch.summary, 600)));
    }
  }
  if (first && (st.checks.mr || st.checks.nccl || st.checks.rdma)) {
    auto b = plan_probe_budget(c, st.checks, st.step_conf);
    if (!b.warning.empty()) v.admin_lines.push_back("mrcheck: " + b.warning);
  }
  // Per step, whatever the reports say: slurmd's log and the user's terminal get a bounded number of bounded
  // lines (one step's probe had added thousands of lines to slurmd's log; tests/e2e/hostile_report_test.sh).
  cap_lines(v.user_lines, k_user_lines_max);
  cap_lines(v.admin_lines, k_admin_lines_max);
  // Only the running task's /proc/PID/limits shows a TaskProlog's or a wrapper's override, so a watcher reads
  // it after exec (local task 0). It costs ~4 % of `srun -n 2 true` on the 2-core test VM (bench/plugin:
  // its fork in the task's path), so it runs where an override matters most: a TaskProlog is configured, the
  // site enforces (a wrapper must not silently undo the raise), or the user asked for verbose. A task that
  // ends here never execs: nothing to watch. On a node that serves IMEX it also reads the task's IMEX channels.
  v.watch_post_exec = st.checks.memlock && first && v.rc == 0 &&
                      (!st.task_prolog.empty() || st.enf.has_value() || st.checks.verbose || st.imex.has_value());
  return v;
}

}  // namespace mrcheck
