#include <mrcheck/child.h>

#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

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

// The container helper's way (src/container/enter.cpp): exec an O_PATH descriptor, argv[0] only names it; the
// descriptor is close-on-exec in the child, so the program holds only 0-2. before_exec runs last and can refuse.
TEST(run_child, execs_a_descriptor_and_runs_before_exec) {
  int fd = ::open("/bin/sh", O_PATH | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  child_spec s = sh("echo \"$0\"; ls /proc/$$/fd");
  s.argv[0] = "/not/there/sh";
  s.exec_fd = fd;
  static int ran = 0;
  s.before_exec = [](const void* arg) noexcept -> int { return *static_cast<const int*>(arg); };
  s.before_exec_arg = &ran;
  auto o = run_child(s);
  ASSERT_TRUE(o.is_ok());
  EXPECT_EQ(o->exit_code, 0) << o->err;
  EXPECT_EQ(o->out, "/not/there/sh\n0\n1\n2\n");
  static const int refuse = ENOENT;
  s.before_exec_arg = &refuse;
  s.before_exec_what = "join the task's container";
  o = run_child(s);
  ASSERT_TRUE(o.is_ok());
  EXPECT_EQ(o->exit_code, 127);
  EXPECT_NE(o->err.find("mrcheck: child: join the task's container: No such file or directory"), std::string::npos)
      << o->err;
  ::close(fd);
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

// A child that leaves a detached grandchild (own session, SIGTERM ignored) holding its output pipes.
// The wait is for the child's exit, not for the pipes; the grandchild comes back to us (subreaper) and is killed.
TEST(run_child, a_detached_grandchild_holding_the_pipes_neither_delays_nor_survives) {
  auto s = sh("setsid sh -c 'trap \"\" TERM HUP; echo $$ > /proc/self/fd/1; exec sleep 100' & sleep 0.2; echo done",
              20000);
  auto t0 = std::chrono::steady_clock::now();
  auto o = run_child(s);
  auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(o.is_ok());
  EXPECT_TRUE(o->exited) << o->describe();
  EXPECT_LT(took, std::chrono::seconds(5));
  EXPECT_GE(o->left_behind, 1u);
  EXPECT_NE(o->out.find("done"), std::string::npos) << o->out;
  // The grandchild's pid is the first line: it is gone.
  pid_t g = static_cast<pid_t>(std::atoi(o->out.c_str()));
  ASSERT_GT(g, 1);
  EXPECT_NE(::kill(g, 0), 0);
}

TEST(run_child, a_timeout_kills_what_left_the_group_too) {
  auto s = sh("setsid sh -c 'trap \"\" TERM; exec sleep 100' & trap '' TERM; sleep 100", 300);
  auto o = run_child(s);
  ASSERT_TRUE(o.is_ok());
  EXPECT_TRUE(o->timed_out);
  EXPECT_GE(o->left_behind, 1u);
  EXPECT_LT(o->elapsed.count(), 3000);
}

TEST(run_child, killed_from_outside_is_told_apart_from_a_crash_and_a_timeout) {
  auto o = run_child(sh("kill -KILL $$"));
  ASSERT_TRUE(o.is_ok());
  EXPECT_TRUE(o->killed_from_outside());
  o = run_child(sh("kill -SEGV $$"));
  ASSERT_TRUE(o.is_ok());
  EXPECT_FALSE(o->killed_from_outside());
  o = run_child(sh("sleep 10", 100));
  ASSERT_TRUE(o.is_ok());
  EXPECT_FALSE(o->killed_from_outside());
}

TEST(run_child, the_caller_is_no_subreaper_afterwards) {
  ASSERT_TRUE(run_child(sh("true")).is_ok());
  int v = -1;
  ASSERT_EQ(::prctl(PR_GET_CHILD_SUBREAPER, &v), 0);
  EXPECT_EQ(v, 0);
}

TEST(run_child, a_function_instead_of_exec) {
  child_spec s;
  s.run_in_child = [] {
    (void)!::write(1, "hello", 5);
    return 7;
  };
  auto o = run_child(s);
  ASSERT_TRUE(o.is_ok());
  EXPECT_EQ(o->exit_code, 7);
  EXPECT_EQ(o->out, "hello");
}

// An image whose start-up removed /dev: a child started there used to fail before exec ("open /dev/null"), and a
// detached one (the post-exec watcher, which carries the admins' record) failed unseen. With the host's /dev/null
// kept (child_keep_null_device, in slurmstepd) children start; without it a detached child's set-up failure is
// the caller's error, so the caller can still write what it had.
TEST(spawn_child, no_dev_null_where_the_child_starts) {
  if (::geteuid() != 0) GTEST_SKIP() << "a mount namespace needs root";
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto hide_dev = [] { return ::mount("none", "/dev", "tmpfs", 0, nullptr) == 0; };
    if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 || !hide_dev())
      _exit(77);
    int rc = 0;
    auto detached = sh("exit 0");
    detached.detach = true;
    detached.out = child_stream::null;
    detached.err = child_stream::null;
    auto c = spawn_child(detached);
    if (c || c.error().message() != "mrcheck: child: open /dev/null: No such file or directory") rc |= 1;
    auto o = run_child(sh("exit 0"));
    if (!o || o->exit_code != 127) rc |= 2;
    // The host's /dev/null, kept before the task's /dev went away.
    if (::umount("/dev") != 0) _exit(77);
    child_keep_null_device();
    if (!hide_dev()) _exit(77);
    o = run_child(sh("read x; echo \"[$x]\""));
    if (!o || o->exit_code != 0 || o->out != "[]\n") rc |= 4;
    c = spawn_child(detached);
    if (!c) rc |= 8;
    _exit(rc);
  }
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st));
  if (WEXITSTATUS(st) == 77) GTEST_SKIP() << "no mount namespace here";
  EXPECT_EQ(WEXITSTATUS(st), 0) << "1: detached failure not reported, 2: not 127 without /dev/null, "
                                   "4: no run with the host's, 8: no detached start with the host's";
}

// A child that starts children of its own (the container watcher, src/container/enter.cpp) hands them /dev/null as
// stdin, never the number the kept /dev/null had in its parent: that one was closed when the child's descriptors
// were placed (the Slurm 24.11 leg's container test: "mrcheck: child: open /dev/null: Bad file descriptor").
TEST(run_child, a_child_of_a_child_gets_dev_null) {
  // In a process of its own: the kept /dev/null is process-wide, and no_dev_null_where_the_child_starts needs
  // this one without it.
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    child_keep_null_device();
    child_spec s;
    s.run_in_child = [] {
      child_keep_null_device();  // what the watcher does first
      auto o = run_child(sh("readlink /proc/self/fd/0"));
      return o && o->exit_code == 0 && o->out == "/dev/null\n" ? 0 : 1;
    };
    auto o = run_child(s);
    _exit(o && o->exited && o->exit_code == 0 ? 0 : 1);
  }
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << "the grandchild's stdin was not /dev/null";
}

TEST(spawn_child, extra_fds_land_at_their_numbers) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  auto s = sh("echo three >&3");
  s.extra_fds.push_back({3, p[1]});
  auto o = run_child(s);
  ::close(p[1]);
  ASSERT_TRUE(o.is_ok());
  char buf[32] = {};
  ASSERT_GT(::read(p[0], buf, sizeof buf - 1), 0);
  ::close(p[0]);
  EXPECT_STREQ(buf, "three\n");
}

TEST(spawn_child, detached_is_not_our_child) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  auto s = sh("echo $PPID >&3");
  s.detach = true;
  s.out = child_stream::null;
  s.err = child_stream::null;
  s.extra_fds.push_back({3, p[1]});
  auto c = spawn_child(s);
  ::close(p[1]);
  ASSERT_TRUE(c.is_ok());
  EXPECT_EQ(c->pid, -1);
  char buf[32] = {};
  ASSERT_GT(::read(p[0], buf, sizeof buf - 1), 0);
  ::close(p[0]);
  EXPECT_NE(std::atoi(buf), ::getpid());
  EXPECT_FALSE(run_child(s).is_ok());  // a detached child cannot be waited for
}

// child_process: the handle the callers that do their own waiting use (src/nccl/pair.cpp).

// Reads a captured stream to EOF through the handle; false when it is still open after `bound` (something holds
// it). The bound is a limit, not a synchronisation: EOF comes as soon as every writer is gone.
bool read_to_eof(child_process& c, child_pipe which, std::string& to, std::chrono::milliseconds bound) {
  auto until = std::chrono::steady_clock::now() + bound;
  bool truncated = false;
  while (c.pipe_fd(which) >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    struct pollfd p {
      c.pipe_fd(which), POLLIN, 0
    };
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    c.read_bounded(which, to, 1 << 20, truncated);
  }
  return true;
}

TEST(child_process, wait_until_keeps_to_its_deadline_and_kill_group_ends_the_group) {
  auto c = child_process::spawn(sh("sleep 100 & echo started; sleep 100"));
  ASSERT_TRUE(c.is_ok());
  using std::chrono::steady_clock;
  EXPECT_FALSE(c->wait_until(steady_clock::time_point::min()).has_value()) << "a deadline gone only looks";
  auto t0 = steady_clock::now();
  EXPECT_FALSE(c->wait_until(t0 + std::chrono::milliseconds(50)).has_value());
  auto took = steady_clock::now() - t0;
  EXPECT_GE(took, std::chrono::milliseconds(50));
  EXPECT_LT(took, std::chrono::seconds(3));
  EXPECT_FALSE(c->ended());
  c->kill_group();
  auto end = c->wait_until(steady_clock::now() + std::chrono::seconds(10));
  ASSERT_TRUE(end.has_value());
  EXPECT_TRUE(end->killed);
  EXPECT_TRUE(end->signaled);
  EXPECT_EQ(end->term_signal, SIGKILL);
  EXPECT_TRUE(c->ended());
  // The background sleep held stdout too: EOF says it is gone with its group.
  std::string out;
  EXPECT_TRUE(read_to_eof(*c, child_pipe::out, out, std::chrono::seconds(10))) << "the group's sleep survived";
  EXPECT_EQ(out, "started\n");
  // The same end again, without another wait.
  auto again = c->wait_until(steady_clock::time_point::min());
  ASSERT_TRUE(again.has_value());
  EXPECT_TRUE(again->killed);
}

TEST(child_process, after_an_exit_kill_group_takes_what_it_left_in_its_group) {
  auto c = child_process::spawn(sh("sleep 100 & exit 4"));
  ASSERT_TRUE(c.is_ok());
  auto end = c->wait_until(std::chrono::steady_clock::now() + std::chrono::seconds(10));
  ASSERT_TRUE(end.has_value());
  EXPECT_TRUE(end->exited);
  EXPECT_EQ(end->exit_code, 4);
  EXPECT_FALSE(end->killed);
  struct pollfd p {
    c->pipe_fd(child_pipe::out), POLLIN, 0
  };
  EXPECT_EQ(::poll(&p, 1, 0), 0) << "the sleep holds stdout open";
  c->kill_group();
  std::string out;
  EXPECT_TRUE(read_to_eof(*c, child_pipe::out, out, std::chrono::seconds(10))) << "the group's sleep survived";
  auto again = c->wait_until(std::chrono::steady_clock::time_point::min());
  ASSERT_TRUE(again.has_value());
  EXPECT_FALSE(again->killed) << "a kill after the end is not a kill of the child";
}

TEST(child_process, a_crash_is_its_own_signal_and_output_is_bounded) {
  auto c = child_process::spawn(sh("head -c 100000 /dev/zero; kill -SEGV $$"));
  ASSERT_TRUE(c.is_ok());
  std::string out;
  bool truncated = false;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (c->pipe_fd(child_pipe::out) >= 0 && std::chrono::steady_clock::now() < until) {
    struct pollfd p {
      c->pipe_fd(child_pipe::out), POLLIN, 0
    };
    ::poll(&p, 1, 1000);
    c->read_bounded(child_pipe::out, out, 1000, truncated);
  }
  EXPECT_EQ(out.size(), 1000u);
  EXPECT_TRUE(truncated);
  EXPECT_FALSE(c->read_bounded(child_pipe::out, out, 1000, truncated)) << "closed at EOF";
  auto end = c->wait_until(until);
  ASSERT_TRUE(end.has_value());
  EXPECT_TRUE(end->signaled);
  EXPECT_EQ(end->term_signal, SIGSEGV);
  EXPECT_FALSE(end->killed);
}

TEST(child_process, moves_and_closes_its_descriptors) {
  int out_fd = -1;
  {
    auto c = child_process::spawn(sh("exit 0"));
    ASSERT_TRUE(c.is_ok());
    child_process moved = std::move(*c);
    EXPECT_EQ(c->pid(), -1);
    EXPECT_EQ(c->pipe_fd(child_pipe::out), -1);
    out_fd = moved.pipe_fd(child_pipe::out);
    ASSERT_GE(out_fd, 0);
    auto end = moved.wait_until(std::chrono::steady_clock::now() + std::chrono::seconds(10));
    ASSERT_TRUE(end.has_value());
    EXPECT_EQ(end->exit_code, 0);
  }
  EXPECT_EQ(::fcntl(out_fd, F_GETFD), -1) << "the handle left its pipe open";
}

}  // namespace
}  // namespace mrcheck
