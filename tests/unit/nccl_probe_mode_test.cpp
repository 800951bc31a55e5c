// Mode selection, visible-GPU counting, the node-pair port sequence and the unique-id encoding.
#include <mrcheck/nccl_probe.h>

#include <gtest/gtest.h>

#include <unistd.h>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

namespace mrcheck {
namespace {

TEST(nccl_probe_mode, names_round_trip) {
  for (nccl_mode m : {nccl_mode::local_pair, nccl_mode::gpu_pair, nccl_mode::node_pair}) {
    auto back = parse_nccl_mode(to_string(m));
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, m);
  }
  EXPECT_FALSE(parse_nccl_mode("local_pair").has_value());
  EXPECT_FALSE(parse_nccl_mode("").has_value());
}

TEST(nccl_probe_mode, best_mode_the_allocation_allows) {
  auto none = choose_nccl_mode(0, 1);
  EXPECT_FALSE(none.mode.has_value());
  EXPECT_NE(none.reason.find("no GPU"), std::string::npos);
  EXPECT_EQ(choose_nccl_mode(1, 1).mode, nccl_mode::local_pair);
  EXPECT_EQ(choose_nccl_mode(2, 1).mode, nccl_mode::gpu_pair);
  EXPECT_EQ(choose_nccl_mode(8, 1).mode, nccl_mode::gpu_pair);
  EXPECT_EQ(choose_nccl_mode(1, 2).mode, nccl_mode::node_pair);
  EXPECT_EQ(choose_nccl_mode(8, 4).mode, nccl_mode::node_pair);
  // No GPU wins over nodes: there is nothing to run NCCL on.
  EXPECT_FALSE(choose_nccl_mode(0, 4).mode.has_value());
}

class visible_gpus : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("mrcheck_gpus_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void gpu(const std::string& bdf) { std::filesystem::create_directories(dir_ / "proc/driver/nvidia/gpus" / bdf); }
  void dev(const std::string& name) {
    std::filesystem::create_directories(dir_ / "dev");
    std::ofstream(dir_ / "dev" / name) << "";
  }
  int count(const char* cvd) { return count_visible_gpus(sysroot::open(dir_).value(), cvd); }
  std::filesystem::path dir_;
};

TEST_F(visible_gpus, counts_proc_entries_and_honours_cuda_visible_devices) {
  gpu("0000:00:06.0");
  gpu("0000:00:07.0");
  EXPECT_EQ(count(nullptr), 2);
  EXPECT_EQ(count("0"), 1);
  EXPECT_EQ(count("1,0"), 2);
  EXPECT_EQ(count("0,1,2,3"), 2);  // CUDA cannot show more GPUs than the node has
  EXPECT_EQ(count(""), 0);
  EXPECT_EQ(count("-1"), 0);
  EXPECT_EQ(count("NoDevFiles"), 0);
  EXPECT_EQ(count("0,-1,1"), 1);  // CUDA stops at the first invalid entry
  EXPECT_EQ(count("GPU-ead38cae-d25b-47be-121a-d591df6291ef"), 1);
}

TEST_F(visible_gpus, falls_back_to_dev_nodes) {
  dev("nvidia0");
  dev("nvidia1");
  dev("nvidiactl");
  dev("nvidia-uvm");
  EXPECT_EQ(count(nullptr), 2);
}

TEST_F(visible_gpus, nothing_readable_means_zero_unless_listed) {
  std::filesystem::create_directories(dir_);
  EXPECT_EQ(count(nullptr), 0);
}

TEST(nccl_probe_port, deterministic_in_range_and_distinct_per_attempt) {
  std::set<std::uint16_t> seen;
  for (int k = 0; k < k_nccl_port_attempts; ++k) {
    std::uint16_t p = nccl_pair_port(4242, 0, k);
    EXPECT_EQ(p, nccl_pair_port(4242, 0, k));
    EXPECT_GE(p, k_nccl_port_base);
    EXPECT_LT(p, k_nccl_port_base + k_nccl_port_span);
    EXPECT_LT(p, 32768);  // below the ephemeral range
    seen.insert(p);
  }
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(k_nccl_port_attempts));
}

TEST(nccl_probe_port, jobs_and_steps_spread_over_the_range) {
  std::set<std::uint16_t> firsts;
  for (std::uint64_t job = 1000; job < 1100; ++job) firsts.insert(nccl_pair_port(job, 0, 0));
  EXPECT_GT(firsts.size(), 90u);  // 100 jobs: a few collisions at most
  EXPECT_NE(nccl_pair_port(77, 0, 0), nccl_pair_port(77, 1, 0));
  EXPECT_NE(nccl_pair_port(77, 0, 0), nccl_pair_port(0, 77, 0));
}

TEST(nccl_probe_nodelist, first_host) {
  EXPECT_EQ(first_host_of_nodelist("gpu[003-005,9],cpu1"), "gpu003");
  EXPECT_EQ(first_host_of_nodelist("n1,n2"), "n1");
  EXPECT_EQ(first_host_of_nodelist("node7"), "node7");
  EXPECT_EQ(first_host_of_nodelist("rack[2]-gpu[1-4]"), "rack2-gpu[1-4]");  // only the first bracket is expanded
  EXPECT_EQ(first_host_of_nodelist("a[10,12]b"), "a10b");
  EXPECT_EQ(first_host_of_nodelist(""), "");
  EXPECT_EQ(first_host_of_nodelist("[1-2]"), "");
  EXPECT_EQ(first_host_of_nodelist("gpu[x-y]"), "");
  EXPECT_EQ(first_host_of_nodelist("gpu[1-2"), "");
}

TEST(nccl_probe_id, hex_round_trip_and_rejects) {
  unsigned char id[128];
  for (int i = 0; i < 128; ++i) id[i] = static_cast<unsigned char>(255 - i);
  std::string hex = hex_encode(id, sizeof id);
  ASSERT_EQ(hex.size(), 256u);
  EXPECT_EQ(hex.substr(0, 4), "fffe");
  unsigned char back[128] = {};
  ASSERT_TRUE(hex_decode(hex, back, sizeof back));
  EXPECT_EQ(std::memcmp(id, back, sizeof id), 0);
  EXPECT_FALSE(hex_decode(hex.substr(2), back, sizeof back));
  hex[10] = 'g';
  EXPECT_FALSE(hex_decode(hex, back, sizeof back));
}

}  // namespace
}  // namespace mrcheck
