// collect_facts() over every fixture tree in tests/fixtures (captured with `mrcheck dump` or crafted for one
// parser branch each; each tree's README says which).
#include <mrcheck/facts.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace mrcheck {
namespace {

namespace fs = std::filesystem;

const fs::path k_fixtures = MRCHECK_FIXTURES_DIR;

node_facts collect(const std::string& name) {
  auto root = sysroot::open(k_fixtures / name);
  EXPECT_TRUE(root.is_ok()) << name;
  collect_options o;
  o.load_libraries = true;  // ignored under --root: the tree's libraries.json is used instead
  return collect_facts(*root, o);
}

const kmodule_fact& mod(const node_facts& f, const std::string& n) { return f.modules.at(n); }

TEST(facts_fixture, gpu_h200_captured) {
  auto f = collect("gpu_h200");
  EXPECT_EQ(f.hostname, "vm");
  ASSERT_TRUE(f.kernel_release.is_ok());
  EXPECT_EQ(*f.kernel_release, "6.18.44-fc-v657-gpu");
  ASSERT_TRUE(f.gpus.is_ok());
  ASSERT_EQ(f.gpus->size(), 1u);
  const gpu_fact& g = f.gpus->front();
  EXPECT_EQ(g.pci_bdf, "0000:00:06.0");
  EXPECT_EQ(g.device_id, "0x2335");
  EXPECT_EQ(g.bar1_bytes, std::uint64_t{256} << 30);
  EXPECT_EQ(g.bar1_resource_line, 2);  // BAR0 is 64-bit: lines 0-1
  ASSERT_TRUE(f.nvidia.is_ok());
  EXPECT_EQ(f.nvidia->version, "580.159.04");
  EXPECT_EQ(f.nvidia->flavour, nvidia_flavour::open);
  EXPECT_TRUE(f.nvidia->note.empty()) << f.nvidia->note;
  EXPECT_TRUE(mod(f, "nvidia").loaded);
  EXPECT_EQ(mod(f, "nvidia").taint, "O");
  EXPECT_TRUE(mod(f, "mlx5_core").loaded);
  EXPECT_FALSE(mod(f, "mlx5_core").version.has_value());
  EXPECT_FALSE(mod(f, "nvidia_peermem").loaded);
  EXPECT_FALSE(f.memory_peers);
  ASSERT_TRUE(f.rdma_devices.is_ok());
  EXPECT_TRUE(f.rdma_devices->empty());  // the class dir exists (kept by .keep) but holds no device
  ASSERT_TRUE(f.uverbs_abi.is_ok());
  EXPECT_EQ(*f.uverbs_abi, 6);
  ASSERT_TRUE(f.max_map_count.is_ok());
  EXPECT_EQ(*f.max_map_count, 8250340u);
  ASSERT_FALSE(f.chain.empty());
  EXPECT_EQ(f.chain.front().comm, "mrcheck");
  EXPECT_EQ(f.chain.back().pid, 1);
  ASSERT_TRUE(f.chain.front().memlock.is_ok());
  EXPECT_EQ(f.chain.front().memlock->soft, k_unlimited);
  // Library facts replay from the dump's libraries.json.
  ASSERT_TRUE(f.libibverbs.is_ok());
  EXPECT_EQ(f.libibverbs->version, "1.14.50.0");
  EXPECT_TRUE(f.libibverbs->symbols.at("ibv_reg_mr_iova2@IBVERBS_1.8"));
  EXPECT_TRUE(f.libibverbs->symbols.at("ibv_reg_dmabuf_mr@IBVERBS_1.12"));
  ASSERT_TRUE(f.cuda_driver_version.is_ok());
  EXPECT_EQ(*f.cuda_driver_version, 13000);
  ASSERT_TRUE(f.nccl_version.is_ok());
  EXPECT_EQ(*f.nccl_version, 22803);
  EXPECT_FALSE(f.slurmd.is_ok());
}

TEST(facts_fixture, gpu_h200_replays_its_live_report) {
  // REPORT.json was written live on the node right after the dump; the replay must give the same facts,
  // except the pid of mrcheck itself and MemAvailable, which moved in between.
  std::ifstream in(k_fixtures / "gpu_h200/REPORT.json");
  auto live = nlohmann::json::parse(in)["facts"];
  nlohmann::json replay = collect("gpu_h200");
  for (const auto& [k, v] : live.items()) {
    if (k == "chain" || k == "hugepages" || k == "modules") continue;
    EXPECT_EQ(replay[k], v) << k;
  }
  // The modules read live; modules added to the list since (the other RDMA families) are not loaded there.
  for (const auto& [name, m] : live["modules"].items()) EXPECT_EQ(replay["modules"][name], m) << name;
  for (const auto& [name, m] : replay["modules"].items()) {
    if (!live["modules"].contains(name)) {
      EXPECT_EQ(m["loaded"], false) << name;
    }
  }
  EXPECT_EQ(replay["hugepages"]["total"], live["hugepages"]["total"]);
  EXPECT_EQ(replay["chain"].size(), live["chain"].size());
}

TEST(facts_fixture, cpu_debian12_captured) {
  auto f = collect("cpu_debian12");
  ASSERT_TRUE(f.gpus.is_ok());
  EXPECT_TRUE(f.gpus->empty());
  EXPECT_FALSE(f.nvidia.is_ok());
  EXPECT_NE(f.nvidia.error().message().find("no NVIDIA driver"), std::string::npos);
  ASSERT_TRUE(f.rdma_devices.is_ok());
  EXPECT_TRUE(f.rdma_devices->empty());
  EXPECT_FALSE(f.uverbs_abi.is_ok());
  for (const auto& [n, m] : f.modules) EXPECT_FALSE(m.loaded) << n;
  ASSERT_TRUE(f.max_map_count.is_ok());
  EXPECT_EQ(*f.max_map_count, 65530u);
  ASSERT_FALSE(f.chain.empty());
  ASSERT_TRUE(f.chain.front().memlock.is_ok());
  EXPECT_EQ(f.chain.front().memlock->soft, 8u << 20);
  ASSERT_TRUE(f.libibverbs.is_ok());
  EXPECT_EQ(f.libibverbs->version, "1.14.44.0");
  EXPECT_FALSE(f.cuda_driver_version.is_ok());
  EXPECT_NE(f.cuda_driver_version.error().message().find("libcuda.so.1"), std::string::npos);
}

TEST(facts_fixture, ofed_proprietary_peermem) {
  auto f = collect("hca_ofed_peermem");
  EXPECT_EQ(mod(f, "mlx5_core").version, "24.10-2.1.8");
  EXPECT_EQ(mod(f, "mlx5_core").taint, "O");
  EXPECT_EQ(mod(f, "mlx5_core").srcversion, "6F2C3A1B0E9D8C7B6A59483");
  EXPECT_TRUE(mod(f, "nvidia_peermem").loaded);
  EXPECT_EQ(mod(f, "nvidia_peermem").version, "550.54.15");
  EXPECT_FALSE(mod(f, "nv_peer_mem").loaded);
  EXPECT_TRUE(f.memory_peers);
  EXPECT_EQ(f.memory_peer_clients, (std::vector<std::string>{"nv_mem", "nv_mem_nc"}));
  ASSERT_TRUE(f.nvidia.is_ok());
  EXPECT_EQ(f.nvidia->version, "550.54.15");
  EXPECT_EQ(f.nvidia->flavour, nvidia_flavour::proprietary);
  EXPECT_TRUE(f.nvidia->note.empty()) << f.nvidia->note;  // taint PO agrees
  ASSERT_TRUE(f.rdma_devices.is_ok());
  ASSERT_EQ(f.rdma_devices->size(), 2u);
  const auto& up = (*f.rdma_devices)[0];
  EXPECT_EQ(up.name, "mlx5_0");
  EXPECT_EQ(up.fw_ver, "28.39.1002");
  EXPECT_EQ(up.board_id, "MT_0000000838");
  EXPECT_EQ(up.hca_type, "MT4129");
  EXPECT_EQ(up.pci_bdf, "0000:3b:00.0");  // through the class symlink and the device link
  ASSERT_EQ(up.ports.size(), 1u);
  EXPECT_EQ(up.ports[0].state, "4: ACTIVE");
  EXPECT_EQ(up.ports[0].rate, "400 Gb/sec (4X NDR)");
  EXPECT_EQ(up.ports[0].link_layer, "InfiniBand");
  const auto& down = (*f.rdma_devices)[1];
  EXPECT_EQ(down.pci_bdf, "0000:5e:00.0");
  EXPECT_EQ(down.ports.at(0).state, "1: DOWN");
  EXPECT_EQ(down.ports.at(0).phys_state, "3: Disabled");
  ASSERT_TRUE(f.gpus.is_ok());
  ASSERT_EQ(f.gpus->size(), 1u);  // the two HCAs are vendor 0x15b3, not GPUs
  EXPECT_EQ(f.gpus->front().bar1_resource_line, 1);
  EXPECT_EQ(f.gpus->front().bar1_bytes, std::uint64_t{64} << 30);
  ASSERT_TRUE(f.hugepages.is_ok());
  EXPECT_EQ(f.hugepages->total, 1024u);
  EXPECT_EQ(f.hugepages->free, 512u);
  EXPECT_EQ(f.hugepages->page_size, 2u << 20);
  ASSERT_TRUE(f.slurmd.is_ok()) << f.slurmd.error().message();
  EXPECT_EQ(f.slurmd->pid, 900);
  EXPECT_EQ(f.slurmd->memlock->hard, k_unlimited);
  EXPECT_EQ(f.slurmd_pid_file, "/run/slurmd.pid");
  // The chain: sshd dropped to 8 MiB, PAM's bash raised it again: a rise is never "lowered".
  ASSERT_EQ(f.chain.size(), 4u);
  EXPECT_EQ(f.chain[0].uid, 1000u);
  EXPECT_FALSE(f.chain[1].lowered);
  EXPECT_TRUE(f.chain[2].lowered);
  ASSERT_TRUE(f.libibverbs.is_ok());
  EXPECT_EQ(f.libibverbs->version, "1.14.2410.0");
  EXPECT_EQ(*f.cuda_driver_version, 12040);
  EXPECT_EQ(*f.nccl_version, 22105);
  ASSERT_FALSE(f.libnccl.is_ok());
  EXPECT_NE(f.libnccl.error().message().find("cannot open"), std::string::npos);
}

TEST(facts_fixture, inbox_open_line2) {
  auto f = collect("hca_inbox_open");
  EXPECT_TRUE(mod(f, "mlx5_core").loaded);
  EXPECT_FALSE(mod(f, "mlx5_core").version.has_value());
  EXPECT_EQ(mod(f, "mlx5_core").taint, "");
  EXPECT_FALSE(f.memory_peers);
  EXPECT_FALSE(mod(f, "nvidia_peermem").loaded);
  ASSERT_TRUE(f.nvidia.is_ok());
  EXPECT_EQ(f.nvidia->flavour, nvidia_flavour::open);
  EXPECT_EQ(f.nvidia->version, "580.82.09");
  ASSERT_TRUE(f.gpus.is_ok());
  EXPECT_EQ(f.gpus->at(0).bar1_resource_line, 2);
  EXPECT_EQ(f.gpus->at(0).bar1_bytes, std::uint64_t{256} << 30);
  EXPECT_EQ(*f.max_map_count, 65530u);
  EXPECT_EQ(f.hugepages->free, 0u);
  ASSERT_TRUE(f.slurmd.is_ok()) << f.slurmd.error().message();
  EXPECT_EQ(f.slurmd_pid_file, "/var/run/slurmd.pid");  // /run/slurmd.pid absent: the fallback
  EXPECT_EQ(f.slurmd->memlock->hard, 8u << 20);
  ASSERT_EQ(f.chain.size(), 4u);
  EXPECT_EQ(f.chain[0].memlock->soft, 65536u);  // written with two spaces
  EXPECT_FALSE(f.chain[0].lowered);
  EXPECT_EQ(f.chain[1].comm, "bash");
  EXPECT_EQ(f.chain[1].memlock->soft, 65536u);  // written with tabs
  EXPECT_TRUE(f.chain[1].lowered);
  EXPECT_FALSE(f.libibverbs.is_ok());
  EXPECT_NE(f.libibverbs.error().message().find("not read under --root"), std::string::npos);
}

// SlurmdPidFile comes from the one slurm.conf reader (src/config/slurm_conf.cpp): through an include, quoted, with
// %n expanded to the short host name.
TEST(facts_fixture, slurmd_pid_file_from_slurm_conf_with_include) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("facts_pidfile." + std::to_string(::getpid()));
  fs::remove_all(dir);
  auto put = [&](const std::string& rel, const std::string& text) {
    fs::create_directories((dir / rel).parent_path());
    std::ofstream(dir / rel) << text;
  };
  put("proc/sys/kernel/hostname", "node7.cluster.example\n");
  put("etc/slurm/slurm.conf", "ClusterName=c\nInclude pid.conf\n");
  put("etc/slurm/pid.conf", "SlurmdPidFile=\"/run/slurm/slurmd-%n.pid\"  # per node\n");
  put("run/slurm/slurmd-node7.pid", "4242\n");
  put("proc/4242/stat", "4242 (slurmd) S 1 4242 4242 0 -1 4194560 100 0 0 0\n");
  put("proc/4242/status", "Name:\tslurmd\nPPid:\t1\nUid:\t0\t0\t0\t0\n");
  put("proc/4242/limits", "Max locked memory         unlimited            unlimited            bytes\n");
  auto root = sysroot::open(dir);
  ASSERT_TRUE(root.is_ok());
  collect_options o;
  o.slurmd_pid_file = "/run/none.pid";
  auto f = collect_facts(*root, o);
  EXPECT_EQ(f.slurmd_pid_file, "/run/slurm/slurmd-node7.pid");
  ASSERT_TRUE(f.slurmd.is_ok()) << f.slurmd.error().message();
  EXPECT_EQ(f.slurmd->pid, 4242);
  fs::remove_all(dir);
}

TEST(facts_fixture, limits_variants) {
  auto root = *sysroot::open(k_fixtures / "limits_variants");
  auto f = collect("limits_variants");
  ASSERT_EQ(f.chain.size(), 4u);
  EXPECT_EQ(f.chain[0].pid, 16);
  EXPECT_EQ(f.chain[1].memlock->soft, 65536u);  // odd spacing
  EXPECT_EQ(f.chain[2].comm, "zero (a) b");
  EXPECT_EQ(f.chain[2].memlock->soft, 0u);
  EXPECT_EQ(f.chain[2].memlock->hard, 0u);
  EXPECT_TRUE(f.chain[2].lowered);
  EXPECT_FALSE(f.chain[1].lowered);  // 65536 > 0: raised, not lowered
  EXPECT_EQ(f.chain[3].memlock->soft, k_unlimited);
  auto trunc = read_process(root, 12);
  ASSERT_TRUE(trunc.is_ok());
  EXPECT_FALSE(trunc->memlock.is_ok());
  EXPECT_NE(trunc->memlock.error().message().find("truncated"), std::string::npos);
  auto junk = read_process(root, 13);
  ASSERT_TRUE(junk.is_ok());
  EXPECT_FALSE(junk->memlock.is_ok());
  auto dir = read_process(root, 14);
  ASSERT_TRUE(dir.is_ok());
  EXPECT_FALSE(dir->memlock.is_ok());
}

class facts_fixture_tmp : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mrcheck_fixture_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path copy(const std::string& name) {
    fs::copy(k_fixtures / name, dir_, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
    return dir_;
  }
  fs::path dir_;
};

TEST_F(facts_fixture_tmp, two_megabyte_files_are_refused) {
  auto d = copy("limits_variants");
  std::ofstream(d / "proc/16/limits") << "Max locked memory 1 1 bytes\n" << std::string(2 << 20, 'x');
  std::ofstream(d / "proc/sys/vm/max_map_count") << std::string(2 << 20, '9');
  auto f = collect_facts(*sysroot::open(d), {});
  ASSERT_FALSE(f.chain.empty());
  EXPECT_FALSE(f.chain[0].memlock.is_ok());
  EXPECT_FALSE(f.max_map_count.is_ok());
}

TEST_F(facts_fixture_tmp, empty_root_is_all_unknown) {
  fs::create_directories(dir_);
  auto f = collect_facts(*sysroot::open(dir_), {});
  EXPECT_TRUE(f.chain.empty());
  EXPECT_FALSE(f.chain_status.is_ok());
  EXPECT_FALSE(f.hostname_status.is_ok());
  EXPECT_FALSE(f.max_map_count.is_ok());
  EXPECT_FALSE(f.hugepages.is_ok());
  EXPECT_FALSE(f.gpus.is_ok());
  EXPECT_FALSE(f.nvidia.is_ok());
  EXPECT_FALSE(f.slurmd.is_ok());
  nlohmann::json j = f;
  EXPECT_TRUE(j["chain"].contains("unknown"));
  EXPECT_TRUE(j["max_map_count"]["unknown"].is_string());
  EXPECT_TRUE(j["hostname"]["unknown"].is_string());
}

TEST(facts_fixture, garbage_never_guesses) {
  auto f = collect("garbage");
  EXPECT_FALSE(f.max_map_count.is_ok());
  EXPECT_FALSE(f.hugepages.is_ok());  // a directory
  EXPECT_FALSE(f.uverbs_abi.is_ok());
  EXPECT_FALSE(f.nvidia.is_ok());
  EXPECT_TRUE(f.chain.empty());
  EXPECT_FALSE(f.chain_status.is_ok());
  ASSERT_TRUE(f.rdma_devices.is_ok());
  ASSERT_EQ(f.rdma_devices->size(), 1u);
  EXPECT_EQ(f.rdma_devices->front().fw_ver, "\\x00\\x01\\x02\\xff");  // escaped, never raw bytes
  // Port "notanumber" is skipped; port 1 exists but its state is a directory: known port, unknown ("") state.
  ASSERT_EQ(f.rdma_devices->front().ports.size(), 1u);
  EXPECT_EQ(f.rdma_devices->front().ports[0].number, 1);
  EXPECT_EQ(f.rdma_devices->front().ports[0].state, "");
  ASSERT_TRUE(f.gpus.is_ok());
  ASSERT_EQ(f.gpus->size(), 2u);  // the 0x0680 bridge is not a GPU
  for (const auto& g : *f.gpus) {
    EXPECT_EQ(g.bar1_bytes, 0u);
    EXPECT_EQ(g.bar1_resource_line, -1);
    EXPECT_FALSE(g.bar1_error.empty());
  }
  EXPECT_FALSE(f.slurmd.is_ok());
  EXPECT_FALSE(f.libibverbs.is_ok());
  EXPECT_NE(f.libibverbs.error().message().find("not JSON"), std::string::npos);
  nlohmann::json j = f;  // must serialize without throwing (escaped strings only)
  EXPECT_TRUE(j["gpus"][0]["bar1_bytes"].contains("unknown"));
  EXPECT_NO_THROW((void)j.dump());
}

TEST(facts_fixture, stale_slurmd_pid_file) {
  auto f = collect("slurmd_stale");
  ASSERT_FALSE(f.slurmd.is_ok());
  EXPECT_NE(f.slurmd.error().message().find("stale"), std::string::npos) << f.slurmd.error().message();
}

TEST(facts_fixture, json_schema) {
  nlohmann::json j = collect("hca_inbox_open");
  EXPECT_EQ(j["hostname"], "gpu-inbox-01");
  EXPECT_EQ(j["chain"][0]["memlock_soft"], 65536);
  EXPECT_EQ(j["chain"][0]["memlock_hard"], 8388608);
  EXPECT_EQ(j["chain"][3]["memlock_soft"], 8388608);
  EXPECT_EQ(j["nvidia_driver"]["flavour"], "open");
  EXPECT_EQ(j["gpus"][0]["bar1_bytes"], std::uint64_t{256} << 30);
  EXPECT_EQ(j["modules"]["mlx5_core"]["version"], nullptr);
  EXPECT_EQ(j["modules"]["mlx5_core"]["loaded"], true);
  EXPECT_EQ(j["rdma_devices"][0]["ports"][0]["state"], "4: ACTIVE");
  EXPECT_TRUE(j["libibverbs"]["unknown"].is_string());
  nlohmann::json o = collect("hca_ofed_peermem");
  EXPECT_EQ(o["slurmd"]["memlock_soft"], "unlimited");
  EXPECT_EQ(o["memory_peers"]["present"], true);
}

}  // namespace
}  // namespace mrcheck
