#include <mrcheck/sysroot.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

namespace mrcheck {
namespace {

namespace fs = std::filesystem;

class sysroot_test : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fs::path("mrcheck_sysroot_" + std::to_string(::getpid()));
    fs::create_directories(dir_ / "sys/class/infiniband/mlx5_0");
    std::ofstream(dir_ / "sys/class/infiniband/mlx5_0/fw_ver") << "28.39.1002\n";
    fs::create_symlink("../../../0000:3b:00.0", dir_ / "sys/class/infiniband/mlx5_0/device");
    std::ofstream(dir_ / "big") << std::string(5000, 'x');
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(sysroot_test, reads_values_through_the_root) {
  auto root = sysroot::open(dir_);
  ASSERT_TRUE(root.is_ok());
  auto v = root->read_value("/sys/class/infiniband/mlx5_0/fw_ver");
  ASSERT_TRUE(v.is_ok());
  EXPECT_EQ(*v, "28.39.1002");
  auto names = root->list("/sys/class/infiniband");
  ASSERT_TRUE(names.is_ok());
  EXPECT_EQ(names->size(), 1u);
  auto link = root->read_link("/sys/class/infiniband/mlx5_0/device");
  ASSERT_TRUE(link.is_ok());
  EXPECT_EQ(*link, "../../../0000:3b:00.0");
}

TEST_F(sysroot_test, missing_and_oversized_are_errors_with_the_path) {
  auto root = sysroot::open(dir_);
  ASSERT_TRUE(root.is_ok());
  auto m = root->read("/proc/1/limits");
  ASSERT_FALSE(m.is_ok());
  EXPECT_EQ(m.error().err(), ENOENT);
  EXPECT_NE(m.error().message().find("/proc/1/limits"), std::string::npos);
  auto big = root->read("/big", 1000);
  ASSERT_FALSE(big.is_ok());
  EXPECT_NE(big.error().message().find("refusing to truncate"), std::string::npos);
  EXPECT_FALSE(root->read("/sys/class/infiniband").is_ok());
}

TEST_F(sysroot_test, open_rejects_missing_root) {
  auto r = sysroot::open(dir_ / "nope");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.error().message().find("does not exist"), std::string::npos);
}

TEST_F(sysroot_test, recorder_sees_every_access) {
  auto root = sysroot::open(dir_);
  ASSERT_TRUE(root.is_ok());
  std::set<std::string> seen;
  root->set_recorder([&](sysroot::access, const std::string& p) { seen.insert(p); });
  (void)root->read_value("/sys/class/infiniband/mlx5_0/fw_ver");
  (void)root->list("/sys/class/infiniband");
  (void)root->read_link("/sys/class/infiniband/mlx5_0/device");
  (void)root->read("/nope");
  EXPECT_EQ(seen, (std::set<std::string>{"/sys/class/infiniband/mlx5_0/fw_ver", "/sys/class/infiniband",
                                         "/sys/class/infiniband/mlx5_0/device"}));
}

// B9: a user's dump replayed as root (`mrcheck report --root`, `fleet`, `mrcheck-prolog --root`) must not read
// root's files through a link in the tree: an absolute link, a `../` link and a linked directory all resolve
// inside the tree (or fail), never outside it. On the old code each printed the outside file as the fact.
TEST_F(sysroot_test, no_link_of_a_dump_tree_leads_out_of_it) {
  fs::path outside = dir_.string() + "_secret";
  std::ofstream(outside) << "root-only secret\n";
  fs::create_directories(dir_ / "proc/sys/kernel");
  fs::create_symlink(outside, dir_ / "proc/sys/kernel/osrelease");                                      // absolute
  fs::create_symlink("../../../../" + outside.filename().string(), dir_ / "proc/sys/kernel/hostname");  // ../
  fs::create_symlink(outside.parent_path(), dir_ / "etc");  // a directory outside
  auto root = sysroot::open(dir_);
  ASSERT_TRUE(root.is_ok());
  for (const char* p : {"/proc/sys/kernel/osrelease", "/proc/sys/kernel/hostname"}) {
    auto v = root->read_value(p);
    EXPECT_TRUE(!v || v->find("secret") == std::string::npos) << p << ": " << *v;
  }
  auto v = root->read_value("/etc/" + outside.filename().string());
  EXPECT_TRUE(!v || v->find("secret") == std::string::npos) << *v;
  auto names = root->list("/etc");
  EXPECT_TRUE(!names || std::find(names->begin(), names->end(), outside.filename().string()) == names->end());
  // A link inside the tree, absolute as the node saw it, still reads (the dump's own /proc/sys, not the host's).
  std::ofstream(dir_ / "proc/sys/kernel/real") << "6.1.0-dump\n";
  fs::create_symlink("/proc/sys/kernel/real", dir_ / "proc/sys/kernel/version");
  auto in = root->read_value("/proc/sys/kernel/version");
  if (in) {
    EXPECT_EQ(*in, "6.1.0-dump");  // openat2: resolved inside the tree
  } else {
    EXPECT_NE(in.error().message().find("read"), std::string::npos);  // before 5.6: every link refused
  }
  fs::remove(outside);
}

TEST(sysroot_host, reads_real_proc) {
  sysroot root;
  auto v = root.read_value("/proc/self/limits");
  ASSERT_TRUE(v.is_ok());
  EXPECT_NE(v->find("Max locked memory"), std::string::npos);
}

}  // namespace
}  // namespace mrcheck
