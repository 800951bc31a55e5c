// The registration probe against in-memory verbs: NCCL's calls and flags, every errno -> its cause through the
// shared diagnosis, and every path releasing what it took.
#include <mrcheck/mr_probe.h>
#include <mrcheck/probe_checks.h>
#include <mrcheck/units.h>

#include "doubles/memory_verbs.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>
#include <cerrno>

namespace mrcheck {
namespace {

verbs_port active_port() { return verbs_port{1, k_ibv_port_active, k_ibv_link_layer_infiniband}; }

memory_verbs one_hca(bool iova2 = true, bool dmabuf = true) {
  return memory_verbs({{"mlx5_0", {active_port()}}}, iova2, dmabuf);
}

// A node without RDMA devices or NVIDIA GPUs (a dump of a CPU node): no HCA or GPU has a place in its PCI tree.
const sysroot& cpu_node() {
  static const sysroot root = *sysroot::open(std::string(MRCHECK_FIXTURES_DIR) + "/cpu_debian12");
  return root;
}

// Small NCCL buffers (1.5 MiB in the same 24 buffers) keep the probe's real mmap+touch cheap; a test's own
// values come first and win, as the first definition of a name does in NCCL's environment.
mr_probe_request request(std::vector<std::string> env = {}) {
  mr_probe_request r;
  for (const char* small : {"NCCL_BUFFSIZE=65536", "NCCL_LL_BUFFSIZE=65536", "NCCL_LL128_BUFFSIZE=65536"}) {
    env.emplace_back(small);
  }
  r.env = std::move(env);
  r.nccl_etc_file = "/nonexistent/nccl.conf";
  r.root = cpu_node();
  return r;
}

mr_probe_outcome run(memory_verbs& v, const mr_probe_request& r, gpu_memory* gpu = nullptr) {
  null_log log;
  return run_mr_probe(r, &v, status::ok(), gpu, gpu_probe_result{}, log);
}

// A job user with a finite limit and no CAP_IPC_LOCK, outside a container.
node_evidence user_evidence(std::uint64_t soft) {
  node_evidence e;
  e.memlock_soft = soft;
  e.memlock_hard = soft;
  e.is_root = false;
  e.cap_ipc_lock = false;
  e.in_container = false;
  e.max_map_count = 1048576;
  e.mem_total = 64ull << 30;
  e.mem_available = 32ull << 30;
  e.peer_memory = false;
  return e;
}

TEST(MrProbe, RegistersLikeNccl) {
  memory_verbs v = one_hca();
  mr_probe_outcome o = run(v, request());
  ASSERT_EQ(o.hcas.size(), 1u);
  EXPECT_TRUE(o.hcas[0].host.ok);
  EXPECT_EQ(o.size, o.estimate.host_bytes);
  auto regs = v.calls_named("ibv_reg_mr_iova2");
  ASSERT_EQ(regs.size(), o.estimate.buffers.size());
  const std::uint64_t ps = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
  for (const auto& c : regs) {
    EXPECT_EQ(c.access, k_nccl_mr_access | k_ibv_access_relaxed_ordering);
    EXPECT_EQ(c.iova, c.addr);  // iova = addr, as NCCL passes it
    EXPECT_EQ(c.addr % ps, 0u);
    EXPECT_EQ(c.length % ps, 0u);
  }
  EXPECT_TRUE(v.calls_named("ibv_reg_mr").empty());
  // The DMA-BUF probe exactly as NCCL: offset 0, length 0, iova 0, fd -1, access 0.
  auto db = v.calls_named("ibv_reg_dmabuf_mr");
  ASSERT_EQ(db.size(), 1u);
  EXPECT_EQ(db[0].fd, -1);
  EXPECT_EQ(db[0].length, 0u);
  EXPECT_EQ(db[0].access, 0u);
  EXPECT_EQ(db[0].err, EBADF);
  EXPECT_EQ(o.hcas[0].dmabuf.support, dmabuf_support::supported);
  EXPECT_EQ(v.open_handles(), 0);
  EXPECT_EQ(v.pinned_bytes(), 0u);

  auto checks = mr_probe_checks(o, user_evidence(k_unlimited));
  ASSERT_EQ(checks.size(), 2u);
  EXPECT_EQ(checks[0].result.id, "mr_host");
  EXPECT_EQ(checks[0].result.result, verdict::pass);
  EXPECT_NE(checks[0].result.detail.find("ESTIMATE"), std::string::npos);
  EXPECT_EQ(checks[1].result.id, "dmabuf");
  EXPECT_EQ(checks[1].result.result, verdict::pass);
}

TEST(MrProbe, PlainRegMrWithoutRelaxedOrderingOrWithoutIova2) {
  memory_verbs v = one_hca();
  mr_probe_outcome o = run(v, request({"NCCL_IB_PCI_RELAXED_ORDERING=0"}));
  EXPECT_TRUE(v.calls_named("ibv_reg_mr_iova2").empty());
  auto regs = v.calls_named("ibv_reg_mr");
  ASSERT_FALSE(regs.empty());
  EXPECT_EQ(regs[0].access, k_nccl_mr_access);
  EXPECT_FALSE(o.relaxed_ordering);

  memory_verbs old = one_hca(/*iova2=*/false, /*dmabuf=*/false);
  mr_probe_outcome o2 = run(old, request());
  EXPECT_FALSE(old.calls_named("ibv_reg_mr").empty());
  EXPECT_EQ(o2.hcas[0].dmabuf.err, EOPNOTSUPP);  // a missing symbol reads as NCCL reads it
  EXPECT_EQ(o2.hcas[0].dmabuf.support, dmabuf_support::unsupported);
}

TEST(MrProbe, SizeOverrideIsOnePageRoundedBuffer) {
  memory_verbs v = one_hca();
  auto r = request();
  r.size = 4 * 1024 * 1024 + 1;
  mr_probe_outcome o = run(v, r);
  auto regs = v.calls_named("ibv_reg_mr_iova2");
  ASSERT_EQ(regs.size(), 1u);
  const std::uint64_t ps = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
  EXPECT_EQ(regs[0].length, 4 * 1024 * 1024 + ps);
  EXPECT_TRUE(o.size_from_user);
}

TEST(MrProbe, EnomemUnderLowLimitIsMemlockWithBothNumbers) {
  memory_verbs v = one_hca();
  v.set_pin_budget(64 * 1024);
  auto r = request();
  r.size = 4 * 1024 * 1024;
  mr_probe_outcome o = run(v, r);
  EXPECT_FALSE(o.hcas[0].host.ok);
  EXPECT_EQ(o.hcas[0].host.err, ENOMEM);
  EXPECT_EQ(v.open_handles(), 0);
  auto checks = mr_probe_checks(o, user_evidence(64 * 1024));
  const probe_check& c = checks[0];
  EXPECT_EQ(c.result.result, verdict::fail);
  ASSERT_TRUE(c.diag.has_value());
  EXPECT_EQ(c.diag->what, cause::memlock);
  EXPECT_NE(c.result.summary.find("4 MiB"), std::string::npos) << c.result.summary;
  EXPECT_NE(c.result.summary.find("64 KiB"), std::string::npos) << c.result.summary;
  EXPECT_NE(c.result.summary.find("ENOMEM"), std::string::npos);
  EXPECT_FALSE(c.result.hint.empty());
  EXPECT_NE(c.result.detail.find("cause=memlock"), std::string::npos);
  EXPECT_EQ(c.what.call, "ibv_reg_mr_iova2");
  EXPECT_EQ(c.what.size.value_or(0), 4u * 1024 * 1024);
}

TEST(MrProbe, FailureMidwayReleasesEveryBufferAndHandle) {
  memory_verbs v = one_hca();
  v.fail("ibv_reg_mr_iova2", ENOMEM, 1, /*after=*/5);
  mr_probe_outcome o = run(v, request());
  const mr_attempt& a = o.hcas[0].host;
  EXPECT_FALSE(a.ok);
  EXPECT_EQ(a.failed_buffer, 5);
  EXPECT_GT(a.registered, 0u);
  EXPECT_LT(a.registered, a.bytes);
  EXPECT_EQ(v.calls_named("ibv_dereg_mr").size(), 5u + 0u);  // the 5 that succeeded; the dmabuf probe got none
  EXPECT_EQ(v.open_handles(), 0);
  EXPECT_EQ(v.pinned_bytes(), 0u);
  auto checks = mr_probe_checks(o, user_evidence(8 << 20));
  EXPECT_NE(checks[0].result.summary.find("buffer 6 of 24"), std::string::npos) << checks[0].result.summary;
}

struct errno_case {
  int err;
  cause expected;
  bool cap;  // the evidence says CAP_IPC_LOCK
};

TEST(MrProbe, EveryRegistrationErrnoMapsToItsCause) {
  const errno_case cases[] = {
      {ENOMEM, cause::memlock, false},
      {ENOMEM, cause::pinning_resources, true},
      {EPERM, cause::capability, false},
      {EFAULT, cause::unknown, false},  // host memory: EFAULT is not a peer-memory problem
  };
  for (const auto& tc : cases) {
    memory_verbs v = one_hca();
    v.fail("ibv_reg_mr_iova2", tc.err);
    mr_probe_outcome o = run(v, request());
    node_evidence e = user_evidence(64 * 1024);
    e.cap_ipc_lock = tc.cap;
    auto checks = mr_probe_checks(o, e);
    ASSERT_TRUE(checks[0].diag.has_value()) << tc.err;
    EXPECT_EQ(checks[0].result.result, verdict::fail) << tc.err;
    EXPECT_EQ(checks[0].diag->what, tc.expected) << "errno " << tc.err << ": " << checks[0].result.summary;
    EXPECT_EQ(checks[0].what.err, tc.err);
    EXPECT_EQ(v.open_handles(), 0);
  }
}

TEST(MrProbe, EinvalPointsAtTheStack) {
  memory_verbs v = one_hca();
  v.fail("ibv_reg_mr_iova2", EINVAL);
  mr_probe_outcome o = run(v, request());
  node_evidence e = user_evidence(k_unlimited);
  e.kernel_stack = rdma_flavour::inbox;
  e.user_stack = rdma_flavour::ofed;
  auto checks = mr_probe_checks(o, e);
  ASSERT_TRUE(checks[0].diag.has_value());
  EXPECT_EQ(checks[0].diag->what, cause::rdma_stack_mismatch);
  // Same flavours on both sides: not confirmed as a mismatch, but never a memlock story.
  node_evidence same = user_evidence(k_unlimited);
  auto checks2 = mr_probe_checks(o, same);
  EXPECT_NE(checks2[0].diag->what, cause::memlock);
  EXPECT_NE(checks2[0].diag->what, cause::capability);
}

TEST(MrProbe, DmabufUnsupportedErrnosAreWarnings) {
  for (int err : {EOPNOTSUPP, EPROTONOSUPPORT}) {
    memory_verbs v = one_hca();
    v.fail("ibv_reg_dmabuf_mr", err);
    auto r = request();
    r.gpu = true;  // a GPU job: DMA-BUF matters
    mr_probe_outcome o = run(v, r);
    EXPECT_EQ(o.hcas[0].dmabuf.support, dmabuf_support::unsupported);
    auto checks = mr_probe_checks(o, user_evidence(k_unlimited));
    const probe_check& d = checks[1];
    EXPECT_EQ(d.result.id, "dmabuf");
    EXPECT_EQ(d.result.result, verdict::warn);
    ASSERT_TRUE(d.diag.has_value());
    EXPECT_EQ(d.diag->what, cause::dmabuf_unsupported) << err;
  }
  // Any other answer (EBADF, even EINVAL) means the kernel knows the method: NCCL calls it supported.
  memory_verbs v = one_hca();
  v.fail("ibv_reg_dmabuf_mr", EINVAL);
  EXPECT_EQ(run(v, request()).hcas[0].dmabuf.support, dmabuf_support::supported);
}

TEST(MrProbe, SetupFailuresAreReportedAndReleased) {
  memory_verbs v = one_hca();
  v.fail("ibv_alloc_pd", ENOMEM, /*count=*/1, /*after=*/0);
  mr_probe_outcome o = run(v, request());
  EXPECT_EQ(o.hcas[0].host.failed_step, "ibv_alloc_pd");
  EXPECT_EQ(v.open_handles(), 0);
  auto checks = mr_probe_checks(o, user_evidence(k_unlimited));
  EXPECT_EQ(checks[0].result.result, verdict::fail);
  EXPECT_NE(checks[0].result.summary.find("ibv_alloc_pd"), std::string::npos);
}

TEST(MrProbe, NoDeviceIsSkipWithCause) {
  memory_verbs v({}, true, true);
  mr_probe_outcome o = run(v, request());
  auto checks = mr_probe_checks(o, user_evidence(k_unlimited));
  EXPECT_EQ(checks[0].result.result, verdict::skip);
  EXPECT_EQ(checks[0].result.summary, "no RDMA device");
  ASSERT_TRUE(checks[0].diag.has_value());
  EXPECT_EQ(checks[0].diag->what, cause::no_rdma_device);
  EXPECT_EQ(checks[1].result.result, verdict::skip);

  memory_verbs down({{"mlx5_0", {verbs_port{1, 1, k_ibv_link_layer_infiniband}}}});
  auto c2 = mr_probe_checks(run(down, request()), user_evidence(k_unlimited));
  EXPECT_EQ(c2[0].result.result, verdict::skip);
  EXPECT_NE(c2[0].result.detail.find("DOWN"), std::string::npos);
}

TEST(MrProbe, UnknownDeviceNamedByTheUserIsAnError) {
  memory_verbs v = one_hca();
  auto r = request();
  r.device = "mlx5_7";
  auto checks = mr_probe_checks(run(v, r), user_evidence(k_unlimited));
  EXPECT_EQ(checks[0].result.result, verdict::error);
  EXPECT_NE(checks[0].result.summary.find("mlx5_7"), std::string::npos);
  EXPECT_NE(checks[0].result.summary.find("mlx5_0"), std::string::npos);  // what is present
  EXPECT_TRUE(v.calls_named("ibv_reg_mr_iova2").empty());
}

TEST(MrProbe, LibraryThatDoesNotLoad) {
  null_log log;
  mr_probe_outcome o = run_mr_probe(request(), nullptr, status::error("dlopen libibverbs.so.1: not found"), nullptr,
                                    gpu_probe_result{}, log);
  auto checks = mr_probe_checks(o, user_evidence(k_unlimited));
  EXPECT_EQ(checks[0].result.result, verdict::skip);  // no rdma-core: NCCL cannot use IB either
  o.explicit_library = true;                          // the admin named a path: that is a broken setup
  checks = mr_probe_checks(o, user_evidence(k_unlimited));
  EXPECT_EQ(checks[0].result.result, verdict::error);
}

TEST(MrProbe, IbDisabledRegistersNothing) {
  memory_verbs v = one_hca();
  mr_probe_outcome o = run(v, request({"NCCL_IB_DISABLE=1"}));
  EXPECT_TRUE(v.calls_named("ibv_reg_mr_iova2").empty());
  auto checks = mr_probe_checks(o, user_evidence(k_unlimited));
  EXPECT_EQ(checks[0].result.result, verdict::skip);
  EXPECT_NE(checks[0].result.summary.find("NCCL_IB_DISABLE=1"), std::string::npos);
}

TEST(MrProbe, RootPassSaysMemlockWasNotTested) {
  memory_verbs v = one_hca();
  mr_probe_outcome o = run(v, request());
  node_evidence e = user_evidence(8 << 20);
  e.cap_ipc_lock = true;
  auto checks = mr_probe_checks(o, e);
  EXPECT_EQ(checks[0].result.result, verdict::pass);
  EXPECT_NE(checks[0].result.summary.find("NOT tested"), std::string::npos) << checks[0].result.summary;
}

// A GPU for the mr_gpu check: allocations are plain numbers, DMA-BUF fds are dup'ed /dev/null descriptors.
class fake_gpu final : public gpu_memory {
 public:
  bool dmabuf_attr = true;
  bool fail_handle = false;
  int allocs = 0;
  int frees = 0;
  int device() const override { return 0; }
  std::string pci_bdf() const override { return "0000:3b:00.0"; }
  int driver_version() const override { return 13000; }
  bool dmabuf_supported() const override { return dmabuf_attr; }
  bool gdr_supported() const override { return true; }
  result<std::uint64_t> alloc(std::size_t) override {
    ++allocs;
    return std::uint64_t{0x7f0000000000};
  }
  result<int> dmabuf_fd(std::uint64_t, std::size_t) override {
    if (fail_handle) return status::error("cuMemGetHandleForAddressRange: CUDA_ERROR_NOT_SUPPORTED");
    return ::dup(STDERR_FILENO);
  }
  void free(std::uint64_t) override { ++frees; }
  // CUDA VMM, as NCCL >= 2.19 allocates: off unless a test turns it on.
  bool vmm = false;
  bool fail_vmm_alloc = false;
  int vmm_allocs = 0;
  int vmm_frees = 0;
  bool vmm_supported() const override { return vmm; }
  bool vmm_gdr_supported() const override { return vmm; }
  result<std::uint64_t> alloc_vmm(std::size_t) override {
    if (fail_vmm_alloc) return status::error("cuMemCreate 2097152 bytes: CUDA_ERROR_OUT_OF_MEMORY");
    ++vmm_allocs;
    return std::uint64_t{0x7f4000000000};
  }
  void free_vmm(std::uint64_t) override { ++vmm_frees; }
};

TEST(MrGpu, DmabufPathIsWhatNcclUsesWhenSupported) {
  memory_verbs v = one_hca();
  v.fail("ibv_reg_mr_iova2", EFAULT, 1, /*after=*/24);  // host buffers pass, the GPU pointer gets EFAULT
  fake_gpu g;
  auto r = request();
  r.gpu = true;
  mr_probe_outcome o = run(v, r, &g);
  ASSERT_TRUE(o.hcas[0].gpu.attempted);
  EXPECT_FALSE(o.hcas[0].gpu.peermem.ok);
  EXPECT_EQ(o.hcas[0].gpu.peermem.err, EFAULT);
  EXPECT_TRUE(o.hcas[0].gpu.dmabuf.ok);
  auto db = v.calls_named("ibv_reg_dmabuf_mr");
  ASSERT_EQ(db.size(), 2u);
  EXPECT_GE(db[1].fd, 0);
  EXPECT_EQ(db[1].iova, 0x7f0000000000u);  // iova = the device address, offset 0
  EXPECT_EQ(db[1].addr, 0u);
  EXPECT_EQ(g.allocs, g.frees);
  EXPECT_EQ(v.open_handles(), 0);
  auto checks = mr_probe_checks(o, user_evidence(k_unlimited));
  ASSERT_EQ(checks.size(), 3u);
  EXPECT_EQ(checks[2].result.id, "mr_gpu");
  EXPECT_EQ(checks[2].result.result, verdict::pass) << checks[2].result.summary;
}

TEST(MrGpu, FailingDmabufRegistrationFailsTheJob) {
  memory_verbs v = one_hca();
  v.fail("ibv_reg_dmabuf_mr", EINVAL, 1, /*after=*/1);  // the fd -1 probe answers EBADF, the real one EINVAL
  fake_gpu g;
  auto r = request();
  r.gpu = true;
  mr_probe_outcome o = run(v, r, &g);
  auto checks = mr_probe_checks(o, user_evidence(k_unlimited));
  EXPECT_EQ(checks[2].result.result, verdict::fail) << checks[2].result.summary;
  ASSERT_TRUE(checks[2].diag.has_value());
  EXPECT_EQ(checks[2].what.call, "ibv_reg_dmabuf_mr");
  EXPECT_TRUE(checks[2].what.gpu_buffer.value_or(false));
}

TEST(MrGpu, NoGdrPathIsAWarningNamingPeerMemory) {
  memory_verbs v = one_hca(true, /*dmabuf=*/false);
  v.fail("ibv_reg_mr_iova2", EFAULT, 1, 24);
  fake_gpu g;
  auto r = request();
  r.gpu = true;
  mr_probe_outcome o = run(v, r, &g);
  auto checks = mr_probe_checks(o, user_evidence(k_unlimited));
  EXPECT_EQ(checks[2].result.result, verdict::warn) << checks[2].result.summary;
  ASSERT_TRUE(checks[2].diag.has_value());
  EXPECT_EQ(checks[2].diag->what, cause::gpu_peer_memory);
  // With nvidia_peermem loaded NCCL takes the peer-memory path: EFAULT there fails the job.
  node_evidence pm = user_evidence(k_unlimited);
  pm.peer_memory = true;
  auto checks2 = mr_probe_checks(o, pm);
  EXPECT_EQ(checks2[2].result.result, verdict::fail);
  EXPECT_EQ(checks2[2].diag->what, cause::gpu_peer_memory);
}

// NCCL >= 2.19 allocates its GPU buffers with cuMem (VMM): the probe registers one through the same two paths, and a
// VMM buffer that fails where cudaMalloc memory passes fails the job with NCCL_CUMEM_ENABLE=0 as the way out.
TEST(MrGpu, CumemBufferRegistersThroughTheSamePath) {
  memory_verbs v = one_hca();
  fake_gpu g;
  g.vmm = true;
  auto r = request();
  r.gpu = true;
  mr_probe_outcome o = run(v, r, &g);
  const gpu_probe_result& gp = o.hcas[0].gpu;
  EXPECT_TRUE(gp.vmm_attr);
  EXPECT_TRUE(gp.vmm_dmabuf.ok);
  EXPECT_TRUE(gp.vmm_peermem.ok);
  EXPECT_EQ(g.vmm_allocs, 1);
  EXPECT_EQ(g.vmm_frees, 1);
  auto db = v.calls_named("ibv_reg_dmabuf_mr");
  ASSERT_EQ(db.size(), 3u);  // the fd -1 probe, the cudaMalloc buffer, the cuMem buffer
  EXPECT_EQ(db[2].iova, 0x7f4000000000u);
  EXPECT_EQ(v.open_handles(), 0);
  auto checks = mr_probe_checks(o, user_evidence(k_unlimited));
  EXPECT_EQ(checks[2].result.result, verdict::pass) << checks[2].result.summary;
  EXPECT_NE(checks[2].result.summary.find("via DMA-BUF (cudaMalloc and cuMem buffers)"), std::string::npos)
      << checks[2].result.summary;
}

TEST(MrGpu, CumemBufferThatFailsFailsTheJobAndNamesTheSwitch) {
  memory_verbs v = one_hca();
  v.fail("ibv_reg_dmabuf_mr", EFAULT, 1, /*after=*/2);  // fd -1 probe, cudaMalloc pass; the cuMem one fails
  fake_gpu g;
  g.vmm = true;
  auto r = request();
  r.gpu = true;
  mr_probe_outcome o = run(v, r, &g);
  EXPECT_TRUE(o.hcas[0].gpu.dmabuf.ok);
  EXPECT_FALSE(o.hcas[0].gpu.vmm_dmabuf.ok);
  auto checks = mr_probe_checks(o, user_evidence(k_unlimited));
  EXPECT_EQ(checks[2].result.result, verdict::fail) << checks[2].result.summary;
  EXPECT_NE(checks[2].result.summary.find("cuMem (VMM) GPU memory failed with EFAULT"), std::string::npos)
      << checks[2].result.summary;
  EXPECT_EQ(checks[2].result.hint.rfind("set NCCL_CUMEM_ENABLE=0", 0), 0u) << checks[2].result.hint;

  // The job that already set NCCL_CUMEM_ENABLE=0 allocates with cudaMalloc: the same node passes it.
  memory_verbs v2 = one_hca();
  v2.fail("ibv_reg_dmabuf_mr", EFAULT, 1, 2);
  fake_gpu g2;
  g2.vmm = true;
  auto r2 = request({"NCCL_CUMEM_ENABLE=0"});
  r2.gpu = true;
  mr_probe_outcome o2 = run(v2, r2, &g2);
  EXPECT_EQ(mr_probe_checks(o2, user_evidence(k_unlimited))[2].result.result, verdict::pass);
}

TEST(MrGpu, CumemAllocationFailureIsReportedNotRegistered) {
  memory_verbs v = one_hca();
  fake_gpu g;
  g.vmm = true;
  g.fail_vmm_alloc = true;
  auto r = request();
  r.gpu = true;
  mr_probe_outcome o = run(v, r, &g);
  EXPECT_EQ(o.hcas[0].gpu.vmm_error, "cuMemCreate 2097152 bytes: CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_FALSE(o.hcas[0].gpu.vmm_dmabuf.attempted);
  auto checks = mr_probe_checks(o, user_evidence(k_unlimited));
  EXPECT_NE(checks[2].result.detail.find("cuMem (VMM) buffer could not be allocated"), std::string::npos);
}

// nvidia_peermem loaded without a registered nv_mem client: NCCL takes the peermem path (it only checks that the
// module is there) and the registration gets EFAULT; the diagnosis says the client is missing.
TEST(MrGpu, PeermemLoadedButNotRegisteredIsNamed) {
  memory_verbs v = one_hca(true, /*dmabuf=*/false);
  v.fail("ibv_reg_mr_iova2", EFAULT, 1, 24);
  fake_gpu g;
  auto r = request();
  r.gpu = true;
  mr_probe_outcome o = run(v, r, &g);
  node_evidence e = user_evidence(k_unlimited);
  e.peer_memory = true;
  e.peer_memory_client = false;
  auto checks = mr_probe_checks(o, e);
  EXPECT_EQ(checks[2].result.result, verdict::fail);
  ASSERT_TRUE(checks[2].diag.has_value());
  EXPECT_EQ(checks[2].diag->what, cause::gpu_peer_memory);
  EXPECT_TRUE(checks[2].diag->confirmed);
  EXPECT_NE(checks[2].result.summary.find("no nv_mem peer-memory client is registered"), std::string::npos)
      << checks[2].result.summary;
}

TEST(MrGpu, SkipAndErrorFromSetup) {
  memory_verbs v = one_hca();
  auto r = request();
  r.gpu = true;
  null_log log;
  gpu_probe_result skip;
  skip.skip_reason = "built without CUDA headers";
  auto o = run_mr_probe(r, &v, status::ok(), nullptr, skip, log);
  auto checks = mr_probe_checks(o, user_evidence(k_unlimited));
  EXPECT_EQ(checks[2].result.result, verdict::skip);
  EXPECT_EQ(checks[2].result.summary, "built without CUDA headers");
  gpu_probe_result broken;
  broken.error = "cuInit: CUDA_ERROR_UNKNOWN";
  auto o2 = run_mr_probe(r, &v, status::ok(), nullptr, broken, log);
  EXPECT_EQ(mr_probe_checks(o2, user_evidence(k_unlimited))[2].result.result, verdict::error);
}

TEST(MrProbe, JsonCarriesSizesInputsAndDiagnosis) {
  memory_verbs v = one_hca();
  v.fail("ibv_reg_mr_iova2", EPERM);
  mr_probe_outcome o = run(v, request({"NCCL_BUFFSIZE=2097152"}));
  auto checks = mr_probe_checks(o, user_evidence(0));
  nlohmann::json j = probe_to_json(o, checks);
  EXPECT_EQ(j["size_source"], "estimate");
  EXPECT_EQ(j["estimate"]["buff_simple"], 2097152);
  EXPECT_TRUE(j["estimate"]["is_estimate"].get<bool>());
  EXPECT_EQ(j["hcas"][0]["host"]["errno_name"], "EPERM");
  EXPECT_EQ(j["diagnosis"]["mr_host"]["cause"], "capability");
  EXPECT_EQ(j["diagnosis"]["mr_host"]["call"], "ibv_reg_mr_iova2");
  report rep = to_report(checks);
  EXPECT_EQ(rep.overall(), verdict::fail);
}

}  // namespace
}  // namespace mrcheck
