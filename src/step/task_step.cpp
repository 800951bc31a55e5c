// task_init's decisions below the SPANK calls (step.h, "task_init below the SPANK calls"): the probes' budget and
// place, the verdict, and what becomes of the admins' record. spank/plugin.cpp reads the items and prints.
#include <mrcheck/check_registry.h>
#include <mrcheck/probe_stop.h>
#include <mrcheck/step.h>

#include <unistd.h>

#include <chrono>
#include <memory>
#include <utility>

namespace mrcheck {

bool task_runs_probes(const node_state& st) { return st.checks.mr || st.checks.nccl || st.checks.rdma; }

task_step_outcome run_task_step(const config& c, const task_facts& t, node_state& st, const task_step_io& io) {
  auto budget = plan_probe_budget(c, st.checks, st.step_conf);
  auto stopped = std::make_shared<bool>(false);
  // A task in (or about to enter) its container is probed there, not on the host; a host task's probes run on
  // the host, and a watcher follows its processes for a container one of them may start (docs/containers.md).
  probe_runner host = io.host_probes ? io.host_probes(c, budget.total, stopped)
                                     : real_probe_runner_stop(c, budget.total, stopped);
  probe_runner probes = task_runs_probes(st) && io.place_probes
                            ? io.place_probes(std::move(host), budget.total, stopped)
                            : host;
  task_step_outcome o;
  o.verdict = io.task(c, t, st, probes);
  o.stopped = *stopped;
  return o;
}

std::optional<report> cancelled_step_record(const report& rep) {
  report kept;
  bool found = false;
  for (const auto& c : rep.checks) {
    const check_def* def = find_check(c.id);
    if (c.incomplete || (def && def->origin == check_origin::container)) continue;
    found = found || (c.result != verdict::pass && c.result != verdict::skip);
    kept.checks.push_back(c);
  }
  if (!found) return std::nullopt;
  return kept;
}

std::vector<std::string> send_task_record(const task_step_outcome& o, const task_facts& t, const node_state& st,
                                          const task_step_io& io) {
  std::vector<std::string> errors;
  const task_verdict& v = o.verdict;
  int rec = io.take_record_fd(t);
  if (o.stopped) {
    // A probe was killed from outside: the step is being cancelled (or the job user killed their own probe).
    // A finding of our own (memlock) is still sent (tests/e2e/admin_netns_test.sh).
    if (rec >= 0) {
      if (auto kept = cancelled_step_record(v.rep)) io.send_record(rec, t, st, *kept);
      ::close(rec);
    }
    return errors;
  }
  if (!v.watch_post_exec) {
    if (rec >= 0) {
      io.send_record(rec, t, st, v.rep);
      ::close(rec);
    }
    return errors;
  }
  // The watcher sends the admins' record once it has seen the task after exec, so that a limit lowered after
  // exec reaches the record and not only the task's stderr (tests/e2e/hostile_postexec_test.sh).
  post_exec_done done;
  if (rec >= 0) {
    done = [t, st, rep = v.rep, send = io.send_record](const std::vector<check_result>& after, int fd) {
      report r = rep;
      for (check_result c : after) {
        if (c.id == "memlock") c.id = "memlock_exec";
        r.checks.push_back(std::move(c));
      }
      send(fd, t, st, r);
    };
  }
  post_exec_watch w_in;
  w_in.task = t.task_pid;
  w_in.predicted = st.enf ? st.enf->start : st.prediction.start;
  w_in.required = st.required;
  w_in.task_prolog = st.task_prolog;
  w_in.batch_step = t.batch_step;
  w_in.node_imex = st.imex;
  auto w = io.spawn_watcher(w_in, done, rec);
  if (!w) {
    // No watcher: the record goes now, without the verdict after exec.
    errors.push_back("mrcheck: memlock: " + w.message());
    if (rec >= 0) io.send_record(rec, t, st, v.rep);
  }
  if (rec >= 0) ::close(rec);
  return errors;
}

}  // namespace mrcheck
