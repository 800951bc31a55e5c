// NCCL's GPU-to-NIC distance from a sysfs tree (src/rdma/locality.cpp), and what mr_gpu says when GPUDirect RDMA
// will be off because of it: the PCI layouts of a switch with a GPU and a NIC below it (PIX), two switch levels
// (PXB), two root ports of one CPU (PHB), and two sockets (SYS).
#include <mrcheck/mr_probe.h>
#include <mrcheck/probe_checks.h>
#include <mrcheck/units.h>

#include "doubles/memory_verbs.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace mrcheck {
namespace {

namespace fs = std::filesystem;

class PciPath : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / fs::path("mrcheck_pci_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "sys/bus/pci/devices");
    fs::create_directories(root_ / "sys/class/infiniband");
    // Socket 0: a switch (01:00.0 upstream, 02:0x.0 downstream) under root port 00:01.0, with a GPU and a NIC;
    // a second switch level below it holds another GPU; a NIC straight on root port 00:02.0.
    device("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0", 0);  // GPU A
    device("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:04:00.0", 0);  // NIC near A
    device("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:02.0/0000:06:00.0/0000:07:00.0/0000:08:00.0", 0);  // GPU B
    device("pci0000:00/0000:00:02.0/0000:05:00.0", 0);  // NIC on its own root port
    device("pci0000:40/0000:40:01.0/0000:41:00.0", 0);  // NIC behind another host bridge of socket 0
    device("pci0000:80/0000:80:01.0/0000:81:00.0", 1);  // NIC on socket 1
  }
  void TearDown() override { fs::remove_all(root_); }

  void device(const std::string& path, int numa) {
    fs::path d = root_ / "sys/devices" / path;
    fs::create_directories(d);
    std::ofstream(d / "numa_node") << numa << "\n";
    fs::create_symlink(fs::path("../../../devices") / path, root_ / "sys/bus/pci/devices" / d.filename());
  }
  void hca(const std::string& name, const std::string& bdf) {
    fs::create_directories(root_ / "sys/class/infiniband" / name);
    fs::create_symlink(fs::path("../../../bus/pci/devices") / bdf, root_ / "sys/class/infiniband" / name / "device");
  }
  pci_path path(const std::string& a, const std::string& b) { return nccl_pci_path(*sysroot::open(root_), a, b); }

  fs::path root_;
};

TEST_F(PciPath, NcclPathTypesFromTheTree) {
  EXPECT_EQ(path("0000:03:00.0", "0000:04:00.0"), pci_path::pix);  // one switch between them
  EXPECT_EQ(path("0000:04:00.0", "0000:03:00.0"), pci_path::pix);  // symmetric
  EXPECT_EQ(path("0000:08:00.0", "0000:04:00.0"), pci_path::pxb);  // a switch below a switch
  EXPECT_EQ(path("0000:03:00.0", "0000:05:00.0"), pci_path::phb);  // two root ports of one host bridge
  EXPECT_EQ(path("0000:03:00.0", "0000:41:00.0"), pci_path::phb);  // two host bridges, one NUMA node
  EXPECT_EQ(path("0000:03:00.0", "0000:81:00.0"), pci_path::sys);  // two sockets
  EXPECT_EQ(path("0000:03:00.0", "0000:03:00.0"), pci_path::loc);
  EXPECT_EQ(path("0000:03:00.0", "0000:99:00.0"), pci_path::unknown);  // not in sysfs
  EXPECT_EQ(path("0000:03:00.0", ""), pci_path::unknown);
}

TEST(GdrLevel, NamesAndTheOldNumbers) {
  EXPECT_EQ(parse_gdr_level("PIX"), pci_path::pix);
  EXPECT_EQ(parse_gdr_level("SYS"), pci_path::sys);
  EXPECT_EQ(parse_gdr_level("2"), pci_path::pxb);
  EXPECT_EQ(parse_gdr_level("0"), pci_path::loc);
  EXPECT_EQ(parse_gdr_level("9"), pci_path::sys);
  EXPECT_EQ(parse_gdr_level("NVL"), pci_path::unknown);
  EXPECT_EQ(parse_gdr_level("-1"), pci_path::unknown);
  EXPECT_EQ(parse_gdr_level(""), pci_path::unknown);
}

// A GPU whose only NIC hangs off another root port: NCCL keeps GDR off (PHB > PXB) and stages through host memory;
// mr_gpu says "GDR will be off" with the distance and does not fail the node for a registration NCCL never makes.
class FakeGpuAt final : public gpu_memory {
 public:
  explicit FakeGpuAt(std::string bdf) : bdf_(std::move(bdf)) {}
  int device() const override { return 0; }
  std::string pci_bdf() const override { return bdf_; }
  int driver_version() const override { return 13000; }
  bool dmabuf_supported() const override { return true; }
  bool gdr_supported() const override { return true; }
  result<std::uint64_t> alloc(std::size_t) override { return std::uint64_t{0x7f0000000000}; }
  result<int> dmabuf_fd(std::uint64_t, std::size_t) override { return ::dup(STDERR_FILENO); }
  void free(std::uint64_t) override {}

 private:
  std::string bdf_;
};

mr_probe_request gpu_request(const fs::path& root, std::vector<std::string> env = {}) {
  mr_probe_request r;
  for (const char* small : {"NCCL_BUFFSIZE=65536", "NCCL_LL_BUFFSIZE=65536", "NCCL_LL128_BUFFSIZE=65536"}) {
    env.emplace_back(small);
  }
  r.env = std::move(env);
  r.nccl_etc_file = "/nonexistent/nccl.conf";
  r.root = *sysroot::open(root);
  r.gpu = true;
  return r;
}

node_evidence quiet_evidence() {
  node_evidence e;
  e.memlock_soft = k_unlimited;
  e.memlock_hard = k_unlimited;
  e.is_root = false;
  e.cap_ipc_lock = false;
  e.in_container = false;
  e.peer_memory = false;
  return e;
}

probe_check gpu_verdict(const fs::path& root, const std::string& gpu_bdf, std::vector<std::string> env,
                        bool fail_dmabuf, pci_path* seen = nullptr) {
  memory_verbs v({{"mlx5_0", {verbs_port{1, k_ibv_port_active, k_ibv_link_layer_infiniband}}}}, true, true);
  if (fail_dmabuf) v.fail("ibv_reg_dmabuf_mr", EOPNOTSUPP);  // no DMA-BUF at all
  v.fail("ibv_reg_mr_iova2", EFAULT, 1, 24);                 // the GPU pointer: no peer-memory client
  FakeGpuAt g(gpu_bdf);
  null_log log;
  mr_probe_outcome o = run_mr_probe(gpu_request(root, std::move(env)), &v, status::ok(), &g, {}, log);
  if (seen != nullptr) *seen = o.hcas.at(0).gpu_path;
  return mr_probe_checks(o, quiet_evidence()).at(2);
}

TEST_F(PciPath, FarNicMeansGdrOffByTopologyNotAFault) {
  hca("mlx5_0", "0000:05:00.0");
  pci_path seen = pci_path::unknown;
  probe_check c = gpu_verdict(root_, "0000:03:00.0", {}, /*fail_dmabuf=*/true, &seen);
  EXPECT_EQ(seen, pci_path::phb);
  EXPECT_EQ(c.result.result, verdict::skip) << c.result.summary;
  EXPECT_EQ(c.result.summary,
            "GDR will be off: mlx5_0 is PHB from GPU 0000:03:00.0 (through the CPU), beyond NCCL_NET_GDR_LEVEL "
            "(default PXB); NCCL stages GPU data through host memory (see mr_host)");
  // The user's NCCL_NET_GDR_LEVEL=PHB lets NCCL use GDR there: then the missing path is a warning again.
  probe_check c2 = gpu_verdict(root_, "0000:03:00.0", {"NCCL_NET_GDR_LEVEL=PHB"}, true);
  EXPECT_EQ(c2.result.result, verdict::warn) << c2.result.summary;
}

TEST_F(PciPath, NearNicWithoutAGdrPathWarnsThatGdrWillBeOff) {
  hca("mlx5_0", "0000:04:00.0");
  probe_check c = gpu_verdict(root_, "0000:03:00.0", {}, /*fail_dmabuf=*/true);
  EXPECT_EQ(c.result.result, verdict::warn) << c.result.summary;
  EXPECT_EQ(c.result.summary.rfind("GDR will be off although mlx5_0 is PIX from GPU 0000:03:00.0:", 0), 0u)
      << c.result.summary;
  // The same node with DMA-BUF working passes, and the detail names the distance.
  probe_check ok = gpu_verdict(root_, "0000:03:00.0", {}, /*fail_dmabuf=*/false);
  EXPECT_EQ(ok.result.result, verdict::pass) << ok.result.summary;
  EXPECT_NE(ok.result.detail.find("mlx5_0: PIX from the GPU (NCCL_NET_GDR_LEVEL default PXB)"), std::string::npos)
      << ok.result.detail;
}

}  // namespace
}  // namespace mrcheck
