// The plugin's probes for a task in a container: the same groups (`mr`, `nccl`) as the host probes of
// src/step/plugin_engine.cpp, served by the container helper from inside the task's container.
#include <mrcheck/container_runner.h>

#include <mrcheck/mr_probe.h>
#include <mrcheck/units.h>

#include <fmt/format.h>

#include <memory>

namespace mrcheck {

namespace {

// What NCCL would register for one rank with the job's NCCL_* settings (the host probe's estimate,
// include/mrcheck/mr_probe.h), one HCA; read from the environment only (the image's nccl.conf is not the host's).
// 4 MiB when NCCL would register nothing (IB disabled): the image's verbs are still worth a registration.
std::uint64_t container_reg_bytes(const std::vector<std::string>& env) {
  nccl_env e = load_nccl_env(env, "", "");
  nccl_estimate est = estimate_nccl_registration(e, 1);
  return est.host_bytes > 0 ? est.host_bytes : 4ull << 20;
}

// The host probe's environment (probe_environment, step.h), and the job's LD_LIBRARY_PATH: inside the container
// the image is the job's own choice anyway, and its library path is how the job finds the image's NCCL net
// plugin, HPC-X or CUDA compat libraries (an image's ENV, which pyxis imports into the task's environment).
std::vector<std::string> container_environment(const task_facts& t) {
  auto env = probe_environment(t.job_env, t.slurm_conf_path);
  for (const auto& e : t.job_env) {
    if (e.rfind("LD_LIBRARY_PATH=", 0) == 0) env.push_back(e);
  }
  return env;
}

// The task's runtime: the container plugin that moved it (or will), the launcher it runs, else what its
// environment and the helper's view inside show (runtime_inside).
runtime_guess task_runtime(const task_facts& t, const task_location& loc, const ctprobe_run* run) {
  runtime_guess known = loc.launcher;
  if (known.runtime == container_runtime::none) known = plugin_runtime(loc.plugin);
  if (run != nullptr) return runtime_inside(*run, t.job_env, known);
  if (known.runtime != container_runtime::none) return known;
  runtime_signs s;
  s.env = t.job_env;
  s.own_namespace = loc.place != task_place::host;
  return guess_runtime(s);
}

// `podman run`, `docker run`: the container's processes are children of the runtime's monitor (conmon, dockerd),
// never of the task, so no watcher could enter it: a warning that the verdicts say nothing about the image.
check_result launched_outside_task(const runtime_guess& launcher) {
  check_result r;
  r.id = "container";
  r.result = verdict::warn;
  r.summary = fmt::format(
      "not checked: {}, which starts the container outside the task (through its own monitor process), "
      "where no Slurm plugin can follow it: the verdicts above are the host's, not the image's",
      launcher.evidence);
  r.hint =
      "run the image through a Slurm container plugin (pyxis/enroot, Slurm's OCI support) or with "
      "Apptainer, whose containers mrcheck checks inside";
  return r;
}

check_result probe_not_run(const std::string& group, bool killed) {
  check_result r;
  r.id = "container";
  r.result = verdict::error;
  r.summary = fmt::format("probe {} not run: {}", group,
                          killed ? "the previous probe was killed from outside (the step is ending)"
                                 : "the step's probe time (below UnkillableStepTimeout) is used up");
  return r;
}

}  // namespace

probe_runner container_probe_runner(const config& c, const container_state& st, const task_location& loc,
                                    probe_runner host_runner, std::chrono::milliseconds budget, bool verbose,
                                    std::shared_ptr<bool> stopped) {
  using clock = std::chrono::steady_clock;
  auto watching = std::make_shared<bool>(false);
  auto deadline = clock::now() + budget;
  auto killed = std::make_shared<bool>(false);  // a probe inside was killed from outside: the step is ending
  return [&c, &st, loc, watching, deadline, verbose, killed, stopped,
          host_runner = std::move(host_runner)](const std::string& group, const task_facts& t,
                                                const memlock_limit& limits) -> std::vector<check_result> {
    // The data plane is the host's HCA and kernel whatever the image: its probe runs on the host, as without a
    // container (the image's libibverbs is the `container` check's matter).
    if (group == "rdma") return host_runner(group, t, limits);
    container_probe_request req;
    req.env = container_environment(t);
    req.memlock_soft = limits.soft;
    req.memlock_hard = limits.hard;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
    req.timeout = std::min(group == "nccl" ? c.nccl_timeout : c.probe_timeout, left);
    req.nccl = group == "nccl";
    req.reg_bytes = group == "mr" ? container_reg_bytes(t.job_env) : 0;
    if (loc.place != task_place::inside) {
      // Still on the host: the host's probes as without a container, and a watcher for the container the task
      // may enter after mrcheck's task_init (one per task: with the `mr` group, or `nccl` when alone). A host
      // task's watcher follows its descendants and says nothing unless one of them enters a root of its own.
      auto host = host_runner(group, t, limits);
      if (!*watching && loc.launcher.outside_task) {
        // No watcher could enter a container started this way: the warning, once, stands in its place.
        *watching = true;
        host.push_back(launched_outside_task(loc.launcher));
      }
      if (!*watching) {
        *watching = true;
        bool launcher = loc.launcher.runtime != container_runtime::none;
        container_watch how = loc.place == task_place::host ? container_watch::descendants
                              : launcher                    ? container_watch::launcher
                                                            : container_watch::plugin;
        // A host task's runtime is whatever its descendant entered: guessed from there (runtime_inside).
        runtime_guess rt = how == container_watch::descendants ? runtime_guess{} : task_runtime(t, loc, nullptr);
        req.reg_bytes = container_reg_bytes(t.job_env);
        req.fail_is_warn = c.on_fail == fail_policy::warn;
        req.verbose = verbose;
        if (auto w = spawn_deferred_container_probe(st, t.task_pid, req, rt, c.container_wait, how); !w) {
          check_result r;
          r.id = "container";
          // A host task may never start a container: not watching it is no error of the host's verdicts.
          r.result = how == container_watch::descendants ? verdict::warn : verdict::error;
          r.summary = (how == container_watch::descendants ? "cannot watch for a container the task may start: "
                                                           : "cannot watch for the task's container: ") +
                      w.message();
          host.push_back(std::move(r));
        }
      }
      return host;
    }
    if (*killed || left.count() <= 0) return {probe_not_run(group, *killed)};
    ctprobe_run run = run_ctprobe(st, req);
    // Killed by the step's cancel (or by the job user), not by our timeout: the plugin sends no record of the
    // probe's verdicts, and node 0 reports the step as cancelled (docs/DESIGN.md §3).
    if (run.started && run.outcome.killed_from_outside()) {
      *killed = true;
      if (stopped) *stopped = true;
    }
    runtime_guess rt = task_runtime(t, loc, &run);
    auto checks = judge_container(run, st.host, rt, req.nccl);
    if (group == "nccl") {
      // The `mr` group already judged the container itself; keep only NCCL's verdict (or the helper's failure).
      std::vector<check_result> out;
      for (auto& ch : checks) {
        if (ch.id == "container_nccl" || ch.result == verdict::error) out.push_back(std::move(ch));
      }
      return out;
    }
    return checks;
  };
}

}  // namespace mrcheck
