// include/mrcheck/proc_tree.h: trees of real processes (forked here), a process that exits, a pid that does not
// exist, and a made-up /proc with bad content (read through a sysroot).
#include <mrcheck/proc_tree.h>

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

namespace mrcheck {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

std::vector<pid_t> sorted(std::vector<pid_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// A tree of four processes in a group of their own, until the test ends:
//   root ─┬─ b ── d
//         └─ c
// Each one writes {its name, its pid} to a pipe once it exists, then sleeps.
class forked_tree {
 public:
  forked_tree() {
    int p[2];
    if (::pipe(p) != 0) return;
    root_ = ::fork();
    if (root_ == 0) {
      ::close(p[0]);
      ::setpgid(0, 0);
      announce(p[1], 'r');
      if (::fork() == 0) {
        announce(p[1], 'b');
        if (::fork() == 0) announce(p[1], 'd');
        sleep_forever();
      }
      if (::fork() == 0) announce(p[1], 'c');
      sleep_forever();
    }
    ::close(p[1]);
    if (root_ < 0) return;
    ::setpgid(root_, root_);  // also here: the group exists before anything below signals it
    struct entry {
      char name;
      pid_t pid;
    } e{};
    while (pids_.size() < 4 && ::read(p[0], &e, sizeof e) == static_cast<ssize_t>(sizeof e)) pids_[e.name] = e.pid;
    ::close(p[0]);
  }
  ~forked_tree() {
    if (root_ <= 0) return;
    ::kill(-root_, SIGKILL);
    ::waitpid(root_, nullptr, 0);
  }
  forked_tree(const forked_tree&) = delete;
  forked_tree& operator=(const forked_tree&) = delete;

  bool complete() const { return pids_.size() == 4; }
  pid_t operator[](char name) const { return pids_.at(name); }

 private:
  static void announce(int fd, char name) {
    struct {
      char name;
      pid_t pid;
    } e{name, ::getpid()};
    if (::write(fd, &e, sizeof e) != static_cast<ssize_t>(sizeof e)) _exit(1);
  }
  [[noreturn]] static void sleep_forever() {
    for (;;) ::pause();
  }
  pid_t root_ = -1;
  std::map<char, pid_t> pids_;
};

TEST(proc_tree, children_and_the_tree_of_real_processes) {
  forked_tree t;
  ASSERT_TRUE(t.complete());
  EXPECT_EQ(sorted(children_of(t['r'])), sorted({t['b'], t['c']}));
  EXPECT_EQ(children_of(t['b']), std::vector<pid_t>{t['d']});
  EXPECT_TRUE(children_of(t['c']).empty());
  EXPECT_TRUE(children_of(t['d']).empty());
  // This process's own child is among its children.
  auto mine = children_of(::getpid());
  EXPECT_NE(std::find(mine.begin(), mine.end(), t['r']), mine.end());

  // Breadth first: the root, then its children, then theirs.
  auto tree = process_tree(t['r'], 64);
  ASSERT_EQ(tree.size(), 4u);
  EXPECT_EQ(tree[0], t['r']);
  EXPECT_EQ(sorted({tree[1], tree[2]}), sorted({t['b'], t['c']}));
  EXPECT_EQ(tree[3], t['d']);
  // Bounded: never more than asked for, the root first.
  auto two = process_tree(t['r'], 2);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0], t['r']);
  EXPECT_TRUE(process_tree(t['r'], 0).empty());
  EXPECT_EQ(process_tree(t['c'], 64), std::vector<pid_t>{t['c']});
}

// A child that exits when its pipe closes (it is ours here, but the watch neither knows nor reaps it).
pid_t child_until_pipe_closes(int& write_end) {
  int p[2];
  if (::pipe(p) != 0) return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(p[1]);
    char c;
    while (::read(p[0], &c, 1) > 0) {
    }
    _exit(0);
  }
  ::close(p[0]);
  write_end = p[1];
  return pid;
}

TEST(exit_watch, sees_a_process_exit_and_keeps_seeing_it) {
  int w = -1;
  pid_t pid = child_until_pipe_closes(w);
  ASSERT_GT(pid, 0);
  exit_watch watch(pid);
  if (!watch.sees_exit()) {
    ::close(w);
    ::waitpid(pid, nullptr, 0);
    GTEST_SKIP() << "no pidfd_open on this kernel (before 5.3)";
  }
  auto t0 = clock_type::now();
  EXPECT_FALSE(watch.wait(20ms).exited);
  EXPECT_GE(clock_type::now() - t0, 19ms);  // it waited its time out
  ::close(w);
  t0 = clock_type::now();
  auto woke = watch.wait(10s);
  EXPECT_TRUE(woke.exited);  // a zombie, not yet reaped: it runs no more
  EXPECT_FALSE(woke.fd_ready);
  EXPECT_LT(clock_type::now() - t0, 5s);  // woken by the exit, not at the end of the wait
  ASSERT_EQ(::waitpid(pid, nullptr, 0), pid);
  t0 = clock_type::now();
  EXPECT_TRUE(watch.wait(10s).exited);  // reaped: still seen, at once
  EXPECT_LT(clock_type::now() - t0, 5s);
}

TEST(exit_watch, the_callers_descriptor_wakes_it_too) {
  int w = -1;
  pid_t pid = child_until_pipe_closes(w);
  ASSERT_GT(pid, 0);
  int notice[2];
  ASSERT_EQ(::pipe(notice), 0);
  {
    exit_watch watch(pid);
    auto woke = watch.wait(10ms, notice[0]);
    EXPECT_FALSE(woke.fd_ready);
    EXPECT_FALSE(woke.exited);
    ASSERT_EQ(::write(notice[1], "x", 1), 1);
    auto t0 = clock_type::now();
    woke = watch.wait(10s, notice[0]);
    EXPECT_TRUE(woke.fd_ready);
    EXPECT_FALSE(woke.exited);
    EXPECT_LT(clock_type::now() - t0, 5s);
  }
  ::close(w);
  ::close(notice[0]);
  ::close(notice[1]);
  ::waitpid(pid, nullptr, 0);
}

TEST(exit_watch, a_pid_that_does_not_exist_has_exited) {
  pid_t pid = ::fork();
  if (pid == 0) _exit(0);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::waitpid(pid, nullptr, 0), pid);  // gone (a new process could take the pid: not within this test)
  exit_watch watch(pid);
  EXPECT_TRUE(watch.sees_exit());
  auto t0 = clock_type::now();
  EXPECT_TRUE(watch.wait(10s).exited);
  EXPECT_LT(clock_type::now() - t0, 5s);
  // The caller's descriptor is still looked at, without waiting.
  int notice[2];
  ASSERT_EQ(::pipe(notice), 0);
  ASSERT_EQ(::write(notice[1], "x", 1), 1);
  auto woke = watch.wait(10s, notice[0]);
  EXPECT_TRUE(woke.exited);
  EXPECT_TRUE(woke.fd_ready);
  ::close(notice[0]);
  ::close(notice[1]);
  // No process at all.
  EXPECT_TRUE(exit_watch(0).wait(10s).exited);
  EXPECT_TRUE(exit_watch(-1).wait(10s).exited);
  // Nor has it children, and its tree is itself.
  EXPECT_TRUE(children_of(pid).empty());
  EXPECT_EQ(process_tree(pid, 64), std::vector<pid_t>{pid});
  EXPECT_TRUE(children_of(0).empty());
  EXPECT_TRUE(children_of(-1).empty());
}

// A /proc of the test's own, read through a sysroot.
class made_up_proc : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/mrcheck-proc-tree-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& path, const std::string& text) {
    fs::path p = dir_ / path;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  void mkdir(const std::string& path) { fs::create_directories(dir_ / path); }
  sysroot root() {
    auto r = sysroot::open(dir_);
    EXPECT_TRUE(r.is_ok());
    return r.is_ok() ? *r : sysroot{};
  }
  fs::path dir_;
};

TEST_F(made_up_proc, children_files_keep_only_pids) {
  // Every thread's file, the threads in name order; what is not a positive pid is skipped.
  write("proc/100/task/100/children", "101 abc 0 -5 7x 102\n");
  write("proc/100/task/103/children", "104 ");
  write("proc/100/task/self/children", "999");  // not a thread id
  write("proc/101/task/101/children", "");
  auto r = root();
  EXPECT_EQ(children_of(100, r), (std::vector<pid_t>{101, 102, 104}));
  EXPECT_TRUE(children_of(101, r).empty());
  EXPECT_TRUE(children_of(555, r).empty());  // no such process
}

TEST_F(made_up_proc, without_children_files_the_stat_parent_decides) {
  // A kernel without CONFIG_PROC_CHILDREN: the task directory, no children file.
  mkdir("proc/200/task/200");
  write("proc/201/stat", "201 (a) b) S 200 1 1 0");  // a comm with ") " in it
  write("proc/1000/stat", "1000 (x) R 200 1 1 0");   // in pid order, not name order
  write("proc/99/stat", "99 (y) S 200 1 1 0");
  write("proc/202/stat", "202 (x) S 2000 1 1 0");  // another parent
  write("proc/203/stat", "garbage");               // no comm
  write("proc/204/stat", "204 (y) S");             // no parent field
  write("proc/205/stat", "205 (z) S -1 1");        // not a pid
  write("proc/206/stat", "206 (z)S 200 1");        // not the stat layout
  write("proc/abc/stat", "207 (z) S 200 1");       // not a process directory
  auto r = root();
  EXPECT_EQ(children_of(200, r), (std::vector<pid_t>{99, 201, 1000}));
}

TEST_F(made_up_proc, a_tree_that_loops_is_still_bounded) {
  write("proc/300/task/300/children", "301");
  write("proc/301/task/301/children", "300");
  auto r = root();
  auto tree = process_tree(300, 64, r);
  ASSERT_EQ(tree.size(), 64u);
  EXPECT_EQ(tree[0], 300);
  EXPECT_EQ(tree[1], 301);
  EXPECT_EQ(tree[2], 300);
}

}  // namespace
}  // namespace mrcheck
