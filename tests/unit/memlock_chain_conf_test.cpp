// slurm.conf: PropagateResourceLimits[Except], TaskProlog, SlurmdPidFile, through `include` lines; the one
// reader (slurm_conf.h) that the plugin and the prolog's matrix share (fuzz finding F4).
#include <mrcheck/matrix.h>
#include <mrcheck/slurm_conf.h>
#include <mrcheck/step.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace mrcheck {
namespace {

class MemlockChainConf : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("mrcheck_conf_" + std::to_string(::getpid()) + "_" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_ / "etc/slurm/conf.d");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void write(const std::string& rel, const std::string& text) { std::ofstream(dir_ / rel) << text; }
  result<slurm_conf_facts> read() {
    auto root = sysroot::open(dir_);
    EXPECT_TRUE(root);
    return read_slurm_conf_facts(*root, "/etc/slurm/slurm.conf");
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
  write("etc/slurm/slurm.conf",
        "include conf.d/limits.conf\n# PropagateResourceLimitsExcept=NONE\nTaskProlog=/x/tp.sh\n");
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

// Finding F6: the include path is the word after `include`, not the first place its text occurs in the line.
TEST_F(MemlockChainConf, IncludePathIsTheWordAfterInclude) {
  write("etc/slurm/slurm.conf", "Include inc\nClusterName=Blue\ninclude   %c.conf   \n");
  write("etc/slurm/inc", "TaskProlog=/from/inc\n");
  write("etc/slurm/blue.conf", "PropagateResourceLimitsExcept=MEMLOCK\n");
  auto c = read();
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_EQ(c->task_prolog, "/from/inc");
  EXPECT_FALSE(c->memlock_propagated) << c->propagate_setting;
  EXPECT_NE(c->propagate_setting.find("/etc/slurm/blue.conf:1"), std::string::npos) << c->propagate_setting;
  EXPECT_TRUE(c->problems.empty()) << c->problems.front();
}

// Fuzz finding F10: Slurm reads a line as a C string, so a NUL ends it; before, the NUL stayed in the include
// name, the file was read a second time under that name and the raw NUL reached the problem lines.
TEST_F(MemlockChainConf, NulEndsTheLineAsInSlurm) {
  write("etc/slurm/slurm.conf", std::string("include inc\0junk\nTaskProlog=/tp\0/more\ninclude inc\n", 50));
  write("etc/slurm/inc", "ClusterName=c\n");
  auto c = read();
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_EQ(c->task_prolog, "/tp");
  ASSERT_EQ(c->problems.size(), 1u);  // the second include of the same file, and nothing else
  EXPECT_EQ(c->problems[0].find('\0'), std::string::npos);
  EXPECT_NE(c->problems[0].find("already read"), std::string::npos) << c->problems[0];
}

TEST_F(MemlockChainConf, IncludeCyclesGlobsAndMissingFilesAreProblemsNotErrors) {
  write("etc/slurm/slurm.conf",
        "include slurm.conf\ninclude slurm.conf\ninclude conf.d/*.conf\ninclude /nope.conf\n"
        "PropagateResourceLimitsExcept=MEMLOCK\n");
  write("etc/slurm/conf.d/a.conf", "PropagateResourceLimitsExcept=NONE\n");
  auto c = read();
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_FALSE(c->memlock_propagated);  // the glob is not expanded: a.conf is never read (Slurm 22.05)
  ASSERT_EQ(c->problems.size(), 4u);
  EXPECT_NE(c->problems[0].find("slurm.conf:1: include /etc/slurm/slurm.conf: already read"), std::string::npos)
      << c->problems[0];
  EXPECT_NE(c->problems[2].find("does not expand globs"), std::string::npos) << c->problems[2];
  EXPECT_NE(c->problems[3].find("slurm.conf:4: include"), std::string::npos) << c->problems[3];
}

TEST(SlurmConfText, CommentsEscapesContinuationsQuotesAndObjectLines) {
  slurm_conf_settings c;
  parse_slurm_conf_text(
      "Prolog=/a\\#b # comment\n"                   // `\#` is a literal '#'
      "Epilog=/x\\\\#c\n"                           // `\\` then a comment
      "PropagateResourceLimits=CORE,\\\nMEMLOCK\n"  // continued line: the value is glued back
      "  SlurmdPidFile = \"/run/with space.pid\"  UsePAM=1\n"
      "NodeName=n1 TaskProlog=/not/global CPUs=2\n"
      "taskprolog=/last/wins junk\n",
      "/etc/slurm/slurm.conf", c);
  ASSERT_NE(c.find("TaskProlog"), nullptr);
  EXPECT_EQ(c.find("TaskProlog")->value, "/last/wins");
  EXPECT_EQ(c.find("TaskProlog")->where, "/etc/slurm/slurm.conf:7");
  EXPECT_EQ(c.find("Prolog")->value, "/a#b");
  EXPECT_EQ(c.find("epilog")->value, "/x\\");
  EXPECT_EQ(c.find("PropagateResourceLimits")->value, "CORE,MEMLOCK");
  EXPECT_EQ(c.find("PropagateResourceLimits")->where, "/etc/slurm/slurm.conf:3");
  EXPECT_EQ(c.find("SlurmdPidFile")->value, "/run/with space.pid");
  EXPECT_EQ(c.find("UsePAM")->value, "1");
  EXPECT_EQ(c.find("CPUs"), nullptr);
  ASSERT_EQ(c.problems.size(), 1u);
  EXPECT_NE(c.problems[0].find(":7: not Key=Value: junk"), std::string::npos) << c.problems[0];
}

TEST(SlurmConfText, PropagationIsSlurmsParseRlimits) {
  EXPECT_TRUE(*memlock_propagated_by("RLIMIT_MEMLOCK", false));
  EXPECT_TRUE(*memlock_propagated_by("core memlock", false));
  EXPECT_FALSE(*memlock_propagated_by("RLIMIT_MEMLOCK,NOFILE", true));
  // NONE and ALL stand alone in Slurm; inside a list they are "Bad rlimit name" (slurm_rlimits_info.c).
  auto bad = memlock_propagated_by("NONE,MEMLOCK", false);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("ALL and NONE stand alone"), std::string::npos) << bad.error().message();
  EXPECT_FALSE(memlock_propagated_by("ALL,MEMLOCK", true));
  EXPECT_FALSE(memlock_propagated_by("", false));
  EXPECT_FALSE(memlock_propagated_by(",", false));
}

// Finding F4: the plugin's facts and the prolog's matrix facts read the same file the same way (one reader, one
// value type); the matrix also refuses a file whose includes it could not follow.
TEST_F(MemlockChainConf, PluginAndPrologAgree) {
  const char* cases[] = {
      "PropagateResourceLimits=NONE\n",
      "PropagateResourceLimits=RLIMIT_MEMLOCK\n",
      "PropagateResourceLimits=CORE\n",
      "PropagateResourceLimitsExcept=NOFILE,memlock\n",
      "PropagateResourceLimitsExcept=CORE\nPropagateResourceLimits=NONE\n",
      "PropagateResourceLimitsExcept=MEMLOCK\\#x\n",
      "ClusterName=c\n",
  };
  for (const char* text : cases) {
    write("etc/slurm/slurm.conf", text);
    auto chain = read();
    auto root = sysroot::open(dir_);
    ASSERT_TRUE(root);
    auto matrix = collect_matrix_facts(*root, "/etc/slurm/slurm.conf", false).slurm_conf;
    ASSERT_EQ(chain.is_ok(), matrix.is_ok()) << text;
    if (!chain) continue;
    EXPECT_EQ(chain->memlock_propagated, matrix->memlock_propagated) << text;
    EXPECT_EQ(matrix->path, "/etc/slurm/slurm.conf");
  }
  write("etc/slurm/slurm.conf", "PropagateResourceLimits=NONE,MEMLOCK\n");
  auto root = sysroot::open(dir_);
  EXPECT_FALSE(read());
  EXPECT_FALSE(collect_matrix_facts(*root, "/etc/slurm/slurm.conf", false).slurm_conf);
  write("etc/slurm/slurm.conf", "PropagateResourceLimitsExcept=MEMLOCK\ninclude missing.conf\n");
  ASSERT_TRUE(read());
  EXPECT_EQ(read()->problems.size(), 1u);
  auto partial = collect_matrix_facts(*root, "/etc/slurm/slurm.conf", false).slurm_conf;
  ASSERT_FALSE(partial);
  EXPECT_NE(partial.error().message().find("missing.conf"), std::string::npos) << partial.error().message();
}

// A value the facts do not take is added to the reader's problems (it used to replace them).
TEST_F(MemlockChainConf, KeyProblemsFollowTheReadersProblems) {
  write("etc/slurm/slurm.conf", "include missing.conf\nUnkillableStepTimeout=soon\n");
  auto c = read();
  ASSERT_TRUE(c) << c.error().message();
  ASSERT_EQ(c->problems.size(), 2u);
  EXPECT_NE(c->problems[0].find("missing.conf"), std::string::npos) << c->problems[0];
  EXPECT_NE(c->problems[1].find("UnkillableStepTimeout=soon"), std::string::npos) << c->problems[1];
  EXPECT_EQ(c->unkillable_step_timeout, std::chrono::seconds(60));
}

TEST(SlurmConfPath, AbsoluteSlurmConfOnTheHostOnly) {
  const char* saved = std::getenv("SLURM_CONF");
  std::string keep = saved ? saved : "";
  ::setenv("SLURM_CONF", "/opt/slurm/etc/slurm.conf", 1);
  EXPECT_EQ(slurm_conf_path(sysroot()), "/opt/slurm/etc/slurm.conf");
  auto tree = sysroot::open(std::filesystem::temp_directory_path());
  ASSERT_TRUE(tree);
  EXPECT_EQ(slurm_conf_path(*tree), "/etc/slurm/slurm.conf");  // a tree brings no environment
  ::setenv("SLURM_CONF", "etc/slurm.conf", 1);
  EXPECT_EQ(slurm_conf_path(sysroot()), "/etc/slurm/slurm.conf");  // relative: not followed
  ::unsetenv("SLURM_CONF");
  EXPECT_EQ(slurm_conf_path(sysroot()), "/etc/slurm/slurm.conf");
  if (saved) ::setenv("SLURM_CONF", keep.c_str(), 1);
}

TEST(MemlockChainPidFile, Expands) {
  EXPECT_EQ(expand_slurmd_pid_file("/run/slurmd-%n-%h.pid", "n1", "host1"), "/run/slurmd-n1-host1.pid");
  EXPECT_EQ(expand_slurmd_pid_file("/run/slurmd.pid", "n1", "h"), "/run/slurmd.pid");
}

}  // namespace
}  // namespace mrcheck
