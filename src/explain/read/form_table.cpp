// The table of line forms (line_forms.h): one row per form, each with its anchor, who prints it, a real sample line,
// its public source and its matcher (form_matchers.cpp). tests/unit/explain_forms_test.cpp runs every sample through
// match_line(). A new form is one row here and its sample; docs/transports.md, "Line forms".
#include "form_matchers.h"

#include <string_view>
#include <vector>

namespace mrcheck::forms {

namespace {

struct row {
  form_row doc;
  matcher how;
  // Whether the anchor joins the cheap rejection. Rows whose lines always carry a failure word ("failed",
  // "error", "Unable", "Couldn't": anchors of their own, k_extra) leave theirs out, so that an ordinary line
  // naming the same thing ("NCCL INFO DMA-BUF is available", "NET/OFI Selected Provider") is rejected cheaply.
  bool filter = true;
};

constexpr row k_rows[] = {
    // mrcheck's own verdict first: its line may quote another library's words, and then it is the finding.
    {{": FAIL: ", "mrcheck (the plugin, its probes, `mrcheck report`)", "", "- (the check's summary)", "-",
      "mrcheck: data_plane: FAIL: mlx5_0 port 1: port: mlx5_0 port 1 is DOWN, not ACTIVE: no link (cable, switch "
      "port, or the netdev is down) (fix: bring the link up: the network device under a RoCE port (`ip link set DEV "
      "up`), the cable or switch port of an InfiniBand one; `ibv_devinfo` shows the port's state)",
      "tests/e2e/plugin_probe_test.sh"},
     m_own_verdict},
    {{"Got completion", "NCCL NET/IB (and vendor net plugins)", "", "- (status is an ibv_wc_status)",
      "NCCL host:pid:tid",
      "ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer 10.216.210.236<54862> with status=12 opcode=0 "
      "len=0 "
      "vendor err 129 (Recv)",
      "https://github.com/NVIDIA/nccl/issues/1405"},
     m_nccl_completion},
    {{"wc->status", "Gloo ibverbs transport", "", "- (status after IBV_WC_SUCCESS.)", "-",
      "what():  [enforce fail at gloo/transport/ibverbs/pair.cc:466] wc->status == IBV_WC_SUCCESS. 12 vs 0.",
      "https://github.com/pytorch/gloo/issues/52"},
     m_wc_status},
    {{"work item failed", "mscclpp", "", "- (status N is an ibv_wc_status, its strerror text is wrong)", "-",
      "what():  a work item failed: status 12 (Ib failure: Cannot allocate memory)",
      "https://github.com/microsoft/mscclpp/issues/323"},
     m_wc_status},
    {{"] status ", "Charm++ verbs layer", "", "- (wc[i] status N)", "-", "[0] wc[0] status 9 wc[i].opcode 0",
      "https://github.com/charmplusplus/charm/issues/2532"},
     m_wc_status},
    {{"got completion with error", "libmlx5 (rdma-core)", "", "-",
      "mlx5: <host>:", "mlx5: c101-011.frontera.tacc.utexas.edu: got completion with error:",
      "https://github.com/charmplusplus/charm/issues/2532"},
     m_mlx5_completion},
    {{"Duplicate GPU detected", "NCCL", "", "-", "NCCL host:pid:tid",
      "init.cc:657 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1a000",
      "https://github.com/NVIDIA/nccl/issues/418"},
     m_duplicate_gpu},
    {{"No device found", "NCCL NET/IB", "", "-", "NCCL host:pid:tid", "NCCL INFO NET/IB : No device found.",
      "https://github.com/NVIDIA/nccl/issues/941"},
     m_no_device},
    {{"Could not find any optimal provider", "aws-ofi-nccl", "fi_getinfo", "-", "-",
      "get_ofi_provider:312 NCCL WARN NET/OFI Could not find any optimal provider",
      "https://github.com/NVIDIA/nccl/issues/229"},
     m_ofi_no_provider},
    {{"Request completed with error", "aws-ofi-nccl", "", "- (RC is a provider error)", "NCCL host:pid:tid",
      "NCCL WARN NET/OFI Request completed with error. RC: 21. Error: unknown error",
      "https://github.com/aws/aws-ofi-nccl/issues/161"},
     m_ofi_request},
    {{"NET/OFI", "aws-ofi-nccl", "by step", "RC: -N, then strerror", "NCCL host:pid:tid",
      "create_nccl_ofi_component:496 NCCL WARN NET/OFI Couldn't enable endpoint. RC: -12, ERROR: Cannot allocate "
      "memory",
      "https://github.com/aws/aws-ofi-nccl/issues/44"},
     m_ofi_step,
     false},
    {{"<warn>", "libfabric providers (efa, verbs, ...)", "from the message", "strerror text, (N), (-N)", "-",
      "libfabric:22102:1638393161:verbs:ep_ctrl:vrb_ep_enable():884<warn> rdma_create_qp: Cannot allocate memory (12)",
      "https://github.com/ofiwg/libfabric/issues/7368"},
     m_libfabric_warn},
    {{"Libfabric error: (", "libfabric EFA provider", "", "(-N) then strerror", "-",
      "Libfabric error: (-12) Cannot allocate memory", "https://github.com/awslabs/awsome-distributed-ai/issues/647"},
     m_libfabric_abort},
    {{"LibfabricError: code", "libfabric Rust bindings", "after 'context: '", "code -N", "-",
      "LibfabricError: code -93 (\"Protocol not supported\"), context: fi_mr_regattr",
      "https://github.com/perplexityai/pplx-garden/issues/1"},
     m_libfabric_rs},
    {{"infiniband ", "RDMA kernel drivers (efa, mlx5)", "by the driver's verb", "[-N], err -N, status -N",
      "dmesg (no host)", "infiniband efa_0: Failed to process command ALLOC_PD (opcode 14) comp_status 1 err -12",
      "https://github.com/aws/aws-ofi-nccl/issues/22"},
     m_kernel_dev,
     false},
    {{"mlx5_cmd_", "mlx5_core firmware commands", "the command", "err(-N); status <text>(0xN) is firmware's",
      "dmesg (no host)",
      "mlx5_core 0000:61:00.0: mlx5_cmd_check:795:(pid 53945): ALLOC_UAR(0x802) op_mod(0x0) failed, status limits "
      "exceeded(0x8), syndrome (0x5a7939)",
      "https://github.com/openucx/ucx/issues/6049"},
     m_mlx5_cmd,
     false},
    {{"Call to ", "NCCL (ibvwrap, NET/MLX5)", "named", "strerror text, -N, errno N", "NCCL host:pid:tid",
      "misc/ibvwrap.cc:278 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory",
      "https://github.com/NVIDIA/nccl-tests/issues/206"},
     m_nccl_call,
     false},
    {{"unhandled system error", "NCCL", "", "-", "NCCL host:pid:tid",
      "NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:47, unhandled system error, NCCL version "
      "2.7.8",
      "https://github.com/horovod/horovod/issues/1651"},
     m_system_error},
    {{"ncclSystemError", "NCCL", "", "-", "-",
      "ncclSystemError: System call (e.g. socket, malloc) or external library call failed",
      "https://github.com/NVIDIA/nccl/issues/1191"},
     m_system_error},
    {{"unhandled cuda error", "NCCL", "", "-", "-", "NCCL error: unhandled cuda error",
      "https://github.com/horovod/horovod/issues/893"},
     m_system_error},
    {{"ncclUnhandledCudaError", "NCCL", "", "-", "-", "ncclUnhandledCudaError: Call to CUDA function failed.",
      "https://github.com/NVIDIA/nccl/issues/962"},
     m_system_error},
    {{"internal error - please report", "NCCL", "", "-", "-", "NCCL error: internal error - please report this issue",
      "https://github.com/awslabs/awsome-distributed-ai/issues/647"},
     m_system_error},
    {{"ncclInternalError", "NCCL", "", "-", "-", "ncclInternalError: Internal check failed.",
      "https://github.com/NVIDIA/nccl/issues/1538"},
     m_system_error},
    {{"ncclCommInitRank failed", "NCCL", "", "-", "-", "ncclCommInitRank failed: unhandled system error",
      "https://github.com/NVIDIA/nccl/issues/1538"},
     m_system_error},
    {{"Caught signal", "NCCL", "", "-", "-", "NCCL WARN Caught signal 11 (Segmentation fault)",
      "https://github.com/NVIDIA/nccl/issues/1538"},
     m_system_error},
    {{"egist", "NCCL, aws-ofi-nccl, transfer engines, CTRAN, MORI, other verbs users", "named or none",
      "strerror text, RC: -N, [N], errno:N", "-",
      "E0605 17:54:16.878770 178707 rdma_context.cpp:198] Failed to register memory 0x7f56e6600000: Numerical result "
      "out of range [34]",
      "https://github.com/kvcache-ai/Mooncake/issues/454"},
     m_registration,
     false},
    {{"ailed", "verbs users (UCX, mscclpp, NVSHMEM, perftest-like tools)", "the ibv_/mlx5dv_/rdma_/fi_ identifier",
      "strerror text, -N, (errno N), errno=N", "UCX [host:pid:tid]",
      "[1652739463.054681] [cn0022:4071024:0]        ib_iface.c:1035 UCX  ERROR ibv_create_cq(cqe=4096) failed: Cannot "
      "allocate memory",
      "https://github.com/openucx/ucx/issues/8229"},
     m_verbs_call},
    {{"eturn", "verbs users printing a return value", "the identifier", "return -N, returned -1 (errno=N)", "-",
      "ibv_reg_mr returned null, errno unrecognized", "https://github.com/jcarreira/cirrus-kv/issues/87"},
     m_verbs_call},
    {{"rror", "verbs users printing an error", "the identifier", "error code: N, Os { code: N }", "-",
      "ibv_reg_mr failed [error code: 14]", "https://github.com/ut-osa/assise/issues/26"},
     m_verbs_call,
     false},
    {{"DMA-BUF", "NCCL and others", "ibv_reg_dmabuf_mr or none", "strerror text", "NCCL host:pid:tid",
      "NCCL WARN NET/IB : DMA-BUF registration failed", "https://github.com/NVIDIA/nccl/issues/778"},
     m_dmabuf,
     false},
    {{"dmabuf", "NCCL and others", "ibv_reg_dmabuf_mr or none", "strerror text", "-",
      "ibv_reg_dmabuf_mr(address=0xfcc99fa00000, length=16384, ...) failed: Unknown error 524",
      "https://github.com/ai-dynamo/nixl/pull/1605"},
     m_dmabuf,
     false},
    {{"ocket creation failed", "NCCL bootstrap", "socket", "strerror text", "NCCL host:pid:tid",
      "misc/socket.cc:356 NCCL WARN Net : Socket creation failed : Address family not supported by protocol",
      "https://github.com/NVIDIA/nccl/issues/210"},
     m_socket},
    // The program's own word that it failed: NCCL's result strings as torch, nccl-tests and wrappers print them.
    // Tied to the failure before them when there is one, else a finding of their own (src/explain/read/nccl_log.cpp).
    {{"invalid usage", "NCCL (ncclInvalidUsage, as torch and wrappers print it)", "", "-", "-",
      "NCCL error: invalid usage (run with NCCL_DEBUG=WARN for details)",
      "https://github.com/vllm-project/vllm/issues/7548"},
     m_system_error},
    {{"ncclInvalidUsage", "NCCL", "", "-", "-",
      "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.",
      "https://github.com/NVIDIA/nccl/issues/1241"},
     m_system_error},
    {{"ncclInvalidArgument", "NCCL", "", "-", "-", "ncclInvalidArgument: Invalid value for an argument.",
      "https://github.com/SpursGoZmy/Table-LLaVA/issues/4"},
     m_system_error},
    {{"ncclRemoteError", "NCCL", "", "-", "-",
      "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
      "https://github.com/NVIDIA/nccl/issues/2076"},
     m_system_error},
    {{"remote process exited or there was a network error", "NCCL (ncclRemoteError, as torch prints it)", "", "-", "-",
      "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:268, "
      "remote process exited or there was a network error, NCCL version 2.21.5",
      "https://github.com/NVIDIA/nccl/issues/2076"},
     m_system_error},
    {{"NCCL failure", "nccl-tests and NCCLCHECK wrappers", "", "-", "-",
      "NCCL failure common.cu:921 'unhandled system error'", "https://github.com/NVIDIA/nccl-tests/issues/15"},
     m_system_error},
    {{"NCCL Error ", "PyTorch (older) and wrappers", "", "-", "-", "RuntimeError: NCCL Error 2: unhandled system error",
      "https://github.com/NVIDIA/nccl/issues/473"},
     m_system_error},
    {{"DistBackendError", "PyTorch", "", "-", "-",
      "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:219, invalid "
      "argument, NCCL version 2.14.3",
      "https://github.com/SpursGoZmy/Table-LLaVA/issues/4"},
     m_system_error},
    {{"NCCL error", "PyTorch, Horovod, other NCCL users", "", "-", "-",
      "what(): NCCL error: remote process exited or there was a network error, NCCL version 2.14.3",
      "https://github.com/tatsu-lab/stanford_alpaca/issues/207"},
     m_system_error},
    {{"exited with non-zero status", "Open MPI's mpirun", "", "-", "-",
      "mpirun detected that one or more processes exited with non-zero status, thus causing",
      "https://github.com/NVIDIA/nccl-tests/issues/322"},
     m_system_error},
    {{"terminate called after throwing", "C++ runtime (an uncaught exception aborts the process)", "", "-", "-",
      "terminate called after throwing an instance of 'mscclpp::CudaError'",
      "https://github.com/Azure/azhpc-images/issues/445"},
     m_system_error},
    {{"Segmentation fault", "any program (a crash: MVAPICH2's error_sighandler, the shell's core dump note)", "", "-",
      "-", "[A-c7-023-14:mpi_rank_24][error_sighandler] Caught error: Segmentation fault (signal 11)",
      "https://github.com/lanl/MPI-Bash/issues/14"},
     m_system_error},
    {{"non-zero exit code", "Open MPI's mpirun", "", "-", "-",
      "a non-zero exit code. Per user-direction, the job has been aborted.",
      "https://github.com/NVIDIA/nccl-tests/issues/338"},
     m_system_error},
    {{"will now abort", "libfabric EFA provider (fork() with registrations)", "", "-", "-", "Your job will now abort.",
      "https://github.com/OP2/PyOP2/pull/682"},
     m_system_error},
    {{"Fatal error in", "MPICH-family MPI (Intel MPI, MVAPICH2)", "", "-", "-",
      "Abort(1091215) on node 5 (rank 5 in comm 0): Fatal error in PMPI_Init: Other MPI error, error stack:",
      "https://github.com/openucx/ucx/issues/7978"},
     m_system_error},
    {{"Traceback (most recent call last)", "Python (an uncaught exception)", "", "-", "-",
      "Traceback (most recent call last):", "https://github.com/deepbeepmeep/Wan2GP/issues/1083"},
     m_system_error},
    {{"ChildFailedError", "torchrun (torch.distributed.elastic: a worker failed)", "", "-", "-",
      "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
      "https://pytorch.org/docs/stable/elastic/errors.html"},
     m_system_error},
    {{"Fatal: ", "librdmacm and other libraries that name their fatal errors", "", "-", "-",
      "librdmacm: Fatal: no RDMA devices found", "https://github.com/ofiwg/libfabric/issues/975"},
     m_system_error},
    {{"non-zero status:", "NVSHMEM (its NVSHMEMI_ERROR checks)", "", "- (an NVSHMEM status)", "-",
      "/sgl-workspace/nvshmem/src/host/init/init.cu:998: non-zero status: 3 building transport map failed",
      "https://github.com/deepseek-ai/DeepEP/issues/223"},
     m_system_error},
    {{"RuntimeError: ", "Python (PyTorch, Ray, vLLM)", "", "-", "-", "RuntimeError: Engine core initialization failed",
      "https://github.com/aws-samples/aws-do-eks/pull/69"},
     m_system_error},
    {{"Assertion", "C/C++ test programs (assert, gdrcopy's sanity)", "", "-", "-",
      "Assertion \"(gdr_pin_buffer(g, d_ptr, size, 0, 0, &mh)) == (0)\" failed at sanity.cpp:188",
      "https://github.com/NVIDIA/gdrcopy/issues/139"},
     m_system_error},
    // A library's own error level, and the RDMA tools' fatal statements: what Soft-RoCE guests printed
    // (tests/fixtures/guest_logs/, made by tests/guest/make_logs.sh with Debian 12's packages).
    {{"UCX  ERROR", "UCX (its ERROR level: the operation failed and is reported up)", "", "-", "-",
      "[1796574324.252448] [node2:586  :0]         libperf.c:1637 UCX  ERROR Failed to setup endpoints: Destination "
      "is unreachable",
      "tests/fixtures/guest_logs/ucx_perftest_no_aux_transport.log"},
     m_library_error,
     false},
    {{"[error] ", "libfabric's fabtests (FT_PRINTERR and friends: the test ends)", "", "-", "-",
      "[error] util/pingpong.c:568 : ctrl/read: no data or remote connection closed",
      "tests/fixtures/guest_logs/fi_pingpong_memlock.log"},
     m_library_error,
     false},
    {{"Couldn't connect to ", "perftest and rdma-core's ibv_*_pingpong (the out-of-band TCP connection to the peer)",
      "", "-", "-", "Couldn't connect to 10.77.0.9:18515", "tests/fixtures/guest_logs/ibv_rc_pingpong_unreachable.log"},
     m_library_error,
     false},
    {{"Couldn't read/write remote", "rdma-core's ibv_*_pingpong (the peer's address exchange)", "", "-", "-",
      "Couldn't read/write remote address", "tests/fixtures/guest_logs/ibv_rc_pingpong_bad_gid.log"},
     m_library_error,
     false},
    {{"Incompatibility issue with GID", "perftest (the two sides' GID types differ: the test ends)", "", "-", "-",
      " Found Incompatibility issue with GID types.", "tests/fixtures/guest_logs/ib_write_bw_bad_gid.log"},
     m_library_error},
    // WARNs that NCCL prints only on its way to returning an error: failures as soon as they are read.
    {{"Failed to initialize any NET plugin", "NCCL (NCCL_NET names a network no plugin provides)", "net_plugin", "-",
      "NCCL host:pid:tid", "NCCL WARN Failed to initialize any NET plugin",
      "https://github.com/NVIDIA/nccl/blob/master/src/plugin/net.cc"},
     m_fatal_warn},
    {{"no socket interface found", "NCCL bootstrap (NCCL_SOCKET_IFNAME matches no interface)", "socket_interface", "-",
      "NCCL host:pid:tid", "NCCL WARN Bootstrap : no socket interface found",
      "https://github.com/marin-community/marin/issues/6940"},
     m_fatal_warn},
    {{"No usable listening interface found",
      "NCCL bootstrap (NCCL_COMM_ID's address, or NCCL_SOCKET_IFNAME, "
      "names no interface of this host to listen on)",
      "socket_interface", "-", "NCCL host:pid:tid",
      "bootstrap.cc:108 NCCL WARN NET/Socket : No usable listening interface found",
      "tests/corpus/heldout-gpu-2026-12-07/raw_comm_id_foreign_warn.log"},
     m_fatal_warn},
    {{"is available but not working on this system", "NCCL MNNVL (NCCL >= 2.27.3: fatal)", "mnnvl", "-",
      "NCCL host:pid:tid",
      "NCCL WARN MNNVL (cliqueSize 72) is available but not working on this system. Check the IMEX channel "
      "configuration (/dev/nvidia-caps-imex-channels). Set NCCL_MNNVL_ENABLE=0 to ignore this issue.",
      "https://github.com/NVIDIA/nccl/issues/2186"},
     m_fatal_warn},
    {{"Cuda failure", "NCCL CUDACHECK (returns ncclUnhandledCudaError)", "cuda", "- (the CUDA error text is quoted)",
      "NCCL host:pid:tid", "allocator.cc:79 NCCL WARN Cuda failure 711 'peer mapping resources exhausted'",
      "https://github.com/NVIDIA/nccl/issues/1874"},
     m_fatal_warn},
    {{"CUDA failure", "nccl-tests (CUDACHECK)", "cuda", "- (the CUDA error text is quoted)", "-",
      "gpu: Test CUDA failure common.cu:1030 'system not yet initialized'",
      "https://github.com/NVIDIA/nccl-tests/issues/338"},
     m_fatal_warn},
    {{"nvidia_peermem detected", "NVSHMEM (IBRC transport skipped)", "no_peermem", "-", "-",
      "/sgl-workspace/nvshmem/src/modules/transport/ibrc/ibrc.cpp:nvshmemt_init:1851: neither nv_peer_mem, or "
      "nvidia_peermem detected. Skipping transport.",
      "https://github.com/deepseek-ai/DeepEP/issues/223"},
     m_fatal_warn},
    {{"CUDA_ERROR_NOT_PERMITTED", "CUDA driver API checks (nvbandwidth, NCCL's CUCHECK)", "from the expression",
      "- (a CUresult)", "-",
      "[CUDA_ERROR_NOT_PERMITTED] operation not permitted in expression cuMemCreate(&handle, roundedUpAllocationSize, "
      "&prop, 0 )",
      "https://github.com/NVIDIA/nvbandwidth/issues/39"},
     m_fatal_warn},
    {{"GPU memory pin failed", "UCX gdrcopy transport (gdr_copy_md.c)", "gdr_pin_buffer", "ret N", "UCX [host:pid:tid]",
      "gdr_copy_md.c:211 UCX ERROR GPU memory pin failed. length 65536 ret 22 pin_flags 0",
      "https://github.com/openucx/ucx/pull/11885"},
     m_fatal_warn},
    {{"undefined symbol: mlx5dv_", "the dynamic loader (a libmlx5 older than its user expects)", "libmlx5_symbol", "-",
      "-", "/lib/x86_64-linux-gnu/libmlx5.so: undefined symbol: mlx5dv_get_data_direct_sysfs_path",
      "https://github.com/vllm-project/vllm/issues/42750"},
     m_fatal_warn},
    {{"CUDA error: out of memory", "PyTorch (torch.AcceleratorError, RuntimeError)", "cuda", "-", "-",
      "torch.AcceleratorError: CUDA error: out of memory", "https://github.com/deepbeepmeep/Wan2GP/issues/1083"},
     m_framework_oom},
    {{"CUDA out of memory", "PyTorch (torch.OutOfMemoryError, outside NCCL)", "cuda", "-", "-",
      "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 22.00 MiB. GPU 0 has a total capacity of "
      "23.65 "
      "GiB of which 11.06 MiB is free.",
      "https://github.com/pytorch/pytorch/issues/16417"},
     m_framework_oom},
};

}  // namespace

std::optional<match> match_line(const prefix& p) {
  // A libfabric provider's own line is read by its row only: its function names (efa_mr_reg_impl()) and
  // <info>/<debug> levels are no failures of their own.
  std::size_t lf = p.rest.find("libfabric:");
  const bool libfabric_line = lf != std::string_view::npos && lf < 128 &&
                              p.rest.find("():", lf) != std::string_view::npos;
  for (const row& r : k_rows) {
    if (libfabric_line && r.how != &m_libfabric_warn) continue;
    std::string_view where = r.how == &m_libfabric_warn || r.how == &m_kernel_dev || r.how == &m_mlx5_cmd ? p.rest
                                                                                                          : p.message;
    if (where.find(r.doc.anchor) == std::string_view::npos) continue;
    match m;
    prefix q = p;
    if (r.how == &m_kernel_dev || r.how == &m_mlx5_cmd) q.message = p.rest;
    if (r.how(r.doc, q, m)) {
      if (m.gpu_text && !m.what.gpu_buffer) m.what.gpu_buffer = true;
      if (!m.gpu_text && !m.what.gpu_buffer && host_words(p.message)) m.what.gpu_buffer = false;
      return m;
    }
  }
  if (libfabric_line) return std::nullopt;
  match m;
  if (!open_world_event(p, m)) return std::nullopt;
  if (gpu_words(p.message)) m.what.gpu_buffer = true;
  if (!m.what.gpu_buffer && host_words(p.message)) m.what.gpu_buffer = false;
  return m;
}

std::vector<std::string_view> row_anchors() {
  std::vector<std::string_view> out;
  for (const row& r : k_rows) {
    if (r.filter) out.push_back(r.doc.anchor);
  }
  return out;
}

std::span<const form_row> rows() {
  static const std::vector<form_row> all = [] {
    std::vector<form_row> v;
    for (const row& r : k_rows) v.push_back(r.doc);
    return v;
  }();
  return all;
}

}  // namespace mrcheck::forms