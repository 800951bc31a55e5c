// The cause rows of GPU memory (src/explain/causes/cause_rows.h): EFAULT (a buffer no peer-memory client or DMA-BUF
// claimed, or host memory that was not mapped), DMA-BUF registration refused (EOPNOTSUPP, the kernel's ENOTSUPP 524)
// and a GPU registration that failed without an errno. The rules follow docs/facts/verbs-and-nccl.md §2.
#include "cause_rows.h"

#include <fmt/format.h>

#include <cerrno>

namespace mrcheck::cause_rows {

namespace {

bool peer_module_loaded(const case_ctx& c) { return c.e.peer_memory.value_or(false); }

std::string efault_fix(const case_ctx& c) {
  if (c.e.kernel_stack == rdma_flavour::inbox || c.e.driver_flavour == nvidia_flavour::open) {
    return "use DMA-BUF: open GPU kernel modules, kernel >= 5.12, rdma-core >= 34, NCCL_DMABUF_ENABLE=1 (the inbox "
           "RDMA stack cannot load nvidia-peermem); or install MLNX/DOCA-OFED and `modprobe nvidia-peermem`";
  }
  return "`modprobe nvidia-peermem` (needs the MLNX/DOCA-OFED kernel stack), or use DMA-BUF with the open GPU "
         "kernel modules (kernel >= 5.12, rdma-core >= 34, NCCL_DMABUF_ENABLE=1)";
}

bool no_dmabuf_verb(const case_ctx& c) { return c.e.has_dmabuf_mr && !*c.e.has_dmabuf_mr; }

std::string dmabuf_summary(const case_ctx& c) {
  std::string_view why;
  if (no_dmabuf_verb(c)) {
    why = "; this rdma-core lacks ibv_reg_dmabuf_mr (IBVERBS_1.12, rdma-core >= 34)";
  } else if (c.e.driver_flavour == nvidia_flavour::proprietary) {
    why = "; the NVIDIA driver is the proprietary flavour, DMA-BUF needs the open kernel modules";
  }
  return fmt::format("{} got {}: the kernel, rdma-core or GPU driver does not support DMA-BUF registration{}", c.f.call,
                     errno_name(c.f.err), why);
}

constexpr line_list k_efault{lines::call_errno, lines::gpu, lines::versions};
constexpr line_list k_dmabuf{lines::call_errno, lines::versions, lines::gpu};

constexpr std::array k_rows{
    cause_row{.err = EFAULT,
              .mem = memory::host,
              .evidence = k_efault,
              .summary =
                  +[](const case_ctx& c) {
                    return fmt::format(
                        "{} got EFAULT for host memory: the buffer is not mapped (a bug in the caller, or "
                        "memory freed before registration)",
                        c.call());
                  },
              .fix = "run `mrcheck probe mr` on the node; if it passes, report the failing application's buffer "
                     "handling",
              .fallback = k_tcp_fallback},
    // Neither the log nor the node says what memory it was.
    cause_row{.err = EFAULT,
              .mem = memory::unknown,
              .evidence = k_efault,
              .summary =
                  +[](const case_ctx& c) {
                    return fmt::format(
                        "{} got EFAULT: the buffer was not mapped for the device; the log does not say "
                        "whether it is GPU memory (then no peer-memory client, nvidia_peermem, or DMA-BUF "
                        "claimed it) or host memory (then it was not mapped or was freed before "
                        "registration)",
                        c.call());
                  },
              .fix = "run `mrcheck probe mr --gpu` on the node: it registers host and GPU memory and names which fails",
              .fallback = k_tcp_fallback},
    cause_row{.err = EFAULT,
              .mem = memory::gpu,
              .when =
                  [](const case_ctx& c) {
                    return peer_module_loaded(c) && c.e.peer_memory_client && !*c.e.peer_memory_client;
                  },
              .evidence = k_efault,
              .what = cause::gpu_peer_memory,
              .confirmed = yes,
              .summary =
                  +[](const case_ctx& c) {
                    return fmt::format(
                        "{} got EFAULT: nvidia_peermem is loaded but no nv_mem peer-memory client is "
                        "registered (/sys/kernel/mm/memory_peers/nv_mem absent), so no one claims the GPU "
                        "buffer; NCCL still takes the peermem path because it only checks that the module "
                        "is loaded",
                        c.call());
                  },
              .fix = "reload nvidia-peermem after the MLNX/DOCA-OFED kernel stack is up (`modprobe -r nvidia-peermem; "
                     "modprobe nvidia-peermem`) and check /sys/kernel/mm/memory_peers/nv_mem; or use DMA-BUF (open GPU "
                     "kernel modules, NCCL_DMABUF_ENABLE=1)",
              .fallback = k_gdr_fallback},
    cause_row{.err = EFAULT,
              .mem = memory::gpu,
              .when = peer_module_loaded,
              .evidence = k_efault,
              .what = cause::gpu_peer_memory,
              .summary =
                  +[](const case_ctx& c) {
                    return fmt::format(
                        "{} got EFAULT although a peer-memory client is loaded: the GPU buffer was not "
                        "claimed (cuMem memory without gpuDirectRDMACapable, mscclpp #657, or "
                        "nvidia_peermem not matching the driver)",
                        c.call());
                  },
              .fix = "check that nvidia_peermem's version equals the NVIDIA driver's (reload it after driver updates) "
                     "and run `mrcheck probe mr --gpu`; or use DMA-BUF (open GPU kernel modules, NCCL_DMABUF_ENABLE=1)",
              .fallback = k_gdr_fallback},
    cause_row{.err = EFAULT,
              .mem = memory::gpu,
              .evidence = k_efault,
              .what = cause::gpu_peer_memory,
              .confirmed = [](const case_ctx& c) { return c.e.peer_memory.has_value() && !*c.e.peer_memory; },
              .summary =
                  +[](const case_ctx& c) {
                    return fmt::format(
                        "{} got EFAULT: a GPU buffer can only be registered through a peer-memory client "
                        "(nvidia_peermem) or DMA-BUF, and {}",
                        c.call(),
                        c.e.peer_memory ? "no peer-memory client is loaded" : "none was confirmed on this node");
                  },
              .fix = efault_fix,
              .fallback = k_gdr_fallback},
    cause_row{.err = {EOPNOTSUPP, EPROTONOSUPPORT},
              .call_class = calls::dmabuf,
              .evidence = k_dmabuf,
              .what = cause::dmabuf_unsupported,
              .confirmed =
                  [](const case_ctx& c) {
                    return no_dmabuf_verb(c) || c.e.driver_flavour == nvidia_flavour::proprietary;
                  },
              .summary = dmabuf_summary,
              .fix = "set NCCL_DMABUF_ENABLE=0 (NCCL then uses nvidia-peermem if loaded), or move to kernel >= 5.12, "
                     "rdma-core >= 34 and the open GPU kernel modules (NVIDIA/nccl #778)",
              .fallback = k_gdr_fallback},
    // errno 524 is the kernel's ENOTSUPP (include/linux/errno.h), not a user-space errno: glibc prints "Unknown
    // error 524". From ibv_reg_dmabuf_mr on GB200 it means the GPU memory was exported with the PCIe (Direct-NIC)
    // mapping and imported through the generic verb, which needs the host mapping (openucx/ucx PR #11571).
    cause_row{
        .err = k_kernel_enotsupp,
        .call_class = calls::dmabuf,
        .evidence = k_dmabuf,
        .what = cause::dmabuf_unsupported,
        .summary =
            +[](const case_ctx& c) {
              return fmt::format(
                  "{} got errno 524, the kernel's internal ENOTSUPP: the RDMA driver refused this DMA-BUF. On "
                  "GB200 with Direct-NIC the GPU memory was exported with the PCIe mapping, which only the "
                  "data-direct registration accepts, while the generic verb needs the host mapping (openucx/ucx PR "
                  "#11571)",
                  c.f.call);
            },
        .fix = "check that the Direct-NIC (data-direct) port is up (`ibv_devinfo`); use a UCX/NIXL release that "
               "matches the dmabuf mapping to the registration verb (openucx/ucx PR #11571), or turn DMA-BUF off "
               "in the library that failed (NCCL: NCCL_DMABUF_ENABLE=0) so that it registers through "
               "nvidia-peermem",
        .fallback = k_gdr_fallback},
    cause_row{.err = k_kernel_enotsupp,
              .evidence = k_dmabuf,
              .summary =
                  +[](const case_ctx& c) {
                    return fmt::format(
                        "{} got errno 524, the kernel's internal ENOTSUPP leaking to user space: the driver "
                        "does not support this request",
                        c.call());
                  },
              .fix = "run `mrcheck report` to compare the kernel RDMA driver with rdma-core and the NVIDIA driver",
              .fallback = k_tcp_fallback},
    // A GPU buffer whose registration fails without an errno: the usual cause is that no peer-memory client claims
    // it (EFAULT when the errno is printed).
    cause_row{.err = 0,
              .call_class = calls::registration,
              .mem = memory::gpu,
              .evidence = {lines::call_errno, lines::gpu},
              .what = cause::gpu_peer_memory,
              .summary =
                  +[](const case_ctx& c) {
                    return fmt::format(
                        "{} of a GPU buffer failed (no errno printed): a GPU buffer can only be registered "
                        "through a peer-memory client (nvidia_peermem) or DMA-BUF",
                        c.call());
                  },
              .fix = "check that nvidia_peermem is loaded (`lsmod | grep peermem`, or the nv_peer_mem service) and "
                     "matches the driver; or use DMA-BUF (open GPU kernel modules, kernel >= 5.12, rdma-core >= 34)",
              .fallback = k_gdr_fallback},
};

}  // namespace

std::span<const cause_row> gpu_rows() { return k_rows; }

}  // namespace mrcheck::cause_rows
