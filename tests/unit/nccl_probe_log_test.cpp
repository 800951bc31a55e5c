// NCCL's own log, as captured on the GPU machine (tests/fixtures/nccl_logs/, header line says how), parsed for
// the transport, GPUDirect RDMA / DMA-BUF, init timings and the warnings.
#include <mrcheck/nccl_probe.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace mrcheck {
namespace {

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(MRCHECK_FIXTURES_DIR) + "/nccl_logs/" + name);
  EXPECT_TRUE(in.good()) << name;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(nccl_probe_log, h200_local_pair_over_socket) {
  nccl_log_facts f = parse_nccl_log(fixture("h200_local_pair_socket_rank0.log"));
  EXPECT_EQ(f.version, "2.28.3+cuda13.0");
  EXPECT_EQ(f.network, "Socket");
  EXPECT_EQ(f.transports, std::vector<std::string>{"NET/Socket"});
  EXPECT_TRUE(has(f.channels, "NET/Socket/0"));
  EXPECT_TRUE(f.ib_no_device);
  EXPECT_TRUE(f.ib_devices.empty());  // "NET/IB : Using [RO]; OOB ..." after "No device found" names no device
  EXPECT_EQ(f.socket_devices, "[0]lo:127.0.0.1<0>");
  ASSERT_TRUE(f.gdr.has_value());
  EXPECT_FALSE(*f.gdr);
  EXPECT_FALSE(f.dmabuf.has_value());
  ASSERT_TRUE(f.nnodes.has_value());
  EXPECT_EQ(*f.nnodes, 2);  // the distinct NCCL_HOSTID made two "hosts" of one GPU
  ASSERT_EQ(f.init_timings.size(), 1u);
  const auto& t = f.init_timings[0];
  EXPECT_EQ(t.rank, 0);
  EXPECT_EQ(t.nranks, 2);
  EXPECT_DOUBLE_EQ(t.total_s, 0.41);
  ASSERT_EQ(t.parts.size(), 8u);
  EXPECT_EQ(t.parts[0].first, "kernels");
  EXPECT_DOUBLE_EQ(t.parts[0].second, 0.36);
  EXPECT_EQ(t.parts[2].first, "bootstrap");
  EXPECT_TRUE(f.warnings.empty());
}

TEST(nccl_probe_log, both_ranks_merge) {
  nccl_log_facts f = parse_nccl_log(fixture("h200_local_pair_socket_rank0.log"));
  merge_nccl_log_facts(f, parse_nccl_log(fixture("h200_local_pair_socket_rank1.log")));
  ASSERT_EQ(f.init_timings.size(), 2u);
  EXPECT_EQ(f.init_timings[1].rank, 1);
  EXPECT_EQ(f.transports.size(), 1u);  // distinct
}

TEST(nccl_probe_log, fake_hca_enomem_names_the_call_and_the_path) {
  nccl_log_facts f = parse_nccl_log(fixture("h200_fake_ibverbs_enomem_rank0.log"));
  EXPECT_EQ(f.network, "IB");
  EXPECT_EQ(f.transports, std::vector<std::string>{"NET/IB"});
  EXPECT_EQ(f.ib_devices, std::vector<std::string>{"mlx5_0:1/IB [RO]"});
  EXPECT_FALSE(f.ib_no_device);
  ASSERT_TRUE(f.dmabuf.has_value());
  EXPECT_TRUE(*f.dmabuf);
  // "NET/IB : GPU Direct RDMA Enabled for HCA 0" but the channels say "via NET/IB/0": host bounce buffers.
  ASSERT_TRUE(f.gdr.has_value());
  EXPECT_FALSE(*f.gdr);
  EXPECT_NE(f.gdr_note.find("distance 8 > 5"), std::string::npos) << f.gdr_note;
  bool found = false;
  for (const auto& w : f.warnings)
    found = found || w == "Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory";
  EXPECT_TRUE(found);
  EXPECT_TRUE(f.init_timings.size() == 1);
}

// The reader as a listener: lines fed one at a time (the marker already found, as explain's path note hands them
// over) say what the whole captured output says.
TEST(nccl_probe_log, reader_fed_line_by_line_says_what_the_whole_output_says) {
  const std::string text = fixture("h200_fake_ibverbs_enomem_rank0.log");
  nccl_log_reader r;
  std::string_view rest(text);
  while (!rest.empty()) {
    std::string_view line = rest.substr(0, rest.find('\n'));
    rest.remove_prefix(std::min(rest.size(), line.size() + 1));
    if (std::size_t i = line.find("NCCL INFO "); i != std::string_view::npos && line.find("NCCL WARN ") == line.npos) {
      r.feed_info(line.substr(i + 10));
    } else {
      r.feed(line);
    }
  }
  nccl_log_facts a = r.facts();
  nccl_log_facts b = parse_nccl_log(text);
  EXPECT_EQ(a.transports, b.transports);
  EXPECT_EQ(a.channels, b.channels);
  EXPECT_EQ(a.ib_devices, b.ib_devices);
  EXPECT_EQ(a.gdr, b.gdr);
  EXPECT_EQ(a.gdr_note, b.gdr_note);
  EXPECT_EQ(a.warnings, b.warnings);
  EXPECT_EQ(a.version, b.version);
  EXPECT_FALSE(b.warnings.empty());
  ASSERT_TRUE(a.gdr.has_value());
  EXPECT_FALSE(*a.gdr);  // NET channels without /GDRDMA: decided when the facts are asked for, not per line
}

TEST(nccl_probe_log, einval_warning_text) {
  nccl_log_facts f = parse_nccl_log(fixture("h200_fake_ibverbs_einval_rank0.log"));
  bool found = false;
  for (const auto& w : f.warnings) found = found || w == "Call to ibv_reg_mr_iova2 failed with error Invalid argument";
  EXPECT_TRUE(found);
}

TEST(nccl_probe_log, ib_hca_of_a_missing_device_is_only_an_info_line) {
  nccl_log_facts f = parse_nccl_log(fixture("h200_ib_hca_missing_rank0.log"));
  EXPECT_TRUE(f.ib_no_device);
  EXPECT_TRUE(f.warnings.empty());  // NCCL does not warn: it silently takes NET/Socket
  EXPECT_EQ(f.transports, std::vector<std::string>{"NET/Socket"});
}

// Line shapes that the captured logs (no GDR-capable HCA here) do not contain, written as NCCL 2.28 prints them
// (src/transport.cc "Channel %02d/%d : %d[%d] -> %d[%d] [%s] via %s%s%s").
TEST(nccl_probe_log, gdr_p2p_and_shm_channels) {
  nccl_log_facts f = parse_nccl_log(
      "n1:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/IB/0/GDRDMA\n"
      "n1:1:1 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n"
      "n1:1:1 [0] NCCL INFO Channel 02/0 : 0[0] -> 1[1] via SHM/direct/direct\r\n"
      "garbage without the marker\n"
      "n1:1:1 [0] NCCL INFO Init timings - ncclCommInitRankConfig: rank 3 nranks 8 total 55.10 (kernels 52.00)\n");
  EXPECT_EQ(f.transports, (std::vector<std::string>{"NET/IB", "P2P", "SHM"}));
  ASSERT_TRUE(f.gdr.has_value());
  EXPECT_TRUE(*f.gdr);
  ASSERT_EQ(f.init_timings.size(), 1u);
  EXPECT_EQ(f.init_timings[0].rank, 3);
  EXPECT_DOUBLE_EQ(f.init_timings[0].total_s, 55.10);
}

TEST(nccl_probe_log, hostile_text_is_bounded_and_escaped) {
  std::string evil = "x NCCL WARN " + std::string(5000, 'A') + "\x1b[31m\n x NCCL INFO Init timings total nope\n";
  nccl_log_facts f = parse_nccl_log(evil);
  ASSERT_EQ(f.warnings.size(), 1u);
  EXPECT_LE(f.warnings[0].size(), 400u);
  EXPECT_EQ(f.warnings[0].find('\x1b'), std::string::npos);
  EXPECT_TRUE(f.init_timings.empty());
  EXPECT_NO_THROW(parse_nccl_log(""));
  EXPECT_NO_THROW(parse_nccl_log("NCCL INFO Channel 00/0 : 0[0] -> 1[0] ] via "));
}

}  // namespace
}  // namespace mrcheck
