// The memlock chain's view of a job's environment: SLURM_RLIMIT_MEMLOCK and MRCHECK_SUBMIT (both set on the
// submit side, both forgeable by the user: `export MRCHECK_SUBMIT=...; srun --export=ALL`) and SLURM_SUBMIT_HOST,
// through predict_task_memlock(), judge_memlock(), chain_table_lines() and enforce_memlock() as task_init_privileged
// runs them as root.
// Input: byte 0 picks the node's situation (limits of slurmd/slurmstepd/task, propagation, required, verbose), then
// SLURM_RLIMIT_MEMLOCK, MRCHECK_SUBMIT and SLURM_SUBMIT_HOST separated by NUL bytes (a missing field = unset).
// Invariants (DESIGN.md: a user can never raise a limit past the site's policy; user text is escaped before it
// reaches a log):
//  - the predicted start never exceeds the task's hard limit, and the hard limit is the task's own;
//  - enforcement never sets a hard limit above max(current hard, memlock_min), never a soft above its hard, never
//    lowers, and the SLURM_RLIMIT_MEMLOCK it writes is the raised soft limit;
//  - every line the plugin prints from it (node_task's user lines for the job's stderr, admin lines for slurmd's
//    log, the chain table) is a single printable line, and so are the verdict's summary and hint (they also
//    feed JSON reports and drain reasons; README.md, finding F1).
// fuzz-requires: memlock_chain.h
#include "fuzz_common.h"

#include <mrcheck/memlock_step.h>
#include <mrcheck/step.h>

#include <cerrno>

namespace {

using namespace mrcheck;

class fake_rlimit final : public rlimit_ops {
 public:
  fake_rlimit(memlock_limit now, bool can_raise_hard) : now_(now), can_raise_hard_(can_raise_hard) {}
  result<memlock_limit> get() override { return now_; }
  status set(const memlock_limit& l) override {
    if (l.soft > l.hard) return status::from_errno("setrlimit", EINVAL);
    if (l.hard > now_.hard && !can_raise_hard_) return status::from_errno("setrlimit", EPERM);
    now_ = l;
    return status::ok();
  }
  memlock_limit now_;

 private:
  bool can_raise_hard_;
};

process_fact proc(pid_t pid, pid_t ppid, std::string comm, memlock_limit m) {
  process_fact p;
  p.pid = pid;
  p.ppid = ppid;
  p.comm = std::move(comm);
  p.memlock = m;
  return p;
}

// What task_init prints: the job's stderr (user_lines) and slurmd's log (admin_lines). Only memlock runs, so the
// probe runner is never called.
void check_sinks(const memlock_prediction& p, std::optional<enforcement> e, std::uint64_t required, bool verbose) {
  config c;
  c.memlock_min = required;
  c.enforce = e.has_value();
  task_facts t;
  t.node = "node1";
  t.host = "node1";
  t.job_id = 12;
  t.task_pid = 4242;
  node_state st;
  st.active = true;
  st.checks.memlock = true;
  st.checks.verbose = verbose;
  st.prediction = p;
  st.enf = std::move(e);
  st.required = required;
  task_verdict v = node_task(c, t, st, probe_runner{});
  for (const auto& l : v.user_lines) MRCHECK_FUZZ_REQUIRE(fuzz::printable_ascii(l) && l.rfind("mrcheck: ", 0) == 0, l);
  for (const auto& l : v.admin_lines) MRCHECK_FUZZ_REQUIRE(fuzz::printable_ascii(l) && l.rfind("mrcheck: ", 0) == 0, l);
}

std::optional<std::string> field(std::string_view& rest, bool& more) {
  if (!more) return std::nullopt;
  std::size_t nul = rest.find('\0');
  std::string value(rest.substr(0, nul));
  if (nul == std::string_view::npos) {
    more = false;
    rest = {};
  } else {
    rest.remove_prefix(nul + 1);
  }
  return value;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::uint8_t shape = data[0];
  std::string_view rest = fuzz::as_text(data + 1, size - 1);
  bool more = true;

  constexpr std::uint64_t k8m = 8ull << 20;
  constexpr std::uint64_t k64k = 64ull << 10;
  const memlock_limit unlimited{k_unlimited, k_unlimited};
  const memlock_limit slurmd_limit = (shape & 1) ? memlock_limit{k8m, k8m} : unlimited;
  const memlock_limit stepd_limit = (shape & 2) ? memlock_limit{k64k, k8m} : slurmd_limit;
  const memlock_limit task_now = (shape & 4) ? memlock_limit{k64k, stepd_limit.hard} : stepd_limit;
  const std::uint64_t required = (shape & 8) ? k_unlimited : (1ull << 30);

  memlock_inputs in;
  in.node = "node1";
  in.job = "job 12 step 0";
  in.batch_step = (shape & 16) != 0;
  in.slurmd = proc(800, 1, "slurmd", slurmd_limit);
  in.task_chain = {proc(4242, 4241, "bash", task_now), proc(4241, 800, "slurmstepd", stepd_limit),
                   proc(800, 1, "slurmd", slurmd_limit)};
  in.task_now = task_now;
  slurm_conf_facts conf;
  conf.memlock_propagated = (shape & 32) == 0;
  conf.use_pam = (shape & 64) != 0;
  in.conf = conf;
  in.propagated = field(rest, more);
  in.submit_raw = field(rest, more);
  if (auto host = field(rest, more)) in.submit_host = *host;

  // --mr-check=verbose also prints pass lines with the verdict's summary (finding F1 was a forged host in it).
  const bool verbose = (shape & 128) != 0;

  memlock_prediction p = predict_task_memlock(in, required);
  MRCHECK_FUZZ_REQUIRE(p.start.hard == task_now.hard, "prediction changed the hard limit");
  MRCHECK_FUZZ_REQUIRE(p.start.soft <= p.start.hard, "predicted soft above hard");
  if (!p.propagation_applies) MRCHECK_FUZZ_REQUIRE(p.start.soft == task_now.soft, "soft changed without propagation");

  for (const auto& line : chain_table_lines(p)) {
    MRCHECK_FUZZ_REQUIRE(fuzz::printable_ascii(line) && line.rfind("mrcheck: ", 0) == 0, line);
  }
  check_result before = judge_memlock(p, required, nullptr);
  MRCHECK_FUZZ_REQUIRE(fuzz::printable_ascii(before.summary), before.summary);
  MRCHECK_FUZZ_REQUIRE(fuzz::printable_ascii(before.hint), before.hint);
  check_sinks(p, std::nullopt, required, verbose);

  // enforce=yes as root with memlock_min = required: with and without CAP_SYS_RESOURCE.
  for (bool cap : {false, true}) {
    fake_rlimit ops(task_now, cap);
    enforcement e = enforce_memlock(ops, required, p);
    const memlock_limit& now = ops.now_;
    MRCHECK_FUZZ_REQUIRE(now.soft <= now.hard, "soft above hard");
    MRCHECK_FUZZ_REQUIRE(now.hard <= std::max(task_now.hard, required), "hard raised past the policy");
    MRCHECK_FUZZ_REQUIRE(now.soft <= std::max(task_now.soft, required), "soft raised past the policy");
    MRCHECK_FUZZ_REQUIRE(now.soft >= task_now.soft && now.hard >= task_now.hard, "enforcement lowered a limit");
    MRCHECK_FUZZ_REQUIRE(e.start.soft <= e.start.hard, "start soft above hard");
    if (e.env_value) {
      auto v = parse_propagated_limit(*e.env_value);
      MRCHECK_FUZZ_REQUIRE(v && !v->user_requested && v->value == now.soft, *e.env_value);
    }
    check_result after = judge_memlock(p, required, &e);
    MRCHECK_FUZZ_REQUIRE(fuzz::printable_ascii(after.summary), after.summary);
    MRCHECK_FUZZ_REQUIRE(fuzz::printable_ascii(after.hint), after.hint);
    check_sinks(p, e, required, verbose);
  }
  return 0;
}
