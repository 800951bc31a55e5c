// The path note of `mrcheck explain` (src/explain/path_note.cpp): GPUDirect RDMA silently off, or sockets, where the
// node facts show the node could do better; nothing when NCCL's own reason is the PCI distance or the facts show
// nothing better. The log lines are NCCL 2.28's INFO forms (docs/facts/verbs-and-nccl.md §4).
#include <mrcheck/explain.h>
#include <mrcheck/nccl_log.h>

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>

namespace mrcheck {
namespace {

constexpr const char* k_ib_no_gdr =
    "gpu01:2201:2201 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB ib0:10.0.0.1<0>\n"
    "gpu01:2201:2201 [0] NCCL INFO Using network IB\n"
    "gpu01:2201:2215 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0\n"
    "gpu01:2201:2215 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0\n";

constexpr const char* k_ib_gdr_far =
    "gpu01:2201:2201 [0] NCCL INFO GPU Direct RDMA Disabled for GPU 0 / HCA 0 (distance 5 > 3)\n"
    "gpu01:2201:2215 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0\n";

constexpr const char* k_ib_gdr_on =
    "gpu01:2201:2215 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA\n";

constexpr const char* k_sockets =
    "gpu01:2201:2201 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\n"
    "gpu01:2201:2215 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0\n";

// What scan_fd() shows its observer, fed as cmd_explain does.
nccl_path_scan scan_of(const char* log) {
  char file[] = "/tmp/mrcheck_path_note_XXXXXX";
  int fd = ::mkstemp(file);
  EXPECT_GE(fd, 0);
  std::string_view text(log);
  EXPECT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::lseek(fd, 0, SEEK_SET);
  nccl_log_scanner scanner;
  nccl_path_scan path;
  EXPECT_TRUE(scan_fd(fd, scanner, [&](std::string_view l, std::size_t) { path.feed(l); }).is_ok());
  ::close(fd);
  ::unlink(file);
  return path;
}

evidence_origin here(const char* host = "gpu01.cluster") {
  evidence_origin o;
  o.hostname = host;
  return o;
}

TEST(PathNote, GdrOffWhereTheNodeHasARegisteredPeerClient) {
  node_evidence e;
  e.peer_memory = true;
  e.peer_memory_client = true;
  int asked = 0;
  auto ev = [&]() -> const node_evidence& {
    ++asked;
    return e;
  };
  nccl_path_scan s = scan_of(k_ib_no_gdr);
  EXPECT_EQ(s.hosts, std::set<std::string>{"gpu01"});
  auto n = judge_path(s, ev, here());
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->what, "gdr_off");
  EXPECT_TRUE(n->evidence_applies);
  EXPECT_NE(n->text.find("yet on this node nvidia_peermem is registered"), std::string::npos) << n->text;
  EXPECT_NE(n->fix.find("NCCL_NET_GDR_LEVEL=LOC"), std::string::npos);
  EXPECT_EQ(asked, 1);

  // The open modules with DMA-BUF in rdma-core are as good; a node with neither has nothing better: no note.
  node_evidence open;
  open.driver_flavour = nvidia_flavour::open;
  open.has_dmabuf_mr = true;
  EXPECT_TRUE(judge_path(
                  s, [&]() -> const node_evidence& { return open; }, here())
                  .has_value());
  node_evidence none;
  none.peer_memory = false;
  none.peer_memory_client = false;
  EXPECT_FALSE(judge_path(
                   s, [&]() -> const node_evidence& { return none; }, here())
                   .has_value());
}

TEST(PathNote, AnotherNodesLogNamesTheNodeToCheck) {
  node_evidence none;
  auto n = judge_path(
      scan_of(k_ib_no_gdr), [&]() -> const node_evidence& { return none; }, here("login1"));
  ASSERT_TRUE(n.has_value());
  EXPECT_FALSE(n->evidence_applies);
  EXPECT_NE(n->fix.find("`mrcheck probe mr --gpu` on gpu01"), std::string::npos) << n->fix;
}

TEST(PathNote, NothingForTheTopologyOrForGdrInUseAndNoFactsRead) {
  int asked = 0;
  node_evidence e;
  e.peer_memory_client = true;
  auto ev = [&]() -> const node_evidence& {
    ++asked;
    return e;
  };
  EXPECT_FALSE(judge_path(scan_of(k_ib_gdr_far), ev, here()).has_value());  // NCCL's reason: the distance
  EXPECT_FALSE(judge_path(scan_of(k_ib_gdr_on), ev, here()).has_value());
  EXPECT_FALSE(judge_path(scan_of("gpu01:1:1 [0] NCCL INFO Bootstrap : Using eth0\n"), ev, here()).has_value());
  EXPECT_EQ(asked, 1);  // only the distance case asked for the node
}

TEST(PathNote, SocketsWhereTheNodeHasRdmaDevices) {
  node_evidence e;
  e.rdma_devices = 2;
  e.rdma_device_list = "mlx5_0 (MT4129, fw 28.39.1002), mlx5_1 (MT4129, fw 28.39.1002)";
  auto n = judge_path(
      scan_of(k_sockets), [&]() -> const node_evidence& { return e; }, here());
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->what, "sockets");
  EXPECT_EQ(n->text.rfind("NCCL used sockets although this node has 2 RDMA devices (mlx5_0", 0), 0u) << n->text;
  node_evidence none;
  none.rdma_devices = 0;
  EXPECT_FALSE(judge_path(
                   scan_of(k_sockets), [&]() -> const node_evidence& { return none; }, here())
                   .has_value());
}

TEST(PathNote, BoundedWhateverTheLog) {
  nccl_path_scan s;
  std::string line = "gpu01:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0";
  for (int i = 0; i < 10000; ++i) s.feed(line);
  EXPECT_EQ(s.kept, 4096u);
  EXPECT_EQ(s.skipped, 10000u - 4096u);
  EXPECT_LE(s.bytes, std::size_t{1} << 20);
  EXPECT_EQ(s.reader.facts().channels, std::vector<std::string>{"NET/IB/0"});
  nccl_path_scan hosts;
  for (int i = 0; i < 100; ++i) {
    hosts.feed("node" + std::to_string(i) + ":7:7 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB");
  }
  EXPECT_EQ(hosts.hosts.size(), 16u);
}

}  // namespace
}  // namespace mrcheck
