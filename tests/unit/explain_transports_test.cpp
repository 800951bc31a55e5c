// The scanner and the diagnosis beyond NCCL's NET/IB, each on a real public line (the corpus file that carries it
// is named), and fatal NCCL errors outside the taxonomy (docs/transports.md).
#include <mrcheck/explain.h>
#include <mrcheck/nccl_log.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <string>
#include <vector>

namespace mrcheck {
namespace {

nccl_event must_parse(std::string_view line) {
  auto e = parse_nccl_line(line);
  EXPECT_TRUE(e.has_value()) << line;
  return e.value_or(nccl_event{});
}

nccl_log_scanner scan(const std::vector<std::string>& lines) {
  nccl_log_scanner s;
  for (const auto& l : lines) s.feed_line(l);
  return s;
}

bool any_contains(const std::vector<std::string>& lines, std::string_view needle) {
  for (const auto& l : lines) {
    if (l.find(needle) != std::string::npos) return true;
  }
  return false;
}

// aws_ofi_nccl_44_enable_endpoint.log, aws_ofi_nccl_24_open_av.log, aws_ofi_nccl_1020_getinfo_container.log
TEST(explain_ofi, net_ofi_steps_name_the_libfabric_call_and_errno) {
  nccl_event e = must_parse(
      "create_nccl_ofi_component:496 NCCL WARN NET/OFI Couldn't enable endpoint. RC: -12, ERROR: Cannot allocate "
      "memory");
  EXPECT_EQ(e.what.call, "fi_enable");
  EXPECT_EQ(e.what.err, ENOMEM);
  EXPECT_EQ(e.what.transport, "ofi");
  e = must_parse(
      "ip-172-32-45-165:72593:73427 [7] create_nccl_ofi_component:459 NCCL WARN NET/OFI Couldn't open AV. "
      "RC: -22, ERROR: Invalid argument");
  EXPECT_EQ(e.what.call, "fi_av_open");
  EXPECT_EQ(e.what.err, EINVAL);
  EXPECT_EQ(e.host, "ip-172-32-45-165");
  e = must_parse(
      "[2025-10-16 22:16:08] ip-172-31-3-90:1929:1937 [0] nccl_net_ofi_rdma_init:7978 NCCL WARN NET/OFI OFI "
      "fi_getinfo() call failed: No data available");
  EXPECT_EQ(e.what.call, "fi_getinfo");
  EXPECT_EQ(e.what.err, ENODATA);
  // An INFO line of the plugin is not a failure.
  EXPECT_FALSE(parse_nccl_line("h:1:2 [0] NCCL INFO NET/OFI Unable to find a GPU on this node, failed lookups ok"));
}

TEST(explain_ofi, enomem_under_the_plugin_gets_the_socket_fallback_not_ib_disable) {
  nccl_event e = must_parse("NCCL WARN NET/OFI Couldn't enable endpoint. RC: -12, ERROR: Cannot allocate memory");
  diagnosis d = diagnose(e.what, node_evidence{});
  EXPECT_EQ(d.what, cause::memlock);
  EXPECT_NE(d.fallback.find("NCCL_NET=Socket"), std::string::npos) << d.fallback;
  EXPECT_NE(d.fallback.find("does nothing under a net plugin"), std::string::npos);
  EXPECT_TRUE(any_contains(d.evidence, "libfabric #9739"));
  // The same errno from NCCL's own NET/IB keeps NCCL_IB_DISABLE=1.
  diagnosis ib = diagnose(must_parse("NCCL WARN Call to ibv_create_cq failed with error Cannot allocate memory").what,
                          node_evidence{});
  EXPECT_NE(ib.fallback.find("NCCL_IB_DISABLE=1"), std::string::npos);
}

// libfabric_9739_efa_95gb.log: with memlock unlimited the EFA page limit is the cause, huge pages the fix.
TEST(explain_ofi, libfabric_efa_registration_with_unlimited_memlock_is_the_efa_page_limit) {
  nccl_event e = must_parse(
      "libfabric:15409:1705531788::efa:mr:efa_mr_regattr():982<warn> Unable to register MR: Cannot allocate memory");
  EXPECT_EQ(e.what.transport, "libfabric");
  EXPECT_EQ(e.what.provider, "efa");
  EXPECT_EQ(e.what.call, "fi_mr_regattr");
  EXPECT_EQ(e.what.err, ENOMEM);
  node_evidence ev;
  ev.memlock_soft = k_unlimited;
  diagnosis d = diagnose(e.what, ev);
  EXPECT_EQ(d.what, cause::pinning_resources);
  EXPECT_NE(d.fix.find("huge pages"), std::string::npos) << d.fix;
  EXPECT_NE(d.summary.find("EFA device's limit"), std::string::npos) << d.summary;
  // Other libfabric warnings are not failures (aws/libfabric #3: a provider that found no device).
  EXPECT_FALSE(
      parse_nccl_line("libfabric:72089:ofi_mrail:fabric:mrail_get_core_info():277<warn> "
                      "OFI_MRAIL_ADDR_STRC env variable not set!"));
  EXPECT_FALSE(parse_nccl_line("libfabric:1:2::efa:mr:efa_mr_reg_impl():835<info> Registered memory of size 1"));
}

// awsome_203_ofi_einval.log
TEST(explain_ofi, registration_einval_is_the_old_efa_installer_with_new_nccl) {
  nccl_event e = must_parse(
      "register_rail_mr_buffer:617 NCCL WARN NET/OFI Unable to register memory (type = 2) for "
      "device 4. RC: -22, Error: Invalid argument");
  diagnosis d = diagnose(e.what, node_evidence{});
  EXPECT_EQ(d.what, cause::rdma_stack_mismatch);
  EXPECT_FALSE(d.confirmed);
  EXPECT_NE(d.fix.find("FI_EFA_SET_CUDA_SYNC_MEMOPS=0"), std::string::npos);
  EXPECT_NE(d.fix.find("1.29.1"), std::string::npos);
  EXPECT_EQ(d.fix.find("mlx5_core"), std::string::npos) << "not an mlx5 fix: " << d.fix;
}

// aws_ofi_nccl_1020_getinfo_container.log
TEST(explain_ofi, no_efa_provider_in_a_container_is_no_rdma_device) {
  nccl_event e = must_parse("NCCL WARN NET/OFI OFI fi_getinfo() call failed: No data available");
  node_evidence ev;
  ev.in_container = true;
  diagnosis d = diagnose(e.what, ev);
  EXPECT_EQ(d.what, cause::no_rdma_device);
  EXPECT_NE(d.fix.find("/dev/infiniband"), std::string::npos);
  EXPECT_TRUE(any_contains(d.evidence, "container"));
}

// nccl_563_efa_kernel_dmesg.log: both kernel lines are one failure of the efa driver.
TEST(explain_ofi, efa_kernel_lines_group_and_blame_the_device_page_limit) {
  nccl_log_scanner s = scan({
      "[1038619.687627] infiniband efa_0: Failed to process command REG_MR (opcode 7) comp_status 1 err -12",
      "[1038619.695161] infiniband efa_0: Failed to register mr [-12]",
      "[1632.420957] infiniband efa_0: Failed to allocate pd[-12]",
      "[1.0] infiniband efa_0: registered device",
  });
  auto g = s.groups();
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0]->what.call, "efa_reg_mr");
  EXPECT_EQ(g[0]->what.err, ENOMEM);
  EXPECT_EQ(g[0]->what.provider, "efa_0");
  EXPECT_EQ(g[0]->count, 2u);
  EXPECT_EQ(g[1]->what.call, "efa_alloc_pd");
  diagnosis d = diagnose(g[0]->what, node_evidence{});
  EXPECT_EQ(d.what, cause::pinning_resources);
  EXPECT_NE(d.fix.find("huge pages"), std::string::npos);
  EXPECT_NE(d.fallback.find("NCCL_NET=Socket"), std::string::npos);
}

// aws_ofi_nccl_715_efa_cq.log: the CQ failure told three times, its errno rewritten on the way up.
TEST(explain_ofi, one_failed_call_reported_by_each_layer_is_one_finding_with_the_first_errno) {
  nccl_log_scanner s = scan({
      "  | 2024-11-28T07:42:11.527Z | libfabric:17778:1732779731::efa:cq:efa_cq_ibv_cq_ex_open_with_ibv_create_cq_ex():"
      "92<warn> Unable to create extended CQ: Cannot allocate memory",
      "  | 2024-11-28T07:42:11.527Z | libfabric:17778:1732779731::efa:cq:efa_rdm_cq_open():688<warn> Unable to create "
      "extended CQ: Invalid argument",
      "  | 2024-11-28T07:42:11.527Z | algo-1:17778:17848 [5] nccl_ofi_ofiutils_init_connection:274 NCCL WARN NET/OFI "
      "Couldn't open CQ. RC: -22, ERROR: Invalid argument",
      "  | 2024-11-28T07:42:11.527Z | algo-1:17778:17848 [5] nccl_net_ofi_create_plugin:259 NCCL WARN NET/OFI "
      "aws-ofi-nccl initialization failed",
  });
  auto g = s.groups();
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0]->what.call, "fi_cq_open");
  EXPECT_EQ(g[0]->what.err, ENOMEM);
  EXPECT_EQ(g[0]->consequences, 3u);
}

// ucx_8746_create_cq_64k.log: the limit UCX printed is the failed process's own.
TEST(explain_ucx, the_limit_ucx_prints_confirms_memlock) {
  nccl_event e = must_parse(
      "[1668693503.473099] [ampere:1188443:0]          ib_log.c:246  UCX  ERROR mlx5_0: ibv_create_cq() failed: "
      "Cannot allocate memory. Please set max locked memory (ulimit -l) to 'unlimited' (current: 64 kbytes)");
  EXPECT_EQ(e.what.transport, "ucx");
  ASSERT_TRUE(e.what.log_memlock.has_value());
  EXPECT_EQ(*e.what.log_memlock, 64u * 1024);
  diagnosis d = diagnose(e.what, node_evidence{});
  EXPECT_EQ(d.what, cause::memlock);
  EXPECT_TRUE(d.confirmed);
  EXPECT_TRUE(any_contains(d.evidence, "soft 64 KiB"));
  EXPECT_NE(d.fallback.find("UCX_TLS"), std::string::npos);
  // Evidence of the failed task itself (memlock_source empty) still wins over the message.
  node_evidence ev;
  ev.memlock_soft = k_unlimited;
  EXPECT_EQ(diagnose(e.what, ev).what, cause::pinning_resources);
  // Another process's (explain's shell, a --root tree's pid) does not: its limit and CAP_IPC_LOCK are not the task's.
  ev.memlock_source = "pid 797 (mrcheck) in the --root tree";
  ev.cap_ipc_lock = true;
  d = diagnose(e.what, ev);
  EXPECT_EQ(d.what, cause::memlock);
  EXPECT_TRUE(any_contains(d.evidence, "RLIMIT_MEMLOCK of the failed process (its own message): soft 64 KiB"));
  EXPECT_FALSE(any_contains(d.evidence, "CAP_IPC_LOCK"));
}

// nccl_925_modify_qp_enodev.log
TEST(explain_failures, enodev_from_modify_qp_is_not_a_missing_device) {
  nccl_event e = must_parse("NCCL WARN Call to ibv_modify_qp failed with error No such device");
  node_evidence ev;
  ev.rdma_devices = 2;
  diagnosis d = diagnose(e.what, ev);
  EXPECT_EQ(d.what, cause::unknown);
  EXPECT_NE(d.summary.find("the device exists"), std::string::npos);
  EXPECT_NE(d.fix.find("NCCL_IB_GID_INDEX"), std::string::npos);
  EXPECT_EQ(diagnose(must_parse("NCCL WARN Call to ibv_open_device failed with error No such device").what, ev).what,
            cause::no_rdma_device);
}

// nccl_962_cuda_oom_alloc.log (NCCL_DEBUG=WARN: no return trace, torch's terminal line)
TEST(explain_failures, cuda_out_of_memory_before_a_terminal_error_is_a_finding) {
  nccl_log_scanner s = scan({
      "node:2134736:2285781 [0] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'",
      "node:2134736:2285781 [0] include/alloc.h:185 NCCL WARN Failed to CUDA calloc 6291456 bytes",
      "node:2134736:2285781 [0] proxy.cc:1518 NCCL WARN [Proxy Service 93] Failed to execute operation Setup from "
      "rank 93, retcode 1",
      "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1296, "
      "internal error - please report this issue to the NCCL developers, NCCL version 2.18.1",
  });
  auto g = s.groups();
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0]->what.what, failure::kind::fatal_warning);
  EXPECT_EQ(g[0]->what.call, "cuda");
  EXPECT_EQ(g[0]->what.detail, "out of memory");
  EXPECT_EQ(g[0]->lines, (std::vector<std::uint64_t>{1}));
  EXPECT_EQ(g[0]->consequences, 3u);  // the two WARNs of the same thread and torch's line
  diagnosis d = diagnose(g[0]->what, node_evidence{});
  EXPECT_EQ(d.what, cause::gpu_out_of_memory);
  EXPECT_NE(d.summary.find("GPU memory"), std::string::npos);
  EXPECT_NE(d.fix.find("NCCL_BUFFSIZE"), std::string::npos);
  evidence_origin origin;
  origin.from_root = true;
  std::string text = findings_to_text(explain_groups(s, node_evidence{}, origin), "job.log", s);
  EXPECT_NE(text.find("1. gpu_out_of_memory (likely) - CUDA failure 'out of memory' (NCCL stopped on it)"),
            std::string::npos)
      << text;
}

// nccl_573_no_verbs_topology.log: the trace from the same thread picks the topology WARN, not the libibverbs one.
TEST(explain_failures, return_trace_promotes_the_warning_of_its_own_thread) {
  nccl_log_scanner s = scan({
      "SHJS-PF4ZKYLL:92777:92777 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]",
      "SHJS-PF4ZKYLL:92777:92777 [0] NCCL INFO Using network Socket",
      "SHJS-PF4ZKYLL:92777:92889 [0] graph/xml.cc:332 NCCL WARN Could not find real path of "
      "/sys/class/pci_bus/0000:01/../../0000:01:00.0",
      "SHJS-PF4ZKYLL:92777:92889 [0] NCCL INFO graph/xml.cc:469 -> 2",
      "SHJS-PF4ZKYLL:92777:92889 [0] NCCL INFO graph/xml.cc:660 -> 2",
      "SHJS-PF4ZKYLL:92777:92889 [0] NCCL INFO group.cc:73 -> 2 [Async thread]",
  });
  auto g = s.groups();
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0]->what.call, "realpath");
  EXPECT_EQ(g[0]->lines, (std::vector<std::uint64_t>{3}));
  ASSERT_EQ(g[0]->context.size(), 1u);
  std::vector<finding> f = explain_groups(s, node_evidence{}, evidence_origin{});
  ASSERT_EQ(f.size(), 1u);
  EXPECT_TRUE(any_contains(f[0].diag.evidence, "libibverbs.so[.1] (no RDMA user space"));
  EXPECT_NE(f[0].diag.fix.find("NCCL_TOPO_FILE"), std::string::npos);
}

// Negatives: a WARN NCCL recovers from, channel lines with "->", and a failed libibverbs load in a socket run.
TEST(explain_failures, warnings_without_a_failure_after_them_stay_clean) {
  nccl_log_scanner s = scan({
      "vm:1833:1833 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]",
      "vm:1833:1833 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [receive] via NET/Socket/0",
      "vm:1833:1833 [0] NCCL INFO Connected to proxy localRank 0 -> connection 0x7efbdc000d20",
      "us1:406794:406828 [1] NCCL INFO Channel 01 : 9[16000] -> 10[49000] via P2P/direct pointer/read",
      "vm:1833:1845 [0] NCCL INFO transport.cc:111 -> 0",
      "vm:1833:1833 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE",
  });
  EXPECT_TRUE(s.groups().empty());
}

// nccl_210_socket_creation.log (NCCL <= 2.4 header without "NCCL")
TEST(explain_failures, socket_creation_failure_names_the_address_family) {
  nccl_event e = must_parse(
      "include/socket.h:344 WARN Socket creation failed : Address family not supported by protocol");
  EXPECT_EQ(e.what.what, failure::kind::fatal_warning);
  EXPECT_EQ(e.what.call, "socket");
  EXPECT_EQ(e.what.err, EAFNOSUPPORT);
  diagnosis d = diagnose(e.what, node_evidence{});
  EXPECT_NE(d.fix.find("NCCL_SOCKET_IFNAME"), std::string::npos);
}

// nixl_1854_dmabuf_524.log
TEST(explain_failures, errno_524_is_the_kernels_enotsupp_on_dmabuf) {
  nccl_event e = must_parse("ibv_reg_dmabuf_mr(...) failed: Unknown error 524");
  EXPECT_EQ(e.what.call, "ibv_reg_dmabuf_mr");
  EXPECT_EQ(e.what.err, 524);
  EXPECT_EQ(errno_name(524), "ENOTSUPP");
  diagnosis d = diagnose(e.what, node_evidence{});
  EXPECT_EQ(d.what, cause::dmabuf_unsupported);
  EXPECT_NE(d.summary.find("kernel's internal ENOTSUPP"), std::string::npos);
  EXPECT_NE(d.summary.find("Direct-NIC"), std::string::npos);
  EXPECT_TRUE(any_contains(d.evidence, "ENOTSUPP 524"));
  EXPECT_EQ(diagnose(must_parse("Call to ibv_create_qp failed with error -524").what, node_evidence{}).what,
            cause::unknown);
}

// dspark_259_cma_longterm_pin.log
TEST(explain_failures, cma_pageblocks_explain_enomem_with_memlock_unlimited) {
  nccl_event e = must_parse("NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory");
  node_evidence ev;
  ev.memlock_soft = k_unlimited;
  ev.cma_total = 0;
  ev.cma_free = 940604ull * 1024;
  diagnosis d = diagnose(e.what, ev);
  EXPECT_EQ(d.what, cause::pinning_resources);
  EXPECT_NE(d.summary.find("CMA pageblocks"), std::string::npos) << d.summary;
  EXPECT_NE(d.fix.find("kho=off"), std::string::npos) << d.fix;
  EXPECT_TRUE(any_contains(d.evidence, "CmaTotal 0 B, CmaFree 918.6 MiB"));
  // A real CMA area with little free: not the suspect.
  ev.cma_total = 64ull << 20;
  ev.cma_free = 32ull << 20;
  EXPECT_EQ(diagnose(e.what, ev).fix.find("kho=off"), std::string::npos);
}

}  // namespace
}  // namespace mrcheck
