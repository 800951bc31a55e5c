// slurmstepd's side of the admins' record (src/admin/collector.cpp): the collector's start, the record pipe of local
// task 0, the last task_exit's wait and the reap. Most tests stand in for the collector with a scripted
// child_handle whose descriptors (fd 3: the control socket, fd 4: the log pipe) the test holds; one runs a real
// process through child_process, to see its session's group stopped.
#include <mrcheck/admin_collector.h>
#include <mrcheck/admin_protocol.h>
#include <mrcheck/admin_record.h>

#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace mrcheck {
namespace {

using namespace std::chrono_literals;
using kind = admin_control_message::kind;

// What the collector was started with, and the test's copies of its descriptors.
struct collector_seen {
  int spawned = 0;
  std::vector<std::string> argv;
  std::vector<int> child_fds;
  bool new_session = false;
  int ctl = -1;  // the collector's end of the control socket (its fd 3)
  int log = -1;  // the write end of its log pipe (its fd 4); closed = the collector has ended
  int kills = 0;
  int waits = 0;
  ~collector_seen() {
    if (ctl >= 0) ::close(ctl);
    if (log >= 0) ::close(log);
  }
  void say(const std::string& lines) const {
    ASSERT_EQ(::write(log, lines.data(), lines.size()), static_cast<ssize_t>(lines.size()));
  }
  void end() {
    ::close(log);
    log = -1;
  }
};

// The collector's first process as the handle sees it: ended once the test closed the log (the collector is
// done) or the handle killed its group.
class fake_collector final : public child_handle {
 public:
  explicit fake_collector(collector_seen& seen) : seen_(seen) {}
  std::optional<child_end> wait_until(clock::time_point) override {
    ++seen_.waits;
    if (!killed_ && seen_.log >= 0) return std::nullopt;
    child_end e;
    e.exited = !killed_;
    e.exit_code = 0;
    e.signaled = killed_;
    e.killed = killed_;
    return e;
  }
  void kill_group() override {
    ++seen_.kills;
    killed_ = true;
  }
  bool read_bounded(child_pipe, std::string&, std::size_t, bool&) override { return false; }
  int pipe_fd(child_pipe) const override { return -1; }

 private:
  collector_seen& seen_;
  bool killed_ = false;
};

child_spawner fake_spawner(collector_seen& seen) {
  return [&seen](const child_spec& spec) -> result<std::unique_ptr<child_handle>> {
    ++seen.spawned;
    seen.argv = spec.argv;
    seen.new_session = spec.new_session;
    for (const auto& f : spec.extra_fds) {
      seen.child_fds.push_back(f.child_fd);
      if (f.child_fd == k_admin_control_fd) seen.ctl = ::fcntl(f.parent_fd, F_DUPFD_CLOEXEC, 0);
      if (f.child_fd == k_admin_log_fd) seen.log = ::fcntl(f.parent_fd, F_DUPFD_CLOEXEC, 0);
    }
    return std::unique_ptr<child_handle>(std::make_unique<fake_collector>(seen));
  };
}

config record_config() {
  config c;
  c.admin_comment = true;
  c.report_timeout = 10s;
  return c;
}

admin_step a_step() {
  admin_step s;
  s.job_id = 7;
  s.step_id = 3;
  s.node_id = 1;
  s.nnodes = 2;
  s.node = "n1";
  return s;
}

std::string value_after(const std::vector<std::string>& argv, const std::string& flag) {
  auto it = std::find(argv.begin(), argv.end(), flag);
  return it == argv.end() || it + 1 == argv.end() ? "<none>" : *(it + 1);
}

int open_fds() {
  int n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  while (const dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
  ::closedir(d);
  return n;
}

// A collector started for a_step() with record_config() through the scripted spawner: what most tests begin with.
class StartedCollector : public ::testing::Test {
 protected:
  void SetUp() override { ac.start(a_step(), record_config(), log, fake_spawner(seen)); }
  collector_seen seen;
  admin_collector ac;
  vector_log log;
};

TEST(CollectorFromSlurmstepd, NothingStartsWhenTheSiteKeepsNoRecord) {
  collector_seen seen;
  admin_collector ac;
  vector_log log;
  ac.start(a_step(), config{}, log, fake_spawner(seen));
  EXPECT_EQ(seen.spawned, 0);
  EXPECT_FALSE(ac.collecting());
  auto s = a_step();
  s.extern_step = true;
  ac.start(s, record_config(), log, fake_spawner(seen));
  EXPECT_EQ(seen.spawned, 0);
  EXPECT_TRUE(log.lines().empty());
}

TEST(CollectorFromSlurmstepd, StartsTheCollectorWithTheProtocolsArgumentsAndDescriptors) {
  collector_seen seen;
  admin_collector ac;
  vector_log log;
  auto c = record_config();
  c.report_dir = "/var/spool/mrcheck";
  ac.start(a_step(), c, log, fake_spawner(seen));
  ASSERT_EQ(seen.spawned, 1);
  EXPECT_TRUE(ac.collecting());
  ASSERT_GE(seen.argv.size(), 2u);
  EXPECT_EQ(seen.argv[0], c.admin_helper_path());
  EXPECT_EQ(seen.argv[1], k_admin_collect_command);
  EXPECT_EQ(value_after(seen.argv, "--job"), "7");
  EXPECT_EQ(value_after(seen.argv, "--step"), "3");
  EXPECT_EQ(value_after(seen.argv, "--node-id"), "1");
  EXPECT_EQ(value_after(seen.argv, "--nnodes"), "2");
  EXPECT_EQ(value_after(seen.argv, "--node"), "n1");
  EXPECT_EQ(value_after(seen.argv, "--admin-comment"), "1");
  EXPECT_EQ(value_after(seen.argv, "--report-dir"), "/var/spool/mrcheck");
  EXPECT_EQ(value_after(seen.argv, "--timeout-ms"), "10000");
  EXPECT_EQ(value_after(seen.argv, "--own-ms"), "120000");  // probe 30 s + NCCL 60 s + 30 s
  std::sort(seen.child_fds.begin(), seen.child_fds.end());
  EXPECT_EQ(seen.child_fds, (std::vector<int>{STDERR_FILENO, k_admin_control_fd, k_admin_log_fd}));
  EXPECT_TRUE(seen.new_session);  // its group is its own: the handle stops what it detached
  // A second start (another hook of the same slurmstepd) starts nothing more.
  ac.start(a_step(), c, log, fake_spawner(seen));
  EXPECT_EQ(seen.spawned, 1);
  ac.finish(log);
}

TEST(CollectorFromSlurmstepd, TheBatchStepIsNodeZeroOfOne) {
  auto s = a_step();
  s.batch_step = true;
  s.nnodes = 0;
  auto argv = admin_collector_argv(s, record_config());
  EXPECT_EQ(value_after(argv, "--node-id"), "0");
  EXPECT_EQ(value_after(argv, "--nnodes"), "1");
  EXPECT_EQ(value_after(argv, "--state-dir"), "");  // no report_dir: no spool
}

// B7: while the task child holds the record pipe it is not dumpable, so no other process of the job user can open
// the pipe through /proc/PID/fd and write a record first (on the old code a child left dumpable stayed so).
TEST_F(StartedCollector, TheTaskChildHoldingTheRecordPipeIsNotDumpable) {
  pid_t c = ::fork();
  if (c == 0) {
    ::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);  // as a container plugin may leave it
    ac.task_begin(0, true, log);
    ::_exit(::prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0 && ac.take_record_fd(0) >= 0 ? 0 : 1);
  }
  int st = -1;
  ASSERT_EQ(::waitpid(c, &st, 0), c);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << "the task child stayed dumpable while it held the record pipe";
}

TEST_F(StartedCollector, LocalTaskZeroSendsItsRecordPipeWithTheBeginMarker) {
  ac.task_begin(0, true, log);
  auto m = admin_read_control(seen.ctl);
  ASSERT_EQ(m.what, kind::record_pipe);
  int fd = ac.take_record_fd(0);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(ac.take_record_fd(0), -1);  // once
  admin_write_record(fd, "record\n");
  ::close(fd);
  std::string got(64, '\0');
  ssize_t n = ::read(m.fd, got.data(), got.size());
  ASSERT_GT(n, 0);
  got.resize(static_cast<std::size_t>(n));
  EXPECT_EQ(got, std::string(k_admin_begin_marker) + "\nrecord\n");
  ::close(m.fd);
  // The task kept no copy of the socket: the collector's read sees every sender gone.
  EXPECT_EQ(admin_read_control(seen.ctl).what, kind::closed);
  EXPECT_TRUE(log.lines().empty());
}

TEST_F(StartedCollector, ANodeWithNothingToCheckSendsAnEmptyPipeAndKeepsNoEnd) {
  ac.task_begin(0, false, log);
  auto m = admin_read_control(seen.ctl);
  ASSERT_EQ(m.what, kind::record_pipe);
  EXPECT_EQ(ac.take_record_fd(0), -1);
  char c;
  EXPECT_EQ(::read(m.fd, &c, 1), 0);  // EOF at once: nothing to record
  ::close(m.fd);
}

TEST_F(StartedCollector, AnotherTaskClosesItsCopyOfTheSocketAndSendsNothing) {
  ac.task_begin(1, true, log);
  EXPECT_EQ(ac.take_record_fd(1), -1);
  EXPECT_EQ(admin_read_control(seen.ctl).what, kind::closed);
}

TEST_F(StartedCollector, TheLastTaskExitSaysTasksEndedForwardsTheLinesAndReapsWithoutAKill) {
  ac.task_exit(2, 5s, log);  // the first of two tasks: nothing yet
  EXPECT_EQ(admin_read_control(seen.ctl).what, kind::none);
  seen.say("I mrcheck: admin: job 7 step 3: pass on 2 nodes\nE mrcheck: admin: slurmctld: busy\n");
  seen.end();
  ac.task_exit(2, 5s, log);
  EXPECT_EQ(admin_read_control(seen.ctl).what, kind::tasks_ended);
  ASSERT_EQ(log.lines().size(), 2u);
  EXPECT_EQ(log.lines()[0].line, "mrcheck: admin: job 7 step 3: pass on 2 nodes");
  // Every collector line goes to slurmd's log only: an error in slurmstepd would reach the user's srun.
  EXPECT_EQ(log.lines()[1].level, log_level::info);
  EXPECT_EQ(log.lines()[1].line, "mrcheck: admin: slurmctld: busy");
  EXPECT_EQ(seen.kills, 0);
  EXPECT_GE(seen.waits, 1);
  EXPECT_FALSE(ac.collecting());
  ac.task_exit(2, 5s, log);  // a late call does nothing
  ac.finish(log);
  EXPECT_EQ(seen.kills, 0);
  EXPECT_EQ(log.lines().size(), 2u);
}

TEST_F(StartedCollector, ACollectorThatDoesNotFinishIsStoppedAtTheEndOfTheWait) {
  seen.say("I mrcheck: admin: waiting for node 1\n");
  ac.task_exit(1, 50ms, log);
  EXPECT_EQ(seen.kills, 1);
  ASSERT_EQ(log.lines().size(), 2u);
  EXPECT_EQ(log.lines()[0].line, "mrcheck: admin: waiting for node 1");
  EXPECT_EQ(log.lines()[1].level, log_level::error);
  EXPECT_EQ(log.lines()[1].line, "mrcheck: admin: the collector did not finish within 50 ms; stopped");
  ac.finish(log);
  EXPECT_EQ(seen.kills, 1);
}

TEST_F(StartedCollector, AtMost64LinesOfAStepReachTheLogAndEachIsEscaped) {
  std::string lines = "I mrcheck: \x1b[31mred\n";
  for (int i = 1; i < 100; ++i) lines += "I mrcheck: line " + std::to_string(i) + "\n";
  seen.say(lines);
  seen.end();
  ac.task_exit(1, 5s, log);
  ASSERT_EQ(log.lines().size(), k_admin_log_lines_max + 1);
  EXPECT_EQ(log.lines()[0].line.find('\x1b'), std::string::npos);
  EXPECT_EQ(log.lines()[k_admin_log_lines_max - 1].line, "mrcheck: line 63");
  EXPECT_EQ(log.lines()[k_admin_log_lines_max].line,
            "mrcheck: admin: further collector lines of this step not shown (at most 64)");
}

TEST_F(StartedCollector, AStepWhoseTasksNeverEndedIsToldAtExitAndItsCollectorStopped) {
  ac.finish(log);  // no task_exit at all; the collector is still running after its second
  EXPECT_EQ(admin_read_control(seen.ctl).what, kind::tasks_ended);
  EXPECT_EQ(seen.kills, 1);
  // slurmstepd's end is closed with the rest.
  EXPECT_EQ(admin_read_control(seen.ctl).what, kind::closed);
  EXPECT_FALSE(ac.collecting());
}

TEST(CollectorFromSlurmstepd, AStartThatFailsSaysWhyAndLeavesNoDescriptorOpen) {
  admin_collector ac;
  vector_log log;
  int before = open_fds();
  ac.start(a_step(), record_config(), log, [](const child_spec&) -> result<std::unique_ptr<child_handle>> {
    return status::error("fork: Resource temporarily unavailable");
  });
  EXPECT_FALSE(ac.collecting());
  EXPECT_EQ(open_fds(), before);
  ASSERT_EQ(log.lines().size(), 1u);
  EXPECT_EQ(log.lines()[0].level, log_level::error);
  EXPECT_EQ(log.lines()[0].line, "mrcheck: admin: fork: Resource temporarily unavailable");
  ac.task_begin(0, true, log);
  EXPECT_EQ(ac.take_record_fd(0), -1);
  ac.task_exit(1, 5s, log);
  ac.finish(log);
  EXPECT_EQ(log.lines().size(), 1u);
}

// A real collector that detaches as mrcheck-prolog admin-collect does (its first process exits, a second one in
// its session keeps fd 4 open): the wait ends at its bound, the session's group is killed, and the detached
// process is gone.
TEST(CollectorFromSlurmstepd, ARealCollectorLeftRunningIsStoppedWithItsDetachedProcess) {
  char dir[] = "/tmp/mrcheck-admin-collector-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  std::string script = std::string(dir) + "/collector.sh";
  std::string pidfile = std::string(dir) + "/detached.pid";
  {
    std::ofstream f(script);
    f << "#!/bin/sh\n"
      << "echo 'I mrcheck: admin: started' >&4\n"
      << "sh -c 'echo $$ > " << pidfile << ".tmp; mv " << pidfile << ".tmp " << pidfile << "; exec sleep 60' &\n"
      << "exit 0\n";
  }
  ::chmod(script.c_str(), 0755);
  auto c = record_config();
  c.admin_helper = script;
  admin_collector ac;
  vector_log log;
  ac.start(a_step(), c, log);
  ASSERT_TRUE(ac.collecting());
  pid_t detached = 0;
  for (int i = 0; i < 500 && detached == 0; ++i) {
    std::ifstream p(pidfile);
    if (!(p >> detached)) std::this_thread::sleep_for(10ms);
  }
  ASSERT_GT(detached, 0);
  ac.task_exit(1, 300ms, log);
  ASSERT_GE(log.lines().size(), 2u);
  EXPECT_EQ(log.lines()[0].line, "mrcheck: admin: started");
  EXPECT_NE(log.lines().back().line.find("did not finish within 300 ms; stopped"), std::string::npos);
  // The detached process was in the collector's group: killed. It is not our child (its parent exited), so init
  // reaps it; gone or a zombie, it no longer runs.
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    std::ifstream st("/proc/" + std::to_string(detached) + "/stat");
    std::string text;
    std::getline(st, text);
    auto close_paren = text.rfind(')');
    gone = text.empty() || (close_paren != std::string::npos && text.substr(close_paren + 2, 1) == "Z");
    if (!gone) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(gone);
  if (!gone) ::kill(detached, SIGKILL);
  ac.finish(log);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mrcheck
