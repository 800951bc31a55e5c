// Every matrix rule's edges, on constructed node facts: a healthy H200 + ConnectX-7 + DOCA node passes every
// rule, and each test breaks one thing and asserts the verdict, the summary (the drain reason's fact) and the fix.
#include "checks/matrix_checks.h"

#include <mrcheck/check_registry.h>
#include <mrcheck/matrix.h>

#include "judge.h"

#include <gtest/gtest.h>

namespace mrcheck {
namespace {

using namespace matrix;

kmodule_fact module(const char* name, std::optional<std::string> version, std::string taint) {
  kmodule_fact m;
  m.name = name;
  m.loaded = true;
  m.version = std::move(version);
  m.taint = std::move(taint);
  return m;
}

process_fact slurmd_process(std::uint64_t soft, std::uint64_t hard) {
  process_fact p;
  p.pid = 1234;
  p.ppid = 1;
  p.comm = "slurmd";
  p.memlock = memlock_limit{soft, hard};
  return p;
}

// A node where everything lines up: DOCA-OFED kernel + user space, CX-7 fw 28.39, open driver 580 with
// peermem, CUDA 13.0, NCCL 2.28.9, BAR1 256 GiB, slurmd unlimited.
node_facts healthy() {
  node_facts f;
  f.hostname = "gpu01";
  f.kernel_release = std::string("6.1.0-18-amd64");
  rdma_device_fact d;
  d.name = "mlx5_0";
  d.fw_ver = "28.39.1002";
  d.pci_bdf = "0000:19:00.0";
  f.rdma_devices = std::vector<rdma_device_fact>{d};
  f.uverbs_abi = 6;
  f.modules["ib_core"] = module("ib_core", std::nullopt, "O");
  f.modules["mlx5_core"] = module("mlx5_core", "24.10-1.1.4", "O");
  f.modules["mlx5_ib"] = module("mlx5_ib", std::nullopt, "O");
  f.modules["nvidia"] = module("nvidia", "580.82.09", "");
  f.modules["nvidia_peermem"] = module("nvidia_peermem", "580.82.09", "");
  f.memory_peers = true;
  f.memory_peer_clients = {"nv_mem", "nv_mem_nc"};
  f.nvidia = nvidia_driver_fact{"580.82.09", nvidia_flavour::open,
                                "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.82.09  Release Build",
                                ""};
  gpu_fact g;
  g.pci_bdf = "0000:1b:00.0";
  g.device_id = "0x2335";
  g.bar1_bytes = std::uint64_t{256} << 30;
  g.bar1_resource_line = 2;
  f.gpus = std::vector<gpu_fact>{g};
  library_fact l;
  l.requested = "libibverbs.so.1";
  l.path = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.2410mlnx54";
  l.version = "1.14.2410mlnx54";
  l.symbols["ibv_reg_mr_iova2@IBVERBS_1.8"] = true;
  l.symbols["ibv_reg_dmabuf_mr@IBVERBS_1.12"] = true;
  f.libibverbs = l;
  f.cuda_driver_version = 13000;
  f.nccl_version = 22809;
  f.slurmd = slurmd_process(k_unlimited, k_unlimited);
  return f;
}

// slurm.conf text as collect_matrix_facts() would read it from /etc/slurm/slurm.conf.
result<slurm_conf_facts> conf_of(const char* text) {
  slurm_conf_settings s;
  parse_slurm_conf_text(text, "/etc/slurm/slurm.conf", s);
  return slurm_conf_facts_of(s);
}

matrix_facts healthy_extra() {
  matrix_facts m;
  m.slurm_conf = conf_of("PropagateResourceLimitsExcept=MEMLOCK\n");
  m.ofed_user_release = "OFED-internal-24.10-1.1.4";
  m.rdma_core_files = {"2410mlnx54"};
  return m;
}

const matrix_rules& rules() {
  static const matrix_rules r = default_matrix_rules();
  return r;
}

TEST(MatrixJudge, HealthyNodePassesEveryRule) {
  auto f = healthy();
  auto extra = healthy_extra();
  report r = judge_matrix(f, rules(), extra);
  auto ids = selected_ids(matrix_only());
  ASSERT_EQ(r.checks.size(), ids.size());
  for (std::size_t i = 0; i < r.checks.size(); ++i) {
    EXPECT_EQ(r.checks[i].id, ids[i]);
    // mnnvl: no multi-node NVLink fabric on this node (its own tests: mnnvl_test.cpp).
    EXPECT_EQ(r.checks[i].result, r.checks[i].id == "mnnvl" ? verdict::skip : verdict::pass)
        << r.checks[i].id << ": " << r.checks[i].summary;
  }
  EXPECT_EQ(r.overall(), verdict::pass);
  EXPECT_EQ(r.find("gpudirect")->summary, "GPUDirect RDMA via nvidia_peermem and DMA-BUF");
  EXPECT_EQ(r.find("hca_fw")->summary, "mlx5_0 ConnectX-7 fw 28.39.1002");
}

TEST(MatrixJudge, WithoutExtraFactsPropagateSkips) {
  report r = judge_matrix(healthy(), rules());
  EXPECT_EQ(r.find("propagate_limits")->result, verdict::skip);
  EXPECT_EQ(r.find("rdma_stack")->result, verdict::pass);
}

TEST(MatrixRdmaStack, InboxKernelUnderOfedUserSpaceFails) {
  auto f = healthy();
  f.modules["mlx5_core"] = module("mlx5_core", std::nullopt, "");
  f.modules["ib_core"] = module("ib_core", std::nullopt, "");
  f.memory_peers = false;
  auto c = check_rdma_stack(f, rules(), nullptr);  // user space known from the libibverbs fact ("mlnx")
  EXPECT_EQ(c.result, verdict::fail);
  EXPECT_EQ(c.summary, "inbox mlx5_core (kernel 6.1.0-18-amd64) under OFED user space OFED rdma-core 2410mlnx54");
  EXPECT_NE(c.hint.find("--add-kernel-support"), std::string::npos);
  // ofed_info alone says OFED too.
  f.libibverbs = status::error("not recorded in the dump");
  auto extra = healthy_extra();
  extra.rdma_core_files.clear();
  c = check_rdma_stack(f, rules(), &extra);
  EXPECT_EQ(c.result, verdict::fail);
  EXPECT_EQ(c.summary, "inbox mlx5_core (kernel 6.1.0-18-amd64) under OFED user space OFED-internal-24.10-1.1.4");
}

// mlx5_core loaded but no RDMA device (a VM, an Ethernet-only ConnectX): no stack in use, so no pass - and no
// drain for a mismatch nothing uses.
TEST(MatrixRdmaStack, ModuleWithoutDeviceIsSkipNotPass) {
  auto f = healthy();
  f.rdma_devices = std::vector<rdma_device_fact>{};
  auto c = check_rdma_stack(f, rules(), nullptr);
  EXPECT_EQ(c.result, verdict::skip) << c.summary;
  EXPECT_EQ(c.summary.find("OFED mlx5_core"), 0u) << c.summary;
  EXPECT_NE(c.summary.find("loaded, but no RDMA device: the stack was not checked"), std::string::npos) << c.summary;
  f.modules["mlx5_core"] = module("mlx5_core", std::nullopt, "");
  f.modules["ib_core"] = module("ib_core", std::nullopt, "");
  f.memory_peers = false;
  c = check_rdma_stack(f, rules(), nullptr);
  EXPECT_EQ(c.result, verdict::skip) << c.summary;
  EXPECT_NE(c.summary.find("(would be: inbox mlx5_core"), std::string::npos) << c.summary;
  f.rdma_devices = status::error("sysfs not readable");
  EXPECT_NE(check_rdma_stack(f, rules(), nullptr).summary.find("RDMA devices not read (sysfs not readable)"),
            std::string::npos);
}

TEST(MatrixRdmaStack, InboxModuleVersionEqualToKernelReleaseIsInbox) {
  // Kernels with the 5.10.y backport print the kernel release as mlx5_core's version
  // (docs/facts/kernel-and-drivers.md §3).
  auto f = healthy();
  f.modules["mlx5_core"] = module("mlx5_core", "6.1.0-18-amd64", "");
  f.modules["ib_core"] = module("ib_core", std::nullopt, "");
  library_fact l = *f.libibverbs;
  l.version = "1.14.44.0";
  l.path = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0";
  f.libibverbs = l;
  auto c = check_rdma_stack(f, rules(), nullptr);
  EXPECT_EQ(c.result, verdict::pass) << c.summary;
  EXPECT_EQ(c.summary, "inbox mlx5_core, user space distro rdma-core 44.0");
}

TEST(MatrixRdmaStack, OfedKernelUnderDistroRdmaCoreFails) {
  auto f = healthy();
  library_fact l = *f.libibverbs;
  l.version = "1.14.44.0";
  l.path = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0";
  f.libibverbs = l;
  auto c = check_rdma_stack(f, rules(), nullptr);
  EXPECT_EQ(c.result, verdict::fail);
  EXPECT_EQ(c.summary, "OFED mlx5_core 24.10-1.1.4 under distro rdma-core 44.0");
}

TEST(MatrixRdmaStack, MixedIbCoreAndMlx5CoreFails) {
  auto f = healthy();
  f.modules["ib_core"] = module("ib_core", std::nullopt, "");
  auto c = check_rdma_stack(f, rules(), nullptr);
  EXPECT_EQ(c.result, verdict::fail);
  EXPECT_EQ(c.summary, "mlx5_core (out-of-tree) and ib_core (inbox) from different stacks");
}

TEST(MatrixRdmaStack, UverbsAbiOutsideTheRules) {
  auto f = healthy();
  f.uverbs_abi = 5;
  auto c = check_rdma_stack(f, rules(), nullptr);
  EXPECT_EQ(c.result, verdict::fail);
  EXPECT_EQ(c.summary, "kernel uverbs ABI 5 not supported");
}

TEST(MatrixRdmaStack, OfedReleaseMismatchWarnsAndActionIsConfigurable) {
  auto f = healthy();
  auto extra = healthy_extra();
  extra.ofed_user_release = "MLNX_OFED_LINUX-23.10-0.5.5.0";
  auto c = check_rdma_stack(f, rules(), &extra);
  EXPECT_EQ(c.result, verdict::warn);
  EXPECT_EQ(c.summary, "OFED kernel modules 24.10-1.1.4 but user space MLNX_OFED_LINUX-23.10-0.5.5.0");
  auto r = rules();
  r.rdma_stack_ofed_version = rule_action::off;
  EXPECT_EQ(check_rdma_stack(f, r, &extra).result, verdict::pass);
  extra.ofed_user_release = "MLNX_OFED_LINUX-24.10-1.1.4.0";  // same release, fourth component added
  EXPECT_EQ(check_rdma_stack(f, rules(), &extra).result, verdict::pass);
}

// The package database tells DOCA/MLNX-OFED user space from the distribution's when the library's name
// cannot (the seed's own mismatch: DOCA-OFED user space on the inbox kernel modules).
TEST(MatrixRdmaStack, PackageDatabaseTellsTheFlavour) {
  auto f = healthy();
  f.modules["mlx5_core"] = module("mlx5_core", std::nullopt, "");
  f.modules["ib_core"] = module("ib_core", std::nullopt, "");
  library_fact l = *f.libibverbs;
  l.version = "1.14.54.0";  // OFED's file name looks like upstream's
  l.path = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.54.0";
  f.libibverbs = l;
  EXPECT_EQ(check_rdma_stack(f, rules(), nullptr).result, verdict::pass);
  auto pk = parse_dpkg_rdma("Package: libibverbs1\nStatus: install ok installed\nVersion: 2410mlnx54-1.2410068\n\n",
                            "/var/lib/dpkg/status");
  ASSERT_TRUE(pk.is_ok());
  f.rdma_packages = *pk;
  auto c = check_rdma_stack(f, rules(), nullptr);
  EXPECT_EQ(c.result, verdict::fail);
  EXPECT_NE(c.summary.find("inbox mlx5_core (kernel 6.1.0-18-amd64) under OFED user space"), std::string::npos)
      << c.summary;
  EXPECT_NE(c.detail.find("libibverbs1 2410mlnx54-1.2410068 (MLNX/DOCA-OFED build)"), std::string::npos) << c.detail;
  // Without any library fact the package database alone decides.
  f.libibverbs = status::error("not recorded");
  EXPECT_EQ(check_rdma_stack(f, rules(), nullptr).result, verdict::fail);
  f.rdma_packages = *parse_dpkg_rdma("Package: rdma-core\nStatus: install ok installed\nVersion: 44.0-2\n", "x");
  f.modules["mlx5_core"] = module("mlx5_core", "24.10-1.1.4", "O");
  f.modules["ib_core"] = module("ib_core", std::nullopt, "O");
  EXPECT_EQ(check_rdma_stack(f, rules(), nullptr).summary, "OFED mlx5_core 24.10-1.1.4 under distro rdma-core 44.0-2");
}

// Other NIC families need their rdma-core provider; mlx5-only rules do not apply to them.
TEST(MatrixRdmaStack, NonMellanoxFamiliesNeedTheirProvider) {
  node_facts f;
  f.kernel_release = std::string("6.8.0-1015-aws");
  rdma_device_fact d;
  d.name = "rdmap16s27";
  d.driver = "efa";
  d.fw_ver = "0.0.0.0";
  f.rdma_devices = std::vector<rdma_device_fact>{d};
  f.uverbs_abi = 6;
  f.modules["efa"] = module("efa", "2.15.3g", "O");
  f.verbs_providers = {"mlx5", "rxe"};
  auto c = check_rdma_stack(f, rules(), nullptr);
  EXPECT_EQ(c.result, verdict::fail);
  EXPECT_EQ(c.summary, "rdmap16s27 (efa) has no rdma-core provider libefa in user space");
  EXPECT_NE(c.detail.find("efa: version 2.15.3g, taint 'O'"), std::string::npos) << c.detail;
  f.verbs_providers.push_back("efa");
  c = check_rdma_stack(f, rules(), nullptr);
  EXPECT_EQ(c.result, verdict::pass) << c.summary;
  EXPECT_EQ(c.summary, "efa device(s), rdma-core providers present");
  // Broadcom RoCE: the PCI driver is bnxt_en, the verbs module bnxt_re.
  d.name = "bnxt_re0";
  d.driver = "bnxt_en";
  EXPECT_EQ(rdma_family(d), "bnxt_re");
  d.driver.clear();
  d.name = "rxe0";
  EXPECT_EQ(rdma_family(d), "rxe");
}

TEST(MatrixRdmaStack, UnknownUserSpaceAndNoHardware) {
  auto f = healthy();
  f.libibverbs = status::error("not recorded");
  auto c = check_rdma_stack(f, rules(), nullptr);
  // An unknown flavour is a warning that says what could not be read, never a silent pass.
  EXPECT_EQ(c.result, verdict::warn);
  EXPECT_EQ(c.summary, "OFED mlx5_core 24.10-1.1.4, user-space flavour unknown");
  EXPECT_NE(c.detail.find("user space: not determined"), std::string::npos);
  EXPECT_NE(c.hint.find("not recorded"), std::string::npos) << c.hint;
  EXPECT_NE(c.hint.find("package database: not read"), std::string::npos) << c.hint;
  node_facts empty;
  empty.rdma_devices = std::vector<rdma_device_fact>{};
  EXPECT_EQ(check_rdma_stack(empty, rules(), nullptr).result, verdict::skip);
  auto r = rules();
  r.rdma_stack = rule_action::warn;
  f = healthy();
  f.uverbs_abi = 9;
  EXPECT_EQ(check_rdma_stack(f, r, nullptr).result, verdict::warn);
}

TEST(MatrixHcaFw, BelowMinimumAtAndAbove) {
  auto f = healthy();
  (*f.rdma_devices)[0].fw_ver = "28.34.4000";
  auto c = check_hca_fw(f, rules());
  EXPECT_EQ(c.result, verdict::fail);
  EXPECT_EQ(c.summary, "mlx5_0 ConnectX-7 fw 28.34.4000 < 28.35.1012");
  EXPECT_NE(c.hint.find("28.35.1012"), std::string::npos);
  (*f.rdma_devices)[0].fw_ver = "28.35.1012";
  EXPECT_EQ(check_hca_fw(f, rules()).result, verdict::pass);
  (*f.rdma_devices)[0].fw_ver = "16.35.1011";  // a ConnectX-5 one build short
  c = check_hca_fw(f, rules());
  EXPECT_EQ(c.result, verdict::fail);
  EXPECT_EQ(c.summary, "mlx5_0 ConnectX-5 fw 16.35.1011 < 16.35.1012");
  EXPECT_EQ(c.device, "mlx5_0");  // one device below: the drain reason's <device> part
  // Two adapters below the minimum: the finding is about both, so no single device.
  auto two = f;
  two.rdma_devices->push_back((*f.rdma_devices)[0]);
  two.rdma_devices->back().name = "mlx5_1";
  c = check_hca_fw(two, rules());
  EXPECT_EQ(c.result, verdict::fail);
  EXPECT_EQ(c.device, "");
}

TEST(MatrixHcaFw, UnknownFamilyAndNonMellanox) {
  auto f = healthy();
  (*f.rdma_devices)[0].fw_ver = "40.44.1000";
  auto c = check_hca_fw(f, rules());
  EXPECT_EQ(c.result, verdict::warn);
  EXPECT_EQ(c.summary, "mlx5_0 fw 40.44.1000 of unknown family");
  // A device of another vendor (irdma, efa) is not judged by Mellanox families.
  (*f.rdma_devices)[0].name = "irdma0";
  (*f.rdma_devices)[0].fw_ver = "1.52";
  EXPECT_EQ(check_hca_fw(f, rules()).result, verdict::skip);
  f.rdma_devices = std::vector<rdma_device_fact>{};
  EXPECT_EQ(check_hca_fw(f, rules()).summary, "no RDMA device");
}

TEST(MatrixHcaFw, OneBadDeviceAmongGoodOnes) {
  auto f = healthy();
  rdma_device_fact d2 = (*f.rdma_devices)[0];
  d2.name = "mlx5_1";
  d2.fw_ver = "22.31.1014";
  f.rdma_devices->push_back(d2);
  auto c = check_hca_fw(f, rules());
  EXPECT_EQ(c.result, verdict::fail);
  EXPECT_EQ(c.summary, "mlx5_1 ConnectX-6Dx fw 22.31.1014 < 22.35.1012");
}

TEST(MatrixGpuDriver, MinimumFlavourAndMissingDriver) {
  auto f = healthy();
  f.nvidia->version = "470.223.02";
  auto c = check_gpu_driver(f, rules());
  EXPECT_EQ(c.result, verdict::fail);
  EXPECT_EQ(c.summary, "driver open 470.223.02 < 525");
  f = healthy();
  f.nvidia->flavour = nvidia_flavour::proprietary;
  EXPECT_EQ(check_gpu_driver(f, rules()).result, verdict::pass);  // flavour any
  auto r = rules();
  r.gpu_driver_flavour = flavour_rule::open;
  c = check_gpu_driver(f, r);
  EXPECT_EQ(c.result, verdict::fail);
  EXPECT_EQ(c.summary, "driver proprietary 580.82.09 is not the open kernel module");
  f.nvidia = status::error("read /proc/driver/nvidia/version: No such file or directory");
  c = check_gpu_driver(f, rules());
  EXPECT_EQ(c.result, verdict::fail);
  EXPECT_EQ(c.summary, "1 NVIDIA GPU(s) but no driver loaded");
  f.gpus = std::vector<gpu_fact>{};
  EXPECT_EQ(check_gpu_driver(f, rules()).result, verdict::skip);
}

TEST(MatrixGpudirect, ProprietaryDriverWithoutPeermemFails) {
  auto f = healthy();
  f.nvidia->flavour = nvidia_flavour::proprietary;
  f.modules.erase("nvidia_peermem");
  f.memory_peer_clients.clear();
  auto c = check_gpudirect(f, rules());
  EXPECT_EQ(c.result, verdict::fail);
  EXPECT_EQ(c.summary, "no nvidia_peermem and no DMA-BUF (driver is not the open kernel module)");
  EXPECT_NE(c.hint.find("modprobe nvidia_peermem"), std::string::npos);  // memory_peers present: peermem can load
  f.memory_peers = false;
  c = check_gpudirect(f, rules());
  EXPECT_NE(c.hint.find("inbox RDMA cannot load nvidia_peermem"), std::string::npos);
  auto r = rules();
  r.gpudirect = rule_action::warn;
  EXPECT_EQ(check_gpudirect(f, r).result, verdict::warn);
  r.gpudirect = rule_action::off;
  EXPECT_EQ(check_gpudirect(f, r).result, verdict::skip);
}

TEST(MatrixGpudirect, DmabufNeedsKernelVerbsAndCuda) {
  auto f = healthy();
  f.modules.erase("nvidia_peermem");
  f.memory_peer_clients.clear();
  EXPECT_EQ(check_gpudirect(f, rules()).summary, "GPUDirect RDMA via DMA-BUF");
  f.kernel_release = std::string("5.10.0-28-amd64");
  EXPECT_EQ(check_gpudirect(f, rules()).summary, "no nvidia_peermem and no DMA-BUF (kernel 5.10.0-28-amd64 < 5.12)");
  f = healthy();
  f.modules.erase("nvidia_peermem");
  f.memory_peer_clients.clear();
  f.libibverbs->symbols["ibv_reg_dmabuf_mr@IBVERBS_1.12"] = false;
  EXPECT_EQ(check_gpudirect(f, rules()).summary,
            "no nvidia_peermem and no DMA-BUF (libibverbs lacks ibv_reg_dmabuf_mr)");
  f = healthy();
  f.modules.erase("nvidia_peermem");
  f.memory_peer_clients.clear();
  f.cuda_driver_version = 11040;
  EXPECT_EQ(check_gpudirect(f, rules()).summary, "no nvidia_peermem and no DMA-BUF (CUDA driver 11.4 < 11.7)");
}

TEST(MatrixGpudirect, SkipsWithoutHcaOrGpu) {
  auto f = healthy();
  f.rdma_devices = std::vector<rdma_device_fact>{};
  EXPECT_EQ(check_gpudirect(f, rules()).summary, "no RDMA device");
  f = healthy();
  f.gpus = std::vector<gpu_fact>{};
  f.nvidia = status::error("absent");
  EXPECT_EQ(check_gpudirect(f, rules()).summary, "no NVIDIA GPU");
}

TEST(MatrixCudaNccl, MinimumsWhereInstalled) {
  auto f = healthy();
  f.cuda_driver_version = 11080;
  auto c = check_cuda_driver(f, rules());
  EXPECT_EQ(c.result, verdict::fail);
  EXPECT_EQ(c.summary, "CUDA driver 11.8 < 12.0");
  f.cuda_driver_version = status::error("dlopen libcuda.so.1: not found");
  EXPECT_EQ(check_cuda_driver(f, rules()).result, verdict::skip);
  f.nccl_version = 21105;
  c = check_nccl(f, rules());
  EXPECT_EQ(c.result, verdict::fail);
  EXPECT_EQ(c.summary, "NCCL 2.11.5 < 2.12.0");
  f.nccl_version = 21200;
  EXPECT_EQ(check_nccl(f, rules()).result, verdict::pass);
  f.nccl_version = status::error("dlopen libnccl.so.2: not found");
  EXPECT_EQ(check_nccl(f, rules()).result, verdict::skip);
}

TEST(MatrixBar1, ComparesWithNvmlThenTableThenSkips) {
  auto f = healthy();
  EXPECT_EQ(check_bar1(f, rules()).summary, "1 GPU(s): BAR1 256 GiB >= memory 141 GiB");
  (*f.gpus)[0].bar1_bytes = std::uint64_t{128} << 30;
  auto c = check_bar1(f, rules());
  EXPECT_EQ(c.result, verdict::warn);  // bar1 defaults to warn
  EXPECT_EQ(c.summary, "0000:1b:00.0 BAR1 128 GiB < memory 141 GiB");
  (*f.gpus)[0].memory_bytes = std::uint64_t{96} << 30;  // NVML wins over the table
  EXPECT_EQ(check_bar1(f, rules()).result, verdict::pass);
  (*f.gpus)[0].memory_bytes.reset();
  (*f.gpus)[0].device_id = "0x1eb8";  // not in the table, no NVML
  c = check_bar1(f, rules());
  EXPECT_EQ(c.result, verdict::skip);
  EXPECT_EQ(c.summary, "0000:1b:00.0 (0x1eb8): memory unknown (no NVML, device id not in gpu_memory)");
  auto r = rules();
  r.bar1 = rule_action::fail;
  (*f.gpus)[0].device_id = "0x2330";
  (*f.gpus)[0].bar1_bytes = std::uint64_t{64} << 30;
  EXPECT_EQ(check_bar1(f, r).result, verdict::fail);
}

// A 256 MiB BAR1 on an 80 GB GPU cannot map NCCL's GPU buffers (fail); a 64 GiB one only falls short of
// the GPU's memory (warn). The floor is NCCL's GPU registrations for the node's NICs, or bar1.min.
TEST(MatrixBar1, GradedByWhatNcclRegistersOnTheGpu) {
  auto f = healthy();
  (*f.gpus)[0].device_id = "0x2330";  // 80 GiB from the rules table
  (*f.gpus)[0].bar1_bytes = std::uint64_t{64} << 30;
  auto c = check_bar1(f, rules());
  EXPECT_EQ(c.result, verdict::warn);
  EXPECT_NE(c.detail.find("needed for NCCL: 71.5 MiB"), std::string::npos) << c.detail;
  // One NIC: 4 channels of 9.19 MiB per connection, 71.5 MiB on the GPU; a 64 MiB BAR1 cannot hold it.
  (*f.gpus)[0].bar1_bytes = std::uint64_t{64} << 20;
  c = check_bar1(f, rules());
  EXPECT_EQ(c.result, verdict::fail);
  EXPECT_EQ(c.summary, "0000:1b:00.0 BAR1 64 MiB < 71.5 MiB that NCCL registers on the GPU");
  EXPECT_NE(c.hint.find("NCCL_NET_GDR_LEVEL=LOC"), std::string::npos);
  // Eight NICs: 32 channels, 572 MiB: the 256 MiB BAR1 above fails.
  std::vector<rdma_device_fact> eight(8, f.rdma_devices->front());
  f.rdma_devices = eight;
  (*f.gpus)[0].bar1_bytes = std::uint64_t{256} << 20;
  c = check_bar1(f, rules());
  EXPECT_EQ(c.result, verdict::fail);
  EXPECT_NE(c.summary.find("< 572 MiB"), std::string::npos) << c.summary;
  // bar1.min from the rules wins; bar1.too_small can be lowered to warn or turned off.
  auto r = rules();
  r.bar1_min = std::uint64_t{128} << 20;
  EXPECT_EQ(check_bar1(f, r).result, verdict::warn);
  r.bar1_min.reset();
  r.bar1_too_small = rule_action::warn;
  EXPECT_EQ(check_bar1(f, r).result, verdict::warn);
  r.bar1_too_small = rule_action::off;
  EXPECT_EQ(check_bar1(f, r).summary, "0000:1b:00.0 BAR1 256 MiB < memory 80 GiB");
  // No RDMA device: no GPUDirect, nothing for NCCL to map, only the memory comparison.
  f.rdma_devices = std::vector<rdma_device_fact>{};
  EXPECT_EQ(check_bar1(f, rules()).result, verdict::warn);
}

TEST(MatrixSlurmdMemlock, HardSoftAndWhereSlurmdIsFound) {
  auto f = healthy();
  f.slurmd = slurmd_process(8u << 20, 8u << 20);
  auto c = check_slurmd_memlock(f, rules());
  EXPECT_EQ(c.result, verdict::fail);
  EXPECT_EQ(c.summary, "slurmd hard memlock 8 MiB < unlimited");
  EXPECT_NE(c.hint.find("LimitMEMLOCK=infinity"), std::string::npos);
  f.slurmd = slurmd_process(8u << 20, k_unlimited);
  EXPECT_EQ(check_slurmd_memlock(f, rules()).result, verdict::warn);
  // No pid file: slurmd is found as an ancestor (the prolog's parent).
  f.slurmd = status::error("read /run/slurmd.pid: No such file or directory");
  process_fact self;
  self.pid = 99;
  self.comm = "mrcheck-prolog";
  self.memlock = memlock_limit{k_unlimited, k_unlimited};
  f.chain = {self, slurmd_process(65536, 65536)};
  c = check_slurmd_memlock(f, rules());
  EXPECT_EQ(c.result, verdict::fail);
  EXPECT_EQ(c.summary, "slurmd hard memlock 64 KiB < unlimited");
  f.chain = {self};
  EXPECT_EQ(check_slurmd_memlock(f, rules()).result, verdict::skip);
  auto r = rules();
  r.slurmd_memlock_min = std::uint64_t{8} << 20;
  f.slurmd = slurmd_process(8u << 20, 8u << 20);
  EXPECT_EQ(check_slurmd_memlock(f, r).result, verdict::pass);
}

TEST(MatrixPropagateLimits, DefaultAllWarns) {
  matrix_facts extra;
  extra.slurm_conf = conf_of("ClusterName=c\n");
  auto c = check_propagate_limits(rules(), &extra);
  EXPECT_EQ(c.result, verdict::warn);
  EXPECT_EQ(c.summary, "MEMLOCK propagated from the submit host (PropagateResourceLimits unset (default ALL))");
  EXPECT_NE(c.hint.find("PropagateResourceLimitsExcept=MEMLOCK"), std::string::npos);
  extra.slurm_conf = status::error("read /etc/slurm/slurm.conf: No such file or directory");
  EXPECT_EQ(check_propagate_limits(rules(), &extra).result, verdict::skip);
}

}  // namespace
}  // namespace mrcheck
