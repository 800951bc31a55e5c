// mrcheck_spank_core.so: the checks behind spank_mrcheck.so. Slurm loads the small loader (shim.cpp), which
// loads this file only for a step that checks something and calls these hooks through one table
// (core_abi.h). The hooks are thin: hook -> adapter (job_info.cpp: the SPANK items, read once into plain data)
// -> step engine (src/step/). The idle gate is gate.h's, the loader's too; the --mr-check value is the
// loader's (core_abi.h), read here through a pointer. Which hook does what, and why there
// (docs/facts/slurm-spank.md §1):
//
//   init            all contexts     load config (the loader has checked the Slurm version, logged the load
//                                    line and registered --mr-check)
//   check_option    srun/sbatch      a bad LIST is refused here, before anything is launched
//   init_post_opt   srun/sbatch      refuse `off` when the site forbids it; record the submit chain
//                                    (MRCHECK_SUBMIT) and, for sbatch/salloc, MRCHECK_CHECKS for inner sruns
//   task_init_privileged  task, root predict the task's limit; enforce=yes raises hard+soft and rewrites
//                                    SLURM_RLIMIT_MEMLOCK, and SLURM_RLIMIT_STACK/NOFILE with a `U` for
//                                    stack_max/nofile_min (set_user_limits() applies them after us)
//   task_init       task, job user   verdicts, probes as the user, one line per node; post-exec watcher
//   init_post_opt, task_init, task_exit, exit  the admins' record: AdminComment + report_dir through a root
//                                    collector (include/mrcheck/admin_collector.h says which hook does what)
//
// Never an error from remote init/init_post_opt: a batch step would drain the node (docs/facts/slurm-spank.md §5).
extern "C" {
#include <slurm/spank.h>
}

#include "core_abi.h"
#include "engine.h"
#include "gate.h"
#include "job_info.h"

#include <mrcheck/admin_collector.h>
#include <mrcheck/build_config.h>
#include <mrcheck/child.h>
#include <mrcheck/container_runner.h>
#include <mrcheck/memlock_step.h>
#include <mrcheck/step.h>

#include <fmt/format.h>

#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace mrcheck::spank_glue {

engine& current_engine() {
  static engine e;
  return e;
}

namespace {

// Per-process state: srun, sbatch, and each slurmstepd task child have their own copy.
struct plugin_state {
  config cfg;
  std::string cfg_error;
  const mrcheck_step_option* option = nullptr;  // the loader's (core_abi.h); set by init
  node_state node;
  container_state ct;  // the job's container (docs/containers.md): the helper's fd and the host's view
};
plugin_state& state() {
  static plugin_state s;
  return s;
}

// The admins' record's collector of this slurmstepd (include/mrcheck/admin_collector.h): apart from plugin_state,
// which init resets, and shared with the clone children that run task_exit under contain_spank.
admin_collector& collector() {
  static admin_collector c;
  return c;
}

// Where the collector's lines and errors go: slurmd's log. An error line in slurmstepd also reaches the user's
// srun; the collector's own lines come at info (admin_collector.cpp).
class slurmd_log final : public log_sink {
 public:
  void write(log_level level, std::string_view line) noexcept override {
    std::string l(line);
    if (level == log_level::error) {
      slurm_error("%s", l.c_str());
    } else {
      slurm_info("%s", l.c_str());
    }
  }
};

// The step as the collector needs it; SLURMD_NODENAME from slurmstepd's own environment (slurmstepd.c sets it),
// trusted, unlike the job's.
admin_step admin_step_of(const spank_items& it) {
  const char* me = std::getenv("SLURMD_NODENAME");
  return {it.job_id, it.step_id, it.batch_step, it.extern_step, it.node_id, it.nnodes, me ? me : ""};
}

enum class hook_kind { may_fail, never_fail };

// One guard for every hook: nothing unwinds into Slurm. An internal error follows on_error, except in the
// hooks that must never fail.
template <class F>
int guarded(const char* hook, hook_kind kind, F&& body) noexcept {
  try {
    return body();
  } catch (const std::exception& e) {
    slurm_error("mrcheck: %s: internal error: %s", hook, e.what());
  } catch (...) {
    slurm_error("mrcheck: %s: internal error: unknown exception", hook);
  }
  try {
    return kind == hook_kind::may_fail && state().cfg.on_error == fail_policy::fail ? -1 : 0;
  } catch (...) {
    return 0;
  }
}

bool option_seen() {
  const auto* o = state().option;
  return o != nullptr && o->seen != 0;
}

// The user's request: the loader's --mr-check, and MRCHECK_CHECKS as the caller read it.
check_request user_request(std::optional<std::string> env_checks) {
  check_request req;
  req.option_seen = option_seen();
  if (req.option_seen) req.option = normalize_optarg(state().option->value);
  req.env_checks = std::move(env_checks);
  return req;
}

// srun/sbatch only (the loader's option callback). Refuse here rather than in init_post_opt: srun ignores
// init_post_opt errors of an `optional` plugin, but an option callback error always stops srun/sbatch before
// launch.
int on_check_option() {
  auto& s = state();
  auto g = effective_checks(s.cfg, user_request(std::nullopt));
  if (!g) {
    slurm_error("mrcheck: %s", g.error().message().c_str());
    return -1;
  }
  return 0;
}

int on_init(spank_t, int ac, char** av, const mrcheck_step_option* option) {
  spank_context_t ctx = spank_context();
  if (ctx == S_CTX_JOB_SCRIPT) return 0;
  state() = plugin_state{};  // the loader calls init first, before it asks for anything else
  state().option = option;
  std::vector<std::string_view> args(av, av + ac);
  auto c = current_engine().load_config(args, "plugstack.conf spank_mrcheck.so");
  if (c) {
    state().cfg = std::move(*c);
    return 0;
  }
  state().cfg_error = c.error().message();
  slurm_error("mrcheck: configuration: %s", state().cfg_error.c_str());
  // slurmd (daemon start) and srun/sbatch may fail - only a `required` plugin's error counts there.
  return ctx == S_CTX_SLURMD || ctx == S_CTX_LOCAL || ctx == S_CTX_ALLOCATOR ? -1 : 0;
}

// The idle gate (gate.h) with the parsed configuration: no option, no MRCHECK_CHECKS from an enclosing sbatch,
// no site default. Every hook asks it before it reads anything else.
bool may_check(spank_t sp, spank_context_t ctx) {
  return mrcheck_step_may_check(option_seen(), mrcheck_env_checks_set(sp, ctx), state().cfg.default_checks.any());
}
bool node_may_check(spank_t sp) { return may_check(sp, S_CTX_REMOTE); }

// slurmstepd, once per step before the tasks fork (root): what is the same for every task, so the task
// children do not each read slurm.conf and slurmd's limits again.
int prefetch_step(spank_t sp) {
  auto& s = state();
  if (!node_may_check(sp)) return 0;  // idle
  spank_items items = read_spank_items(sp);
  task_facts t = make_task_facts(items, sp, false);
  if (t.extern_step) return 0;
  slurmd_log log;
  collector().start(admin_step_of(items), s.cfg, log);
  sysroot host;
  prefetch_step_facts(host, t.slurm_conf_path, t.node, t.host, s.node);
  prepare_container_state(s.ct, s.cfg.helper_path(), host);
  child_keep_null_device();  // the host's /dev/null for every child the tasks start, in a container without one
  return 0;
}

int on_init_post_opt(spank_t sp, int, char**) {
  spank_context_t ctx = spank_context();
  if (ctx == S_CTX_REMOTE) return prefetch_step(sp);
  if (ctx != S_CTX_LOCAL && ctx != S_CTX_ALLOCATOR) return 0;
  auto& s = state();
  if (!may_check(sp, ctx)) return 0;  // idle
  submit_inputs in = read_submit_inputs(ctx);
  in.request = user_request(in.request.env_checks);
  auto plan = current_engine().submit(s.cfg, in, sysroot{});
  if (!plan) {
    slurm_error("mrcheck: %s", plan.error().message().c_str());
    return -1;
  }
  // setenv in srun's/sbatch's own environment: it is copied into the job's (docs/facts/slurm-spank.md §3).
  for (const auto& [k, v] : plan->setenv) ::setenv(k.c_str(), v.c_str(), 1);
  return 0;
}

int on_task_init_privileged(spank_t sp, int, char**) {
  auto& s = state();
  if (!node_may_check(sp)) return 0;  // idle
  task_facts t = make_task_facts(read_spank_items(sp), sp, false);
  t.request = user_request(t.request.env_checks);
  s.node.conf_problem = s.cfg_error;
  auto env = current_engine().privileged(s.cfg, t, sysroot{}, real_rlimit_ops(), s.node);
  if (env) {
    spank_err_t rc = spank_setenv(sp, "SLURM_RLIMIT_MEMLOCK", env->c_str(), 1);
    if (rc != ESPANK_SUCCESS)
      slurm_error("mrcheck: memlock: cannot rewrite SLURM_RLIMIT_MEMLOCK: %s", spank_strerror(rc));
  }
  for (const auto& [name, value] : s.node.limit_env) {  // enforce=yes for stack and nofile (task_limits.cpp)
    spank_err_t rc = spank_setenv(sp, name.c_str(), value.c_str(), 1);
    if (rc != ESPANK_SUCCESS) slurm_error("mrcheck: cannot rewrite %s: %s", name.c_str(), spank_strerror(rc));
  }
  if (s.node.active) prepare_container_state(s.ct, s.cfg.helper_path(), sysroot{});  // before any plugin's task_init
  return 0;
}

int on_task_init(spank_t sp, int, char**) {
  auto& s = state();
  auto& ac = collector();
  if (!s.node.active && !ac.collecting()) return 0;
  spank_items items = read_spank_items(sp);
  slurmd_log log;
  if (ac.collecting()) ac.task_begin(items.local_task_id.value_or(-1), s.node.active, log);
  if (!s.node.active) return 0;
  task_facts t = make_task_facts(items, sp, task_runs_probes(s.node));
  t.request = user_request(t.request.env_checks);
  // The decisions are the step engine's (run_task_step, send_task_record: src/step/task_step.cpp); here, what
  // lies outside its layer: the task's container, the record pipe and the record's message.
  task_step_io io;
  io.task = current_engine().task;
  io.place_probes = [&](probe_runner host, std::chrono::milliseconds budget, std::shared_ptr<bool> stopped) {
    task_location loc = locate_task(s.ct, s.cfg.container_plugins, t.job_argv);
    return container_probe_runner(s.cfg, s.ct, loc, std::move(host), budget, s.node.checks.verbose, std::move(stopped));
  };
  io.take_record_fd = [&ac](const task_facts& ft) { return ac.take_record_fd(ft.local_task_id); };
  io.send_record = [](int fd, const task_facts& ft, const node_state& st, const report& rep) {
    admin_write_record(fd, admin_record_message(ft, st, rep));
  };
  task_step_outcome o = run_task_step(s.cfg, t, s.node, io);
  for (const auto& l : o.verdict.user_lines) slurm_spank_log("%s", l.c_str());
  for (const auto& l : o.verdict.admin_lines) slurm_info("%s", l.c_str());
  for (const auto& l : send_task_record(o, t, s.node, io)) slurm_error("%s", l.c_str());
  return o.verdict.rc;
}

// The admins' record, slurmstepd only: the collector starts in init_post_opt (prefetch_step) and the task children
// hand it their record in task_init; user_init and task_post_fork have nothing to do (admin_collector.h says
// why).
int on_user_init(spank_t, int, char**) { return 0; }
int on_task_post_fork(spank_t, int, char**) { return 0; }
int on_task_exit(spank_t sp, int, char**) {
  auto& ac = collector();
  if (!ac.collecting()) return 0;
  slurmd_log log;
  ac.task_exit(read_spank_items(sp).local_task_count, admin_collector_wait(state().cfg), log);
  return 0;
}
int on_spank_exit(spank_t, int, char**) {
  if (spank_context() != S_CTX_REMOTE) return 0;
  slurmd_log log;
  collector().finish(log);
  return 0;
}

}  // namespace
}  // namespace mrcheck::spank_glue

// The hooks, as the loader calls them. Each body is one guarded call; the guard is noexcept and catches
// everything.
namespace mrcheck::spank_glue {
namespace {

int core_init(spank_t sp, int ac, char** av, const mrcheck_step_option* option) {
  return guarded("init", hook_kind::never_fail, [&] { return on_init(sp, ac, av, option); });
}
int core_check_option() {
  return guarded("--mr-check", hook_kind::may_fail, [&] { return on_check_option(); });
}
int core_init_post_opt(spank_t sp, int ac, char** av) {
  return guarded("init_post_opt", hook_kind::never_fail, [&] { return on_init_post_opt(sp, ac, av); });
}
// A task hook's failure ends the task here, as slurmstepd does for a `required` plugin (task.c exec_task,
// mgr.c _fork_all_tasks: _exit(1) in the task child): Slurm ignores an `optional` plugin's error
// (docs/facts/slurm-spank.md §5), and on_fail=fail must stop the task however the plugin is loaded.
int core_task_init_privileged(spank_t sp, int ac, char** av) {
  int rc = guarded("task_init_privileged", hook_kind::may_fail, [&] { return on_task_init_privileged(sp, ac, av); });
  if (rc != 0) current_engine().end_task(1);
  return rc;
}
int core_task_init(spank_t sp, int ac, char** av) {
  int rc = guarded("task_init", hook_kind::may_fail, [&] { return on_task_init(sp, ac, av); });
  if (rc != 0) current_engine().end_task(1);
  return rc;
}
int core_user_init(spank_t sp, int ac, char** av) {
  return guarded("user_init", hook_kind::never_fail, [&] { return on_user_init(sp, ac, av); });
}
int core_task_post_fork(spank_t sp, int ac, char** av) {
  return guarded("task_post_fork", hook_kind::never_fail, [&] { return on_task_post_fork(sp, ac, av); });
}
int core_task_exit(spank_t sp, int ac, char** av) {
  return guarded("task_exit", hook_kind::never_fail, [&] { return on_task_exit(sp, ac, av); });
}
int core_exit(spank_t sp, int ac, char** av) {
  return guarded("exit", hook_kind::never_fail, [&] { return on_spank_exit(sp, ac, av); });
}

constexpr mrcheck_core_hooks k_hooks = {MRCHECK_CORE_ABI,  MRCHECK_VERSION,    core_init,
                                        core_check_option, core_init_post_opt, core_task_init_privileged,
                                        core_task_init,    core_user_init,     core_task_post_fork,
                                        core_task_exit,    core_exit};

}  // namespace
}  // namespace mrcheck::spank_glue

extern "C" __attribute__((visibility("default"))) const mrcheck_core_hooks* mrcheck_spank_core_v1() {
  return &mrcheck::spank_glue::k_hooks;
}
