// What explain calls a failure: what the program itself calls fatal (NCCL's error returns as frameworks and tools
// print them, WARNs NCCL prints only before an error return, crashes), never an INFO line about the path it took.
// Every line below is a real line (its source in src/explain/read/form_table.cpp's rows or docs/transports.md).
#include <mrcheck/explain.h>
#include <mrcheck/nccl_log.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace mrcheck {
namespace {

struct result {
  std::vector<std::string> causes;
  std::vector<finding> findings;
  std::optional<path_note> note;
};

result explain(std::initializer_list<const char*> lines, const node_evidence& e = {}) {
  nccl_log_scanner s;
  for (const char* l : lines) s.feed_line(l);
  evidence_origin origin;
  origin.from_root = true;
  result r;
  r.findings = explain_groups(s, e, origin);
  for (const finding& f : r.findings) r.causes.emplace_back(to_string(f.diag.what));
  r.note = no_device_note(s, r.findings);
  return r;
}

using causes = std::vector<std::string>;

constexpr const char* k_no_device = "vm:1833:1833 [0] NCCL INFO NET/IB : No device found.";

TEST(explain_semantics, no_device_at_info_is_a_path_note_not_a_failure) {
  result r = explain({
      "vm:1833:1833 [0] NCCL INFO dlvsym failed on mlx5dv_get_data_direct_sysfs_path - /lib/x86_64-linux-gnu/"
      "libmlx5.so: undefined symbol: mlx5dv_get_data_direct_sysfs_path, version MLX5_1.25",
      "vm:1833:1833 [0] NCCL INFO Call to mlx5dv_get_data_direct_sysfs_path failed with error No such device errno 19",
      k_no_device,
      "vm:1833:1833 [0] NCCL INFO NET/Socket : Using [0]lo:127.0.0.1<0>",
      "vm:1833:1833 [0] NCCL INFO Using network Socket",
  });
  EXPECT_EQ(r.causes, causes{});
  ASSERT_TRUE(r.note.has_value());
  EXPECT_EQ(r.note->what, "sockets");
}

TEST(explain_semantics, no_device_is_a_failure_when_the_job_asked_for_ib) {
  EXPECT_EQ(explain({"vm:1:1 [0] NCCL INFO NCCL_IB_HCA set to mlx5_0", k_no_device}).causes, causes{"no_rdma_device"});
  EXPECT_EQ(explain({"NCCL_NET=IB", k_no_device}).causes, causes{"no_rdma_device"});
  EXPECT_EQ(explain({"vm:1:1 [0] NCCL INFO NCCL_NET set by environment to IB", k_no_device}).causes,
            causes{"no_rdma_device"});
  // NCCL_NET_GDR_LEVEL is no request for InfiniBand.
  EXPECT_EQ(explain({"vm:1:1 [0] NCCL INFO NCCL_NET_GDR_LEVEL set by environment to PHB", k_no_device}).causes,
            causes{});
}

TEST(explain_semantics, no_device_on_a_multi_node_job_whose_nodes_have_hcas) {
  node_evidence e;
  e.rdma_devices = 2;
  EXPECT_EQ(explain({"a1:1:1 [0] NCCL INFO NET/IB : No device found.",
                     "b2:1:1 [0] NCCL INFO NET/IB : No device found."},
                    e)
                .causes,
            causes{"no_rdma_device"});
  EXPECT_EQ(explain({"a1:1:1 [0] NCCL INFO NET/IB : No device found."}, e).causes, causes{});
}

TEST(explain_semantics, fatal_warn_at_warn_level_is_a_failure) {
  EXPECT_EQ(explain({"vm:1:1 [0] bootstrap.cc:95 NCCL WARN Bootstrap : no socket interface found"}).causes,
            causes{"socket_interface"});
  EXPECT_EQ(explain({"vm:1:1 [0] plugin/net.cc:1041 NCCL WARN Failed to initialize any NET plugin"}).causes,
            causes{"no_rdma_device"});
}

TEST(explain_semantics, torch_error_alone_is_a_finding_with_no_rule) {
  result r = explain({
      "[rank0]: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
      "ProcessGroupNCCL.cpp:3356, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.28.9",
      "[rank0]: ncclInvalidUsage: This usually reflects invalid usage of NCCL library.",
  });
  ASSERT_EQ(r.causes, causes{"unknown"});
  EXPECT_NE(r.findings[0].diag.summary.find("no rule for"), std::string::npos);
  EXPECT_NE(r.findings[0].diag.fix.find("NCCL_DEBUG=INFO"), std::string::npos);
}

TEST(explain_semantics, last_error_names_the_failure_behind_the_torch_error) {
  result r = explain({
      "[rank1]: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
      "NCCLUtils.hpp:268, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.28.9",
      "[rank1]: ncclInvalidUsage: This usually reflects invalid usage of NCCL library.",
      "[rank1]: Last error:",
      "[rank1]: Bootstrap : no socket interface found",
  });
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].group.what.what, failure::kind::fatal_warning);
  EXPECT_NE(r.findings[0].group.example.find("no socket interface found"), std::string::npos);
}

TEST(explain_semantics, duplicate_gpu_is_not_hidden_behind_no_device) {
  result r = explain({
      k_no_device,
      "vm:1818:1818 [0] init.cc:808 NCCL WARN Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 60",
      "capture: rank 0: ncclCommInitRank: invalid usage (run with NCCL_DEBUG=WARN for details)",
  });
  EXPECT_EQ(r.causes, causes{"duplicate_gpu"});
}

// Who fixes a refused MNNVL fabric handle: the site, which gives each job its IMEX channel (Slurm's
// switch/nvidia_imex, a ComputeDomain), unless this node's IMEX daemon is known not to run: then the node.
TEST(explain_semantics, mnnvl_refusal_is_the_sites_unless_the_imex_daemon_is_down) {
  const char* mnnvl =
      "gpu1:1:2 [0] NCCL WARN MNNVL (cliqueSize 72) is available but not working on this system. Check the IMEX "
      "channel configuration (/dev/nvidia-caps-imex-channels). Set NCCL_MNNVL_ENABLE=0 to ignore this issue.";
  const char* cumem =
      "[CUDA_ERROR_NOT_PERMITTED] operation not permitted in expression cuMemCreate(&handle, roundedUpAllocationSize, "
      "&prop, 0 )";
  node_evidence unknown;  // a node without IMEX, or facts of another node
  node_evidence running;
  running.imex_daemon = true;
  node_evidence down;
  down.imex_daemon = false;
  for (const char* line : {mnnvl, cumem}) {
    for (const node_evidence* e : {&unknown, &running}) {
      result r = explain({line}, *e);
      ASSERT_EQ(r.causes, causes{"imex_channel"}) << line;
      EXPECT_EQ(r.findings[0].diag.owner, fix_owner::site) << line;
      EXPECT_FALSE(r.findings[0].diag.confirmed);
      EXPECT_NE(r.findings[0].diag.fix.find("switch/nvidia_imex"), std::string::npos) << r.findings[0].diag.fix;
    }
    result r = explain({line}, down);
    ASSERT_EQ(r.causes, causes{"imex_channel"}) << line;
    EXPECT_EQ(r.findings[0].diag.owner, fix_owner::node) << line;
    EXPECT_TRUE(r.findings[0].diag.confirmed);
    EXPECT_NE(r.findings[0].diag.fix.find("nvidia-imex-ctl -N"), std::string::npos) << r.findings[0].diag.fix;
  }
  // Other findings name no owner: the JSON keeps its old shape for them.
  EXPECT_EQ(explain({"vm:1:1 [0] NCCL INFO NCCL_NET=IB", k_no_device}).findings.at(0).diag.owner, fix_owner::none);
}

// NCCL's RAS client report (ncclras; NVIDIA/nccl #1730 a healthy one, #1911 one with a MISMATCH under Warnings):
// a running job's state, not something the program called fatal. Neither is a failure; RAS's Errors section has
// no public sample yet and no row.
TEST(explain_semantics, ras_report_of_a_running_job_is_no_failure) {
  const std::initializer_list<const char*> head = {
      "NCCL version 2.26.2 compiled with CUDA 12.6",
      "CUDA runtime version 12060, driver version 12060",
      "Job summary",
      "===========",
      "  Nodes  Processes         GPUs  Processes     GPUs",
      "(total)   per node  per process    (total)  (total)",
      "      4          8            1         32       32",
      "Communicators... (0.00s)",
      "=============",
      "Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors",
      "    #  in group  per comm  per node  per comm  in group",
  };
  std::vector<const char*> ok(head);
  for (const char* l : {"    0         1        32         8       256       256   RUNNING      OK", "Errors",
                        "======", "Warnings", "========"}) {
    ok.push_back(l);
  }
  std::vector<const char*> mismatch(head);
  for (const char* l : {"    0         1         4         8        32        32   RUNNING  MISMATCH", "Errors",
                        "======", "Warnings", "========", "#0-0 (fa93daea854b060b) MISMATCH",
                        "  Communicator ranks have different AllGather operation counts",
                        "  30 ranks have launched up to operation 640", "  2 ranks have launched up to operation 641",
                        "  Rank 12 -- GPU 4 managed by process 323032 on node 10.137.190.124"}) {
    mismatch.push_back(l);
  }
  for (const auto* lines : {&ok, &mismatch}) {
    nccl_log_scanner s;
    for (const char* l : *lines) s.feed_line(l);
    EXPECT_TRUE(s.groups().empty());
  }
}

TEST(explain_semantics, new_forms_of_the_field) {
  EXPECT_EQ(explain({"gpu1:1:2 [0] NCCL WARN MNNVL (cliqueSize 72) is available but not working on this system. "
                     "Check the IMEX channel configuration (/dev/nvidia-caps-imex-channels). Set "
                     "NCCL_MNNVL_ENABLE=0 to ignore this issue."})
                .causes,
            causes{"imex_channel"});
  EXPECT_EQ(explain({"[CUDA_ERROR_NOT_PERMITTED] operation not permitted in expression cuMemCreate(&handle, "
                     "roundedUpAllocationSize, &prop, 0 )"})
                .causes,
            causes{"imex_channel"});
  EXPECT_EQ(explain({"h:1:2 [0] allocator.cc:79 NCCL WARN Cuda failure 711 'peer mapping resources exhausted'"}).causes,
            causes{"gpu_peer_limit"});
  EXPECT_EQ(explain({"h:1:2 [0] allocator.cc:89 (ncclMemAlloc) NCCL WARN Cuda failure 205 'mapping of buffer object "
                     "failed'"})
                .causes,
            causes{"pinning_resources"});
  EXPECT_EQ(explain({"[1757000000.1] [gb1:12:0] gdr_copy_md.c:211 UCX ERROR GPU memory pin failed. length 65536 ret "
                     "22 pin_flags 0"})
                .causes,
            causes{"gpu_peer_memory"});
  EXPECT_EQ(explain({"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total "
                     "capacity of 79.19 GiB of which 1.2 GiB is free."})
                .causes,
            causes{"gpu_out_of_memory"});
  EXPECT_EQ(explain({"h:1:2 [0] misc/socket.cc:480 NCCL WARN Net : Call to socket failed : Too many open files"})
                .causes,
            causes{"open_files"});
}

TEST(explain_semantics, stack_note_is_no_failure_but_explains_a_later_crash) {
  constexpr const char* stack =
      "gpu1:1:1 [0] NCCL INFO Stack size limit (unlimited) is unsafe; will use 8192KB for newly launched threads";
  EXPECT_EQ(explain({stack}).causes, causes{});
  EXPECT_EQ(explain({stack, "gpu1:1:5 [0] NCCL WARN Caught signal 11 (Segmentation fault)"}).causes,
            causes{"stack_limit"});
}

TEST(explain_semantics, efault_is_gpu_memory_only_when_the_log_says_so) {
  EXPECT_EQ(explain({"h:1:2 [0] NCCL WARN Call to ibv_reg_mr failed with error Bad address"}).causes,
            causes{"unknown"});
  EXPECT_EQ(explain({"h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/IB/0/GDRDMA",
                     "h:1:2 [0] NCCL WARN Call to ibv_reg_mr failed with error Bad address"})
                .causes,
            causes{"gpu_peer_memory"});
  // A host memory pool (UCX's mpool) is host memory whatever the node.
  EXPECT_EQ(explain({"[1.2] [h:1:0] mpool.c:269 UCX ERROR Failed to allocate memory pool (name=rc_recv_desc) chunk: "
                     "ibv_reg_mr() failed: Bad address"})
                .causes,
            causes{"unknown"});
}

// The open-world reader: libraries without a row (perftest, verbs examples, gdrcopy, NVSHMEM) are read by the
// general form: an RDMA object or a call of a known family, a failure word, an errno (or a stated failure).
TEST(explain_semantics, open_world_reader_reads_libraries_without_rows) {
  auto calls = [](std::initializer_list<const char*> lines) {
    nccl_log_scanner s;
    for (const char* l : lines) s.feed_line(l);
    std::vector<std::string> out;
    for (const nccl_group* g : s.groups()) out.push_back(g->what.call + "/" + std::to_string(g->what.err));
    return out;
  };
  EXPECT_EQ(calls({"[1583370992.161735] [gn0101:301910:0]    gdr_copy_md.c:113  UCX  ERROR gdr_pin_buffer failed. "
                   "length :3735552 ret:25"}),
            (std::vector<std::string>{"gdr_pin_buffer/25"}));
  EXPECT_EQ(calls({"Couldn't allocate MR"}), (std::vector<std::string>{"/0"}));
  EXPECT_EQ(calls({"failed to modify QP state to RTR"}), (std::vector<std::string>{"ibv_modify_qp/0"}));
  EXPECT_EQ(calls({"2402-login-001:rank25.test_mpi: Unable to register memory region on mlx5_0: Cannot allocate "
                   "memory"}),
            (std::vector<std::string>{"/12"}));
  // No resource, a library warning, a provider a container cannot load: none.
  EXPECT_EQ(calls({"Failed to connect to server: Connection refused"}), std::vector<std::string>{});
  EXPECT_EQ(calls({"libibverbs: Warning: couldn't load driver 'libvmw_pvrdma-rdmav34.so': libvmw_pvrdma-rdmav34.so: "
                   "cannot open shared object file: No such file or directory"}),
            std::vector<std::string>{});
  EXPECT_EQ(calls({"[1.5] [h:1:0] ib_md.c:1 UCX  WARN  IB: ibv_fork_init() was disabled or failed, yet a fork() has "
                   "been issued."}),
            std::vector<std::string>{});
}

TEST(explain_semantics, healthy_warn_lines_are_no_failure) {
  EXPECT_EQ(explain({"h:1:2 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so.",
                     "h:1:2 [0] NCCL INFO Bootstrap: Using eth0:10.0.0.1<0>",
                     "h:1:2 [0] NCCL INFO GPU Direct RDMA Disabled for HCA 0 'mlx5_0'",
                     "[rank0]:[W1206 15:20:00.1 ProcessGroupNCCL.cpp:1496] Warning: WARNING: destroy_process_group() "
                     "was not called before program exit"})
                .causes,
            causes{});
}

// mrcheck's own FAIL lines (src/report/check.cpp failure_lines) are the finding, with the check's words and fix.
// The first two lines were printed by `mrcheck probe rdma` on the fake verbs with a port DOWN and by `mrcheck probe
// mr` as nobody under `ulimit -l 64`; the third by the plugin's stack check (tests/e2e/plugin_k_stack_nofile_test.sh).
TEST(explain_semantics, mrchecks_own_fail_lines_are_findings) {
  result r = explain(
      {"mrcheck: data_plane: FAIL: mlx5_0 port 1: port: mlx5_0 port 1 is DOWN, not ACTIVE: no link (cable, switch "
       "port, or the netdev is down) (fix: bring the link up: the network device under a RoCE port (`ip link set DEV "
       "up`), the cable or switch port of an InfiniBand one; `ibv_devinfo` shows the port's state)"});
  ASSERT_EQ(r.causes, causes{"data_plane"});
  EXPECT_EQ(r.findings[0].group.what.call, "data_plane");
  EXPECT_NE(r.findings[0].diag.summary.find("mlx5_0 port 1 is DOWN, not ACTIVE: no link (cable, switch port, or the "
                                            "netdev is down)"),
            std::string::npos);
  EXPECT_TRUE(r.findings[0].diag.fix.starts_with("bring the link up: the network device under a RoCE port"));
  EXPECT_EQ(r.findings[0].diag.owner, fix_owner::node);

  r = explain(
      {"mrcheck: mr_host: FAIL: mlx5_0: ibv_reg_mr_iova2 of 73.5 MiB host memory failed with ENOMEM (Cannot allocate "
       "memory) at buffer 1 of 24 (0 B of 73.5 MiB already registered): registration of 73.5 MiB needs locked memory "
       "but the RLIMIT_MEMLOCK soft limit of the probe (pid 16895, uid 65534) is 64 KiB (fix: the limit was lowered "
       "at pid 16892 (bash), soft 64 KiB (its parent pid 16890 (bash) had soft 8 MiB): set "
       "PropagateResourceLimitsExcept=MEMLOCK in slurm.conf and LimitMEMLOCK=infinity for slurmd (systemd drop-in), "
       "restart slurmd; to test now run `ulimit -l unlimited` in the shell that starts srun)"});
  ASSERT_EQ(r.causes, causes{"memlock"});
  EXPECT_TRUE(r.findings[0].diag.fix.starts_with("the limit was lowered at pid 16892 (bash), soft 64 KiB"));

  r = explain(
      {"0: mrcheck: stack: FAIL: task will start with stack soft unlimited (above stack_max 1 GiB); set at "
       "srun's propagation (job): SLURM_RLIMIT_STACK=18446744073709551615 from the shell that ran srun/sbatch "
       "on node1"});
  ASSERT_EQ(r.causes, causes{"stack_limit"});
  EXPECT_EQ(r.findings[0].diag.owner, fix_owner::none);  // the job's own: the schema names node and site only

  // A check with no cause of the taxonomy keeps its words; its fix when it names none is where to get one.
  r = explain({"mrcheck: hca_fw: FAIL: mlx5_0 firmware 28.39.1002 is older than 28.41"});
  ASSERT_EQ(r.causes, causes{"unknown"});
  EXPECT_NE(r.findings[0].diag.fix.find("mrcheck report"), std::string::npos);
}

// mrcheck's other lines are no failures: its passes, its tables, its warnings, the CLI's usage errors.
TEST(explain_semantics, mrchecks_other_lines_are_no_failure) {
  EXPECT_EQ(explain({"mrcheck: data_plane: pass: RC loopback on 1 port(s), every byte verified: rxe0:1 GID 1 "
                     "::ffff:10.77.0.1 (RoCE v2)",
                     "mrcheck: memlock: WARN: max locked memory 64 KiB (soft): on_fail=warn, the task runs",
                     "mrcheck: memlock: chain on node1 (job 12 step 0 task 0), required 73.5 MiB:",
                     "mrcheck: WARN: unknown check group 'foo'; running the site's checks",
                     "mrcheck: probe rdma: unknown option '--x: FAIL: y'"})
                .causes,
            causes{});
}

}  // namespace
}  // namespace mrcheck
