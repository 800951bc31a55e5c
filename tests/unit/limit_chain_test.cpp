// RLIMIT_STACK and RLIMIT_NOFILE along the chain (include/mrcheck/limit_chain.h): /proc/PID/limits parsing, the
// task's prediction, the hop named with its owner, the calling shell's chain, and bad input.
#include <mrcheck/admin_record.h>
#include <mrcheck/check_registry.h>
#include <mrcheck/config.h>
#include <mrcheck/limit_chain.h>
#include <mrcheck/step.h>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

namespace mrcheck {
namespace {

constexpr std::uint64_t k8m = 8ull << 20;

process_fact proc(pid_t pid, pid_t ppid, std::string comm, std::uint64_t stack, std::uint64_t nofile,
                  std::optional<uid_t> uid = 0) {
  process_fact p;
  p.pid = pid;
  p.ppid = ppid;
  p.comm = std::move(comm);
  p.uid = uid;
  p.memlock = memlock_limit{k_unlimited, k_unlimited};
  p.stack = memlock_limit{stack, k_unlimited};
  p.nofile = memlock_limit{nofile, 524288};
  return p;
}

struct node {
  result<process_fact> slurmd = proc(800, 1, "slurmd", k8m, 131072);
  std::vector<process_fact> chain = {proc(901, 900, "slurmstepd", k8m, 131072), proc(900, 1, "slurmstepd", k8m, 131072),
                                     proc(1, 0, "systemd", k8m, 1024)};
  limit_inputs inputs(rlimit_kind k, std::optional<std::string> propagated) const {
    limit_inputs in;
    in.kind = k;
    in.node = "node1";
    in.slurmd = &slurmd;
    in.task_chain = &chain;
    in.propagated = std::move(propagated);
    in.propagate_setting = "PropagateResourceLimits not set (default ALL)";
    in.submit_host = "login1";
    return in;
  }
};

TEST(LimitChain, ParsesStackAndOpenFilesLines) {
  constexpr std::string_view k_limits =
      "Limit                     Soft Limit           Hard Limit           Units     \n"
      "Max stack size            8388608              unlimited            bytes     \n"
      "Max open files            1024                 524288               files     \n";
  auto s = parse_rlimit_from_limits(k_limits, "Max stack size", "bytes");
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(s->soft, k8m);
  EXPECT_EQ(s->hard, k_unlimited);
  auto n = parse_rlimit_from_limits(k_limits, "Max open files", "files");
  ASSERT_TRUE(n.is_ok());
  EXPECT_EQ(n->soft, 1024u);
  EXPECT_EQ(n->hard, 524288u);
  // Open files are counted in "files": the units column is what proves the line whole.
  auto wrong = parse_rlimit_from_limits(k_limits, "Max open files", "bytes");
  ASSERT_FALSE(wrong.is_ok());
  EXPECT_NE(wrong.error().message().find("'Max open files' units are 'files'"), std::string::npos);
  EXPECT_FALSE(parse_rlimit_from_limits("Max stack size 8388608", "Max stack size", "bytes").is_ok());
}

TEST(LimitChain, UnlimitedStackFromTheSubmitShellIsTheJobsViaSrunsPropagation) {
  node n;
  config c;
  auto p = predict_task_limit(n.inputs(rlimit_kind::stack, "18446744073709551615"), c);
  ASSERT_TRUE(p.known);
  EXPECT_TRUE(p.propagation_applies);
  EXPECT_EQ(p.start.soft, k_unlimited);
  ASSERT_TRUE(p.hop.has_value());
  EXPECT_EQ(p.hop->hop, "srun's propagation");
  EXPECT_EQ(p.hop->owner, fix_owner::job);
  auto r = judge_task_limit(p, c);
  EXPECT_EQ(r.id, "stack");
  EXPECT_EQ(r.result, verdict::fail);
  EXPECT_EQ(r.owner, fix_owner::job);
  EXPECT_NE(r.summary.find("stack soft unlimited (above stack_max 1 GiB)"), std::string::npos) << r.summary;
  EXPECT_NE(r.summary.find("SLURM_RLIMIT_STACK=18446744073709551615 from the shell that ran srun/sbatch on login1"),
            std::string::npos)
      << r.summary;
  EXPECT_NE(r.hint.find("ulimit -s 8192"), std::string::npos);
  report rep;
  rep.checks.push_back(r);
  EXPECT_EQ(failure_lines(rep).at(0).rfind("mrcheck: stack: FAIL: task will start with stack soft unlimited (above "
                                           "stack_max 1 GiB); set at srun's propagation (job): ",
                                           0),
            0u);
}

TEST(LimitChain, LowOpenFilesFromTheSubmitShellFailsNamingTheHop) {
  node n;
  config c;
  auto r = judge_task_limit(predict_task_limit(n.inputs(rlimit_kind::nofile, "256"), c), c);
  EXPECT_EQ(r.id, "nofile");
  EXPECT_EQ(r.result, verdict::fail);
  EXPECT_EQ(r.owner, fix_owner::job);
  EXPECT_NE(r.summary.find("nofile soft 256 (below nofile_min 1024); set at srun's propagation"), std::string::npos)
      << r.summary;
}

TEST(LimitChain, PropagationExcludedKeepsSlurmstepdsLimit) {
  node n;
  config c;
  auto in = n.inputs(rlimit_kind::nofile, "256");
  in.conf_propagates = false;
  auto p = predict_task_limit(in, c);
  EXPECT_FALSE(p.propagation_applies);
  EXPECT_EQ(p.start.soft, 131072u);
  EXPECT_EQ(judge_task_limit(p, c).result, verdict::pass);
}

TEST(LimitChain, SlurmdsOwnLimitIsTheNodes) {
  node n;
  n.slurmd = proc(800, 1, "slurmd", k8m, 256);
  for (auto& p : n.chain) p.nofile = memlock_limit{256, 256};
  config c;
  auto p = predict_task_limit(n.inputs(rlimit_kind::nofile, std::nullopt), c);
  ASSERT_TRUE(p.hop.has_value());
  EXPECT_EQ(p.hop->hop, "slurmd");
  EXPECT_EQ(p.hop->owner, fix_owner::node);
  EXPECT_NE(p.hop->fix.find("LimitNOFILE="), std::string::npos);
}

TEST(LimitChain, PropagatedValueAboveTheHardLimitIsCutToIt) {
  node n;
  config c;
  auto p = predict_task_limit(n.inputs(rlimit_kind::nofile, "9999999"), c);
  EXPECT_EQ(p.start.soft, 524288u);
  // With `U` (srun --propagate) setrlimit refuses it and the soft limit stays.
  p = predict_task_limit(n.inputs(rlimit_kind::nofile, "U9999999"), c);
  EXPECT_EQ(p.start.soft, 131072u);
}

TEST(LimitChain, MalformedPropagatedStackIsOneNoteAndIgnored) {
  node n;
  config c;
  auto p = predict_task_limit(n.inputs(rlimit_kind::stack, "unlimited"), c);
  EXPECT_FALSE(p.propagated.has_value());
  EXPECT_EQ(p.start.soft, k8m);
  ASSERT_EQ(p.notes.size(), 1u);
  EXPECT_EQ(p.notes[0], "SLURM_RLIMIT_STACK 'unlimited' is not a number (slurmstepd ignores it)");
  EXPECT_EQ(judge_task_limit(p, c).result, verdict::pass);
}

TEST(LimitChain, UnreadableLimitsAtOneHopIsARowNoteOnly) {
  node n;
  n.chain[1].stack = status::error("/proc/900/limits: Permission denied");
  config c;
  auto p = predict_task_limit(n.inputs(rlimit_kind::stack, "8388608"), c);
  EXPECT_EQ(judge_task_limit(p, c).result, verdict::pass);
  bool shown = false;
  for (const auto& l : limit_table_lines(p))
    shown = shown || l.find("unreadable: /proc/900/limits") != std::string::npos;
  EXPECT_TRUE(shown);
  // The task's own limit unreadable: an error, one line, never a guessed pass.
  n.chain[0].stack = status::error("/proc/901/limits: Permission denied");
  auto r = judge_task_limit(predict_task_limit(n.inputs(rlimit_kind::stack, "8388608"), c), c);
  EXPECT_EQ(r.result, verdict::error);
  EXPECT_NE(r.summary.find("Permission denied"), std::string::npos);
}

TEST(LimitChain, CallingShellsUlimitIsTheJobsAndRootsIsTheNodes) {
  config c;
  std::vector<process_fact> chain = {proc(4300, 4242, "mrcheck", k_unlimited, 1024, 1000),
                                     proc(4242, 4000, "bash", k_unlimited, 1024, 1000),
                                     proc(4000, 1, "sshd", k8m, 1024, 0), proc(1, 0, "systemd", k8m, 1024, 0)};
  auto r = judge_chain_limit(rlimit_kind::stack, chain, c);
  EXPECT_EQ(r.result, verdict::fail);
  EXPECT_EQ(r.owner, fix_owner::job);
  EXPECT_NE(r.summary.find("set at pid 4242 (bash) (job), its parent pid 4000 (sshd) had soft 8 MiB"),
            std::string::npos)
      << r.summary;
  for (auto& p : chain) p.uid = 0;
  EXPECT_EQ(judge_chain_limit(rlimit_kind::stack, chain, c).owner, fix_owner::node);
  EXPECT_EQ(judge_chain_limit(rlimit_kind::nofile, chain, c).result, verdict::pass);
}

TEST(LimitChain, ConfigRefusesAnUnlimitedStackMax) {
  config c;
  EXPECT_FALSE(apply_config_item(c, "stack_max=unlimited", "test").is_ok());
  EXPECT_TRUE(apply_config_item(c, "stack_max=16M", "test").is_ok());
  EXPECT_EQ(c.stack_max, 16ull << 20);
  EXPECT_FALSE(apply_config_item(c, "nofile_min=lots", "test").is_ok());
  EXPECT_TRUE(apply_config_item(c, "nofile_min=65536", "test").is_ok());
  EXPECT_EQ(c.nofile_min, 65536u);
}

TEST(LimitChain, MemlockStaysTheFirstCheckOfItsGroup) {
  auto ids = selected_ids(report_selection());
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids[0], "memlock");
  EXPECT_EQ(ids[1], "stack");
  EXPECT_EQ(ids[2], "nofile");
}

TEST(LimitChain, OwnerRoundTripsThroughJson) {
  report rep;
  check_result r;
  r.id = "stack";
  r.result = verdict::fail;
  r.owner = fix_owner::job;
  rep.checks.push_back(r);
  report back;
  std::string err;
  ASSERT_TRUE(report_from_json(report_to_json(rep), back, err)) << err;
  EXPECT_EQ(back.checks.at(0).owner, fix_owner::job);
  auto j = report_to_json(rep);
  j["checks"][0]["owner"] = "nobody";
  EXPECT_FALSE(report_from_json(j, back, err));
}

TEST(LimitChain, TheRecordNamesTheValueTheHopAndTheOwner) {
  node n;
  config c;
  node_state st;
  st.active = true;
  st.prediction.start = {k_unlimited, k_unlimited};
  st.stack = predict_task_limit(n.inputs(rlimit_kind::stack, "18446744073709551615"), c);
  st.nofile = predict_task_limit(n.inputs(rlimit_kind::nofile, "256"), c);
  report rep;
  rep.checks.push_back(judge_task_limit(st.stack, c));
  rep.checks.push_back(judge_task_limit(st.nofile, c));
  auto r = make_node_record(0, "node1", st, rep);
  ASSERT_EQ(r.checks.size(), 2u);
  EXPECT_EQ(r.checks[0].token, "stack=unlimited (srun's propagation, job)");
  EXPECT_EQ(r.checks[1].token, "nofile=256 (srun's propagation, job)");
}

TEST(LimitChain, EnforceValueBringsTheStartWithinTheRule) {
  node n;
  config c;
  std::string problem;
  auto stack = predict_task_limit(n.inputs(rlimit_kind::stack, "18446744073709551615"), c);
  EXPECT_EQ(enforce_limit_value(stack, c, problem), "U1073741824");
  auto nofile = predict_task_limit(n.inputs(rlimit_kind::nofile, "256"), c);
  EXPECT_EQ(enforce_limit_value(nofile, c, problem), "U1024");
  EXPECT_TRUE(problem.empty());
  // Within the rule: nothing to write.
  EXPECT_EQ(enforce_limit_value(predict_task_limit(n.inputs(rlimit_kind::nofile, "4096"), c), c, problem),
            std::nullopt);
  // Above the task's hard limit slurmstepd would refuse it: no value, the reason instead.
  c.nofile_min = 600000;
  EXPECT_EQ(enforce_limit_value(nofile, c, problem), std::nullopt);
  EXPECT_EQ(problem, "cannot enforce: nofile_min 600000 is above the task's hard limit 524288");
}

TEST(LimitChain, PluginEnforcesThroughTheJobEnvAndThenPasses) {
  node n;
  config c;
  c.enforce = true;
  memlock_inputs m;
  m.slurmd = n.slurmd;
  m.task_chain = n.chain;
  task_facts t;
  t.node = "node1";
  t.rlimit_stack = "18446744073709551615";
  t.rlimit_nofile = "256";
  node_state st;
  predict_task_limits(c, t, m, st);
  ASSERT_EQ(st.limit_env.size(), 2u);
  EXPECT_EQ(st.limit_env[0], (std::pair<std::string, std::string>{"SLURM_RLIMIT_STACK", "U1073741824"}));
  EXPECT_EQ(st.limit_env[1], (std::pair<std::string, std::string>{"SLURM_RLIMIT_NOFILE", "U1024"}));
  EXPECT_EQ(st.stack.start.soft, 1ull << 30);
  EXPECT_EQ(judge_task_limit(st.stack, c).result, verdict::pass);
  EXPECT_EQ(judge_task_limit(st.nofile, c).result, verdict::pass);
  // enforce=no: the same facts fail, nothing is written.
  c.enforce = false;
  predict_task_limits(c, t, m, st);
  EXPECT_TRUE(st.limit_env.empty());
  EXPECT_EQ(judge_task_limit(st.stack, c).result, verdict::fail);
}

}  // namespace
}  // namespace mrcheck
