// Every errno branch of diagnose() with and without evidence (docs/facts/verbs-and-nccl.md §2), plus the helpers.
#include <mrcheck/diagnosis.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cerrno>

namespace mrcheck {
namespace {

failure reg(int err, std::string call = "ibv_reg_mr_iova2") {
  failure f;
  f.call = std::move(call);
  f.err = err;
  return f;
}

bool any_contains(const std::vector<std::string>& lines, std::string_view needle) {
  for (const auto& l : lines) {
    if (l.find(needle) != std::string::npos) return true;
  }
  return false;
}

TEST(diagnosis_cause, strings_match_the_documented_list) {
  const char* documented[] = {"memlock",          "capability",         "pinning_resources", "rdma_stack_mismatch",
                              "gpu_peer_memory",  "dmabuf_unsupported", "duplicate_gpu",     "no_rdma_device",
                              "unknown",          "hca_resources",      "gpu_out_of_memory", "imex_channel",
                              "socket_interface", "stack_limit",        "open_files",        "gpu_peer_limit",
                              "data_plane"};
  ASSERT_EQ(std::size(documented), k_all_causes.size());
  for (std::size_t i = 0; i < k_all_causes.size(); ++i) {
    EXPECT_EQ(to_string(k_all_causes[i]), documented[i]);
  }
}

TEST(diagnosis_enomem, size_above_soft_limit_is_memlock_with_numbers) {
  node_evidence e;
  e.memlock_soft = 64 * 1024;
  e.memlock_hard = 8 << 20;
  failure f = reg(ENOMEM);
  f.size = 4 << 20;
  diagnosis d = diagnose(f, e);
  EXPECT_EQ(d.what, cause::memlock);
  EXPECT_TRUE(d.confirmed);
  EXPECT_EQ(d.summary, "registration of 4 MiB needs locked memory but the task's RLIMIT_MEMLOCK soft limit is 64 KiB");
  EXPECT_NE(d.fix.find("PropagateResourceLimitsExcept=MEMLOCK"), std::string::npos);
  EXPECT_NE(d.fix.find("LimitMEMLOCK=infinity"), std::string::npos);
  EXPECT_NE(d.fix.find("ulimit -l"), std::string::npos);
  EXPECT_NE(d.fallback.find("NCCL_IB_DISABLE=1"), std::string::npos);
  // errno first, then the limits.
  ASSERT_GE(d.evidence.size(), 3u);
  EXPECT_NE(d.evidence[0].find("ENOMEM 12 (Cannot allocate memory)"), std::string::npos);
  EXPECT_NE(d.evidence[1].find("size: 4 MiB"), std::string::npos);
  EXPECT_NE(d.evidence[2].find("soft 64 KiB, hard 8 MiB"), std::string::npos);
}

TEST(diagnosis_enomem, hop_is_named_in_fix_and_evidence) {
  node_evidence e;
  e.memlock_soft = 64 * 1024;
  e.memlock_hop = "srun's shell (ulimit -l 64, propagated as SLURM_RLIMIT_MEMLOCK)";
  diagnosis d = diagnose(reg(ENOMEM), e);
  EXPECT_EQ(d.what, cause::memlock);
  EXPECT_TRUE(d.confirmed);
  EXPECT_TRUE(d.fix.starts_with("the limit was lowered at srun's shell"));
  EXPECT_TRUE(any_contains(d.evidence, "lowered at: srun's shell"));
}

TEST(diagnosis_enomem, finite_limit_below_ram_without_size_is_memlock) {
  node_evidence e;
  e.memlock_soft = 8 << 20;
  e.mem_total = std::uint64_t{512} << 30;
  diagnosis d = diagnose(reg(ENOMEM), e);
  EXPECT_EQ(d.what, cause::memlock);
  EXPECT_TRUE(d.confirmed);
  EXPECT_NE(d.summary.find("8 MiB"), std::string::npos);
}

TEST(diagnosis_enomem, unlimited_is_pinning_resources_and_names_max_map_count) {
  node_evidence e;
  e.memlock_soft = k_unlimited;
  e.memlock_hard = k_unlimited;
  e.max_map_count = 65530;
  e.hugepages_total = 0;
  e.mem_available = std::uint64_t{3} << 30;
  e.mem_total = std::uint64_t{64} << 30;
  diagnosis d = diagnose(reg(ENOMEM), e);
  EXPECT_EQ(d.what, cause::pinning_resources);
  EXPECT_TRUE(d.confirmed);
  EXPECT_NE(d.summary.find("unlimited"), std::string::npos);
  EXPECT_NE(d.fix.find("vm.max_map_count"), std::string::npos);
  EXPECT_TRUE(any_contains(d.evidence, "vm.max_map_count: 65530 (the kernel default)"));
  EXPECT_TRUE(any_contains(d.evidence, "MemAvailable: 3 GiB of 64 GiB"));
  EXPECT_TRUE(any_contains(d.evidence, "hugepages: none reserved"));
}

TEST(diagnosis_enomem, large_hugepage_reserve_is_the_fix) {
  node_evidence e;
  e.memlock_soft = k_unlimited;
  e.max_map_count = 1048576;
  e.hugepages_total = 20000;
  e.hugepages_free = 20000;
  e.hugepage_size = 2 << 20;
  e.mem_total = std::uint64_t{64} << 30;
  diagnosis d = diagnose(reg(ENOMEM), e);
  EXPECT_EQ(d.what, cause::pinning_resources);
  EXPECT_NE(d.fix.find("vm.nr_hugepages"), std::string::npos);
  EXPECT_TRUE(any_contains(d.evidence, "hugepages: 20000 reserved, 20000 free of 2 MiB"));
}

TEST(diagnosis_enomem, gpu_buffer_with_adequate_limit_points_at_bar1) {
  node_evidence e;
  e.memlock_soft = k_unlimited;
  e.max_map_count = 1048576;
  e.gpu_bar1 = std::uint64_t{256} << 20;
  failure f = reg(ENOMEM);
  f.gpu_buffer = true;
  diagnosis d = diagnose(f, e);
  EXPECT_EQ(d.what, cause::pinning_resources);
  EXPECT_NE(d.summary.find("BAR1"), std::string::npos);
  EXPECT_NE(d.fix.find("BAR1"), std::string::npos);
  EXPECT_TRUE(any_contains(d.evidence, "GPU BAR1: 256 MiB"));
}

TEST(diagnosis_enomem, limit_at_or_above_ram_is_pinning) {
  node_evidence e;
  e.memlock_soft = std::uint64_t{128} << 30;
  e.mem_total = std::uint64_t{64} << 30;
  diagnosis d = diagnose(reg(ENOMEM), e);
  EXPECT_EQ(d.what, cause::pinning_resources);
  EXPECT_NE(d.summary.find("128 GiB"), std::string::npos);
}

TEST(diagnosis_enomem, cap_ipc_lock_bypasses_the_limit) {
  node_evidence e;
  e.memlock_soft = 64 * 1024;  // would be memlock, but the kernel skips the check
  e.cap_ipc_lock = true;
  diagnosis d = diagnose(reg(ENOMEM), e);
  EXPECT_EQ(d.what, cause::pinning_resources);
  EXPECT_TRUE(any_contains(d.evidence, "CAP_IPC_LOCK: yes"));
}

TEST(diagnosis_enomem, root_outside_container_bypasses_but_root_in_container_does_not) {
  node_evidence e;
  e.memlock_soft = 64 * 1024;
  e.is_root = true;
  e.in_container = false;
  EXPECT_EQ(diagnose(reg(ENOMEM), e).what, cause::pinning_resources);
  e.in_container = true;
  diagnosis d = diagnose(reg(ENOMEM), e);
  EXPECT_EQ(d.what, cause::memlock);
  EXPECT_NE(d.fix.find("--ulimit memlock=-1:-1"), std::string::npos);
}

// Inside a container, a limit lowered at a known hop (the submit shell's ulimit propagated by srun) is fixed in
// Slurm; the container runtime's fix is only for a limit nobody in the chain lowered.
TEST(diagnosis_enomem, known_hop_in_container_gets_the_hops_fix_not_the_runtimes) {
  node_evidence e;
  e.memlock_soft = 64 * 1024;
  e.in_container = true;
  e.memlock_hop = "pid 4242 (bash), soft 64 KiB";
  diagnosis d = diagnose(reg(ENOMEM), e);
  EXPECT_EQ(d.what, cause::memlock);
  EXPECT_NE(d.fix.find("lowered at pid 4242 (bash)"), std::string::npos) << d.fix;
  EXPECT_NE(d.fix.find("PropagateResourceLimitsExcept=MEMLOCK"), std::string::npos) << d.fix;
  EXPECT_EQ(d.fix.find("--ulimit memlock"), std::string::npos) << d.fix;
  e.memlock_hop.clear();
  EXPECT_NE(diagnose(reg(ENOMEM), e).fix.find("--ulimit memlock=-1:-1"), std::string::npos);
}

TEST(diagnosis_enomem, unknown_limit_is_memlock_unconfirmed) {
  diagnosis d = diagnose(reg(ENOMEM), node_evidence{});
  EXPECT_EQ(d.what, cause::memlock);
  EXPECT_FALSE(d.confirmed);
  EXPECT_NE(d.summary.find("not known"), std::string::npos);
  EXPECT_TRUE(any_contains(d.evidence, "ulimit -l"));
}

TEST(diagnosis_enomem, create_cq_in_container_gets_the_container_fix) {
  node_evidence e;
  e.in_container = true;
  diagnosis d = diagnose(reg(ENOMEM, "ibv_create_cq"), e);
  EXPECT_EQ(d.what, cause::memlock);
  EXPECT_NE(d.summary.find("in a container"), std::string::npos);
  EXPECT_NE(d.fix.find("--cap-add=IPC_LOCK"), std::string::npos);
  EXPECT_NE(d.fix.find("mscclpp #335"), std::string::npos);
}

TEST(diagnosis_eperm, zero_limit_is_capability_confirmed) {
  node_evidence e;
  e.memlock_soft = 0;
  diagnosis d = diagnose(reg(EPERM), e);
  EXPECT_EQ(d.what, cause::capability);
  EXPECT_TRUE(d.confirmed);
  EXPECT_NE(d.summary.find("soft limit is 0"), std::string::npos);
  EXPECT_NE(d.fix.find("LimitMEMLOCK=infinity"), std::string::npos);
}

TEST(diagnosis_eperm, container_without_cap_gets_cap_add) {
  node_evidence e;
  e.cap_ipc_lock = false;
  e.in_container = true;
  e.memlock_soft = 64 * 1024;
  diagnosis d = diagnose(reg(EPERM), e);
  EXPECT_EQ(d.what, cause::capability);
  EXPECT_TRUE(d.confirmed);
  EXPECT_NE(d.fix.find("--cap-add=IPC_LOCK"), std::string::npos);
}

TEST(diagnosis_eperm, no_evidence_is_capability_unconfirmed) {
  diagnosis d = diagnose(reg(EPERM), node_evidence{});
  EXPECT_EQ(d.what, cause::capability);
  EXPECT_FALSE(d.confirmed);
}

TEST(diagnosis_efault, gpu_without_peermem_on_inbox_prefers_dmabuf) {
  node_evidence e;
  e.peer_memory = false;
  e.kernel_stack = rdma_flavour::inbox;
  failure f = reg(EFAULT);
  f.gpu_buffer = true;
  diagnosis d = diagnose(f, e);
  EXPECT_EQ(d.what, cause::gpu_peer_memory);
  EXPECT_TRUE(d.confirmed);
  EXPECT_TRUE(d.fix.starts_with("use DMA-BUF"));
  EXPECT_NE(d.fallback.find("NCCL_NET_GDR_LEVEL=LOC"), std::string::npos);
}

TEST(diagnosis_efault, ofed_node_prefers_nvidia_peermem) {
  node_evidence e;
  e.peer_memory = false;
  e.kernel_stack = rdma_flavour::ofed;
  e.driver_flavour = nvidia_flavour::proprietary;
  failure f = reg(EFAULT);
  f.gpu_buffer = true;
  diagnosis d = diagnose(f, e);
  EXPECT_EQ(d.what, cause::gpu_peer_memory);
  EXPECT_TRUE(d.fix.starts_with("`modprobe nvidia-peermem`"));
}

TEST(diagnosis_efault, peermem_loaded_is_unconfirmed_and_mentions_cumem) {
  node_evidence e;
  e.peer_memory = true;
  failure f = reg(EFAULT);
  f.gpu_buffer = true;
  diagnosis d = diagnose(f, e);
  EXPECT_EQ(d.what, cause::gpu_peer_memory);
  EXPECT_FALSE(d.confirmed);
  EXPECT_NE(d.summary.find("gpuDirectRDMACapable"), std::string::npos);
}

// EFAULT is GPU memory only when the log or the node says the buffer is: unknown memory names both readings.
TEST(diagnosis_efault, unknown_memory_is_not_taken_for_gpu_memory) {
  node_evidence e;
  e.peer_memory = false;
  diagnosis d = diagnose(reg(EFAULT), e);
  EXPECT_EQ(d.what, cause::unknown);
  EXPECT_NE(d.summary.find("GPU memory"), std::string::npos);
  EXPECT_NE(d.summary.find("host memory"), std::string::npos);
}

TEST(diagnosis_emfile, too_many_open_files_is_open_files) {
  EXPECT_EQ(diagnose(reg(EMFILE, "ibv_open_device"), node_evidence{}).what, cause::open_files);
  EXPECT_EQ(diagnose(reg(ENFILE, "socket"), node_evidence{}).what, cause::open_files);
}

TEST(diagnosis_efault, host_buffer_is_not_peer_memory) {
  failure f = reg(EFAULT);
  f.gpu_buffer = false;
  EXPECT_EQ(diagnose(f, node_evidence{}).what, cause::unknown);
}

TEST(diagnosis_einval, ofed_kernel_with_inbox_user_space_is_mismatch) {
  node_evidence e;
  e.kernel_stack = rdma_flavour::ofed;
  e.kernel_stack_detail = "mlx5_core 24.10-1.1.4 (out of tree)";
  e.user_stack = rdma_flavour::inbox;
  e.rdma_core_version = "44.0";
  diagnosis d = diagnose(reg(EINVAL), e);
  EXPECT_EQ(d.what, cause::rdma_stack_mismatch);
  EXPECT_TRUE(d.confirmed);
  EXPECT_NE(d.summary.find("MLNX/DOCA-OFED"), std::string::npos);
  EXPECT_NE(d.summary.find("44.0"), std::string::npos);
  EXPECT_NE(d.fix.find("ships with the MLNX/DOCA-OFED kernel modules"), std::string::npos);
}

TEST(diagnosis_einval, inbox_kernel_with_ofed_user_space_is_mismatch_the_other_way) {
  node_evidence e;
  e.kernel_stack = rdma_flavour::inbox;
  e.user_stack = rdma_flavour::ofed;
  diagnosis d = diagnose(reg(EINVAL), e);
  EXPECT_EQ(d.what, cause::rdma_stack_mismatch);
  EXPECT_NE(d.fix.find("DKMS"), std::string::npos);
}

TEST(diagnosis_einval, matching_stack_points_at_the_stack_check_and_relaxed_ordering) {
  node_evidence e;
  e.kernel_stack = rdma_flavour::inbox;
  e.user_stack = rdma_flavour::inbox;
  diagnosis d = diagnose(reg(EINVAL), e);
  EXPECT_EQ(d.what, cause::unknown);
  EXPECT_NE(d.summary.find("page offset"), std::string::npos);
  EXPECT_NE(d.fix.find("mrcheck report"), std::string::npos);
  EXPECT_NE(d.fix.find("NCCL_IB_PCI_RELAXED_ORDERING=0"), std::string::npos);
  EXPECT_NE(d.fix.find("#1842"), std::string::npos);
}

TEST(diagnosis_einval, modify_qp_points_at_gid_index) {
  diagnosis d = diagnose(reg(EINVAL, "ibv_modify_qp"), node_evidence{});
  EXPECT_EQ(d.what, cause::unknown);
  EXPECT_NE(d.fix.find("NCCL_IB_GID_INDEX"), std::string::npos);
}

TEST(diagnosis_dmabuf, eopnotsupp_and_eprotonosupport_are_dmabuf_unsupported) {
  for (int err : {EOPNOTSUPP, EPROTONOSUPPORT}) {
    diagnosis d = diagnose(reg(err, "ibv_reg_dmabuf_mr"), node_evidence{});
    EXPECT_EQ(d.what, cause::dmabuf_unsupported) << err;
    EXPECT_FALSE(d.confirmed);
    EXPECT_NE(d.fix.find("NCCL_DMABUF_ENABLE=0"), std::string::npos);
    EXPECT_NE(d.fix.find("#778"), std::string::npos);
  }
}

TEST(diagnosis_dmabuf, confirmed_by_old_rdma_core_or_proprietary_driver) {
  node_evidence e;
  e.has_dmabuf_mr = false;
  diagnosis d = diagnose(reg(EOPNOTSUPP, "ibv_reg_dmabuf_mr"), e);
  EXPECT_TRUE(d.confirmed);
  EXPECT_NE(d.summary.find("IBVERBS_1.12"), std::string::npos);
  node_evidence p;
  p.driver_flavour = nvidia_flavour::proprietary;
  d = diagnose(reg(EOPNOTSUPP, "ibv_reg_dmabuf_mr"), p);
  EXPECT_TRUE(d.confirmed);
  EXPECT_NE(d.summary.find("proprietary"), std::string::npos);
}

TEST(diagnosis_eopnotsupp, on_plain_reg_mr_is_not_dmabuf) {
  diagnosis d = diagnose(reg(EOPNOTSUPP, "ibv_reg_mr"), node_evidence{});
  EXPECT_EQ(d.what, cause::unknown);
  node_evidence e;
  e.kernel_stack = rdma_flavour::ofed;
  e.user_stack = rdma_flavour::inbox;
  EXPECT_EQ(diagnose(reg(EOPNOTSUPP, "ibv_reg_mr"), e).what, cause::rdma_stack_mismatch);
}

TEST(diagnosis_nodev, enodev_and_kind_no_device) {
  EXPECT_EQ(diagnose(reg(ENODEV, "ibv_open_device"), node_evidence{}).what, cause::no_rdma_device);
  EXPECT_EQ(diagnose(reg(ENXIO, "ibv_open_device"), node_evidence{}).what, cause::no_rdma_device);
  failure f;
  f.what = failure::kind::no_device;
  node_evidence e;
  e.rdma_devices = 0;
  diagnosis d = diagnose(f, e);
  EXPECT_EQ(d.what, cause::no_rdma_device);
  EXPECT_TRUE(d.confirmed);
  EXPECT_TRUE(d.fallback.empty());
  EXPECT_TRUE(any_contains(d.evidence, "/sys/class/infiniband: 0"));
}

TEST(diagnosis_nodev, open_device_without_errno_is_no_rdma_device) {
  diagnosis d = diagnose(reg(0, "ibv_open_device"), node_evidence{});
  EXPECT_EQ(d.what, cause::no_rdma_device);
  EXPECT_NE(d.summary.find("/dev/infiniband"), std::string::npos);
}

TEST(diagnosis_other, duplicate_gpu) {
  failure f;
  f.what = failure::kind::duplicate_gpu;
  diagnosis d = diagnose(f, node_evidence{});
  EXPECT_EQ(d.what, cause::duplicate_gpu);
  EXPECT_NE(d.fix.find("--gpus-per-task=1"), std::string::npos);
  EXPECT_TRUE(d.fallback.empty());
}

TEST(diagnosis_other, completion_errors_by_status) {
  failure f;
  f.what = failure::kind::completion_error;
  f.wc_status = 12;
  f.peer = "10.0.0.2<43521>";
  diagnosis d = diagnose(f, node_evidence{});
  EXPECT_EQ(d.what, cause::unknown);
  EXPECT_NE(d.summary.find("IBV_WC_RETRY_EXC_ERR (12) with peer 10.0.0.2<43521>"), std::string::npos);
  EXPECT_NE(d.fix.find("peer's log"), std::string::npos);
  f.wc_status = 4;
  EXPECT_NE(diagnose(f, node_evidence{}).fix.find("probe mr --gpu"), std::string::npos);
  f.wc_status = 5;
  EXPECT_NE(diagnose(f, node_evidence{}).summary.find("consequence"), std::string::npos);
  f.wc_status = 99;
  EXPECT_NE(diagnose(f, node_evidence{}).summary.find("status (99)"), std::string::npos);
}

TEST(diagnosis_other, system_error_without_call_and_unknown_errno) {
  failure s;
  s.what = failure::kind::system_error;
  diagnosis d = diagnose(s, node_evidence{});
  EXPECT_EQ(d.what, cause::unknown);
  EXPECT_NE(d.fix.find("NCCL_DEBUG=INFO"), std::string::npos);

  d = diagnose(reg(0), node_evidence{});
  EXPECT_EQ(d.what, cause::unknown);
  EXPECT_NE(d.fix.find("mrcheck probe mr"), std::string::npos);

  d = diagnose(reg(EBUSY), node_evidence{});
  EXPECT_EQ(d.what, cause::unknown);
  EXPECT_NE(d.summary.find("EBUSY 16 (Device or resource busy)"), std::string::npos);
  d = diagnose(reg(9999, ""), node_evidence{});
  EXPECT_EQ(d.what, cause::unknown);
  EXPECT_NE(d.summary.find("errno 9999"), std::string::npos);
}

TEST(diagnosis_errno, names_and_glibc_messages_map_both_ways) {
  EXPECT_EQ(errno_name(12), "ENOMEM");
  EXPECT_EQ(errno_message(22), "Invalid argument");
  EXPECT_EQ(errno_from_name("EFAULT"), 14);
  EXPECT_EQ(errno_from_name("ENOTSUP"), 95);
  EXPECT_EQ(errno_message_in("ibv_reg_mr_iova2 failed with error Cannot allocate memory"), 12);
  EXPECT_EQ(errno_message_in("open /dev/infiniband: No such device or address (x)"), 6);  // not 19
  EXPECT_EQ(errno_message_in("cannot allocate memory"), 0);                               // strerror's case only
  EXPECT_EQ(errno_message_in(""), 0);
  // Every message is found inside a line, and the answer is the longest message the line holds.
  for (int e = 1; e < 134; ++e) {
    std::string_view msg = errno_message(e);
    if (msg.empty()) continue;
    std::string line = "NET/IB : Call failed with error " + std::string(msg) + " (rc=1)";
    int got = errno_message_in(line);
    ASSERT_NE(got, 0) << msg;
    EXPECT_NE(line.find(errno_message(got)), std::string::npos) << msg;
    EXPECT_GE(errno_message(got).size(), msg.size()) << msg;
  }
  EXPECT_EQ(errno_name(0), "");
  EXPECT_EQ(wc_status_name(12), "IBV_WC_RETRY_EXC_ERR");
  EXPECT_EQ(wc_status_name(-1), "");
  EXPECT_EQ(wc_status_name(24), "");
}

TEST(diagnosis_helpers, cap_ipc_lock_from_proc_status) {
  EXPECT_EQ(cap_ipc_lock_from_status("Name:\tbash\nCapInh:\t0\nCapEff:\t000001ffffffffff\nCapBnd:\t0\n"), true);
  EXPECT_EQ(cap_ipc_lock_from_status("Name:\tbash\nCapEff:\t0000000000000000\n"), false);
  EXPECT_EQ(cap_ipc_lock_from_status("CapEff:\t0000000000004000\n"), true);
  EXPECT_EQ(cap_ipc_lock_from_status("CapEff:\t0000000000003fff\n"), false);
  EXPECT_FALSE(cap_ipc_lock_from_status("Name:\tbash\n").has_value());
  EXPECT_FALSE(cap_ipc_lock_from_status("CapEff:\tzz\n").has_value());
}

TEST(diagnosis_helpers, dpkg_status_tells_ofed_from_inbox) {
  std::string v;
  EXPECT_EQ(user_stack_from_dpkg_status("Package: foo\nVersion: 1\n\nPackage: libibverbs1\nStatus: install ok "
                                        "installed\nVersion: 44.0-2\n\n",
                                        &v),
            rdma_flavour::inbox);
  EXPECT_EQ(v, "44.0-2");
  EXPECT_EQ(user_stack_from_dpkg_status("Package: libibverbs1\nVersion: 2410mlnx54-1.2410068\n"), rdma_flavour::ofed);
  EXPECT_EQ(user_stack_from_dpkg_status("Package: rdma-core\nVersion: 2307mlnx47-1\n"), rdma_flavour::ofed);
  EXPECT_EQ(user_stack_from_dpkg_status("Package: libfoo\nVersion: mlnx\n"), rdma_flavour::unknown);
}

TEST(diagnosis_helpers, evidence_from_facts) {
  node_facts nf;
  process_fact task;
  task.pid = 4242;
  task.comm = "python";
  task.uid = 1000;
  task.memlock = memlock_limit{64 * 1024, 8 << 20};
  task.lowered = true;
  process_fact parent;
  parent.pid = 100;
  parent.comm = "slurmstepd";
  parent.memlock = memlock_limit{8 << 20, 8 << 20};
  nf.chain = {task, parent};
  nf.kernel_release = std::string("6.1.0-18-amd64");
  nf.max_map_count = std::uint64_t{65530};
  hugepages_fact hp;
  hp.page_size = 2 << 20;
  hp.mem_total = std::uint64_t{64} << 30;
  hp.mem_available = std::uint64_t{60} << 30;
  nf.hugepages = hp;
  kmodule_fact mlx;
  mlx.name = "mlx5_core";
  mlx.loaded = true;
  mlx.version = "24.10-1.1.4";
  mlx.taint = "O";
  nf.modules["mlx5_core"] = mlx;
  kmodule_fact peer;
  peer.name = "nvidia_peermem";
  nf.modules["nvidia_peermem"] = peer;
  nvidia_driver_fact drv;
  drv.version = "580.82.09";
  drv.flavour = nvidia_flavour::open;
  nf.nvidia = drv;
  library_fact lib;
  lib.version = "1.14.44.0";
  lib.symbols["ibv_reg_mr_iova2@IBVERBS_1.8"] = true;
  lib.symbols["ibv_reg_dmabuf_mr@IBVERBS_1.12"] = true;
  nf.libibverbs = lib;
  nf.rdma_devices = std::vector<rdma_device_fact>(2);

  node_evidence e = evidence_from_facts(nf);
  EXPECT_EQ(e.memlock_soft, 64u * 1024);
  EXPECT_EQ(e.memlock_hard, 8u << 20);
  EXPECT_EQ(e.memlock_source, "pid 4242 (python)");
  // The hop is the one picking rule's (memlock_hop.h): the process itself has less than its parent.
  EXPECT_EQ(e.memlock_hop,
            "the process itself (pid 4242 (python), soft 64 KiB): set between fork and exec by its launcher (its "
            "parent pid 100 (slurmstepd) had soft 8 MiB)");
  EXPECT_EQ(e.is_root, false);
  EXPECT_EQ(e.max_map_count, 65530u);
  EXPECT_EQ(e.mem_total, std::uint64_t{64} << 30);
  EXPECT_EQ(e.kernel_stack, rdma_flavour::ofed);
  EXPECT_NE(e.kernel_stack_detail.find("24.10-1.1.4"), std::string::npos);
  EXPECT_EQ(e.rdma_core_version, "44.0");
  EXPECT_EQ(e.user_stack, rdma_flavour::unknown);  // the file name cannot tell
  EXPECT_EQ(e.has_iova2, true);
  EXPECT_EQ(e.has_dmabuf_mr, true);
  EXPECT_EQ(e.peer_memory, false);
  EXPECT_EQ(e.driver_flavour, nvidia_flavour::open);
  EXPECT_EQ(e.rdma_devices, 2);

  // Inbox: no version file, no taint.
  nf.modules["mlx5_core"].version.reset();
  nf.modules["mlx5_core"].taint = "";
  e = evidence_from_facts(nf);
  EXPECT_EQ(e.kernel_stack, rdma_flavour::inbox);
  // Unread facts stay unset.
  node_evidence empty = evidence_from_facts(node_facts{});
  EXPECT_FALSE(empty.memlock_soft.has_value());
  EXPECT_FALSE(empty.peer_memory.has_value());
  EXPECT_EQ(empty.kernel_stack, rdma_flavour::unknown);
}

TEST(diagnosis_json, stable_keys) {
  nlohmann::json j = diagnose(reg(ENOMEM), node_evidence{});
  EXPECT_EQ(j.at("cause"), "memlock");
  EXPECT_EQ(j.at("confirmed"), false);
  EXPECT_TRUE(j.at("evidence").is_array());
  EXPECT_TRUE(j.at("fix").is_string());
  EXPECT_TRUE(j.at("fallback").is_string());
}

}  // namespace
}  // namespace mrcheck
