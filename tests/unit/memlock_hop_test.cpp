// One memlock-chain model: one picking rule (the nearest drop still in force, memlock_hop.h)
// and one table per hop. Every path that names a hop - the memlock check, the diagnosis evidence, the probe's
// report, the plugin's prediction and verdict, the admins' record - blames the same process for the same chain.
#include <mrcheck/admin_record.h>
#include <mrcheck/checks.h>
#include <mrcheck/diagnosis.h>
#include <mrcheck/memlock_hop.h>
#include <mrcheck/memlock_step.h>
#include <mrcheck/mr_probe.h>
#include <mrcheck/probe_checks.h>
#include <mrcheck/step.h>

#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>

namespace mrcheck {
namespace {

constexpr std::uint64_t k64k = 64ull << 10;
constexpr std::uint64_t k1m = 1ull << 20;
constexpr std::uint64_t k4m = 4ull << 20;
constexpr std::uint64_t k8m = 8ull << 20;

process_fact proc(pid_t pid, std::string comm, std::uint64_t soft, std::uint64_t hard) {
  process_fact p;
  p.pid = pid;
  p.comm = std::move(comm);
  p.memlock = memlock_limit{soft, hard};
  return p;
}

// Nearest first. Three drops: the task lowered only its HARD limit (soft unchanged, so not the soft limit's
// hop), the wrapper set today's soft 64 KiB, and bash had lowered it to 1 MiB before (a raise in between would
// hide it; here it is simply older).
std::vector<process_fact> three_drops() {
  std::vector<process_fact> c = {proc(5000, "task", k64k, k4m),  proc(4900, "wrapper", k64k, k8m),
                                 proc(4800, "python", k1m, k8m), proc(4700, "bash", k1m, k8m),
                                 proc(4000, "sshd", k8m, k8m),   proc(1, "init", k_unlimited, k_unlimited)};
  mark_lowered(c);
  return c;
}

TEST(MemlockHopPick, NearestDropStillInForce) {
  using v = std::vector<std::optional<std::uint64_t>>;
  auto pick = [](v s) { return pick_lowering_hop(s); };
  EXPECT_EQ(pick({k64k, k64k, k1m, k8m}), 1u);               // the second process set it
  EXPECT_EQ(pick({k64k, k8m}), 0u);                          // the process itself (set between fork and exec)
  EXPECT_EQ(pick({k64k, k64k, k64k}), std::nullopt);         // inherited from before the chain
  EXPECT_EQ(pick({k64k, std::nullopt, k8m}), std::nullopt);  // cannot tell past an unreadable limit
  EXPECT_EQ(pick({k64k, k64k, k64k / 2}), std::nullopt);     // its parent had less: raised, no drop in force
  EXPECT_EQ(pick({}), std::nullopt);
  EXPECT_EQ(pick({std::nullopt, k8m}), std::nullopt);
  EXPECT_EQ(pick_lowering_hop(three_drops()), 1u);
}

TEST(MemlockHopTable, EveryHopHasOneRow) {
  std::set<std::string_view> ids;
  for (auto h : {memlock_hop::none, memlock_hop::submit_host, memlock_hop::job_script, memlock_hop::submit_unknown,
                 memlock_hop::slurmd, memlock_hop::step_daemon, memlock_hop::task_setup, memlock_hop::enforced}) {
    const auto& i = hop_info(h);
    EXPECT_EQ(i.hop, h);
    EXPECT_EQ(to_string(h), i.id);
    EXPECT_TRUE(ids.insert(i.id).second) << i.id;
    EXPECT_FALSE(i.label.empty()) << i.id;
    bool lowering = h != memlock_hop::none && h != memlock_hop::enforced;
    EXPECT_EQ(i.token.empty(), !lowering) << i.id;
    EXPECT_EQ(i.fix.empty(), !lowering) << i.id;
    EXPECT_EQ(hop_fix(h).find("{host}"), std::string::npos) << i.id;
  }
  EXPECT_NE(hop_fix(memlock_hop::submit_host, "login1").find("raise memlock on login1"), std::string::npos);
  EXPECT_NE(hop_fix(memlock_hop::submit_host).find("raise memlock on the submit host"), std::string::npos);
}

TEST(MemlockHopPaths, CheckAndDiagnosisBlameTheSameProcess) {
  node_facts f;
  f.chain = three_drops();
  config c;
  c.memlock_min = k8m;
  auto r = check_memlock(f, c);
  ASSERT_EQ(r.result, verdict::fail);
  EXPECT_NE(r.summary.find("lowered at wrapper (4900)"), std::string::npos) << r.summary;
  EXPECT_NE(r.detail.find("also lowered at bash (4700)"), std::string::npos) << r.detail;
  EXPECT_NE(r.detail.find("also lowered at task (5000)"), std::string::npos) << r.detail;

  node_evidence e = evidence_from_facts(f);
  EXPECT_EQ(e.memlock_hop.rfind("pid 4900 (wrapper), soft 64 KiB", 0), 0u) << e.memlock_hop;
  EXPECT_EQ(e.memlock_hop, describe_lowering_hop(f.chain));
}

// The plugin's prediction over the submit side's record of the same chain (srun in place of the task), its
// verdict, and the AdminComment token all name the wrapper and the hop's one label and token.
TEST(MemlockHopPaths, PredictionVerdictAndAdminRecordBlameTheSameHop) {
  submit_record rec;
  rec.tool = "srun";
  rec.host = "login1";
  rec.sent = std::to_string(k64k);
  for (const auto& p : three_drops()) rec.chain.push_back({p.pid, p.comm, *p.memlock});
  memlock_inputs in;
  in.node = "node1";
  in.slurmd = proc(800, "slurmd", k8m, k8m);
  in.task_chain = {proc(901, "slurmstepd", k8m, k8m), proc(900, "slurmstepd", k8m, k8m)};
  in.task_now = {k8m, k8m};
  in.conf = slurm_conf_facts{};
  in.propagated = std::to_string(k64k);
  in.submit_raw = encode_submit_record(rec);
  auto p = predict_task_memlock(in, k8m);
  ASSERT_EQ(p.hop, memlock_hop::submit_host);
  EXPECT_NE(p.cause.find("wrapper pid 4900 on login1 set soft 64 KiB"), std::string::npos) << p.cause;
  EXPECT_EQ(p.fix, hop_fix(memlock_hop::submit_host, "login1"));

  auto v = judge_memlock(p, k8m, nullptr);
  ASSERT_EQ(v.result, verdict::fail);
  EXPECT_NE(v.summary.find(std::string("lowered at ") + std::string(hop_info(p.hop).label) + ": wrapper pid 4900"),
            std::string::npos)
      << v.summary;

  node_state st;
  st.active = true;
  st.prediction = p;
  report rep;
  rep.checks.push_back(v);
  node_record nr = make_node_record(0, "node1", st, rep);
  ASSERT_EQ(nr.checks.size(), 1u);
  EXPECT_EQ(nr.checks[0].token, std::string("memlock=64KiB (") + std::string(hop_info(p.hop).token) + ")");
}

// The probe's report reads the real chain of the probe process: a limit lowered between fork and the probe
// (here: by the test itself, as a launcher would) is blamed on the probe itself, by the same rule.
TEST(MemlockHopPaths, ProbeReportNamesTheProbeItselfWhenItsLauncherLoweredIt) {
  struct rlimit parent {};
  ASSERT_EQ(getrlimit(RLIMIT_MEMLOCK, &parent), 0);
  if (parent.rlim_cur != RLIM_INFINITY && parent.rlim_cur <= 8192) GTEST_SKIP() << "memlock already tiny";
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    struct rlimit low = parent;
    low.rlim_cur = 4096;
    if (setrlimit(RLIMIT_MEMLOCK, &low) != 0) _exit(2);
    mr_probe_outcome o;
    o.memlock_soft = 4096;
    o.memlock_hard = parent.rlim_max == RLIM_INFINITY ? k_unlimited : parent.rlim_max;
    node_evidence e = probe_evidence(sysroot{}, o, /*deep=*/true);
    bool ok = e.memlock_hop.rfind("the probe itself (pid " + std::to_string(getpid()) + " (", 0) == 0;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace mrcheck
