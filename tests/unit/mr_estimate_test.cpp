// The size NCCL would register and the HCAs it would use: NCCL's own rules (init.cc, net.cc, utils.cc) redone.
#include <mrcheck/mr_probe.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace mrcheck {
namespace {

nccl_env env_of(std::vector<std::string> kv) { return load_nccl_env(kv, "", "/nonexistent/nccl.conf"); }

constexpr std::uint64_t k_ll = 524288;      // 8 * 512 * 8 * 16
constexpr std::uint64_t k_ll128 = 4915200;  // 120 * 640 * 8 * 8
constexpr std::uint64_t k_simple = 4194304;

TEST(MrEstimate, DefaultsFollowNcclSizing) {
  nccl_estimate e = estimate_nccl_registration(env_of({}), 1);
  EXPECT_EQ(e.buff_ll, k_ll);
  EXPECT_EQ(e.buff_ll128, k_ll128);
  EXPECT_EQ(e.buff_simple, k_simple);
  EXPECT_EQ(e.channels, 4);  // ~2 per NIC, doubled
  EXPECT_EQ(e.connections, 8);
  EXPECT_EQ(e.host_bytes, 8 * (k_ll + k_ll128 + k_simple));
  EXPECT_EQ(e.buffers.size(), 24u);
  EXPECT_EQ(e.dmabuf_host_bytes, 4 * k_ll);
  EXPECT_EQ(e.p2p_bytes, 2ull * 4 * 16 * 131072);
  EXPECT_TRUE(e.relaxed_ordering);
  EXPECT_TRUE(e.dmabuf_enabled);
  EXPECT_FALSE(e.ib_disabled);
  EXPECT_NE(e.formula.find("73.5 MiB"), std::string::npos) << e.formula;
}

TEST(MrEstimate, EnvironmentChangesSizesAndChannels) {
  nccl_estimate e = estimate_nccl_registration(env_of({"NCCL_BUFFSIZE=8388608", "NCCL_MIN_NCHANNELS=16"}), 1);
  EXPECT_EQ(e.buff_simple, 8388608u);
  EXPECT_EQ(e.channels, 16);
  EXPECT_EQ(e.host_bytes, 32 * (k_ll + k_ll128 + 8388608));
  EXPECT_NE(e.channels_from.find("NCCL_MIN_NCHANNELS=16"), std::string::npos);

  nccl_estimate m = estimate_nccl_registration(env_of({"NCCL_MAX_NCHANNELS=2"}), 4);
  EXPECT_EQ(m.channels, 2);
  nccl_estimate legacy = estimate_nccl_registration(env_of({"NCCL_MAX_NRINGS=1"}), 1);
  EXPECT_EQ(legacy.channels, 1);
  nccl_estimate big = estimate_nccl_registration(env_of({"NCCL_MIN_NCHANNELS=1000"}), 1);
  EXPECT_EQ(big.channels, 64);  // MAXCHANNELS
  nccl_estimate hcas = estimate_nccl_registration(env_of({}), 2);
  EXPECT_EQ(hcas.channels, 8);
}

TEST(MrEstimate, SuffixIsReadLikeNcclsStrtoll) {
  nccl_estimate e = estimate_nccl_registration(env_of({"NCCL_BUFFSIZE=4M"}), 1);
  EXPECT_EQ(e.buff_simple, 4u);  // strtoll("4M") = 4, as NCCL reads it
  ASSERT_FALSE(e.notes.empty());
  EXPECT_NE(e.notes.front().find("NCCL_BUFFSIZE=4M"), std::string::npos);
  nccl_estimate hex = estimate_nccl_registration(env_of({"NCCL_BUFFSIZE=0x800000"}), 1);
  EXPECT_EQ(hex.buff_simple, 8388608u);
  EXPECT_TRUE(hex.notes.empty());
}

TEST(MrEstimate, PathsThatChangeWhatIsRegistered) {
  EXPECT_TRUE(estimate_nccl_registration(env_of({"NCCL_IB_DISABLE=1"}), 1).ib_disabled);
  EXPECT_TRUE(estimate_nccl_registration(env_of({"NCCL_NET=Socket"}), 1).ib_disabled);
  EXPECT_FALSE(estimate_nccl_registration(env_of({"NCCL_NET=IB"}), 1).ib_disabled);
  EXPECT_FALSE(estimate_nccl_registration(env_of({"NCCL_IB_PCI_RELAXED_ORDERING=0"}), 1).relaxed_ordering);
  EXPECT_TRUE(estimate_nccl_registration(env_of({"NCCL_IB_PCI_RELAXED_ORDERING=1"}), 1).relaxed_ordering);
  EXPECT_TRUE(estimate_nccl_registration(env_of({"NCCL_NET_GDR_LEVEL=LOC"}), 1).gdr_off);
  EXPECT_FALSE(estimate_nccl_registration(env_of({"NCCL_DMABUF_ENABLE=0"}), 1).dmabuf_enabled);
}

TEST(MrEstimate, ConfFilesFillOnlyUnsetNamesInNcclOrder) {
  auto dir = std::filesystem::temp_directory_path() / ("mr_estimate_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    std::ofstream(dir / ".nccl.conf") << "# comment\nNCCL_BUFFSIZE=1048576\nNCCL_MAX_NCHANNELS=3\n";
    std::ofstream(dir / "etc.conf") << "NCCL_BUFFSIZE=2097152\nNCCL_MIN_NCHANNELS=2\nNCCL_IB_HCA=mlx5_9\n";
  }
  std::vector<std::string> env = {"NCCL_MAX_NCHANNELS=5"};
  nccl_env n = load_nccl_env(env, dir.string(), (dir / "etc.conf").string());
  EXPECT_EQ(n.get("NCCL_MAX_NCHANNELS").value_or(""), "5");   // environment wins
  EXPECT_EQ(n.get("NCCL_BUFFSIZE").value_or(""), "1048576");  // ~/.nccl.conf before /etc/nccl.conf
  EXPECT_EQ(n.get("NCCL_IB_HCA").value_or(""), "mlx5_9");     // /etc/nccl.conf fills the rest
  EXPECT_EQ(n.files_read.size(), 2u);
  // NCCL_CONF_FILE replaces ~/.nccl.conf.
  std::vector<std::string> env2 = {"NCCL_CONF_FILE=" + (dir / "etc.conf").string()};
  nccl_env n2 = load_nccl_env(env2, dir.string(), "/nonexistent");
  EXPECT_EQ(n2.get("NCCL_BUFFSIZE").value_or(""), "2097152");
  std::filesystem::remove_all(dir);
}

TEST(MrHcaFilter, ParsesLikeNccl) {
  auto f = parse_nccl_ib_hca("mlx5_0:1,mlx5_2");
  ASSERT_EQ(f.items.size(), 2u);
  EXPECT_EQ(f.items[0].prefix, "mlx5_0");
  EXPECT_EQ(f.items[0].port, 1);
  EXPECT_EQ(f.items[1].port, -1);
  EXPECT_TRUE(f.matches("mlx5_0", 1));
  EXPECT_FALSE(f.matches("mlx5_0", 2));
  EXPECT_TRUE(f.matches("mlx5_2", 2));
  EXPECT_FALSE(f.matches("mlx5_1", 1));
  // Prefix match by default: mlx5_1 also selects mlx5_10; '=' makes it exact.
  EXPECT_TRUE(parse_nccl_ib_hca("mlx5_1").matches("mlx5_10", 1));
  EXPECT_FALSE(parse_nccl_ib_hca("=mlx5_1").matches("mlx5_10", 1));
  EXPECT_TRUE(parse_nccl_ib_hca("=mlx5_1").matches("mlx5_1", 1));
  // '^' excludes; "^=" is exclude + exact.
  auto x = parse_nccl_ib_hca("^mlx5_1");
  EXPECT_FALSE(x.matches("mlx5_1", 1));
  EXPECT_FALSE(x.matches("mlx5_10", 1));
  EXPECT_TRUE(x.matches("mlx5_0", 1));
  auto xe = parse_nccl_ib_hca("^=mlx5_1");
  EXPECT_TRUE(xe.exclude && xe.exact);
  EXPECT_TRUE(xe.matches("mlx5_10", 1));
  // NCCL quirk kept: "^" alone excludes everything, "" selects everything.
  EXPECT_FALSE(parse_nccl_ib_hca("^").matches("mlx5_0", 1));
  EXPECT_TRUE(parse_nccl_ib_hca("").matches("mlx5_0", 1));
  EXPECT_FALSE(parse_nccl_ib_hca(std::nullopt).set);
  EXPECT_TRUE(parse_nccl_ib_hca(std::nullopt).matches("anything", 7));
}

std::vector<hca_candidate> three_hcas() {
  verbs_port up{1, k_ibv_port_active, k_ibv_link_layer_infiniband};
  verbs_port down{1, 1, k_ibv_link_layer_infiniband};
  return {{"mlx5_0", {up}, "0000:10:00.0"}, {"mlx5_1", {up}, "0000:90:00.0"}, {"mlx5_2", {down}, "0000:91:00.0"}};
}

TEST(MrHcaSelect, SkipsPortsNcclWouldNotUse) {
  auto sel = select_hcas(three_hcas(), parse_nccl_ib_hca(std::nullopt), "", {}, nullptr);
  ASSERT_EQ(sel.chosen.size(), 2u);
  EXPECT_EQ(sel.chosen[0].name, "mlx5_0");
  EXPECT_EQ(sel.chosen[1].name, "mlx5_1");
  ASSERT_EQ(sel.skipped.size(), 1u);
  EXPECT_NE(sel.skipped[0].find("mlx5_2"), std::string::npos);
  EXPECT_NE(sel.skipped[0].find("DOWN"), std::string::npos);
  EXPECT_NE(sel.rule.find("no GPU"), std::string::npos);
}

TEST(MrHcaSelect, NcclIbHcaWinsOverLocalityAndDeviceWinsOverAll) {
  auto near0 = [](const std::string& hca, const std::string&) { return hca == "0000:10:00.0" ? 5 : 2; };
  auto sel = select_hcas(three_hcas(), parse_nccl_ib_hca("mlx5_1"), "", {"0000:11:00.0"}, near0);
  ASSERT_EQ(sel.chosen.size(), 1u);
  EXPECT_EQ(sel.chosen[0].name, "mlx5_1");
  auto dev = select_hcas(three_hcas(), parse_nccl_ib_hca("mlx5_1"), "mlx5_0", {}, nullptr);
  ASSERT_EQ(dev.chosen.size(), 1u);
  EXPECT_EQ(dev.chosen[0].name, "mlx5_0");
  auto none = select_hcas(three_hcas(), parse_nccl_ib_hca("^mlx5"), "", {}, nullptr);
  EXPECT_TRUE(none.chosen.empty());
  EXPECT_EQ(none.skipped.size(), 3u);
}

TEST(MrHcaSelect, PicksTheHcaNearestEachGpu) {
  auto dist = [](const std::string& hca, const std::string& gpu) {
    bool same = hca.substr(0, 7) == gpu.substr(0, 7);  // same root port in this toy topology
    return same ? 6 : 2;
  };
  auto sel = select_hcas(three_hcas(), parse_nccl_ib_hca(std::nullopt), "", {"0000:90:01.0"}, dist);
  ASSERT_EQ(sel.chosen.size(), 1u);
  EXPECT_EQ(sel.chosen[0].name, "mlx5_1");
  EXPECT_NE(sel.chosen[0].why.find("0000:90:01.0"), std::string::npos);
  // Unknown locality for every HCA: all active ones.
  auto unknown = select_hcas(three_hcas(), parse_nccl_ib_hca(std::nullopt), "", {"0000:90:01.0"},
                             [](const std::string&, const std::string&) { return -1; });
  EXPECT_EQ(unknown.chosen.size(), 2u);
}

TEST(MrGpus, VisibleGpusFollowSlurmsGresIndices) {
  auto dir = std::filesystem::temp_directory_path() / ("mr_gpus_" + std::to_string(::getpid()));
  for (auto [bdf, minor] : {std::pair{"0000:3B:00.0", 0}, std::pair{"0000:5e:00.0", 1}, std::pair{"0000:86:00.0", 2}}) {
    std::filesystem::create_directories(dir / "proc/driver/nvidia/gpus" / bdf);
    std::ofstream(dir / "proc/driver/nvidia/gpus" / bdf / "information")
        << "Model: H200\nDevice Minor: " << minor << "\n";
  }
  std::filesystem::create_directories(dir / "none");
  auto root = sysroot::open(dir);
  auto none = sysroot::open(dir / "none");
  ASSERT_TRUE(root.is_ok() && none.is_ok());
  EXPECT_EQ(visible_gpu_bdfs(env_of({}), *root).size(), 3u);
  auto two = visible_gpu_bdfs(env_of({"SLURM_STEP_GPUS=0,2", "CUDA_VISIBLE_DEVICES=0,1"}), *root);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0], "0000:3b:00.0");  // lower-cased like CUDA's bus ids
  EXPECT_EQ(two[1], "0000:86:00.0");
  auto uuid = visible_gpu_bdfs(env_of({"CUDA_VISIBLE_DEVICES=GPU-1234"}), *root);
  EXPECT_EQ(uuid.size(), 3u);  // not indices: no filtering
  EXPECT_TRUE(visible_gpu_bdfs(env_of({}), *none).empty());
  std::filesystem::remove_all(dir);
}

// No HCA found (no RDMA device, no verbs library): the size is NCCL's for one HCA, and the estimate says it found none
// rather than claiming one.
TEST(mr_estimate, no_hca_is_said_not_counted_as_one) {
  nccl_estimate none = estimate_nccl_registration(env_of({}), 0);
  nccl_estimate one = estimate_nccl_registration(env_of({}), 1);
  EXPECT_EQ(none.hcas, 0);
  EXPECT_EQ(none.host_bytes, one.host_bytes);
  EXPECT_NE(none.channels_from.find("no HCA found, so as for 1"), std::string::npos) << none.channels_from;
  EXPECT_EQ(one.channels_from.find("no HCA"), std::string::npos) << one.channels_from;
}

}  // namespace
}  // namespace mrcheck
