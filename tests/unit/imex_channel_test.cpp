// The post-exec check `imex_channel` (src/checks/imex_channel.cpp): its verdicts on the node's and the task's IMEX
// facts, the task's view read through /proc/PID/root of a process in a mount namespace of its own
// (read_task_imex), the step's facts deciding whether a node serves IMEX, and the real post-exec watcher judging a
// task that runs in such a namespace.
#include <mrcheck/check_registry.h>
#include <mrcheck/checks.h>
#include <mrcheck/fabric.h>
#include <mrcheck/owner.h>
#include <mrcheck/step.h>

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace mrcheck {
namespace {

namespace fs = std::filesystem;

imex_facts serving() {
  imex_facts n;
  n.nodes_config = true;
  n.channels_dir = true;
  n.channels = {0};
  return n;
}

task_imex_view view(bool dir, std::vector<unsigned> seen, std::vector<unsigned> usable) {
  task_imex_view v;
  v.read = true;
  v.seen.channels_dir = dir;
  v.seen.channels = std::move(seen);
  v.usable = std::move(usable);
  return v;
}

TEST(ImexChannel, NoVerdictWhereTheNodeServesNoImexOrTheTaskWasGone) {
  EXPECT_FALSE(node_serves_imex(imex_facts{}));
  EXPECT_FALSE(check_imex_channel(imex_facts{}, view(false, {}, {})).has_value());
  EXPECT_FALSE(check_imex_channel(serving(), task_imex_view{}).has_value());  // read = false
  imex_facts channels_only;
  channels_only.channels = {3};
  EXPECT_TRUE(node_serves_imex(channels_only));
}

TEST(ImexChannel, ATaskWithoutAChannelFailsAndTheSiteFixesIt) {
  auto missing = check_imex_channel(serving(), view(false, {}, {}));
  ASSERT_TRUE(missing.has_value());
  EXPECT_EQ(missing->id, "imex_channel");
  EXPECT_EQ(missing->result, verdict::fail);
  EXPECT_EQ(owner_of(*missing), fix_owner::site);
  EXPECT_NE(missing->summary.find("/dev/nvidia-caps-imex-channels is missing"), std::string::npos) << missing->summary;
  EXPECT_NE(missing->summary.find("the node has channel0"), std::string::npos) << missing->summary;
  EXPECT_NE(missing->hint.find("switch/nvidia_imex"), std::string::npos);
  EXPECT_NE(missing->hint.find("NCCL_MNNVL_ENABLE=0"), std::string::npos);
  auto empty = check_imex_channel(serving(), view(true, {}, {}));
  ASSERT_TRUE(empty.has_value());
  EXPECT_EQ(empty->result, verdict::fail);
  EXPECT_NE(empty->summary.find("is empty"), std::string::npos) << empty->summary;
}

TEST(ImexChannel, AChannelTheJobUserMayNotOpenFails) {
  auto r = check_imex_channel(serving(), view(true, {0, 2}, {}));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->result, verdict::fail);
  EXPECT_EQ(owner_of(*r), fix_owner::site);
  EXPECT_NE(r->summary.find("channel0, channel2 but may not open any read-write"), std::string::npos) << r->summary;
}

TEST(ImexChannel, AUsableChannelPasses) {
  auto r = check_imex_channel(serving(), view(true, {0, 1}, {1}));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->result, verdict::pass);
  EXPECT_EQ(r->summary, "IMEX channel1 in the task's mount namespace, read-write for the job user");
  const check_def* def = find_check("imex_channel");
  ASSERT_NE(def, nullptr);
  EXPECT_EQ(def->origin, check_origin::post_exec);
}

TEST(ImexChannel, TheStepReadsWhetherTheNodeServesImex) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("imex_step." + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "etc/nvidia-imex");
  auto root = sysroot::open(dir);
  ASSERT_TRUE(root);
  node_state plain;
  prefetch_step_facts(*root, "/etc/slurm/slurm.conf", "n1", "n1", plain);
  EXPECT_FALSE(plain.imex.has_value());  // IMEX installed, but no domain configured and no channel
  std::ofstream(dir / "etc/nvidia-imex/nodes_config.cfg") << "10.0.0.1\n";
  node_state st;
  prefetch_step_facts(*root, "/etc/slurm/slurm.conf", "n1", "n1", st);
  ASSERT_TRUE(st.imex.has_value());
  EXPECT_TRUE(st.imex->nodes_config);
  fs::remove_all(dir);
}

// Makes this process's mount namespace its own (in a user namespace too where this test is not root) with a
// tmpfs on /dev holding `channels` (mode 0600).
bool enter_private_dev(const std::vector<unsigned>& channels) {
  const uid_t uid = ::getuid();
  const gid_t gid = ::getgid();
  int flags = CLONE_NEWNS | (uid == 0 ? 0 : CLONE_NEWUSER);
  if (::unshare(flags) != 0) return false;
  if (uid != 0) {
    auto put = [](const char* path, const std::string& text) {
      int fd = ::open(path, O_WRONLY | O_CLOEXEC);
      if (fd < 0) return false;
      bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
      ::close(fd);
      return ok;
    };
    put("/proc/self/setgroups", "deny");
    if (!put("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1\n")) return false;
    if (!put("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1\n")) return false;
  }
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return false;
  if (::mount("mrcheck-test", "/dev", "tmpfs", 0, "mode=0755") != 0) return false;
  if (channels.empty()) return true;
  if (::mkdir("/dev/nvidia-caps-imex-channels", 0755) != 0) return false;
  for (unsigned c : channels) {
    std::string p = "/dev/nvidia-caps-imex-channels/channel" + std::to_string(c);
    int fd = ::open(p.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0) return false;
    ::close(fd);
  }
  return true;
}

// Forks the task: it enters its namespace, says so on a pipe (1 = in, 0 = could not), waits for `go` and execs
// /bin/sleep for `seconds`.
struct namespaced_task {
  pid_t pid = -1;
  int go_w = -1;
  bool in_namespace = false;
  explicit namespaced_task(const std::vector<unsigned>& channels, const char* seconds = "2") {
    int ready[2], go[2];
    if (::pipe2(ready, O_CLOEXEC) != 0 || ::pipe2(go, O_CLOEXEC) != 0) return;
    pid = ::fork();
    if (pid == 0) {
      char ok = enter_private_dev(channels) ? 1 : 0;
      (void)!::write(ready[1], &ok, 1);
      char c = 0;
      if (::read(go[0], &c, 1) != 1) ::_exit(126);
      ::execl("/bin/sleep", "sleep", seconds, static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(ready[1]);
    ::close(go[0]);
    char ok = 0;
    in_namespace = ::read(ready[0], &ok, 1) == 1 && ok == 1;
    ::close(ready[0]);
    go_w = go[1];
  }
  // A byte, not end-of-file: a watcher forked after this task holds a copy of the write end.
  void exec() { (void)!::write(go_w, "x", 1); }
  ~namespaced_task() {
    if (go_w >= 0) ::close(go_w);
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

TEST(ImexChannel, ReadsTheChannelsInTheTasksOwnMountNamespace) {
  namespaced_task with({0, 5});
  if (!with.in_namespace) GTEST_SKIP() << "no mount namespace for this test here (unshare refused)";
  task_imex_view v = read_task_imex(with.pid);
  ASSERT_TRUE(v.read);
  EXPECT_TRUE(v.seen.channels_dir);
  EXPECT_EQ(v.seen.channels, (std::vector<unsigned>{0, 5}));
  EXPECT_EQ(v.usable, (std::vector<unsigned>{0, 5}));                   // the task's user made them: read-write for it
  EXPECT_FALSE(fs::exists("/dev/nvidia-caps-imex-channels/channel5"));  // the task's /dev, not this process's
  namespaced_task without({});
  ASSERT_TRUE(without.in_namespace);
  task_imex_view none = read_task_imex(without.pid);
  ASSERT_TRUE(none.read);
  EXPECT_FALSE(none.seen.channels_dir);
  EXPECT_FALSE(read_task_imex(999999999).read);  // no such task: no view, no verdict
}

// The watcher on `task` with `window`: what it wrote on the task's stderr and the verdicts it recorded.
std::pair<std::string, std::string> watch(namespaced_task& task, std::chrono::milliseconds window) {
  int out[2], rec[2];
  EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
  EXPECT_EQ(::pipe2(rec, O_CLOEXEC), 0);
  post_exec_watch w;
  w.task = task.pid;
  struct rlimit r {};
  ::getrlimit(RLIMIT_MEMLOCK, &r);
  w.predicted = memlock_limit{r.rlim_cur, r.rlim_max};
  w.fd = out[1];
  w.window = window;
  w.node_imex = serving();
  post_exec_done done = [](const std::vector<check_result>& vs, int fd) {
    std::string ids;
    for (const auto& v : vs) ids += v.id + "=" + std::string(to_string(v.result)) + "\n";
    (void)!::write(fd, ids.data(), ids.size());
  };
  EXPECT_TRUE(spawn_post_exec_watcher(w, done, rec[1]));
  ::close(out[1]);
  ::close(rec[1]);
  task.exec();
  auto read_all = [](int fd) {
    std::string s;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) s.append(buf, static_cast<std::size_t>(n));
    ::close(fd);
    return s;
  };
  std::string said = read_all(out[0]);
  return {said, read_all(rec[0])};
}

TEST(ImexChannel, TheWatcherJudgesTheTaskAfterItsExecAndSendsTheVerdict) {
  namespaced_task task({});
  if (!task.in_namespace) GTEST_SKIP() << "no mount namespace for this test here (unshare refused)";
  auto [said, record] = watch(task, std::chrono::milliseconds(50));
  EXPECT_NE(said.find("mrcheck: imex_channel: FAIL: no IMEX channel in the task's mount namespace"), std::string::npos)
      << said;
  EXPECT_EQ(record, "imex_channel=fail\n");
}

// A task that ends within the window (a job whose NCCL fails at once): its namespace was read at its exec, so it
// still gets its verdict. Read after the window, as before, it had none (seen under the real slurmstepd).
TEST(ImexChannel, ATaskShorterThanTheWindowStillGetsItsVerdict) {
  namespaced_task task({}, "0.2");
  if (!task.in_namespace) GTEST_SKIP() << "no mount namespace for this test here (unshare refused)";
  auto t0 = std::chrono::steady_clock::now();
  auto [said, record] = watch(task, std::chrono::milliseconds(3000));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(2500));  // ended with the task
  EXPECT_NE(said.find("mrcheck: imex_channel: FAIL: no IMEX channel in the task's mount namespace"), std::string::npos)
      << said;
  EXPECT_EQ(record, "imex_channel=fail\n");
}

}  // namespace
}  // namespace mrcheck
