// enforce=yes and the verdicts. Enforcement raises, never lowers; a refused hard-limit raise (no
// CAP_SYS_RESOURCE, common in containers and on build machines) is a verdict, not a crash.
#include <mrcheck/memlock_step.h>
#include <mrcheck/step.h>

#include <mrcheck/units.h>

#include <fmt/format.h>

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>

namespace mrcheck {

namespace {

class posix_rlimit_ops final : public rlimit_ops {
 public:
  result<memlock_limit> get() override {
    struct rlimit r {};
    if (getrlimit(RLIMIT_MEMLOCK, &r) != 0) return status::from_errno("getrlimit(RLIMIT_MEMLOCK)", errno);
    return memlock_limit{r.rlim_cur == RLIM_INFINITY ? k_unlimited : r.rlim_cur,
                         r.rlim_max == RLIM_INFINITY ? k_unlimited : r.rlim_max};
  }
  status set(const memlock_limit& l) override {
    struct rlimit r {};
    r.rlim_cur = l.soft == k_unlimited ? RLIM_INFINITY : l.soft;
    r.rlim_max = l.hard == k_unlimited ? RLIM_INFINITY : l.hard;
    if (setrlimit(RLIMIT_MEMLOCK, &r) != 0) {
      return status::from_errno(fmt::format("setrlimit(RLIMIT_MEMLOCK, {}/{})", format_bytes(l.soft),
                                            format_bytes(l.hard)),
                                errno);
    }
    return status::ok();
  }
};

std::string show(const memlock_limit& m) {
  return fmt::format("soft {} hard {}", format_bytes(m.soft), format_bytes(m.hard));
}

}  // namespace

rlimit_ops& real_rlimit_ops() {
  static posix_rlimit_ops ops;
  return ops;
}

enforcement enforce_memlock(rlimit_ops& ops, std::uint64_t required, const memlock_prediction& before) {
  enforcement e;
  e.attempted = true;
  auto cur = ops.get();
  if (!cur) {
    e.problem = cur.error().message();
    e.start = before.start;
    return e;
  }
  e.before = *cur;
  memlock_limit want{std::max(cur->soft, required), std::max(cur->hard, required)};
  if (want != *cur) {
    auto s = ops.set(want);
    if (!s) {
      if (s.err() == EPERM && want.hard > cur->hard) {
        e.hard_refused = true;
        // Without CAP_SYS_RESOURCE the soft limit may still go up to the hard one.
        memlock_limit soft_only{std::max(cur->soft, std::min(required, cur->hard)), cur->hard};
        if (soft_only != *cur) {
          auto s2 = ops.set(soft_only);
          if (!s2) e.problem = s2.message();
        }
      } else {
        e.problem = s.message();
      }
    }
  }
  auto after = ops.get();
  e.after = after ? *after : *cur;
  e.start = e.after;
  if (before.propagated_text) {
    // Whatever arrived that is not a plain value at least the enforced one is rewritten: slurmstepd reads the
    // variable with looser rules than a reader would expect (parse_propagated_limit), and an odd spelling
    // must never decide the limit under enforce=yes (docs/slurm-rlimit-memlock.md).
    const auto& v = before.propagated;
    if (!v || !v->canonical || v->value < e.after.soft) {
      e.env_value = format_propagated_limit(e.after.soft);
      // Without `U` it applies only where slurm.conf propagates MEMLOCK; either way the task keeps after.soft.
    } else if (before.propagation_applies) {
      e.start.soft = slurmstepd_soft(*v, e.after);
    }
  }
  if (e.start.soft < required && e.problem.empty()) {
    e.problem = e.hard_refused ? fmt::format("cannot enforce: slurmstepd lacks CAP_SYS_RESOURCE (hard limit {})",
                                             format_bytes(e.before.hard))
                               : fmt::format("cannot enforce: the limit stays at {}", show(e.start));
  } else if (!e.problem.empty()) {
    e.problem = "cannot enforce: " + e.problem;
  }
  return e;
}

std::optional<check_result> judge_post_exec(const post_exec_observation& o, std::uint64_t required) {
  check_result c;
  c.id = "memlock";
  if (o.later && o.at_exec && o.later->soft < o.at_exec->soft) {
    c.result = o.later->soft < required ? verdict::fail : verdict::warn;
    if (o.batch_step) {
      c.summary = fmt::format(
          "the job script lowered its own memlock after it started: {} (at start: {}); every srun "
          "in it propagates that",
          show(*o.later), show(*o.at_exec));
      c.hint = "remove or raise `ulimit -l` in the job script";
      return c;
    }
    c.summary = fmt::format(
        "the task's own program ({}) lowered memlock after exec to {} (at exec: {}): a wrapper's "
        "`ulimit -l`",
        escape_line(o.later_comm, 32), show(*o.later), show(*o.at_exec));
    c.hint = "remove `ulimit -l` from the wrapper or launcher script";
    return c;
  }
  if (!o.at_exec || *o.at_exec == o.predicted) return std::nullopt;
  if (o.at_exec->soft >= o.predicted.soft && o.at_exec->soft >= required) return std::nullopt;  // raised: harmless
  c.result = o.at_exec->soft < required ? verdict::fail : verdict::warn;
  if (!o.task_prolog.empty()) {
    c.summary = fmt::format(
        "TaskProlog {} overrode memlock: the task runs with {} after exec, not the predicted {} "
        "(a TaskProlog that exports SLURM_RLIMIT_MEMLOCK runs after the plugin)",
        escape_line(o.task_prolog, 128), show(*o.at_exec), show(o.predicted));
    c.hint = fmt::format("remove the SLURM_RLIMIT_MEMLOCK export from TaskProlog {}", escape_line(o.task_prolog, 128));
  } else if (o.batch_step) {
    // A job script that starts with `ulimit -l` can do it before the watcher's first look (Slurm 26.05 starts the
    // batch script sooner after the plugin than 22.05 did): at_exec already has the script's own limit.
    c.summary = fmt::format(
        "the job script lowered its own memlock after it started: {} (predicted at start: {}), "
        "or a SPANK plugin after mrcheck exported SLURM_RLIMIT_MEMLOCK; every srun in it "
        "propagates that",
        show(*o.at_exec), show(o.predicted));
    c.hint = "remove or raise `ulimit -l` in the job script";
  } else {
    // The watcher first sees the task just after exec; a wrapper's `ulimit -l` in its first moments looks the
    // same as an override before exec, so both are named.
    c.summary = fmt::format(
        "memlock changed after the plugin: the task runs with {}, not the predicted {} (a "
        "wrapper's `ulimit -l` right after exec, or another SPANK plugin that exports "
        "SLURM_RLIMIT_MEMLOCK)",
        show(*o.at_exec), show(o.predicted));
    c.hint =
        "remove `ulimit -l` from the wrapper or launcher script, or find what exports SLURM_RLIMIT_MEMLOCK "
        "after the plugin";
  }
  return c;
}

}  // namespace mrcheck
