// The cause rows of NCCL's failures that carry no verbs errno (src/explain/causes/cause_rows.h): two ranks on one GPU,
// a completion error, a fatal error without a preceding warning, and the fatal warnings of the open-world rows
// (src/explain/read/form_table.cpp, m_fatal_warn): MNNVL, sockets, CUDA limits, file descriptors.
#include "cause_rows.h"

#include <fmt/format.h>

#include <cerrno>

namespace mrcheck::cause_rows {

namespace {

using k = failure::kind;

// The completion statuses (ibv_wc_status) -> what they mean and what to do; the last row is every other status.
struct completion_row {
  std::array<int, 3> statuses;  // -2: any
  std::string_view meaning;
  std::string_view fix;
};
constexpr std::array<completion_row, 4> k_completion_rows{{
    {{12, 13, 20},  // RETRY_EXC_ERR, RNR_RETRY_EXC_ERR, RESP_TIMEOUT_ERR
     ": the peer stopped answering (its process died first, a link went down, or the fabric does not route between "
     "the ports)",
     "read the peer's log first (it often failed earlier), then check port state on both nodes (`mrcheck report`, "
     "ibstat); on RoCE check NCCL_IB_GID_INDEX and NCCL_IB_TC"},
    {{4, 8, 10},  // LOC_PROT_ERR, LOC_ACCESS_ERR, REM_ACCESS_ERR
     ": a memory region was not accessible as registered (with GPU buffers: GPUDirect RDMA through "
     "nvidia_peermem/DMA-BUF not working)",
     "run `mrcheck probe mr --gpu` on both nodes; as an experiment NCCL_NET_GDR_LEVEL=LOC to take GPU buffers off "
     "the wire"},
    {{5, 5, 5},  // WR_FLUSH_ERR
     ": the queue pair had already failed; this is a consequence of an earlier error",
     "look for the first completion error or WARN before this line, on this rank and on the peer"},
    {{-2, -2, -2},
     ": the RDMA transfer failed",
     "read the peer's log and check port state on both nodes (`mrcheck report`, ibstat)"},
}};

const completion_row& completion_of(const case_ctx& c) {
  const int st = c.f.wc_status.value_or(-1);
  for (const completion_row& r : k_completion_rows) {
    if (r.statuses[0] == -2 || r.statuses[0] == st || r.statuses[1] == st || r.statuses[2] == st) return r;
  }
  return k_completion_rows.back();
}

bool detail_is(const case_ctx& c, std::string_view d) { return c.f.detail == d; }

// MNNVL refused (NCCL's "MNNVL ... is available but not working", CUDA_ERROR_NOT_PERMITTED on a fabric handle):
// the node's when its IMEX daemon is known not to run, else the site's, which gives each job its channel.
constexpr std::string_view k_imex_node_summary =
    "NCCL (or the program) could not create or import NVLink fabric memory (MNNVL) and no nvidia-imex daemon runs "
    "on this node, so no fabric handle can be imported; since NCCL 2.27.3 that is fatal";
constexpr std::string_view k_imex_node_fix =
    "start the node's IMEX service (systemctl start nvidia-imex) and check with `nvidia-imex-ctl -N` that every "
    "node of the IMEX domain is connected; NCCL_MNNVL_ENABLE=0 runs without MNNVL";
constexpr std::string_view k_imex_site_summary =
    "NCCL (or the program) could not create or import NVLink fabric memory (MNNVL): the job has no IMEX channel "
    "(/dev/nvidia-caps-imex-channels/channelN) or no permission on it; since NCCL 2.27.3 that is fatal";
constexpr std::string_view k_imex_site_fix =
    "the site gives each job an IMEX channel (Slurm's switch/nvidia_imex plugin, SwitchType in slurm.conf; a "
    "ComputeDomain on Kubernetes): in the job /dev/nvidia-caps-imex-channels/channel0 must exist and be readable "
    "by the job's user; if it is, `nvidia-imex-ctl -N` on the node shows whether the daemons are connected. "
    "NCCL_MNNVL_ENABLE=0 runs without MNNVL";
bool mnnvl_refused(const case_ctx& c) { return c.f.call == "mnnvl" || detail_is(c, "CUDA_ERROR_NOT_PERMITTED"); }
bool imex_daemon_down(const case_ctx& c) { return c.e.imex_daemon.has_value() && !*c.e.imex_daemon; }
constexpr line_list k_warn{lines::warn_errno};

constexpr std::array k_rows{
    cause_row{.kind = k::duplicate_gpu,
              .what = cause::duplicate_gpu,
              .confirmed = yes,
              .summary = "two ranks of one communicator run on the same GPU; NCCL refuses that (NVIDIA/nccl #418)",
              .fix = "give each rank its own GPU: srun --gpus-per-task=1 (or --gpu-bind=single:1, CUDA_VISIBLE_DEVICES "
                     "per local rank) and no more tasks per node than GPUs"},
    cause_row{.kind = k::completion_error,
              .evidence = {lines::completion},
              .summary =
                  +[](const case_ctx& c) {
                    return completion_summary_head(c.f) + std::string(completion_of(c).meaning);
                  },
              .fix = +[](const case_ctx& c) { return std::string(completion_of(c).fix); },
              .fallback = k_tcp_fallback},
    cause_row{.kind = k::system_error,
              .summary = "NCCL reported a fatal error ('unhandled system error' or similar) but no preceding warning "
                         "names the failed call",
              .fix = "rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET to see the failing call and errno, or run "
                     "`mrcheck probe mr` on the node",
              .fallback = k_tcp_fallback},
    // The fatal warnings, in the order they are tried.
    cause_row{.kind = k::fatal_warning,
              .err = {EMFILE, ENFILE},
              .evidence = k_warn,
              .what = cause::open_files,
              .summary =
                  +[](const case_ctx& c) {
                    return fmt::format(
                        "NCCL failed with {}: the process (RLIMIT_NOFILE) or the system ran out of file "
                        "descriptors",
                        errno_text(c.f.err));
                  },
              .fix = "raise the job's open-files limit (`ulimit -n`, Slurm PropagateResourceLimits NOFILE, "
                     "LimitNOFILE= of slurmd)"},
    cause_row{.kind = k::fatal_warning,
              .names = "mnnvl|cuMemCreate",
              .when = [](const case_ctx& c) { return mnnvl_refused(c) && imex_daemon_down(c); },
              .evidence = k_warn,
              .what = cause::imex_channel,
              .confirmed = yes,
              .summary = k_imex_node_summary,
              .fix = k_imex_node_fix,
              .owner = fix_owner::node},
    cause_row{.kind = k::fatal_warning,
              .names = "mnnvl|cuMemCreate",
              .when = mnnvl_refused,
              .evidence = k_warn,
              .what = cause::imex_channel,
              .summary = k_imex_site_summary,
              .fix = k_imex_site_fix,
              .owner = fix_owner::site},
    cause_row{.kind = k::fatal_warning,
              .names = "libmlx5_symbol",
              .evidence = k_warn,
              .what = cause::rdma_stack_mismatch,
              .summary = "the program's RDMA user space is older than what loads it: libmlx5 lacks a symbol the caller "
                         "(NCCL, UCX) was built against, typically a container's rdma-core older than the library "
                         "bundled with the framework",
              .fix = "update rdma-core (libibverbs1, ibverbs-providers) in the image to the version the framework "
                     "expects, or mount the host's RDMA user space into the container"},
    cause_row{.kind = k::fatal_warning,
              .names = "socket_interface",
              .evidence = k_warn,
              .what = cause::socket_interface,
              .summary = "NCCL found no socket interface for its bootstrap: NCCL_SOCKET_IFNAME names no interface of "
                         "this node (or the node has none but lo), or NCCL_COMM_ID gives an address this node does "
                         "not have",
              .fix = "set NCCL_SOCKET_IFNAME to an interface that exists and has an address on every node (`ip -br "
                     "addr`), or unset it; NCCL_COMM_ID must name an address of the rank 0 node"},
    cause_row{.kind = k::fatal_warning,
              .names = "net_plugin",
              .evidence = k_warn,
              .what = cause::no_rdma_device,
              .summary =
                  "NCCL could not initialize the network it was told to use (NCCL_NET): no RDMA device for "
                  "NET/IB, or a net plugin that failed to load, and NCCL does not fall back when NCCL_NET is set",
              .fix = "check that the node has an HCA (/sys/class/infiniband) and that /dev/infiniband and the plugin "
                     "are in the container; on nodes without RDMA unset NCCL_NET (or NCCL_NET=Socket)"},
    cause_row{.kind = k::fatal_warning,
              .names = "no_peermem",
              .evidence = k_warn,
              .what = cause::gpu_peer_memory,
              .summary = "the library found no peer-memory client (neither nv_peer_mem nor nvidia_peermem is loaded), "
                         "so it cannot register GPU memory with the HCA and drops its RDMA transport",
              .fix = "`modprobe nvidia-peermem` on the node (MLNX/DOCA-OFED kernel stack), or use DMA-BUF with the "
                     "open GPU kernel modules where the library supports it"},
    cause_row{.kind = k::fatal_warning,
              .names = "gdr_pin_buffer",
              .evidence = k_warn,
              .what = cause::gpu_peer_memory,
              .summary = "UCX's gdrcopy transport could not pin GPU memory: the gdrdrv module (gdrcopy) is not loaded "
                         "or does not match the driver",
              .fix = "load gdrdrv on the node (`modprobe gdrdrv`, the gdrcopy package), or leave gdrcopy out (UCX_TLS "
                     "without gdr_copy)"},
    cause_row{.kind = k::fatal_warning,
              .names = "cuda",
              .when = [](const case_ctx& c) { return detail_is(c, "framework: out of memory"); },
              .evidence = k_warn,
              .what = cause::gpu_out_of_memory,
              .summary = "the program ran out of GPU memory outside NCCL (the framework's allocator); no RDMA or NCCL "
                         "setting is involved",
              .fix = "lower the batch size or model share per GPU, or set "
                     "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against fragmentation"},
    cause_row{.kind = k::fatal_warning,
              .names = "cuda",
              .when = [](const case_ctx& c) { return detail_is(c, "peer mapping resources exhausted"); },
              .evidence = k_warn,
              .what = cause::gpu_peer_limit,
              .summary = "CUDA ran out of peer mappings (Cuda failure 711): one GPU can map at most 8 peers, and this "
                         "process enables peer access to more (NVIDIA/nccl #1874)",
              .fix = "use at most 8 GPUs per process (one process per GPU), or NCCL_P2P_LEVEL / NCCL_P2P_DISABLE=1 "
                     "for the extra peers"},
    cause_row{.kind = k::fatal_warning,
              .names = "cuda",
              .when = [](const case_ctx& c) { return detail_is(c, "mapping of buffer object failed"); },
              .evidence = k_warn,
              .what = cause::pinning_resources,
              .summary = "CUDA could not map NCCL's buffer (Cuda failure 205 in ncclMemAlloc): the GPU's BAR1 or the "
                         "driver's mappings are exhausted",
              .fix = "check BAR1 free space (`nvidia-smi -q -d MEMORY`) and the driver; NCCL_CUMEM_ENABLE=0 avoids "
                     "cuMem buffers"},
    cause_row{.kind = k::fatal_warning,
              .names = "cuda",
              .when = [](const case_ctx& c) { return detail_is(c, "out of memory"); },
              .evidence = k_warn,
              .what = cause::gpu_out_of_memory,
              .summary = "NCCL could not allocate GPU memory for its buffers (CUDA 'out of memory'): the GPU was full "
                         "when NCCL set up a connection; this is GPU memory, not pinned host memory or RLIMIT_MEMLOCK",
              .fix = "leave GPU memory for NCCL: lower the framework's share (e.g. PyTorch's caching allocator, vLLM "
                     "gpu_memory_utilization) or shrink NCCL's buffers (NCCL_BUFFSIZE, NCCL_MAX_NCHANNELS, "
                     "NCCL_NVLS_ENABLE=0)"},
    cause_row{.kind = k::fatal_warning,
              .names = "cuda",
              .evidence = k_warn,
              .summary =
                  +[](const case_ctx& c) {
                    return fmt::format("a CUDA call inside NCCL failed ('{}') and NCCL gave up",
                                       c.f.detail.empty() ? "?" : c.f.detail);
                  },
              .fix = "rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ALLOC; check with `mrcheck report` that the "
                     "CUDA driver matches the runtime and that each rank sees the GPU it expects"},
    cause_row{.kind = k::fatal_warning,
              .err = EAFNOSUPPORT,
              .names = "socket|connect",
              .evidence = k_warn,
              .summary = "NCCL could not create a socket: the address family of the interface it chose is not "
                         "available (no usable IPv4/IPv6 interface, or IPv6 disabled)",
              .fix = "set NCCL_SOCKET_IFNAME to an interface with an address (and NCCL_SOCKET_FAMILY=AF_INET where "
                     "IPv6 is off); check that the node has an IP interface besides lo (NVIDIA/nccl #210)"},
    cause_row{.kind = k::fatal_warning,
              .names = "socket|connect",
              .evidence = k_warn,
              .summary =
                  +[](const case_ctx& c) {
                    return fmt::format(
                        "NCCL's socket call {} failed{}: bootstrap or socket transport could not reach a "
                        "peer",
                        c.f.call, c.f.err ? fmt::format(" with {}", errno_name(c.f.err)) : std::string());
                  },
              .fix = "read the peer's log first (it often died earlier); check NCCL_SOCKET_IFNAME and firewalls "
                     "between the nodes"},
    cause_row{.kind = k::fatal_warning,
              .names = "realpath",
              .evidence = k_warn,
              .summary = "NCCL could not resolve the GPU's PCI path in /sys while building the topology (WSL2, or a "
                         "container that does not show the host's /sys/class/pci_bus)",
              .fix = "run where /sys shows the GPU's PCI device (not WSL2), or give NCCL a topology file "
                     "(NCCL_TOPO_FILE) (NVIDIA/nccl #573)"},
    cause_row{.kind = k::fatal_warning,
              .when = [](const case_ctx& c) { return c.f.err != 0; },
              .evidence = k_warn,
              .summary =
                  +[](const case_ctx& c) {
                    return fmt::format("NCCL failed after a warning mrcheck has no rule for ({})", errno_text(c.f.err));
                  },
              .fix = "rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,ENV to see the failing call; run `mrcheck "
                     "report` on that node",
              .fallback = k_tcp_fallback},
    cause_row{.kind = k::fatal_warning,
              .evidence = k_warn,
              .summary = "NCCL failed after a warning mrcheck has no rule for",
              .fix = "rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,ENV to see the failing call; run `mrcheck "
                     "report` on that node"},
};

}  // namespace

std::span<const cause_row> nccl_rows() { return k_rows; }

}  // namespace mrcheck::cause_rows
