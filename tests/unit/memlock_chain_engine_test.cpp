// The plugin's per-step logic without Slurm: which checks run, what srun records, what task_init returns.
#include <mrcheck/check_registry.h>
#include <mrcheck/memlock_step.h>
#include <mrcheck/probe_stop.h>
#include <mrcheck/step.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace mrcheck {
namespace {

constexpr std::uint64_t k8m = 8ull << 20;

config site(std::string_view extra = "") {
  std::vector<std::string_view> args;
  if (!extra.empty()) args.push_back(extra);
  auto c = parse_config_args(args, "test");
  EXPECT_TRUE(c) << c.error().message();
  return *c;
}

check_request option(std::optional<std::string> v) {
  check_request r;
  r.option_seen = true;
  r.option = std::move(v);
  return r;
}

TEST(MemlockChainEngine, OptargNullEmptyAndNullStringAreTheBareOption) {
  EXPECT_FALSE(normalize_optarg(nullptr).has_value());
  EXPECT_FALSE(normalize_optarg("").has_value());
  EXPECT_FALSE(normalize_optarg("(null)").has_value());
  EXPECT_EQ(*normalize_optarg("memlock"), "memlock");
}

TEST(MemlockChainEngine, NothingAskedIsNothingToDo) {
  auto g = effective_checks(site(), check_request{});
  ASSERT_TRUE(g);
  EXPECT_FALSE(g->any());
}

TEST(MemlockChainEngine, UserAddsToSiteDefaultsAndOffNeedsPermission) {
  auto g = effective_checks(site("default_checks=memlock"), option(std::string("nccl")));
  ASSERT_TRUE(g);
  EXPECT_TRUE(g->memlock);
  EXPECT_TRUE(g->nccl);
  auto off = effective_checks(site("default_checks=memlock"), option(std::string("off")));
  ASSERT_TRUE(off);
  EXPECT_FALSE(off->any());
  config strict = site("default_checks=memlock");
  strict.allow_user_off = false;
  auto refused = effective_checks(strict, option(std::string("off")));
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message().find("allow_user_off=no"), std::string::npos);
  EXPECT_FALSE(effective_checks(site(), option(std::string("bogus"))));
  check_request env;
  env.env_checks = "memlock";
  EXPECT_TRUE(effective_checks(site(), env)->memlock);
}

TEST(MemlockChainEngine, SbatchCarriesTheRequestAndTheRecord) {
  submit_inputs in;
  in.tool = "sbatch";
  in.host = "login1";
  in.self = ::getpid();
  in.request = option(std::string("memlock,verbose"));
  auto plan = plan_submit(site(), in, sysroot{});
  ASSERT_TRUE(plan) << plan.error().message();
  std::map<std::string, std::string> env(plan->setenv.begin(), plan->setenv.end());
  EXPECT_EQ(env["MRCHECK_CHECKS"], "memlock,verbose");
  auto rec = decode_submit_record(env["MRCHECK_SUBMIT"]);
  ASSERT_TRUE(rec) << rec.error().message();
  EXPECT_EQ(rec->tool, "sbatch");
  ASSERT_FALSE(rec->chain.empty());
  EXPECT_EQ(rec->chain.front().pid, ::getpid());
  struct rlimit r {};
  ::getrlimit(RLIMIT_MEMLOCK, &r);
  EXPECT_EQ(*rec->sent, format_propagated_limit(r.rlim_cur == RLIM_INFINITY ? k_unlimited : r.rlim_cur));
}

TEST(MemlockChainEngine, SrunWithoutChecksSetsNothing) {
  submit_inputs in;
  in.tool = "srun";
  in.self = ::getpid();
  auto plan = plan_submit(site(), in, sysroot{});
  ASSERT_TRUE(plan);
  EXPECT_TRUE(plan->setenv.empty());
}

TEST(MemlockChainEngine, TaskInitFailsPerPolicyAndPrintsOneLineOnTaskZeroOnly) {
  node_state st;
  st.active = true;
  st.checks.memlock = true;
  st.required = k8m;
  st.prediction.start = {64 << 10, k8m};
  st.prediction.hop = memlock_hop::submit_host;
  st.prediction.cause = "bash pid 4242 on login1 set soft 64 KiB";
  st.prediction.fix = "PropagateResourceLimitsExcept=MEMLOCK";
  task_facts t;
  int probes = 0;
  probe_runner probe = [&](const std::string&, const task_facts&, const memlock_limit&) {
    ++probes;
    return std::vector<check_result>{};
  };
  auto v = node_task(site(), t, st, probe);
  EXPECT_EQ(v.rc, -1);
  ASSERT_EQ(v.user_lines.size(), 1u);
  EXPECT_EQ(v.user_lines[0].rfind("mrcheck: memlock: FAIL: ", 0), 0u) << v.user_lines[0];
  EXPECT_FALSE(v.watch_post_exec);  // the task ends before exec
  EXPECT_EQ(probes, 0);
  t.local_task_id = 1;
  auto other = node_task(site(), t, st, probe);
  EXPECT_EQ(other.rc, -1);
  EXPECT_TRUE(other.user_lines.empty());
  EXPECT_FALSE(other.watch_post_exec);  // one watcher per node
  auto warn = node_task(site("on_fail=warn"), task_facts{}, st, probe);
  EXPECT_EQ(warn.rc, 0);
  ASSERT_EQ(warn.user_lines.size(), 1u);
  EXPECT_EQ(warn.user_lines[0].rfind("mrcheck: memlock: WARN: ", 0), 0u) << warn.user_lines[0];
  EXPECT_FALSE(warn.watch_post_exec);  // no TaskProlog, no enforcement, not verbose: not worth its fork
  st.task_prolog = "/etc/slurm/taskprolog.sh";
  EXPECT_TRUE(node_task(site("on_fail=warn"), task_facts{}, st, probe).watch_post_exec);
  st.task_prolog.clear();
  st.enf = enforcement{};
  EXPECT_TRUE(node_task(site("on_fail=warn"), task_facts{}, st, probe).watch_post_exec);
  st.enf.reset();
  st.imex = imex_facts{};  // a node that serves IMEX: the task's channels are read after its exec
  EXPECT_TRUE(node_task(site("on_fail=warn"), task_facts{}, st, probe).watch_post_exec);
}

TEST(MemlockChainEngine, ProbeCrashIsAVerdictPerOnError) {
  node_state st;
  st.active = true;
  st.checks.mr = true;
  st.required = k8m;
  probe_runner crash = [](const std::string& g, const task_facts&, const memlock_limit&) {
    check_result r;
    r.id = g;
    r.result = verdict::error;
    r.summary = "probe mr killed by SIGSEGV";
    return std::vector<check_result>{r};
  };
  auto warn = node_task(site(), task_facts{}, st, crash);
  EXPECT_EQ(warn.rc, 0);
  auto fail = node_task(site("on_error=fail"), task_facts{}, st, crash);
  EXPECT_EQ(fail.rc, -1);
}

// A probe the step had no time left for is judged under its group's first check (nccl_pair: "nccl" is the NCCL
// version check's id), marked as not finished, so that a cancelled step's record leaves it out.
TEST(MemlockChainEngine, AProbeNotRunIsJudgedUnderItsGroupsFirstCheck) {
  config c = site("helper=/nonexistent/mrcheck");
  task_facts t;
  auto rs = real_probe_runner_stop(c, std::chrono::milliseconds(0), nullptr)("nccl", t, memlock_limit{k8m, k8m});
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].id, "nccl_pair");
  EXPECT_EQ(rs[0].result, verdict::error);
  EXPECT_TRUE(rs[0].incomplete);
  EXPECT_NE(rs[0].summary.find("probe nccl not run"), std::string::npos) << rs[0].summary;
  EXPECT_NE(find_check(rs[0].id), nullptr);
}

TEST(MemlockChainEngine, RealProbeRunnerTurnsAMissingHelperIntoAnError) {
  config c = site("helper=/nonexistent/mrcheck");
  task_facts t;
  t.job_env = {"PATH=/usr/bin:/bin"};
  auto rs = real_probe_runner(c)("mr", t, memlock_limit{k8m, k8m});
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].result, verdict::error);
  EXPECT_EQ(rs[0].id, "mr_host");  // the group's first check: every verdict id is a registry row
  EXPECT_FALSE(rs[0].incomplete);  // it could not start: an error of the checker, not a probe cut short
  EXPECT_NE(rs[0].summary.find("probe mr"), std::string::npos) << rs[0].summary;
}

// The probe child's whole environment (probe_environment in step.h; SECURITY.md).
TEST(MemlockChainEngine, TheProbeEnvironmentKeepsOnlyWhatNcclCudaAndVerbsRead) {
  std::vector<std::string> job = {"LD_PRELOAD=/home/u/evil.so",
                                  "LD_LIBRARY_PATH=/home/u/lib",
                                  "LD_AUDIT=/x.so",
                                  "PATH=/home/u/bin:/usr/bin",
                                  "NCCL_IB_HCA=mlx5_0",
                                  "NCCL_NET_PLUGIN=aws-ofi",
                                  "NCCL_TUNER_PLUGIN=/home/u/tuner.so",
                                  "CUDA_VISIBLE_DEVICES=0,1",
                                  "RDMAV_FORK_SAFE=1",
                                  "MLX5_SHUT_UP_BF=1",
                                  "SLURM_JOB_ID=42",
                                  "SLURM_CONF=/home/u/s.conf",
                                  "HOME=/home/u",
                                  "MRCHECK_FAKE_IBV_INJECT=reg_mr=enomem",
                                  "PYTHONPATH=/x",
                                  "GCONV_PATH=/x"};
  auto env = probe_environment(job, "/etc/slurm/slurm.conf");
  auto has = [&](std::string_view e) { return std::find(env.begin(), env.end(), e) != env.end(); };
  EXPECT_TRUE(has("PATH=/usr/bin:/bin"));
  EXPECT_TRUE(has("SLURM_CONF=/etc/slurm/slurm.conf"));
  for (const char* kept : {"NCCL_IB_HCA=mlx5_0", "NCCL_NET_PLUGIN=aws-ofi", "CUDA_VISIBLE_DEVICES=0,1",
                           "RDMAV_FORK_SAFE=1", "MLX5_SHUT_UP_BF=1", "SLURM_JOB_ID=42", "HOME=/home/u"}) {
    EXPECT_TRUE(has(kept)) << kept;
  }
  // The fake libibverbs's settings cross only in a test build (CMakeLists.txt, MRCHECK_TEST_PROBE_ENV).
#ifdef MRCHECK_TEST_PROBE_ENV
  constexpr bool test_build = true;
#else
  constexpr bool test_build = false;
#endif
  EXPECT_EQ(has("MRCHECK_FAKE_IBV_INJECT=reg_mr=enomem"), test_build);
  for (const auto& e : env) {
    EXPECT_FALSE(e.starts_with("LD_")) << e;
    EXPECT_EQ(e.find("/home/u/"), std::string::npos) << e;  // no path of the user's that loads code
  }
  EXPECT_EQ(env.size(), test_build ? 10u : 9u);
}

TEST(MemlockChainEngine, ProbeBudgetStaysBelowUnkillableStepTimeout) {
  slurm_conf_facts f;
  result<slurm_conf_facts> conf = f;  // UnkillableStepTimeout 60 s (Slurm's default)
  check_groups both;
  both.mr = both.nccl = true;
  auto b = plan_probe_budget(site(), both, conf);  // 30 s + 60 s by default
  EXPECT_EQ(b.total, std::chrono::seconds(50));
  EXPECT_NE(b.warning.find("could reach UnkillableStepTimeout=60 s"), std::string::npos) << b.warning;
  check_groups mr_only;
  mr_only.mr = true;
  b = plan_probe_budget(site(), mr_only, conf);
  EXPECT_EQ(b.total, std::chrono::seconds(30));
  EXPECT_TRUE(b.warning.empty()) << b.warning;
  // The data-plane probe has probe_timeout of its own: mr and rdma, 60 s, are cut to 50 s too.
  check_groups mr_rdma = mr_only;
  mr_rdma.rdma = true;
  b = plan_probe_budget(site(), mr_rdma, conf);
  EXPECT_EQ(b.total, std::chrono::seconds(50));
  EXPECT_NE(b.warning.find("probe_timeout 30 s for mr and again for rdma"), std::string::npos) << b.warning;
  f.unkillable_step_timeout = std::chrono::seconds(120);
  b = plan_probe_budget(site(), both, result<slurm_conf_facts>(f));
  EXPECT_EQ(b.total, std::chrono::seconds(90));
  EXPECT_TRUE(b.warning.empty());
  f.unkillable_step_timeout = std::chrono::seconds(10);
  b = plan_probe_budget(site(), mr_only, result<slurm_conf_facts>(f));
  EXPECT_EQ(b.total, std::chrono::seconds(5));
  // The warning reaches slurmd's log from the first task of a step that probes.
  node_state st;
  st.active = true;
  st.checks = both;
  st.step_conf = conf;
  probe_runner none = [](const std::string& g, const task_facts&, const memlock_limit&) {
    return std::vector<check_result>{{g == "mr" ? "mr_host" : "nccl_pair", verdict::pass, "ok", "", ""}};
  };
  auto v = node_task(site(), task_facts{}, st, none);
  bool warned = false;
  for (const auto& l : v.admin_lines) warned = warned || l.find("UnkillableStepTimeout=60 s") != std::string::npos;
  EXPECT_TRUE(warned);
}

// A helper that prints what a hostile probe would print: the plugin takes only known ids, each once.
TEST(MemlockChainEngine, AProbeReportIsTakenOnlyInItsKnownShape) {
  auto dir = std::filesystem::temp_directory_path() / ("mrcheck_evilprobe_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto run = [&](const std::string& json) {
    auto helper = dir / "mrcheck";
    {
      std::ofstream f(helper);
      f << "#!/bin/sh\ncat <<'EOF'\n" << json << "\nEOF\n";
    }
    std::filesystem::permissions(helper, std::filesystem::perms::owner_all);
    config c = site("helper=" + helper.string());
    task_facts t;
    return real_probe_runner(c)("mr", t, memlock_limit{k8m, k8m});
  };
  auto rs = run(R"({"checks":[{"id":"mr_host\nINJECTED","verdict":"pass","summary":"x"}]})");
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].id, "mr_host");
  EXPECT_EQ(rs[0].result, verdict::error);
  EXPECT_NE(rs[0].summary.find("unknown check id 'mr_host\\x0aINJECTED'"), std::string::npos) << rs[0].summary;
  rs = run(R"({"checks":[{"id":"nccl_pair","verdict":"fail","summary":"x"}]})");  // not the mr probe's
  EXPECT_EQ(rs[0].result, verdict::error);
  rs = run(
      R"({"checks":[{"id":"mr_host","verdict":"pass","summary":"a"},{"id":"mr_host","verdict":"fail","summary":"b"}]})");
  EXPECT_EQ(rs[0].result, verdict::error);
  EXPECT_NE(rs[0].summary.find("twice"), std::string::npos) << rs[0].summary;
  std::string many = R"({"checks":[)";
  for (int i = 0; i < 100; ++i)
    many += std::string(i ? "," : "") + R"({"id":"mr_host","verdict":"fail","summary":"x"})";
  rs = run(many + "]}");
  EXPECT_EQ(rs[0].result, verdict::error);
  rs = run(R"({"checks":[{"id":"mr_host","verdict":"fail","summary":")" + std::string(5000, 'a') +
           R"(","hint":"h"},{"id":"dmabuf","verdict":"skip","summary":"no GPU"}]})");
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0].id, "mr_host");
  EXPECT_LE(rs[0].summary.size(), 600u);
  std::filesystem::remove_all(dir);
}

TEST(MemlockChainEngine, LinesPerStepAreCapped) {
  node_state st;
  st.active = true;
  st.checks.mr = true;
  st.checks.verbose = true;
  st.required = k8m;
  probe_runner lots = [](const std::string&, const task_facts&, const memlock_limit&) {
    std::vector<check_result> r;
    for (int i = 0; i < 500; ++i) r.push_back({"mr_host", verdict::fail, std::string(3000, 'x'), "", ""});
    return r;
  };
  auto v = node_task(site("on_fail=warn"), task_facts{}, st, lots);
  EXPECT_LE(v.user_lines.size(), 40u);
  EXPECT_LE(v.admin_lines.size(), 12u);
  for (const auto& l : v.user_lines) EXPECT_LE(l.size(), 2000u);
  for (const auto& l : v.admin_lines) EXPECT_LE(l.size(), 2000u);
  EXPECT_NE(v.admin_lines.back().find("more lines not shown"), std::string::npos);
}

TEST(MemlockChainEngine, InactiveStateDoesNothing) {
  node_state st;
  auto v = node_task(site(), task_facts{}, st, nullptr);
  EXPECT_EQ(v.rc, 0);
  EXPECT_TRUE(v.user_lines.empty());
  EXPECT_TRUE(v.admin_lines.empty());
}

TEST(MemlockChainPostExecWatch, SeesTheLimitAChildExecsWith) {
  // A child that looks like a pre-exec task (comm "slurmstepd"), lowers its soft limit and execs sleep.
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::prctl(15 /* PR_SET_NAME */, "slurmstepd", 0, 0, 0);
    char c;
    if (::read(go[0], &c, 1) != 1) ::_exit(2);
    struct rlimit r {};
    ::getrlimit(RLIMIT_MEMLOCK, &r);
    r.rlim_cur = 65536;
    ::setrlimit(RLIMIT_MEMLOCK, &r);
    ::execl("/bin/sleep", "sleep", "0.5", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(go[0]);
  ::usleep(50 * 1000);
  ASSERT_EQ(::write(go[1], "x", 1), 1);
  struct rlimit mine {};
  ::getrlimit(RLIMIT_MEMLOCK, &mine);
  memlock_limit predicted{mine.rlim_cur == RLIM_INFINITY ? k_unlimited : mine.rlim_cur,
                          mine.rlim_max == RLIM_INFINITY ? k_unlimited : mine.rlim_max};
  auto o = observe_post_exec(pid, predicted, "/etc/tp.sh", std::chrono::milliseconds(100));
  ::close(go[1]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  ASSERT_TRUE(o.at_exec.has_value());
  EXPECT_EQ(o.at_exec->soft, 65536u);
  auto c = judge_post_exec(o, 1 << 20);
  ASSERT_TRUE(c.has_value());
  EXPECT_NE(c->summary.find("TaskProlog /etc/tp.sh"), std::string::npos);
}

namespace {
// A child that looks like a pre-exec task (comm "slurmstepd"), lowers its soft limit to 64 KiB and execs
// `prog` with `arg` once the test writes to `go`; `notice` (if >= 0) is a close-on-exec write end it keeps.
pid_t lowering_task(int go_r, const char* prog, const char* arg) {
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  ::prctl(15 /* PR_SET_NAME */, "slurmstepd", 0, 0, 0);
  char c;
  if (::read(go_r, &c, 1) != 1) ::_exit(2);
  struct rlimit r {};
  ::getrlimit(RLIMIT_MEMLOCK, &r);
  r.rlim_cur = 65536;
  ::setrlimit(RLIMIT_MEMLOCK, &r);
  ::execl(prog, prog, arg, static_cast<char*>(nullptr));
  ::_exit(127);
}

memlock_limit my_memlock() {
  struct rlimit mine {};
  ::getrlimit(RLIMIT_MEMLOCK, &mine);
  return {mine.rlim_cur == RLIM_INFINITY ? k_unlimited : mine.rlim_cur,
          mine.rlim_max == RLIM_INFINITY ? k_unlimited : mine.rlim_max};
}
}  // namespace

// `srun true` on a loaded node: the task exec'd, ran and exited before the watcher looked. Unreaped, it still
// shows the limits it ran with (the watcher used to take a zombie for "gone" and say nothing).
TEST(MemlockChainPostExecWatch, SeesATaskThatExitedBeforeItLooked) {
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  pid_t pid = lowering_task(go[0], "/bin/true", nullptr);
  ASSERT_GE(pid, 0);
  ::close(go[0]);
  ASSERT_EQ(::write(go[1], "x", 1), 1);
  ::close(go[1]);
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT), 0);  // a zombie, not reaped
  auto o = observe_post_exec(pid, my_memlock(), "/etc/tp.sh", std::chrono::milliseconds(100));
  int st = 0;
  ::waitpid(pid, &st, 0);
  ASSERT_TRUE(o.at_exec.has_value());
  EXPECT_EQ(o.at_exec->soft, 65536u);
  auto c = judge_post_exec(o, 1 << 20);
  ASSERT_TRUE(c.has_value());
  EXPECT_NE(c->summary.find("TaskProlog /etc/tp.sh"), std::string::npos);
}

// One that exits before exec (a failed TaskProlog) is no finding: its name is still slurmstepd.
TEST(MemlockChainPostExecWatch, ATaskThatDiedBeforeExecIsNoFinding) {
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::prctl(15 /* PR_SET_NAME */, "slurmstepd", 0, 0, 0);
    struct rlimit r {};
    ::getrlimit(RLIMIT_MEMLOCK, &r);
    r.rlim_cur = 65536;
    ::setrlimit(RLIMIT_MEMLOCK, &r);
    ::_exit(1);
  }
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT), 0);
  auto o = observe_post_exec(pid, my_memlock(), "/etc/tp.sh", std::chrono::milliseconds(100));
  int st = 0;
  ::waitpid(pid, &st, 0);
  EXPECT_FALSE(o.at_exec.has_value());
  EXPECT_FALSE(judge_post_exec(o, 1 << 20).has_value());
}

// With the exec notice (a close-on-exec write end only the task holds), the watcher wakes at the exec and
// reads the limits the program started with.
TEST(MemlockChainPostExecWatch, TheExecNoticeWakesItAtTheExec) {
  int go[2], notice[2];
  ASSERT_EQ(::pipe(go), 0);
  ASSERT_EQ(::pipe2(notice, O_CLOEXEC), 0);
  pid_t pid = lowering_task(go[0], "/bin/sleep", "0.3");
  ASSERT_GE(pid, 0);
  ::close(go[0]);
  ::close(notice[1]);  // the child's copy is the only write end left
  ASSERT_EQ(::write(go[1], "x", 1), 1);
  ::close(go[1]);
  auto o = observe_post_exec(pid, my_memlock(), "", std::chrono::milliseconds(50), notice[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  ASSERT_TRUE(o.at_exec.has_value());
  EXPECT_EQ(o.at_exec->soft, 65536u);
}

// The step-constant facts are read once per step (slurmstepd, before the tasks fork) and every task uses them:
// a task reading a tree without slurm.conf still sees the prefetched TaskProlog and slurmd.
TEST(MemlockChainEngine, StepFactsPrefetchedOnceServeEveryTask) {
  auto dir = std::filesystem::temp_directory_path() / ("mrcheck_prefetch_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "etc/slurm");
  std::filesystem::create_directories(dir / "run");
  std::filesystem::create_directories(dir / "proc/4242");
  std::filesystem::create_directories(dir / "empty");
  std::ofstream(dir / "etc/slurm/slurm.conf") << "TaskProlog=/x/tp.sh\nSlurmdPidFile=/run/slurmd-%n.pid\n";
  std::ofstream(dir / "run/slurmd-node7.pid") << "4242\n";
  std::ofstream(dir / "proc/4242/stat") << "4242 (slurmd) S 1 4242 4242 0 -1 4194560 0 0 0 0\n";
  std::ofstream(dir / "proc/4242/limits")
      << "Limit                     Soft Limit           Hard Limit           Units     \n"
         "Max locked memory         4194304              4194304              bytes     \n";
  std::ofstream(dir / "proc/4242/status") << "Name:\tslurmd\nUid:\t0\t0\t0\t0\n";
  auto tree = sysroot::open(dir);
  auto empty = sysroot::open(dir / "empty");
  ASSERT_TRUE(tree && empty);

  node_state st;
  prefetch_step_facts(*tree, "/etc/slurm/slurm.conf", "node7", "host7", st);
  ASSERT_TRUE(st.step_read);
  ASSERT_TRUE(st.step_conf) << st.step_conf.error().message();
  ASSERT_TRUE(st.step_slurmd) << st.step_slurmd.error().message();
  EXPECT_EQ(st.step_slurmd->pid, 4242);
  ASSERT_TRUE(st.step_slurmd->memlock);
  EXPECT_EQ(st.step_slurmd->memlock->hard, 4u << 20);

  task_facts t;
  t.node = "node7";
  t.host = "host7";
  t.task_pid = ::getpid();
  t.slurm_conf_path = "/etc/slurm/slurm.conf";
  t.request.env_checks = "memlock";
  struct fixed : rlimit_ops {
    result<memlock_limit> get() override { return memlock_limit{k8m, k8m}; }
    status set(const memlock_limit&) override { return status::ok(); }
  } ops;
  node_state task = st;  // what the forked task child inherits
  node_privileged(site("memlock_min=16M"), t, *empty, ops, task);
  EXPECT_EQ(task.task_prolog, "/x/tp.sh");
  EXPECT_EQ(task.prediction.hop, memlock_hop::slurmd) << task.prediction.cause;  // slurmd's 4 MiB < 16 MiB
  // Without the prefetch the task reads for itself (here: nothing there).
  node_state cold;
  node_privileged(site("memlock_min=8M"), t, *empty, ops, cold);
  EXPECT_TRUE(cold.step_read);
  EXPECT_FALSE(cold.step_conf);
  EXPECT_TRUE(cold.task_prolog.empty());
  std::filesystem::remove_all(dir);
}

// enforce=yes raises the limit for a step that asked only for `mr` (or `nccl`): its probes and its task run under
// the enforced limit, and the probe is handed that limit.
TEST(MemlockChainEngine, EnforceHoldsForEveryCheckedStepNotOnlyMemlock) {
  auto empty_dir = std::filesystem::temp_directory_path() / ("mrcheck_enf_mr_" + std::to_string(::getpid()));
  std::filesystem::create_directories(empty_dir);
  auto empty = sysroot::open(empty_dir);
  ASSERT_TRUE(empty);
  struct recording : rlimit_ops {
    memlock_limit now{k8m, k8m};
    int sets = 0;
    result<memlock_limit> get() override { return now; }
    status set(const memlock_limit& l) override {
      ++sets;
      now = l;
      return status::ok();
    }
  };
  config enforcing = site("memlock_min=128M");
  enforcing.enforce = true;
  for (const char* groups : {"mr", "nccl"}) {
    recording ops;
    task_facts t;
    t.task_pid = ::getpid();
    t.request = option(std::string(groups));
    t.rlimit_memlock = std::to_string(k8m);
    node_state st;
    auto env = node_privileged(enforcing, t, *empty, ops, st);
    ASSERT_TRUE(st.enf.has_value()) << groups;
    EXPECT_EQ(ops.sets, 1) << groups;
    EXPECT_EQ(st.enf->start.soft, 128ull << 20) << groups;
    ASSERT_TRUE(env.has_value()) << groups;  // the propagated 8 MiB would lower it again
    // The probe is handed the enforced limit.
    std::uint64_t probed = 0;
    probe_runner probe = [&](const std::string&, const task_facts&, const memlock_limit& l) {
      probed = l.soft;
      check_result r;
      r.id = std::string(groups) == "mr" ? "mr_host" : "nccl_pair";
      r.result = verdict::pass;
      return std::vector<check_result>{r};
    };
    node_task(enforcing, t, st, probe);
    EXPECT_EQ(probed, 128ull << 20) << groups;
  }
  // enforce=no: nothing is raised.
  recording ops;
  task_facts t;
  t.task_pid = ::getpid();
  t.request = option(std::string("mr"));
  node_state st;
  node_privileged(site("memlock_min=128M"), t, *empty, ops, st);
  EXPECT_FALSE(st.enf.has_value());
  EXPECT_EQ(ops.sets, 0);
  std::filesystem::remove_all(empty_dir);
}

// The watcher holds the task's stderr: it must let go as soon as the task exits, not at the end of its window.
TEST(MemlockChainPostExecWatch, EndsWhenTheTaskExitsNotAtTheEndOfTheWindow) {
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::prctl(15 /* PR_SET_NAME */, "slurmstepd", 0, 0, 0);
    ::usleep(20 * 1000);
    ::execl("/bin/sleep", "sleep", "0.1", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  auto t0 = std::chrono::steady_clock::now();
  auto o = observe_post_exec(pid, memlock_limit{k8m, k8m}, "", std::chrono::milliseconds(5000));
  auto took = std::chrono::steady_clock::now() - t0;
  int st = 0;
  ::waitpid(pid, &st, 0);
  EXPECT_TRUE(o.at_exec.has_value());
  EXPECT_LT(took, std::chrono::milliseconds(2000));
}

}  // namespace
}  // namespace mrcheck
