// The task's RLIMIT_STACK and RLIMIT_NOFILE in the plugin (include/mrcheck/step.h, predict_task_limits): the
// prediction of include/mrcheck/limit_chain.h from the chain node_privileged read for memlock, and enforce=yes.
//
// enforce=yes writes SLURM_RLIMIT_<X>=U<value> into the job env: slurmstepd's set_user_limits() applies a `U`
// value whatever PropagateResourceLimits says, after this hook (docs/facts/limits.md §1), so the task starts with
// it; nothing is set on slurmstepd itself. A value above the task's hard limit would be refused there: then the
// verdict stays a fail with a note saying why.
#include <mrcheck/step.h>

#include <fmt/format.h>

namespace mrcheck {

namespace {

limit_prediction predict_one(const config& c, limit_inputs& in, node_state& st) {
  limit_prediction p = predict_task_limit(in, c);
  if (!c.enforce || !p.hop) return p;
  std::string problem;
  auto v = enforce_limit_value(p, c, problem);
  if (!v) {
    if (!problem.empty()) p.notes.push_back(problem);
    return p;
  }
  const auto env = rlimit_info(in.kind).env;
  st.limit_env.emplace_back(std::string(env), *v);
  in.propagated = *v;
  p = predict_task_limit(in, c);
  p.notes.push_back(fmt::format("enforce=yes: {}={} written into the job's environment", env, *v));
  return p;
}

}  // namespace

void predict_task_limits(const config& c, const task_facts& t, const memlock_inputs& m, node_state& st) {
  st.limit_env.clear();
  limit_inputs in;
  in.node = t.node;
  in.batch_step = t.batch_step;
  in.slurmd = &m.slurmd;
  in.task_chain = &m.task_chain;
  in.submit_host = t.submit_host;
  in.propagate_setting = m.conf ? m.conf->propagate_setting
                                : std::string("PropagateResourceLimits not read (default ALL)");
  in.kind = rlimit_kind::stack;
  in.propagated = t.rlimit_stack;
  in.conf_propagates = !m.conf || m.conf->stack_propagated;
  st.stack = predict_one(c, in, st);
  in.kind = rlimit_kind::nofile;
  in.propagated = t.rlimit_nofile;
  in.conf_propagates = !m.conf || m.conf->nofile_propagated;
  st.nofile = predict_one(c, in, st);
}

}  // namespace mrcheck
