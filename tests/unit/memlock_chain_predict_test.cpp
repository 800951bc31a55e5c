// predict_task_memlock: the limit the task starts with and the hop that lowered it, on hand-built chains
// shaped like the ones measured on the local Slurm (docs/facts/memlock.md §4).
#include <mrcheck/memlock_step.h>
#include <mrcheck/step.h>

#include <gtest/gtest.h>

namespace mrcheck {
namespace {

constexpr std::uint64_t k8m = 8ull << 20;
constexpr std::uint64_t k64k = 64ull << 10;

process_fact proc(pid_t pid, pid_t ppid, std::string comm, std::uint64_t soft, std::uint64_t hard) {
  process_fact p;
  p.pid = pid;
  p.ppid = ppid;
  p.comm = std::move(comm);
  p.memlock = memlock_limit{soft, hard};
  return p;
}

// A node with slurmd, slurmstepd and the task all at `node_limit`, default propagation.
memlock_inputs node_inputs(std::uint64_t node_soft, std::uint64_t node_hard) {
  memlock_inputs in;
  in.node = "node1";
  in.slurmd = proc(800, 1, "slurmd", node_soft, node_hard);
  in.task_chain = {proc(901, 900, "slurmstepd", node_soft, node_hard), proc(900, 1, "slurmstepd", node_soft, node_hard),
                   proc(1, 0, "systemd", k_unlimited, k_unlimited)};
  in.task_now = {node_soft, node_hard};
  in.conf = slurm_conf_facts{};
  return in;
}

std::string login_record(std::uint64_t shell_soft, std::string job_id = "", std::string parent = "sshd") {
  submit_record r;
  r.tool = "srun";
  r.host = "login1";
  r.sent = std::to_string(shell_soft);
  r.job_id = std::move(job_id);
  r.chain = {{4300, "srun", memlock_limit{shell_soft, k8m}},
             {4242, "bash", memlock_limit{shell_soft, k8m}},
             {4000, parent, memlock_limit{k8m, k8m}}};
  return encode_submit_record(r);
}

TEST(MemlockChainPredict, ExceptMemlockKeepsSlurmdsLimitAndPasses) {
  auto in = node_inputs(k_unlimited, k_unlimited);
  slurm_conf_facts conf;
  conf.memlock_propagated = false;
  in.conf = conf;
  in.propagated = "65536";
  auto p = predict_task_memlock(in, k8m);
  EXPECT_FALSE(p.propagation_applies);
  EXPECT_EQ(p.start.soft, k_unlimited);
  EXPECT_EQ(p.hop, memlock_hop::none);
  EXPECT_EQ(judge_memlock(p, k8m, nullptr).result, verdict::pass);
}

TEST(MemlockChainPredict, LoginShellUlimitNamesTheShellOnTheSubmitHost) {
  auto in = node_inputs(k8m, k8m);
  in.propagated = "65536";
  in.submit_raw = login_record(k64k);
  auto p = predict_task_memlock(in, k8m);
  EXPECT_TRUE(p.propagation_applies);
  EXPECT_EQ(p.start.soft, k64k);
  EXPECT_EQ(p.hop, memlock_hop::submit_host);
  EXPECT_NE(p.cause.find("bash pid 4242 on login1 set soft 64 KiB"), std::string::npos) << p.cause;
  EXPECT_NE(p.fix.find("PropagateResourceLimitsExcept=MEMLOCK"), std::string::npos);
  auto c = judge_memlock(p, k8m, nullptr);
  EXPECT_EQ(c.result, verdict::fail);
  EXPECT_NE(c.summary.find("submit-host propagation"), std::string::npos) << c.summary;
}

TEST(MemlockChainPredict, BatchScriptUlimitNamesTheJobScript) {
  auto in = node_inputs(k8m, k8m);
  in.propagated = "65536";
  in.submit_raw = login_record(k64k, "45", "slurmstepd");
  auto p = predict_task_memlock(in, k8m);
  EXPECT_EQ(p.hop, memlock_hop::job_script);
  EXPECT_NE(p.cause.find("job 45"), std::string::npos) << p.cause;
}

TEST(MemlockChainPredict, ForgedRecordChangesOnlyTheWordingNotThePrediction) {
  auto in = node_inputs(k8m, k8m);
  in.propagated = "65536";
  in.submit_raw = login_record(k8m);  // claims 8 MiB was sent: does not match what arrived
  auto p = predict_task_memlock(in, k8m);
  EXPECT_EQ(p.start.soft, k64k);
  EXPECT_EQ(p.hop, memlock_hop::submit_unknown);
  EXPECT_FALSE(p.submit.has_value());
  EXPECT_FALSE(p.submit_problem.empty());
  in.submit_raw = "garbage|||";
  auto q = predict_task_memlock(in, k8m);
  EXPECT_EQ(q.start.soft, k64k);
  EXPECT_EQ(q.hop, memlock_hop::submit_unknown);
}

TEST(MemlockChainPredict, UPrefixAppliesEvenWhenSlurmConfExcludesMemlock) {
  auto in = node_inputs(k8m, k8m);
  slurm_conf_facts conf;
  conf.memlock_propagated = false;
  in.conf = conf;
  in.propagated = "U65536";
  auto p = predict_task_memlock(in, k8m);
  EXPECT_TRUE(p.propagation_applies);
  EXPECT_EQ(p.start.soft, k64k);
}

TEST(MemlockChainPredict, PropagatedValueIsCappedAtTheHardLimit) {
  auto in = node_inputs(4ull << 20, 4ull << 20);
  in.propagated = "18446744073709551615";
  auto p = predict_task_memlock(in, k8m);
  EXPECT_EQ(p.start.soft, 4ull << 20);
  EXPECT_EQ(p.hop, memlock_hop::slurmd);
  EXPECT_NE(p.fix.find("LimitMEMLOCK=infinity"), std::string::npos);
}

TEST(MemlockChainPredict, SlurmdUnreadableBlamesInheritanceFromSlurmd) {
  auto in = node_inputs(4ull << 20, 4ull << 20);
  in.slurmd = status::error("no pid file");
  auto p = predict_task_memlock(in, k8m);
  EXPECT_EQ(p.hop, memlock_hop::slurmd);
  EXPECT_NE(p.cause.find("could not be read"), std::string::npos) << p.cause;
}

TEST(MemlockChainPredict, StepdBelowSlurmdIsPamOrAWrapper) {
  auto in = node_inputs(4ull << 20, 4ull << 20);
  in.slurmd = proc(800, 1, "slurmd", k_unlimited, k_unlimited);
  slurm_conf_facts conf;
  conf.use_pam = true;
  in.conf = conf;
  auto p = predict_task_memlock(in, k8m);
  EXPECT_EQ(p.hop, memlock_hop::step_daemon);
  EXPECT_NE(p.cause.find("UsePAM"), std::string::npos);
}

TEST(MemlockChainPredict, TaskBelowStepdIsTheTaskSetup) {
  auto in = node_inputs(k_unlimited, k_unlimited);
  in.task_now = {k64k, k64k};
  auto p = predict_task_memlock(in, k8m);
  EXPECT_EQ(p.hop, memlock_hop::task_setup);
}

TEST(MemlockChainPredict, TableHasEveryHopOldestFirst) {
  auto in = node_inputs(k8m, k8m);
  in.propagated = "65536";
  in.submit_raw = login_record(k64k);
  auto p = predict_task_memlock(in, k8m);
  auto lines = chain_table_lines(p);
  ASSERT_GE(lines.size(), 7u);
  for (const auto& l : lines) EXPECT_EQ(l.rfind("mrcheck: memlock: ", 0), 0u) << l;
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  auto sshd = all.find("sshd pid 4000");
  auto shell = all.find("bash pid 4242");
  auto slurmd = all.find("slurmd pid 800");
  auto exec = all.find("task at exec (predicted)");
  ASSERT_NE(sshd, std::string::npos);
  EXPECT_LT(sshd, shell);
  EXPECT_LT(shell, slurmd);
  EXPECT_LT(slurmd, exec);
  EXPECT_NE(all.find("lowered soft"), std::string::npos);
  EXPECT_NE(all.find("sends SLURM_RLIMIT_MEMLOCK=65536"), std::string::npos);
}

}  // namespace
}  // namespace mrcheck
