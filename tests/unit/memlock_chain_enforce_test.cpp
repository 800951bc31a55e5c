// enforce=yes over a fake rlimit: raising works, EPERM on the hard limit is a "cannot enforce" verdict.
#include <mrcheck/memlock_step.h>
#include <mrcheck/step.h>

#include <gtest/gtest.h>

#include <cerrno>

namespace mrcheck {
namespace {

constexpr std::uint64_t k8m = 8ull << 20;
constexpr std::uint64_t k64k = 64ull << 10;

class fake_rlimit final : public rlimit_ops {
 public:
  memlock_limit now;
  bool can_raise_hard = true;
  int sets = 0;
  result<memlock_limit> get() override { return now; }
  status set(const memlock_limit& l) override {
    ++sets;
    if (l.soft > l.hard) return status::from_errno("setrlimit", EINVAL);
    if (l.hard > now.hard && !can_raise_hard) return status::from_errno("setrlimit", EPERM);
    now = l;
    return status::ok();
  }
};

memlock_prediction predicted(memlock_limit task, std::optional<std::uint64_t> propagated, bool applies) {
  memlock_prediction p;
  if (propagated) {
    p.propagated = propagated_limit{*propagated, false, true};
    p.propagated_text = std::to_string(*propagated);
  }
  p.propagation_applies = applies && propagated;
  p.start = {p.propagation_applies ? std::min(*propagated, task.hard) : task.soft, task.hard};
  p.hop = memlock_hop::submit_host;
  p.cause = "bash pid 1 on login1 set soft 64 KiB";
  p.fix = "fix it";
  return p;
}

TEST(MemlockChainEnforce, RaisesSoftAndRewritesThePropagatedValue) {
  fake_rlimit r;
  r.now = {k8m, k8m};
  auto p = predicted(r.now, k64k, true);
  auto e = enforce_memlock(r, k8m, p);
  EXPECT_TRUE(e.problem.empty()) << e.problem;
  ASSERT_TRUE(e.env_value.has_value());
  EXPECT_EQ(*e.env_value, std::to_string(k8m));
  EXPECT_EQ(e.start.soft, k8m);
  auto c = judge_memlock(p, k8m, &e);
  EXPECT_EQ(c.result, verdict::pass);
  EXPECT_NE(c.summary.find("enforce=yes raised it"), std::string::npos) << c.summary;
}

// What slurmstepd reads loosely ("U" is 0, "U 65536" is 64 KiB) is rewritten like any low value, and so
// is any spelling that is not srun's, whatever it stands for.
TEST(MemlockChainEnforce, RewritesEveryValueThatIsNotAPlainOneAtLeastTheEnforcedLimit) {
  for (const char* text : {"U", "", "U 65536", "U-18446744073709486080", "+99999999999", "U8388608x", "65536"}) {
    fake_rlimit r;
    r.now = {k8m, k8m};
    memlock_prediction p = predicted(r.now, std::nullopt, false);
    p.propagated_text = text;
    if (auto v = parse_propagated_limit(text)) p.propagated = *v;
    p.propagation_applies = p.propagated.has_value();
    auto e = enforce_memlock(r, k8m, p);
    ASSERT_TRUE(e.env_value.has_value()) << "'" << text << "'";
    EXPECT_EQ(*e.env_value, std::to_string(k8m)) << "'" << text << "'";
    EXPECT_EQ(e.start.soft, k8m) << "'" << text << "'";
  }
  // srun's own spelling at or above the enforced limit stays.
  fake_rlimit r;
  r.now = {k8m, k_unlimited};
  memlock_prediction p = predicted(r.now, std::nullopt, false);
  p.propagated_text = "U16777216";
  p.propagated = *parse_propagated_limit("U16777216");
  p.propagation_applies = true;
  auto e = enforce_memlock(r, k8m, p);
  EXPECT_FALSE(e.env_value.has_value());
  EXPECT_EQ(e.start.soft, 16u << 20);
}

TEST(MemlockChainEnforce, RaisesHardWhenAllowed) {
  fake_rlimit r;
  r.now = {4ull << 20, 4ull << 20};
  auto e = enforce_memlock(r, k_unlimited, predicted(r.now, std::nullopt, false));
  EXPECT_TRUE(e.problem.empty()) << e.problem;
  EXPECT_EQ(r.now.hard, k_unlimited);
  EXPECT_EQ(e.start.soft, k_unlimited);
  EXPECT_FALSE(e.env_value.has_value());
}

TEST(MemlockChainEnforce, EpermOnTheHardLimitIsCannotEnforceNamingTheCapability) {
  fake_rlimit r;
  r.now = {1ull << 20, 4ull << 20};
  r.can_raise_hard = false;
  auto p = predicted(r.now, std::nullopt, false);
  auto e = enforce_memlock(r, k8m, p);
  EXPECT_TRUE(e.hard_refused);
  EXPECT_EQ(r.now.soft, 4ull << 20);  // soft still raised as far as the hard limit allows
  EXPECT_NE(e.problem.find("cannot enforce: slurmstepd lacks CAP_SYS_RESOURCE (hard limit 4 MiB)"), std::string::npos)
      << e.problem;
  auto c = judge_memlock(p, k8m, &e);
  EXPECT_EQ(c.result, verdict::fail);
  EXPECT_EQ(c.summary.rfind("cannot enforce", 0), 0u) << c.summary;
}

TEST(MemlockChainEnforce, NeverLowers) {
  fake_rlimit r;
  r.now = {k_unlimited, k_unlimited};
  auto e = enforce_memlock(r, k8m, predicted(r.now, k_unlimited, true));
  EXPECT_EQ(r.sets, 0);
  EXPECT_EQ(r.now.soft, k_unlimited);
  EXPECT_FALSE(e.env_value.has_value());
}

TEST(MemlockChainPostExec, TaskPrologOverrideIsNamedWithTheRealLimit) {
  post_exec_observation o;
  o.predicted = {k8m, k8m};
  o.at_exec = memlock_limit{k64k, k8m};
  o.task_prolog = "/etc/slurm/taskprolog.sh";
  auto c = judge_post_exec(o, k8m);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->result, verdict::fail);
  EXPECT_NE(c->summary.find("TaskProlog /etc/slurm/taskprolog.sh"), std::string::npos) << c->summary;
  EXPECT_NE(c->summary.find("soft 64 KiB"), std::string::npos) << c->summary;
}

TEST(MemlockChainPostExec, WrapperLoweringAfterExecIsNamed) {
  post_exec_observation o;
  o.predicted = {k8m, k8m};
  o.at_exec = memlock_limit{k8m, k8m};
  o.later = memlock_limit{k64k, k8m};
  o.later_comm = "python3";
  auto c = judge_post_exec(o, k8m);
  ASSERT_TRUE(c.has_value());
  EXPECT_NE(c->summary.find("python3"), std::string::npos);
}

TEST(MemlockChainPostExec, AsPredictedIsSilent) {
  post_exec_observation o;
  o.predicted = {k8m, k8m};
  o.at_exec = memlock_limit{k8m, k8m};
  EXPECT_FALSE(judge_post_exec(o, k8m).has_value());
  o.at_exec.reset();  // the task exited before we saw it exec
  EXPECT_FALSE(judge_post_exec(o, k8m).has_value());
}

}  // namespace
}  // namespace mrcheck
