// The chain parsers: /proc/PID/limits, /proc/PID/stat, /proc/PID/status and the ancestor walk.
#include <mrcheck/facts.h>

#include <gtest/gtest.h>

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace mrcheck {
namespace {

namespace fs = std::filesystem;

constexpr const char* k_limits_8m =
    "Limit                     Soft Limit           Hard Limit           Units     \n"
    "Max cpu time              unlimited            unlimited            seconds   \n"
    "Max open files            1024                 1048576              files     \n"
    "Max locked memory         8388608              8388608              bytes     \n"
    "Max address space         unlimited            unlimited            bytes     \n";

TEST(facts_limits, parses_numbers) {
  auto m = parse_memlock_from_limits(k_limits_8m);
  ASSERT_TRUE(m.is_ok()) << m.error().message();
  EXPECT_EQ(m->soft, 8388608u);
  EXPECT_EQ(m->hard, 8388608u);
}

TEST(facts_limits, parses_unlimited_and_mixed) {
  auto m = parse_memlock_from_limits("Max locked memory         unlimited            unlimited            bytes\n");
  ASSERT_TRUE(m.is_ok());
  EXPECT_EQ(m->soft, k_unlimited);
  EXPECT_EQ(m->hard, k_unlimited);
  auto mixed = parse_memlock_from_limits("Max locked memory 65536 unlimited bytes");
  ASSERT_TRUE(mixed.is_ok());
  EXPECT_EQ(mixed->soft, 65536u);
  EXPECT_EQ(mixed->hard, k_unlimited);
}

TEST(facts_limits, parses_zero_and_odd_spacing) {
  auto m = parse_memlock_from_limits("  Max locked memory\t0 \t  \t 0\tbytes  \r\n");
  ASSERT_TRUE(m.is_ok()) << m.error().message();
  EXPECT_EQ(m->soft, 0u);
  EXPECT_EQ(m->hard, 0u);
}

TEST(facts_limits, huge_value_parses_exactly) {
  auto m = parse_memlock_from_limits("Max locked memory 18446744073709551614 18446744073709551614 bytes\n");
  ASSERT_TRUE(m.is_ok());
  EXPECT_EQ(m->soft, 18446744073709551614u);
}

TEST(facts_limits, refuses_truncated_and_garbage) {
  // Cut in the middle of the hard limit: without the units column it could read as a smaller number.
  EXPECT_FALSE(parse_memlock_from_limits("Max locked memory         8388608              83").is_ok());
  EXPECT_FALSE(parse_memlock_from_limits("Max locked memory         8388608").is_ok());
  EXPECT_FALSE(parse_memlock_from_limits("Limit Soft Hard Units\nMax cpu time unlimited unlimited seconds\n").is_ok());
  EXPECT_FALSE(parse_memlock_from_limits("").is_ok());
  EXPECT_FALSE(parse_memlock_from_limits("Max locked memory -1 5 bytes\n").is_ok());
  EXPECT_FALSE(parse_memlock_from_limits("Max locked memory 12x 5 bytes\n").is_ok());
  EXPECT_FALSE(parse_memlock_from_limits("Max locked memory 99999999999999999999999 5 bytes\n").is_ok());
  EXPECT_FALSE(parse_memlock_from_limits("Max locked memory 5 5 pages\n").is_ok());
  constexpr char junk[] = "Max locked memory \x01\xff\x00 5 bytes";
  EXPECT_FALSE(parse_memlock_from_limits(std::string(junk, sizeof junk - 1)).is_ok());
}

TEST(facts_stat, plain_and_hostile_comm) {
  auto s = parse_proc_stat("1234 (bash) S 1000 1234 1234 34816 1234 4194304 0 0\n");
  ASSERT_TRUE(s.is_ok()) << s.error().message();
  EXPECT_EQ(s->pid, 1234);
  EXPECT_EQ(s->comm, "bash");
  EXPECT_EQ(s->state, 'S');
  EXPECT_EQ(s->ppid, 1000);
  // A process may name itself "a) R 1 (b"; the last ')' is the real end.
  auto h = parse_proc_stat("77 (a) R 1 (b c)) S 42 77 77 0\n");
  ASSERT_TRUE(h.is_ok());
  EXPECT_EQ(h->comm, "a) R 1 (b c)");
  EXPECT_EQ(h->ppid, 42);
  auto empty = parse_proc_stat("5 () Z 0 0");
  ASSERT_TRUE(empty.is_ok());
  EXPECT_EQ(empty->comm, "");
  EXPECT_EQ(empty->ppid, 0);
}

TEST(facts_stat, refuses_malformed) {
  EXPECT_FALSE(parse_proc_stat("").is_ok());
  EXPECT_FALSE(parse_proc_stat("12 bash S 1").is_ok());
  EXPECT_FALSE(parse_proc_stat("12 (bash)").is_ok());
  EXPECT_FALSE(parse_proc_stat("12 (bash) S").is_ok());
  EXPECT_FALSE(parse_proc_stat("x (bash) S 1").is_ok());
  EXPECT_FALSE(parse_proc_stat("12 (bash) S -4").is_ok());
  EXPECT_FALSE(parse_proc_stat("12 (bash) SS 1").is_ok());
  EXPECT_FALSE(parse_proc_stat("12 )bash( S 1").is_ok());
}

TEST(facts_status, real_uid) {
  auto u = parse_status_uid("Name:\tbash\nUid:\t1000\t0\t0\t0\nGid:\t100\t100\t100\t100\n");
  ASSERT_TRUE(u.is_ok());
  EXPECT_EQ(*u, 1000u);
  EXPECT_FALSE(parse_status_uid("Name:\tbash\n").is_ok());
  EXPECT_FALSE(parse_status_uid("Uid:\tabc\n").is_ok());
}

class facts_chain : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fs::path("mrcheck_chain_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "proc");
  }
  void TearDown() override { fs::remove_all(dir_); }
  void proc(int pid, int ppid, const std::string& comm, const std::string& soft, const std::string& hard, int uid = 0) {
    auto d = dir_ / "proc" / std::to_string(pid);
    fs::create_directories(d);
    std::ofstream(d / "stat") << pid << " (" << comm << ") S " << ppid << " 1 1 0 -1 4194560\n";
    std::ofstream(d / "limits") << "Limit                     Soft Limit           Hard Limit           Units\n"
                                << "Max locked memory         " << soft << "  " << hard << "  bytes\n";
    std::ofstream(d / "status") << "Name:\t" << comm << "\nUid:\t" << uid << "\t" << uid << "\t" << uid << "\t" << uid
                                << "\n";
  }
  sysroot root() {
    auto r = sysroot::open(dir_);
    EXPECT_TRUE(r.is_ok());
    return *r;
  }
  fs::path dir_;
};

TEST_F(facts_chain, marks_the_hop_that_dropped) {
  proc(1, 0, "systemd", "8388608", "8388608");
  proc(100, 1, "slurmd", "unlimited", "unlimited");  // raised by root: a rise is not a drop
  proc(200, 100, "slurmstepd", "unlimited", "unlimited");
  proc(300, 200, "bash", "65536", "unlimited", 1000);
  proc(400, 300, "python3 my)job", "65536", "unlimited", 1000);
  auto c = read_chain(root(), 400);
  ASSERT_TRUE(c.is_ok()) << c.error().message();
  ASSERT_EQ(c->size(), 5u);
  EXPECT_EQ((*c)[0].pid, 400);
  EXPECT_EQ((*c)[0].comm, "python3 my)job");
  EXPECT_EQ((*c)[0].uid, 1000u);
  EXPECT_FALSE((*c)[0].lowered);
  EXPECT_EQ((*c)[1].comm, "bash");
  EXPECT_TRUE((*c)[1].lowered);
  EXPECT_EQ((*c)[1].memlock->soft, 65536u);
  EXPECT_FALSE((*c)[2].lowered);
  EXPECT_FALSE((*c)[3].lowered);
  EXPECT_EQ((*c)[4].pid, 1);
  EXPECT_FALSE((*c)[4].lowered);
}

TEST_F(facts_chain, hard_limit_drop_counts_and_unknown_never_marks) {
  proc(1, 0, "init", "unlimited", "unlimited");
  proc(10, 1, "sshd", "unlimited", "8388608");
  proc(20, 10, "bash", "unlimited", "8388608");
  fs::remove(dir_ / "proc/20/limits");
  proc(30, 20, "sh", "1", "1");
  auto c = read_chain(root(), 30);
  ASSERT_TRUE(c.is_ok());
  ASSERT_EQ(c->size(), 4u);
  EXPECT_FALSE((*c)[0].lowered);  // its parent's limits are unknown
  EXPECT_FALSE((*c)[1].memlock.is_ok());
  EXPECT_FALSE((*c)[1].lowered);
  EXPECT_TRUE((*c)[2].lowered);  // hard limit dropped at sshd
}

TEST_F(facts_chain, vanished_ancestor_ends_the_chain) {
  proc(50, 49, "bash", "65536", "65536");  // 49 is gone
  auto c = read_chain(root(), 50);
  ASSERT_TRUE(c.is_ok());
  ASSERT_EQ(c->size(), 1u);
  EXPECT_FALSE((*c)[0].lowered);
  EXPECT_FALSE(read_chain(root(), 49).is_ok());  // the start itself must exist
  EXPECT_FALSE(read_chain(root(), 0).is_ok());
  EXPECT_FALSE(read_chain(root(), -3).is_ok());
}

TEST_F(facts_chain, loop_guard) {
  proc(5, 6, "a", "1", "1");
  proc(6, 5, "b", "1", "1");
  auto c = read_chain(root(), 5);
  ASSERT_TRUE(c.is_ok());
  EXPECT_EQ(c->size(), 2u);
}

TEST_F(facts_chain, stat_naming_another_pid_is_refused) {
  proc(7, 1, "x", "1", "1");
  std::ofstream(dir_ / "proc/7/stat") << "8 (x) S 1 1\n";
  EXPECT_FALSE(read_chain(root(), 7).is_ok());
}

TEST_F(facts_chain, garbage_files_do_not_crash) {
  proc(1, 0, "init", "unlimited", "unlimited");
  proc(9, 1, "junk", "1", "1");
  constexpr char junk[] = "\x00\x01\xff(()) Max locked memory";
  std::ofstream(dir_ / "proc/9/limits") << std::string(junk, sizeof junk - 1);
  fs::remove(dir_ / "proc/9/status");
  fs::create_directories(dir_ / "proc/9/status");  // a directory where a file is expected
  auto c = read_chain(root(), 9);
  ASSERT_TRUE(c.is_ok());
  EXPECT_FALSE((*c)[0].memlock.is_ok());
  EXPECT_FALSE((*c)[0].uid.has_value());
  // A 2 MB stat file is refused, not read.
  std::ofstream(dir_ / "proc/9/stat") << "9 (" << std::string(2 << 20, 'x') << ") S 1\n";
  EXPECT_FALSE(read_chain(root(), 9).is_ok());
}

TEST(facts_chain_host, reads_this_process_and_its_ancestors) {
  struct rlimit rl {};
  ASSERT_EQ(::getrlimit(RLIMIT_MEMLOCK, &rl), 0);
  auto c = read_chain(sysroot(), ::getpid());
  ASSERT_TRUE(c.is_ok()) << c.error().message();
  ASSERT_GE(c->size(), 1u);
  EXPECT_EQ((*c)[0].pid, ::getpid());
  EXPECT_EQ((*c)[0].ppid, ::getppid());
  ASSERT_TRUE((*c)[0].memlock.is_ok());
  std::uint64_t soft = rl.rlim_cur == RLIM_INFINITY ? k_unlimited : rl.rlim_cur;
  EXPECT_EQ((*c)[0].memlock->soft, soft);
  EXPECT_EQ((*c)[0].uid, ::getuid());
}

}  // namespace
}  // namespace mrcheck
