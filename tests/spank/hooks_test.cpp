// Every hook of spank_mrcheck.so, called as Slurm calls it, over the real core and over a core that throws:
// nothing unwinds into Slurm, and the return codes follow the rules (never an error from remote init /
// init_post_opt; task hooks follow on_error).
#include "engine.h"
#include "fake_spank.h"
#include "job_info.h"

#include <mrcheck/memlock_step.h>
#include <mrcheck/step_gate.h>

#include <gtest/gtest.h>

#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>

#include <stdexcept>
#include <string>

namespace {

using mrcheck::spank_glue::current_engine;
using mrcheck::spank_glue::engine;

// Slurm keeps a plugin's arguments for its lifetime and the loader keeps pointing at them: so does this.
int call_init(std::vector<std::string> args) {
  static std::vector<std::string> kept;
  static std::vector<char*> av;
  kept = std::move(args);
  av.clear();
  for (auto& a : kept) av.push_back(a.data());
  return slurm_spank_init(nullptr, static_cast<int>(av.size()), av.data());
}

struct restore_engine {
  engine saved = current_engine();
  ~restore_engine() { current_engine() = saved; }
};

[[noreturn]] void boom() { throw std::runtime_error("core exploded"); }

void make_core_throw() {
  auto& e = current_engine();
  e.load_config = [](std::span<const std::string_view>, std::string_view) -> mrcheck::result<mrcheck::config> {
    boom();
  };
  e.submit = [](const mrcheck::config&, const mrcheck::submit_inputs&,
                const mrcheck::sysroot&) -> mrcheck::result<mrcheck::submit_plan> { boom(); };
  e.privileged = [](const mrcheck::config&, const mrcheck::task_facts&, const mrcheck::sysroot&, mrcheck::rlimit_ops&,
                    mrcheck::node_state&) -> std::optional<std::string> { boom(); };
  e.task = [](const mrcheck::config&, const mrcheck::task_facts&, mrcheck::node_state&,
              const mrcheck::probe_runner&) -> mrcheck::task_verdict { boom(); };
}

TEST(SpankHooks, OptionIsRegisteredAndABadListRefusedLocally) {
  restore_engine r;
  fake_spank::reset(S_CTX_LOCAL);
  ASSERT_EQ(call_init({}), 0);
  auto* opt = fake_spank::the_host().registered;
  ASSERT_NE(opt, nullptr);
  EXPECT_STREQ(opt->name, "mr-check");
  EXPECT_EQ(opt->has_arg, 2);
  EXPECT_EQ(opt->cb(opt->val, "bogus", 0), -1);
  ASSERT_FALSE(fake_spank::the_host().errors.empty());
  EXPECT_NE(fake_spank::the_host().errors.back().find("mrcheck: --mr-check: unknown check 'bogus'"), std::string::npos);
  EXPECT_EQ(opt->cb(opt->val, nullptr, 0), 0);
  EXPECT_EQ(opt->cb(opt->val, "", 0), 0);
  EXPECT_EQ(opt->cb(opt->val, "(null)", 0), 0);
  EXPECT_EQ(opt->cb(opt->val, "memlock,verbose", 0), 0);
  // Remote: a forged value never fails slurmstepd here.
  EXPECT_EQ(opt->cb(opt->val, "bogus", 1), 0);
}

TEST(SpankHooks, BadConfigFailsSlurmdAndACheckingSrunButNeverSlurmstepd) {
  restore_engine r;
  // slurmd reads the configuration at its start, always: a bad one fails there, in its log.
  fake_spank::reset(S_CTX_SLURMD);
  EXPECT_EQ(call_init({"memlock_min=lots"}), -1);
  ASSERT_FALSE(fake_spank::the_host().errors.empty());
  EXPECT_NE(fake_spank::the_host().errors.front().find("argument 1"), std::string::npos)
      << fake_spank::the_host().errors.front();
  for (auto ctx : {S_CTX_LOCAL, S_CTX_ALLOCATOR}) {
    // srun/sbatch that check nothing never read it...
    fake_spank::reset(ctx);
    EXPECT_EQ(call_init({"memlock_min=lots"}), 0) << ctx;
    EXPECT_EQ(slurm_spank_init_post_opt(nullptr, 0, nullptr), 0) << ctx;
    EXPECT_TRUE(fake_spank::the_host().errors.empty()) << ctx;
    // ...one asked to check says why it cannot, and init_post_opt fails as init would have (Slurm stops a
    // `required` plugin's srun there).
    fake_spank::reset(ctx);
    ASSERT_EQ(call_init({"memlock_min=lots"}), 0) << ctx;
    auto* opt = fake_spank::the_host().registered;
    ASSERT_NE(opt, nullptr);
    EXPECT_EQ(opt->cb(opt->val, "memlock", 0), 0) << ctx;
    ASSERT_FALSE(fake_spank::the_host().errors.empty()) << ctx;
    EXPECT_NE(fake_spank::the_host().errors.front().find("argument 1"), std::string::npos);
    EXPECT_EQ(slurm_spank_init_post_opt(nullptr, 0, nullptr), -1) << ctx;
  }
  fake_spank::reset(S_CTX_REMOTE);
  EXPECT_EQ(call_init({"memlock_min=lots", "default_checks=memlock"}), 0);
  EXPECT_EQ(slurm_spank_init_post_opt(nullptr, 0, nullptr), 0);
}

// The loader reads the configuration only through the core, and loads the core only for a step that may
// check something: the option, MRCHECK_CHECKS from an enclosing sbatch, or a default_checks line.
struct load_counter {
  static inline int loads = 0;
  load_counter() {
    loads = 0;
    current_engine().load_config = [](std::span<const std::string_view> a,
                                      std::string_view o) -> mrcheck::result<mrcheck::config> {
      ++loads;
      return mrcheck::parse_config_args(a, o);
    };
  }
};

std::string temp_config(const std::string& text) {
  char path[] = "/tmp/mrcheck-hooks-XXXXXX";
  int fd = ::mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fd);
  return path;
}

// Runs one step's hooks in ctx with these plugstack arguments; returns how often the core read its config.
int core_loads(spank_context_t ctx, std::vector<std::string> args, const char* option = nullptr) {
  fake_spank::reset(ctx);
  current_engine() = engine{};
  load_counter c;
  fake_spank::the_host().job_env["SLURMD_NODENAME"] = "node1";
  EXPECT_EQ(call_init(std::move(args)), 0);
  if (option != nullptr) {
    auto* opt = fake_spank::the_host().registered;
    EXPECT_NE(opt, nullptr);
    if (opt != nullptr) {
      EXPECT_EQ(opt->cb(opt->val, option, ctx == S_CTX_REMOTE), 0);
    }
  }
  int rc = slurm_spank_init_post_opt(nullptr, 0, nullptr);  // srun: -1 when the core cannot read the config
  if (ctx == S_CTX_REMOTE) {
    EXPECT_EQ(rc, 0);
    EXPECT_EQ(slurm_spank_user_init(nullptr, 0, nullptr), 0);
    EXPECT_EQ(slurm_spank_task_init_privileged(nullptr, 0, nullptr), 0);
  }
  EXPECT_EQ(slurm_spank_exit(nullptr, 0, nullptr), 0);
  return load_counter::loads;
}

TEST(SpankHooks, AnIdleStepNeverLoadsTheChecks) {
  restore_engine r;
  std::string without = temp_config("# site policy\nmemlock_min=64K\n  enforce = no\nx_default_checks=memlock\n");
  for (auto ctx : {S_CTX_LOCAL, S_CTX_ALLOCATOR, S_CTX_REMOTE}) {
    ::unsetenv("MRCHECK_CHECKS");
    EXPECT_EQ(core_loads(ctx, {"memlock_min=64K"}), 0) << ctx;
    EXPECT_EQ(core_loads(ctx, {"config=" + without}), 0) << ctx;
  }
  ::unlink(without.c_str());
}

TEST(SpankHooks, TheOptionMrcheckChecksOrADefaultChecksLineLoadTheChecks) {
  restore_engine r;
  std::string with = temp_config("memlock_min=64K\n\t default_checks = memlock\n");
  std::string padded = temp_config(std::string(9000, '#') + "\ndefault_checks=memlock\n");  // across read()s
  for (auto ctx : {S_CTX_LOCAL, S_CTX_ALLOCATOR, S_CTX_REMOTE}) {
    ::unsetenv("MRCHECK_CHECKS");
    EXPECT_EQ(core_loads(ctx, {"memlock_min=64K"}, "memlock"), 1) << ctx;
    EXPECT_EQ(core_loads(ctx, {"default_checks=memlock"}), 1) << ctx;
    EXPECT_EQ(core_loads(ctx, {"config=" + with}), 1) << ctx;
    EXPECT_EQ(core_loads(ctx, {"config=" + padded}), 1) << ctx;
    // A file the loader cannot read: the core reads it and says why.
    EXPECT_EQ(core_loads(ctx, {"config=/nonexistent/mrcheck.conf"}), 1) << ctx;
    if (ctx != S_CTX_REMOTE) {  // slurmstepd reads the job's environment: its own test below
      ::setenv("MRCHECK_CHECKS", "memlock", 1);
      EXPECT_EQ(core_loads(ctx, {"memlock_min=64K"}), 1) << ctx;
      ::unsetenv("MRCHECK_CHECKS");
    }
  }
  ::unlink(with.c_str());
  ::unlink(padded.c_str());
}

// The option is held by the loader only (spank/core_abi.h): the core, loaded in slurmstepd after the option
// callbacks ran, reads the loader's value instead of a replayed copy.
TEST(SpankHooks, SlurmstepdChecksReadTheOptionTheLoaderHolds) {
  restore_engine r;
  fake_spank::reset(S_CTX_REMOTE);
  current_engine() = engine{};
  static int privileged = 0;
  privileged = 0;
  fake_spank::the_host().job_env["SLURMD_NODENAME"] = "node1";
  ASSERT_EQ(call_init({"memlock_min=64K"}), 0);
  current_engine().privileged = [](const mrcheck::config&, const mrcheck::task_facts& t, const mrcheck::sysroot&,
                                   mrcheck::rlimit_ops&, mrcheck::node_state&) -> std::optional<std::string> {
    privileged += t.request.option_seen && t.request.option == std::optional<std::string>("memlock") ? 1 : 100;
    return std::nullopt;
  };
  auto* opt = fake_spank::the_host().registered;
  ASSERT_NE(opt, nullptr);
  EXPECT_EQ(opt->cb(opt->val, "memlock", 1), 0);  // slurmstepd: between init and init_post_opt
  EXPECT_EQ(slurm_spank_init_post_opt(nullptr, 0, nullptr), 0);
  EXPECT_EQ(slurm_spank_task_init_privileged(nullptr, 0, nullptr), 0);
  EXPECT_EQ(privileged, 1);
}

// The SPANK adapter (spank/job_info.cpp) reads a hook's items once into plain data, with one buffer size for
// every job environment value: the admins' node list and the core's MRCHECK_SUBMIT alike.
TEST(SpankHooks, TheAdapterReadsTheItemsIntoPlainData) {
  fake_spank::reset(S_CTX_REMOTE);
  auto& h = fake_spank::the_host();
  h.job_id = 77;
  h.step_id = 0xfffffffb;  // SLURM_BATCH_SCRIPT
  h.task_id = 3;
  // B6 (SECURITY.md): the node's name is slurmstepd's own SLURMD_NODENAME, never the job's copy.
  h.job_env["SLURMD_NODENAME"] = "the-users-choice";
  ::setenv("SLURMD_NODENAME", "node7", 1);
  h.job_env["SLURM_JOB_NODELIST"] = "node[1-7]";
  h.job_env["MRCHECK_SUBMIT"] = std::string(5000, 'x');  // more than the old job_info buffer (4096)
  h.job_env["MRCHECK_CHECKS"] = "memlock";
  auto it = mrcheck::spank_glue::read_spank_items(nullptr);
  EXPECT_EQ(it.job_id, 77u);
  EXPECT_TRUE(it.batch_step);
  EXPECT_FALSE(it.extern_step);
  EXPECT_EQ(it.local_task_id, std::optional<int>(3));
  EXPECT_EQ(it.submit_raw, std::optional<std::string>(std::string(5000, 'x')));
  auto t = mrcheck::spank_glue::make_task_facts(it, nullptr, false);
  EXPECT_EQ(t.node, "node7");
  ::unsetenv("SLURMD_NODENAME");
  EXPECT_EQ(t.job_id, 77u);
  EXPECT_EQ(t.local_task_id, 3);
  EXPECT_EQ(t.request.env_checks, std::optional<std::string>("memlock"));
}

// The one idle gate (include/mrcheck/step_gate.h), asked by the loader, the core and the step engine.
static_assert(!mrcheck_step_may_check(0, 0, 0));
static_assert(mrcheck_step_may_check(1, 0, 0) && mrcheck_step_may_check(0, 1, 0) && mrcheck_step_may_check(0, 0, 1));
static_assert(!mrcheck_user_asked(0, 0) && mrcheck_user_asked(1, 0) && mrcheck_user_asked(0, 1));

TEST(SpankHooks, SlurmstepdWithMrcheckChecksInTheJobLoadsTheChecks) {
  restore_engine r;
  fake_spank::reset(S_CTX_REMOTE);
  current_engine() = engine{};
  load_counter c;
  fake_spank::the_host().job_env["MRCHECK_CHECKS"] = "memlock";
  ASSERT_EQ(call_init({"memlock_min=64K"}), 0);
  EXPECT_EQ(slurm_spank_init_post_opt(nullptr, 0, nullptr), 0);
  EXPECT_EQ(load_counter::loads, 1);
}

TEST(SpankHooks, EveryHookSurvivesAThrowingCoreInEveryContext) {
  restore_engine r;
  bool logged = false;
  for (auto ctx : {S_CTX_LOCAL, S_CTX_ALLOCATOR, S_CTX_REMOTE, S_CTX_SLURMD, S_CTX_JOB_SCRIPT}) {
    fake_spank::reset(ctx);
    current_engine() = engine{};
    ASSERT_EQ(call_init({"default_checks=memlock", "memlock_min=64K"}), 0);
    make_core_throw();
    EXPECT_EQ(call_init({"default_checks=memlock"}), 0) << "init, context " << ctx;
    EXPECT_EQ(slurm_spank_init_post_opt(nullptr, 0, nullptr), 0) << "init_post_opt, context " << ctx;
    EXPECT_EQ(slurm_spank_task_init_privileged(nullptr, 0, nullptr), 0) << "task_init_privileged " << ctx;
    EXPECT_EQ(slurm_spank_task_init(nullptr, 0, nullptr), 0) << "task_init " << ctx;
    for (const auto& e : fake_spank::the_host().errors) {
      logged = logged || e.find("mrcheck: init: internal error: core exploded") != std::string::npos;
    }
  }
  EXPECT_TRUE(logged);
}

TEST(SpankHooks, OnErrorFailMakesTaskHooksFailButNotInit) {
  restore_engine r;
  static int ended = 0;
  ended = 0;
  auto no_exit = [] { current_engine().end_task = [](int) { ++ended; }; };
  fake_spank::reset(S_CTX_REMOTE);
  current_engine() = engine{};
  no_exit();
  ASSERT_EQ(call_init({"default_checks=memlock", "memlock_min=64K", "on_error=fail"}), 0);
  EXPECT_EQ(slurm_spank_init_post_opt(nullptr, 0, nullptr), 0);  // the loader starts the checks here
  make_core_throw();
  EXPECT_EQ(slurm_spank_task_init_privileged(nullptr, 0, nullptr), -1);
  EXPECT_EQ(ended, 1);  // the task child ends itself, as slurmstepd would for a required plugin
  // task_init reaches the core only on an active step: activate it with the real core, then throw.
  current_engine() = engine{};
  no_exit();
  fake_spank::the_host().job_env["SLURMD_NODENAME"] = "node1";
  ASSERT_EQ(slurm_spank_task_init_privileged(nullptr, 0, nullptr), 0);
  make_core_throw();
  EXPECT_EQ(slurm_spank_task_init(nullptr, 0, nullptr), -1);
  EXPECT_EQ(ended, 2);
}

TEST(SpankHooks, IdleWhenNothingIsAskedForTouchesNothing) {
  restore_engine r;
  fake_spank::reset(S_CTX_REMOTE);
  current_engine() = engine{};
  ASSERT_EQ(call_init({"memlock_min=64K", "enforce=yes"}), 0);
  int calls = 0;
  static int* counter = nullptr;
  counter = &calls;
  current_engine().privileged = [](const mrcheck::config&, const mrcheck::task_facts&, const mrcheck::sysroot&,
                                   mrcheck::rlimit_ops&, mrcheck::node_state&) -> std::optional<std::string> {
    ++*counter;
    return std::nullopt;
  };
  fake_spank::the_host().job_env["SLURM_RLIMIT_MEMLOCK"] = "65536";
  EXPECT_EQ(slurm_spank_task_init_privileged(nullptr, 0, nullptr), 0);
  EXPECT_EQ(slurm_spank_task_init(nullptr, 0, nullptr), 0);
  EXPECT_EQ(calls, 0);
  EXPECT_TRUE(fake_spank::the_host().setenv_calls.empty());
  EXPECT_TRUE(fake_spank::the_host().user_lines.empty());
}

TEST(SpankHooks, EnforceRewritesTheJobsSlurmRlimitMemlock) {
  restore_engine r;
  fake_spank::reset(S_CTX_REMOTE);
  current_engine() = engine{};
  // A minimum this process already has: enforcement changes no rlimit, but the propagated 64 KiB must go.
  ASSERT_EQ(call_init({"default_checks=memlock", "memlock_min=1M", "enforce=yes"}), 0);
  struct rlimit rl {};
  ::getrlimit(RLIMIT_MEMLOCK, &rl);
  if (rl.rlim_cur < (1u << 20)) GTEST_SKIP() << "this process has less than 1 MiB of memlock";
  fake_spank::the_host().job_env["SLURM_RLIMIT_MEMLOCK"] = "65536";
  fake_spank::the_host().job_env["SLURMD_NODENAME"] = "node1";
  ASSERT_EQ(slurm_spank_init_post_opt(nullptr, 0, nullptr), 0);
  ASSERT_EQ(slurm_spank_task_init_privileged(nullptr, 0, nullptr), 0);
  ASSERT_EQ(fake_spank::the_host().setenv_calls.size(), 1u);
  EXPECT_EQ(fake_spank::the_host().setenv_calls[0].rfind("SLURM_RLIMIT_MEMLOCK=", 0), 0u);
  EXPECT_NE(fake_spank::the_host().job_env["SLURM_RLIMIT_MEMLOCK"], "65536");
}

// One line at load with mrcheck's version and the Slurm it was built against, in the daemons' log
// (info in slurmd, verbose elsewhere - never on the user's terminal at the default level).
TEST(SpankHooks, LoadLineNamesBothVersions) {
  restore_engine r;
  for (auto ctx : {S_CTX_SLURMD, S_CTX_LOCAL, S_CTX_REMOTE}) {
    fake_spank::reset(ctx);
    ASSERT_EQ(call_init({}), 0) << ctx;
    const auto& h = fake_spank::the_host();
    const auto& lines = ctx == S_CTX_SLURMD ? h.info_lines : h.verbose_lines;
    ASSERT_EQ(lines.size(), 1u) << ctx;
    EXPECT_EQ(lines[0].rfind("mrcheck: spank_mrcheck.so ", 0), 0u) << lines[0];
    EXPECT_NE(lines[0].find(" built against Slurm 22.05."), std::string::npos) << lines[0];
    EXPECT_NE(lines[0].find("loaded into Slurm 22.05.8"), std::string::npos) << lines[0];
    EXPECT_TRUE(h.errors.empty());
    if (ctx != S_CTX_SLURMD) {
      EXPECT_TRUE(h.info_lines.empty()) << "slurm_info outside slurmd reaches the user's terminal (srun)";
    }
  }
}

// Loaded into another major.minor: srun/sbatch/slurmd fail with a message that says so; slurmstepd logs it,
// returns success (never an error from remote init) and every later hook does nothing.
TEST(SpankHooks, AnotherSlurmMajorMinorFailsOutsideSlurmstepdAndIsInertInside) {
  restore_engine r;
  for (auto ctx : {S_CTX_LOCAL, S_CTX_ALLOCATOR, S_CTX_SLURMD}) {
    fake_spank::reset(ctx);
    fake_spank::the_host().version_major = "23";
    fake_spank::the_host().version_minor = "02";
    fake_spank::the_host().version_micro = "1";
    EXPECT_EQ(call_init({"default_checks=memlock"}), -1) << ctx;
    ASSERT_EQ(fake_spank::the_host().errors.size(), 1u) << ctx;
    EXPECT_NE(fake_spank::the_host().errors[0].find("was built against Slurm 22.05 and cannot run in Slurm 23.02.1"),
              std::string::npos)
        << fake_spank::the_host().errors[0];
  }
  fake_spank::reset(S_CTX_REMOTE);
  fake_spank::the_host().version_minor = "11";
  ASSERT_EQ(call_init({"default_checks=memlock", "memlock_min=64K", "enforce=yes"}), 0);
  ASSERT_EQ(fake_spank::the_host().errors.size(), 1u);
  EXPECT_NE(fake_spank::the_host().errors[0].find("cannot run in Slurm 22.11.8"), std::string::npos);
  ASSERT_NE(fake_spank::the_host().registered, nullptr);  // a step launched with --mr-check still starts
  int calls = 0;
  static int* counter = nullptr;
  counter = &calls;
  current_engine().privileged = [](const mrcheck::config&, const mrcheck::task_facts&, const mrcheck::sysroot&,
                                   mrcheck::rlimit_ops&, mrcheck::node_state&) -> std::optional<std::string> {
    ++*counter;
    return std::nullopt;
  };
  fake_spank::the_host().job_env["SLURM_RLIMIT_MEMLOCK"] = "65536";
  EXPECT_EQ(slurm_spank_init_post_opt(nullptr, 0, nullptr), 0);
  EXPECT_EQ(slurm_spank_task_init_privileged(nullptr, 0, nullptr), 0);
  EXPECT_EQ(slurm_spank_task_init(nullptr, 0, nullptr), 0);
  EXPECT_EQ(calls, 0);
  EXPECT_TRUE(fake_spank::the_host().setenv_calls.empty());
  // A later init in a matching Slurm (slurmd reloads the stack) is active again.
  fake_spank::reset(S_CTX_REMOTE);
  ASSERT_EQ(call_init({"default_checks=memlock", "memlock_min=64K"}), 0);
  EXPECT_TRUE(fake_spank::the_host().errors.empty());
}

// on_fail=fail ends the task before exec whether the plugin is `required` or `optional` (Slurm ignores an
// optional plugin's error): the task child exits with status 1, as slurmstepd's own _exit(1).
TEST(SpankHooks, FailingVerdictEndsTheTaskItself) {
  restore_engine r;
  static std::vector<int> ended;
  ended.clear();
  fake_spank::reset(S_CTX_REMOTE);
  current_engine() = engine{};
  current_engine().end_task = [](int status) { ended.push_back(status); };
  struct rlimit rl {};
  ::getrlimit(RLIMIT_MEMLOCK, &rl);
  if (rl.rlim_max == RLIM_INFINITY) GTEST_SKIP() << "no finite hard memlock limit to fail against";
  // A minimum above this process's hard limit, no enforcement: the memlock check fails.
  std::string min = "memlock_min=" + std::to_string(rl.rlim_max + 4096);
  ASSERT_EQ(call_init({"default_checks=memlock", min, "on_fail=warn"}), 0);
  fake_spank::the_host().job_env["SLURMD_NODENAME"] = "node1";
  ASSERT_EQ(slurm_spank_init_post_opt(nullptr, 0, nullptr), 0);
  EXPECT_EQ(slurm_spank_task_init_privileged(nullptr, 0, nullptr), 0);
  EXPECT_EQ(slurm_spank_task_init(nullptr, 0, nullptr), 0);
  EXPECT_TRUE(ended.empty());  // warn: the task runs
  fake_spank::reset(S_CTX_REMOTE);
  ASSERT_EQ(call_init({"default_checks=memlock", min, "on_fail=fail"}), 0);
  fake_spank::the_host().job_env["SLURMD_NODENAME"] = "node1";
  ASSERT_EQ(slurm_spank_init_post_opt(nullptr, 0, nullptr), 0);
  EXPECT_EQ(slurm_spank_task_init_privileged(nullptr, 0, nullptr), 0);
  EXPECT_EQ(slurm_spank_task_init(nullptr, 0, nullptr), -1);
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0], 1);
  bool said = false;
  for (const auto& l : fake_spank::the_host().user_lines) said = said || l.find("mrcheck: memlock: FAIL: ") == 0;
  EXPECT_TRUE(said) << "the FAIL line comes before the task ends";
}

}  // namespace
