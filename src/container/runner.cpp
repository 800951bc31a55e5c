// The plugin's probes for a task in a container: the same groups (`mr`, `nccl`) as the host probes of
// src/limits/plugin_engine.cpp, served by the container helper from inside the task's container.
#include <mrcheck/container_runner.h>

#include <mrcheck/units.h>

#include <fmt/format.h>

#include <memory>

namespace mrcheck {

namespace {

// NCCL registers its buffers in pieces of a few MiB; 64 MiB is several channels' worth and well below any
// limit that works.
constexpr std::uint64_t k_container_reg_bytes = 64ull << 20;

runtime_guess task_runtime(const task_facts& t, const task_location& loc, const ctprobe_run* run) {
  runtime_signs s;
  s.env = t.job_env;
  s.own_namespace = loc.place != task_place::host;
  if (run != nullptr) {
    if (auto v = parse_ctprobe_output(run->outcome.out)) {
      auto it = v->kv.find("markers");
      if (it != v->kv.end()) {
        std::string_view m = it->second;
        while (!m.empty()) {
          auto c = m.find(',');
          if (!m.substr(0, c).empty()) s.marker_files.emplace_back(m.substr(0, c));
          if (c == std::string_view::npos) break;
          m.remove_prefix(c + 1);
        }
      }
      if (auto e = v->kv.find("containerenv"); e != v->kv.end()) s.containerenv = e->second;
    }
  }
  return guess_runtime(s);
}

}  // namespace

probe_runner container_probe_runner(const config& c, const container_state& st, const task_location& loc) {
  auto watching = std::make_shared<bool>(false);
  return [&c, &st, loc, watching](const std::string& group, const task_facts& t, const memlock_limit& limits) -> std::vector<check_result> {
    container_probe_request req;
    req.env = t.job_env;
    req.memlock_soft = limits.soft;
    req.memlock_hard = limits.hard;
    req.timeout = group == "nccl" ? c.nccl_timeout : c.probe_timeout;
    req.nccl = group == "nccl";
    req.reg_bytes = group == "mr" ? k_container_reg_bytes : 0;
    if (loc.place == task_place::maybe_later) {
      // Still on the host: the host's probes as without a container, and a watcher for the container the task
      // may enter after mrcheck's task_init (one per task: with the `mr` group, or `nccl` when alone).
      auto host = real_probe_runner(c)(group, t, limits);
      if (!*watching) {
        *watching = true;
        runtime_guess rt = task_runtime(t, loc, nullptr);
        if (loc.detail.find("pyxis") != std::string::npos) rt = {container_runtime::pyxis, loc.detail + " is loaded"};
        req.reg_bytes = k_container_reg_bytes;
        req.fail_is_warn = c.on_fail == fail_policy::warn;
        if (auto w = spawn_deferred_container_probe(st, t.task_pid, req, rt, c.probe_timeout); !w) {
          check_result r;
          r.id = "container";
          r.result = verdict::error;
          r.summary = "cannot watch for the task's container: " + w.message();
          host.push_back(std::move(r));
        }
      }
      return host;
    }
    ctprobe_run run = run_ctprobe(st, req);
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
