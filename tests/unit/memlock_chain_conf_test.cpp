// slurm.conf: PropagateResourceLimits[Except], TaskProlog, SlurmdPidFile, through `include` lines.
#include <mrcheck/memlock_chain.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace mrcheck {
namespace {

class MemlockChainConf : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("mrcheck_conf_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_ / "etc/slurm/conf.d");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void write(const std::string& rel, const std::string& text) { std::ofstream(dir_ / rel) << text; }
  result<slurm_conf_facts> read() {
    auto root = sysroot::open(dir_);
    EXPECT_TRUE(root);
    return read_slurm_conf(*root, "/etc/slurm/slurm.conf");
  }
  std::filesystem::path dir_;
};

TEST_F(MemlockChainConf, DefaultIsAllPropagated) {
  write("etc/slurm/slurm.conf", "ClusterName=c\nSlurmdPidFile=/run/slurmd-%n.pid\n");
  auto c = read();
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_TRUE(c->memlock_propagated);
  EXPECT_EQ(c->slurmd_pid_file, "/run/slurmd-%n.pid");
  EXPECT_TRUE(c->task_prolog.empty());
}

TEST_F(MemlockChainConf, ExceptMemlockInAnIncludedFileWins) {
  write("etc/slurm/slurm.conf", "include conf.d/*.conf\n# PropagateResourceLimitsExcept=NONE\nTaskProlog=/x/tp.sh\n");
  write("etc/slurm/conf.d/limits.conf", "  propagateresourcelimitsexcept=NOFILE,MEMLOCK   # the fix\n");
  auto c = read();
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_FALSE(c->memlock_propagated);
  EXPECT_NE(c->propagate_setting.find("limits.conf:1"), std::string::npos) << c->propagate_setting;
  EXPECT_EQ(c->task_prolog, "/x/tp.sh");
}

TEST_F(MemlockChainConf, ListsAndBadNames) {
  EXPECT_TRUE(*memlock_propagated_by("ALL", false));
  EXPECT_FALSE(*memlock_propagated_by("NONE", false));
  EXPECT_TRUE(*memlock_propagated_by("CORE,MEMLOCK", false));
  EXPECT_FALSE(*memlock_propagated_by("CORE,NOFILE", false));
  EXPECT_FALSE(*memlock_propagated_by("MEMLOCK", true));
  EXPECT_TRUE(*memlock_propagated_by("NONE", true));
  EXPECT_TRUE(*memlock_propagated_by("CORE", true));
  EXPECT_FALSE(memlock_propagated_by("MEMLOK", true));
  write("etc/slurm/slurm.conf", "PropagateResourceLimits=BOGUS\n");
  auto c = read();
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message().find("slurm.conf:1"), std::string::npos) << c.error().message();
}

TEST_F(MemlockChainConf, MissingFileIsAnError) { EXPECT_FALSE(read()); }

TEST(MemlockChainPidFile, Expands) {
  EXPECT_EQ(expand_slurmd_pid_file("/run/slurmd-%n-%h.pid", "n1", "host1"), "/run/slurmd-n1-host1.pid");
  EXPECT_EQ(expand_slurmd_pid_file("/run/slurmd.pid", "n1", "h"), "/run/slurmd.pid");
}

}  // namespace
}  // namespace mrcheck
