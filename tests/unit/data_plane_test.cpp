// The data-plane probe (include/mrcheck/rdma_probe.h) against the fake libibverbs.so.1 (tests/fakes): its loopback
// data path (MRCHECK_FAKE_IBV_DATA=loopback) for the pass, and each failure the probe must name - a port DOWN, an
// empty RoCE GID table, ibv_create_qp's and ibv_modify_qp's errno, a completion's IBV_WC_* status, a completion
// that never comes (bounded), bytes that differ - and the check's verdicts on them.
#include <mrcheck/probe_checks.h>
#include <mrcheck/rdma_probe.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>

namespace mrcheck {
namespace {

constexpr const char* k_env[] = {"MRCHECK_FAKE_IBV_DEVICES", "MRCHECK_FAKE_IBV_INJECT", "MRCHECK_FAKE_IBV_PORT",
                                 "MRCHECK_FAKE_IBV_DATA",    "MRCHECK_FAKE_IBV_WC",     "MRCHECK_FAKE_IBV_MODIFY"};

class data_plane : public ::testing::Test {
 protected:
  void SetUp() override {
    lib_ = std::string(MRCHECK_BINARY_DIR) + "/fakes/lib/libibverbs.so.1";
    if (!std::filesystem::exists(lib_)) GTEST_SKIP() << "fake libibverbs not built (target fake_ibverbs)";
    for (const char* e : k_env) unsetenv(e);
    setenv("MRCHECK_FAKE_IBV_DEVICES", "mlx5_0", 1);
    setenv("MRCHECK_FAKE_IBV_DATA", "loopback", 1);
    req_.sizes = {64, 65536};
    req_.iters = 4;
    req_.wait = std::chrono::milliseconds(300);
  }
  void TearDown() override {
    for (const char* e : k_env) unsetenv(e);
  }
  rdma_probe_outcome run() { return run_rdma_probe(req_, lib_, log_); }
  // The one tested port of the outcome.
  static const rdma_port_result& port(const rdma_probe_outcome& o) {
    for (const auto& p : o.ports) {
      if (p.tested) return p;
    }
    static rdma_port_result none;
    ADD_FAILURE() << "no tested port";
    return none;
  }

  std::string lib_;
  rdma_probe_request req_;
  vector_log log_;
};

TEST_F(data_plane, infiniband_loopback_moves_and_verifies_every_size) {
  auto o = run();
  ASSERT_EQ(o.load_error, "");
  const auto& p = port(o);
  EXPECT_TRUE(p.ok) << p.step << ": " << p.message;
  EXPECT_EQ(p.link_layer, "InfiniBand");
  EXPECT_EQ(p.lid, 1);
  EXPECT_EQ(p.gid_index, -1);
  EXPECT_EQ(p.mtu, 4096);
  ASSERT_EQ(p.sizes.size(), 2u);
  EXPECT_EQ(p.sizes[1].size, 65536u);
  EXPECT_TRUE(p.sizes[0].verified && p.sizes[1].verified);
  EXPECT_GT(p.sizes[1].write_mbps, 0);
  check_result c = data_plane_check(o);
  EXPECT_EQ(c.id, "data_plane");
  EXPECT_EQ(c.result, verdict::pass) << c.summary;
  EXPECT_NE(c.summary.find("every byte verified"), std::string::npos) << c.summary;
  EXPECT_TRUE(log_.contains("calling ibv_modify_qp RTR"));
  nlohmann::json j = rdma_probe_to_json(o);
  EXPECT_EQ(j["ports"][0]["sizes"][1]["size"], 65536);
  EXPECT_EQ(j["scope"], "loopback");
}

TEST_F(data_plane, roce_prefers_the_ipv4_mapped_roce_v2_gid) {
  setenv("MRCHECK_FAKE_IBV_PORT", "eth", 1);
  auto o = run();
  const auto& p = port(o);
  EXPECT_TRUE(p.ok) << p.step << ": " << p.message;
  EXPECT_EQ(p.link_layer, "Ethernet");
  EXPECT_EQ(p.gid_index, 3);
  EXPECT_EQ(p.gid, "::ffff:192.0.2.1");
  EXPECT_EQ(p.gid_type, "RoCE v2");
  EXPECT_EQ(p.mtu, 1024);
  EXPECT_EQ(data_plane_check(o).result, verdict::pass);
}

TEST_F(data_plane, an_empty_gid_table_names_the_missing_address) {
  setenv("MRCHECK_FAKE_IBV_PORT", "eth,nogid", 1);
  auto o = run();
  const auto& p = port(o);
  EXPECT_EQ(p.step, "gid");
  EXPECT_EQ(p.cause, "no_gid");
  check_result c = data_plane_check(o);
  EXPECT_EQ(c.result, verdict::fail);
  EXPECT_NE(c.summary.find("GID table of mlx5_0 port 1 is empty"), std::string::npos) << c.summary;
  EXPECT_NE(c.hint.find("IP address"), std::string::npos) << c.hint;
}

// The netdev's addresses removed (an admin's botched netplan): the kernel keeps the MAC-derived fe80:: GIDs, and
// a loopback over them passes on Soft-RoCE, yet no other node reaches the port. The port fails at its GID,
// naming the netdev, instead of passing the loopback on a link-local GID.
TEST_F(data_plane, only_link_local_gids_name_the_netdev_without_an_address) {
  setenv("MRCHECK_FAKE_IBV_PORT", "eth,noaddr", 1);
  auto o = run();
  const auto& p = port(o);
  EXPECT_FALSE(p.ok);
  EXPECT_EQ(p.step, "gid");
  EXPECT_EQ(p.cause, "no_gid");
  EXPECT_EQ(p.gid_index, 1);  // the RoCE v2 one of the link-local pair
  check_result c = data_plane_check(o);
  EXPECT_EQ(c.result, verdict::fail);
  EXPECT_NE(c.summary.find(
                "mlx5_0 port 1: gid: mlx5_0 port 1 has no RoCE GID with an IP address: its network device "
                "lo has no IPv4 (nor global IPv6) address, only the link-local GID 1 fe80::200:0:0:1 (RoCE v2)"),
            std::string::npos)
      << c.summary;
  EXPECT_NE(c.hint.find("give the port's network device an IP address"), std::string::npos) << c.hint;
}

// Out of a job step the probe has no pair: the passing summary is the loopback's alone.
TEST_F(data_plane, a_pass_out_of_a_step_names_no_pair) {
  setenv("MRCHECK_FAKE_IBV_PORT", "eth", 1);
  check_result c = data_plane_check(run());
  EXPECT_EQ(c.result, verdict::pass);
  EXPECT_EQ(c.summary.find("between nodes"), std::string::npos) << c.summary;
}

TEST_F(data_plane, a_port_down_fails_naming_its_state) {
  setenv("MRCHECK_FAKE_IBV_PORT", "down", 1);
  auto o = run();
  const auto& p = port(o);
  EXPECT_EQ(p.cause, "port_down");
  check_result c = data_plane_check(o);
  EXPECT_EQ(c.result, verdict::fail);
  EXPECT_NE(c.summary.find("port 1 is DOWN"), std::string::npos) << c.summary;
}

TEST_F(data_plane, create_qp_and_modify_qp_fail_with_their_errno_and_step) {
  setenv("MRCHECK_FAKE_IBV_INJECT", "create_qp=ENOMEM", 1);
  auto o = run();
  EXPECT_EQ(port(o).step, "create_qp");
  EXPECT_EQ(port(o).err, ENOMEM);
  unsetenv("MRCHECK_FAKE_IBV_INJECT");

  setenv("MRCHECK_FAKE_IBV_PORT", "eth", 1);
  setenv("MRCHECK_FAKE_IBV_MODIFY", "RTR=ETIMEDOUT", 1);
  o = run();
  EXPECT_EQ(port(o).step, "modify_qp RTR");
  EXPECT_EQ(port(o).err, ETIMEDOUT);
  check_result c = data_plane_check(o);
  EXPECT_EQ(c.result, verdict::fail);
  EXPECT_NE(c.summary.find("ibv_modify_qp to RTR: ETIMEDOUT (path MTU 1024, GID index 3 ::ffff:192.0.2.1)"),
            std::string::npos)
      << c.summary;
  EXPECT_NE(c.hint.find("route to the GID"), std::string::npos) << c.hint;

  // What Soft-RoCE answers when its netdev's addresses are gone and only the MAC-derived GID is left.
  setenv("MRCHECK_FAKE_IBV_MODIFY", "RTR=ENETUNREACH", 1);
  c = data_plane_check(run());
  EXPECT_NE(c.summary.find("ibv_modify_qp to RTR: ENETUNREACH"), std::string::npos) << c.summary;
  EXPECT_NE(c.hint.find("no usable IP address"), std::string::npos) << c.hint;

  setenv("MRCHECK_FAKE_IBV_MODIFY", "INIT=EINVAL", 1);
  o = run();
  EXPECT_EQ(port(o).step, "modify_qp INIT");
  EXPECT_EQ(port(o).err, EINVAL);
}

TEST_F(data_plane, a_failed_completion_is_named_by_its_ibv_wc_status) {
  setenv("MRCHECK_FAKE_IBV_WC", "RETRY_EXC_ERR", 1);
  auto o = run();
  const auto& p = port(o);
  EXPECT_EQ(p.cause, "completion");
  EXPECT_EQ(p.wc_status, "IBV_WC_RETRY_EXC_ERR");
  check_result c = data_plane_check(o);
  EXPECT_EQ(c.result, verdict::fail);
  EXPECT_NE(c.summary.find("completed with IBV_WC_RETRY_EXC_ERR"), std::string::npos) << c.summary;
  EXPECT_NE(c.hint.find("4791"), std::string::npos) << c.hint;
}

TEST_F(data_plane, a_completion_that_never_comes_ends_at_its_deadline) {
  setenv("MRCHECK_FAKE_IBV_WC", "drop", 1);
  auto t0 = std::chrono::steady_clock::now();
  auto o = run();
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(took, std::chrono::seconds(3));
  const auto& p = port(o);
  EXPECT_EQ(p.step, "poll_cq");
  EXPECT_EQ(p.cause, "timeout");
  EXPECT_NE(p.message.find("within 300 ms"), std::string::npos) << p.message;
}

TEST_F(data_plane, bytes_that_differ_fail_the_verification) {
  setenv("MRCHECK_FAKE_IBV_WC", "corrupt", 1);
  auto o = run();
  EXPECT_EQ(port(o).cause, "mismatch");
  EXPECT_EQ(data_plane_check(o).result, verdict::fail);
}

TEST_F(data_plane, without_the_fakes_data_path_posting_fails_with_eopnotsupp) {
  unsetenv("MRCHECK_FAKE_IBV_DATA");
  auto o = run();
  EXPECT_EQ(port(o).step, "post_recv");
  EXPECT_EQ(port(o).err, EOPNOTSUPP);
}

TEST_F(data_plane, no_device_is_a_skip_and_a_missing_library_too) {
  setenv("MRCHECK_FAKE_IBV_DEVICES", "", 1);
  check_result c = data_plane_check(run());
  EXPECT_EQ(c.result, verdict::skip);
  EXPECT_EQ(c.summary, "no RDMA device: nothing was tested");
  rdma_probe_outcome o = run_rdma_probe(req_, "libmrcheck-no-such-verbs.so.1", log_);
  EXPECT_EQ(data_plane_check(o).result, verdict::skip);
  o = run_rdma_probe(req_, "/nonexistent/libibverbs.so.1", log_);
  EXPECT_EQ(data_plane_check(o).result, verdict::error);
}

TEST_F(data_plane, nccl_ib_hca_and_device_select_the_ports) {
  setenv("MRCHECK_FAKE_IBV_DEVICES", "mlx5_0,mlx5_1", 1);
  req_.nccl_ib_hca = "=mlx5_1";
  auto o = run();
  ASSERT_EQ(o.ports.size(), 1u);
  EXPECT_EQ(o.ports[0].device, "mlx5_1");
  req_.nccl_ib_hca.reset();
  req_.device = "mlx5_9";
  check_result c = data_plane_check(run());
  EXPECT_EQ(c.result, verdict::error);
  EXPECT_NE(c.summary.find("--device mlx5_9: no such RDMA device"), std::string::npos) << c.summary;
}

TEST(data_plane_iterations, default_rule_and_override) {
  rdma_probe_request r;
  EXPECT_EQ(rdma_iterations(r, 1u << 20), 4);
  EXPECT_EQ(rdma_iterations(r, 4096), 256);
  EXPECT_EQ(rdma_iterations(r, 64), 1000);
  r.iters = 3;
  EXPECT_EQ(rdma_iterations(r, 64), 3);
}

}  // namespace
}  // namespace mrcheck
