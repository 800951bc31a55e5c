#include <mrcheck/child.h>

#include <gtest/gtest.h>

#include <signal.h>

namespace mrcheck {
namespace {

child_spec sh(const std::string& script, int timeout_ms = 5000) {
  child_spec s;
  s.argv = {"/bin/sh", "-c", script};
  s.env = {"PATH=/usr/bin:/bin", "MRCHECK_TEST=1"};
  s.timeout = std::chrono::milliseconds(timeout_ms);
  return s;
}

TEST(run_child, captures_output_and_exit) {
  auto o = run_child(sh("echo out; echo err >&2; exit 3"));
  ASSERT_TRUE(o.is_ok());
  EXPECT_TRUE(o->exited);
  EXPECT_EQ(o->exit_code, 3);
  EXPECT_EQ(o->out, "out\n");
  EXPECT_EQ(o->err, "err\n");
  EXPECT_EQ(o->describe(), "exit 3");
}

TEST(run_child, passes_only_the_given_environment) {
  auto o = run_child(sh("echo $MRCHECK_TEST:$HOME"));
  ASSERT_TRUE(o.is_ok());
  EXPECT_EQ(o->out, "1:\n");
}

TEST(run_child, kills_a_hang_and_its_group) {
  auto o = run_child(sh("sleep 100 & sleep 100", 300));
  ASSERT_TRUE(o.is_ok());
  EXPECT_TRUE(o->timed_out);
  EXPECT_LT(o->elapsed.count(), 3000);
  EXPECT_NE(o->describe().find("timed out"), std::string::npos);
}

TEST(run_child, a_crash_is_an_outcome) {
  auto o = run_child(sh("kill -SEGV $$"));
  ASSERT_TRUE(o.is_ok());
  EXPECT_TRUE(o->signaled);
  EXPECT_EQ(o->term_signal, SIGSEGV);
  EXPECT_EQ(o->describe(), "killed by SIGSEGV");
}

TEST(run_child, bounded_output) {
  auto s = sh("head -c 100000 /dev/zero");
  s.max_output = 1000;
  auto o = run_child(s);
  ASSERT_TRUE(o.is_ok());
  EXPECT_EQ(o->out.size(), 1000u);
  EXPECT_TRUE(o->truncated);
}

TEST(run_child, exec_failure_is_127_with_reason) {
  child_spec s;
  s.argv = {"/nonexistent/mrcheck"};
  auto o = run_child(s);
  ASSERT_TRUE(o.is_ok());
  EXPECT_EQ(o->exit_code, 127);
  EXPECT_NE(o->err.find("execve"), std::string::npos);
}

TEST(run_child, stdin_is_dev_null_and_rlimits_apply) {
  auto s = sh("cat; ulimit -S -l");
  s.rlimits.push_back({RLIMIT_MEMLOCK, 64 * 1024, 64 * 1024});
  auto o = run_child(s);
  ASSERT_TRUE(o.is_ok());
  EXPECT_EQ(o->out, "64\n");
}

TEST(run_child, relative_path_refused) {
  child_spec s;
  s.argv = {"sh"};
  EXPECT_FALSE(run_child(s).is_ok());
}

}  // namespace
}  // namespace mrcheck
