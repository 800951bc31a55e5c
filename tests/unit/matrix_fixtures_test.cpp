// The whole path the prolog takes, on fixture trees: collect_facts + collect_matrix_facts through a sysroot,
// judge_matrix with the shipped rules, plan_action. Each misalignment tree drains for its own check with the
// exact reason; the aligned tree and the real H200 capture drain nothing.
#include "prolog/node_action.h"

#include <mrcheck/check_registry.h>
#include <mrcheck/checks.h>
#include <mrcheck/facts.h>
#include <mrcheck/matrix.h>
#include <mrcheck/sysroot.h>

#include "judge.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace mrcheck {
namespace {

struct judged {
  report rep;
  desired_action action;
};

judged judge_tree(const std::string& name) {
  auto root = sysroot::open(std::string(MRCHECK_FIXTURES_DIR) + "/" + name);
  EXPECT_TRUE(root) << name;
  collect_options opts;
  node_facts f = collect_facts(*root, opts);
  matrix_facts extra = collect_matrix_facts(*root, "/etc/slurm/slurm.conf", !f.libibverbs.is_ok());
  auto rules = load_matrix_rules(std::string(MRCHECK_FIXTURES_DIR) + "/../../etc/mrcheck-rules.conf");
  EXPECT_TRUE(rules);
  judged j;
  j.rep = judge_matrix(f, *rules, extra);
  // As mrcheck-prolog does: the node's memory checks after the matrix.
  j.rep.checks.push_back(check_max_map_count(f, *rules));
  j.rep.checks.push_back(check_hugepages(f, *rules));
  j.action = plan_action(j.rep, fail_policy::warn);
  return j;
}

struct fixture_case {
  const char* tree;
  const char* check;
  const char* reason;
};

class MatrixFixture : public ::testing::TestWithParam<fixture_case> {};

TEST_P(MatrixFixture, DrainsForItsCheckWithTheExactReason) {
  const auto& c = GetParam();
  auto j = judge_tree(c.tree);
  const check_result* r = j.rep.find(c.check);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->result, verdict::fail) << r->summary;
  EXPECT_FALSE(r->hint.empty());
  EXPECT_EQ(j.action.what, desired_action::kind::drain);
  EXPECT_EQ(j.action.reason, c.reason);
}

INSTANTIATE_TEST_SUITE_P(
    Trees, MatrixFixture,
    ::testing::Values(
        fixture_case{"matrix_inbox_under_ofed", "rdma_stack",
                     "mrcheck: rdma_stack (node): inbox mlx5_core (kernel 6.1.0-18-amd64) under OFED user space "
                     "OFED-internal-24.10-1.1.4"},
        fixture_case{"matrix_ofed_under_inbox", "rdma_stack",
                     "mrcheck: rdma_stack (node): OFED mlx5_core 24.10-1.1.4 under distro rdma-core 44.0"},
        fixture_case{"matrix_hca_fw_old", "hca_fw",
                     "mrcheck: hca_fw mlx5_0 (node): ConnectX-7 fw 28.33.0800 < 28.35.1012"},
        fixture_case{
            "matrix_no_gpudirect", "gpudirect",
            "mrcheck: gpudirect (node): no nvidia_peermem and no DMA-BUF (driver is not the open kernel module)"},
        fixture_case{"matrix_gpu_driver_old", "gpu_driver",
                     "mrcheck: gpu_driver (node): driver proprietary 470.223.02 < 525"},
        fixture_case{"matrix_slurmd_memlock_8m", "slurmd_memlock",
                     "mrcheck: slurmd_memlock (node): slurmd hard memlock 8 MiB < unlimited"},
        fixture_case{"matrix_max_map_count_low", "max_map_count",
                     "mrcheck: max_map_count (node): vm.max_map_count 16384 < 65530"},
        fixture_case{"matrix_hugepages_hog", "hugepages",
                     "mrcheck: hugepages (node): 1920 hugepages (1.9 TiB) reserved = 95% of memory > 90%"}));

// Nodes of other RDMA families are seen and judged by their own rules, not mlx5's (docs/transports.md).
TEST(MatrixFixtureTrees, EfaAndRoceNodesAreJudgedByTheirFamily) {
  for (const char* tree : {"efa_node", "roce_bnxt_node"}) {
    SCOPED_TRACE(tree);
    auto j = judge_tree(tree);
    for (const auto& c : j.rep.checks) EXPECT_NE(c.result, verdict::fail) << c.id << ": " << c.summary;
    const check_result* r = j.rep.find("rdma_stack");
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->result, verdict::pass) << r->summary << "\n" << r->detail;
    EXPECT_EQ(j.action.what, desired_action::kind::resume);
  }
  auto efa = judge_tree("efa_node");
  const check_result* r = efa.rep.find("rdma_stack");
  EXPECT_EQ(r->summary, "efa device(s), rdma-core providers present");
  EXPECT_NE(r->detail.find("rdmap16s27: family efa, driver efa, fw 0.0.0.0"), std::string::npos) << r->detail;
  EXPECT_NE(r->detail.find("efa: version 2.15.3g, taint 'O'"), std::string::npos) << r->detail;
  EXPECT_NE(r->detail.find("EFA installer 1.29.1: libfabric 1.19.0amzn4.0"), std::string::npos) << r->detail;
  EXPECT_NE(r->detail.find("/var/lib/dpkg/status: libibverbs1 46.0-1 (distribution build)"), std::string::npos);
  auto roce = judge_tree("roce_bnxt_node");
  EXPECT_NE(roce.rep.find("rdma_stack")->detail.find("bnxt_re0: family bnxt_re, driver bnxt_en"), std::string::npos);

  // The facts themselves, as `mrcheck report` shows them.
  auto root = sysroot::open(std::string(MRCHECK_FIXTURES_DIR) + "/efa_node");
  ASSERT_TRUE(root);
  node_facts f = collect_facts(*root, collect_options{});
  ASSERT_TRUE(f.rdma_devices.is_ok());
  ASSERT_EQ(f.rdma_devices->size(), 1u);
  EXPECT_EQ(f.rdma_devices->front().driver, "efa");
  EXPECT_EQ(rdma_family(f.rdma_devices->front()), "efa");
  ASSERT_TRUE(f.rdma_packages.is_ok()) << f.rdma_packages.error().message();
  EXPECT_EQ(f.rdma_packages->libfabric_version, "1.19.0amzn4.0");
  ASSERT_TRUE(f.efa_installer.is_ok());
  EXPECT_EQ(f.efa_installer->installer_version, "1.29.1");
  EXPECT_EQ(f.verbs_providers, (std::vector<std::string>{"efa", "mlx5"}));
  EXPECT_TRUE(f.modules.at("efa").loaded);
}

TEST(MatrixFixtureTrees, AlignedTreePassesEveryRule) {
  auto j = judge_tree("matrix_aligned");
  for (const auto& c : j.rep.checks) {
    // An H200 has no multi-node NVLink fabric, and this tree holds no NVML answer: mnnvl skips.
    EXPECT_EQ(c.result, c.id == "mnnvl" ? verdict::skip : verdict::pass) << c.id << ": " << c.summary;
  }
  EXPECT_EQ(j.action.what, desired_action::kind::resume);
}

TEST(MatrixFixtureTrees, RealH200CaptureDrainsNothing) {
  if (!std::filesystem::is_directory(std::string(MRCHECK_FIXTURES_DIR) + "/gpu_h200"))
    GTEST_SKIP() << "no gpu_h200 capture";
  auto j = judge_tree("gpu_h200");
  EXPECT_EQ(j.action.what, desired_action::kind::resume);
  // What the capture shows (its README): open 580 driver, H200 BAR1 256 GiB, no RDMA device.
  EXPECT_EQ(j.rep.find("gpu_driver")->result, verdict::pass);
  EXPECT_EQ(j.rep.find("bar1")->summary, "1 GPU(s): BAR1 256 GiB >= memory 141 GiB");
  EXPECT_EQ(j.rep.find("hca_fw")->result, verdict::skip);
  EXPECT_EQ(j.rep.find("gpudirect")->result, verdict::skip);
}

}  // namespace
}  // namespace mrcheck
