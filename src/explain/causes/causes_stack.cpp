// The cause rows of the RDMA stack and its devices (src/explain/causes/cause_rows.h): EINVAL and EOPNOTSUPP (kernel and
// user space out of step, libfabric of the EFA installers), no device (ENODEV, ENXIO, NCCL's "No device found",
// libfabric's ENODATA), a call without an errno, and the last row, every other errno. The rules follow
// docs/facts/verbs-and-nccl.md §2.
#include "cause_rows.h"

#include <fmt/format.h>

#include <cerrno>

namespace mrcheck::cause_rows {

namespace {

using k = failure::kind;

bool mismatch(const case_ctx& c) { return c.mismatch(); }
std::string mismatch_fix(const case_ctx& c) { return c.stack_mismatch_fix(); }
bool no_devices(const case_ctx& c) { return c.e.rdma_devices.has_value() && *c.e.rdma_devices == 0; }

std::string no_device_summary(const case_ctx& c) {
  std::string found;
  if (c.e.rdma_devices) found = fmt::format(" (this node shows {} RDMA device(s))", *c.e.rdma_devices);
  return fmt::format("NCCL found no usable RDMA device and uses TCP sockets{}", found);
}

constexpr std::string_view k_no_device_fix =
    "check that the node has an HCA (/sys/class/infiniband), that mlx5_ib and ib_uverbs are loaded, that "
    "/dev/infiniband is passed into containers, and that NCCL_IB_HCA does not filter every device out";

// libfabric found no EFA provider (fi_getinfo, with ENODATA or no errno).
constexpr cause_row efa_not_found(int err) {
  return {.err = err,
          .names = "fi_getinfo",
          .evidence = {lines::call_errno, lines::device_count, lines::container_only},
          .what = cause::no_rdma_device,
          .confirmed = no_devices,
          .summary =
              +[](const case_ctx& c) {
                return fmt::format(
                    "libfabric found no usable EFA provider ({}): no EFA device is visible to the process "
                    "(a container started without /dev/infiniband, or no EFA interface attached to the "
                    "instance)",
                    c.f.err ? errno_text(c.f.err) : std::string("no provider"));
              },
          .fix =
              "pass the EFA devices into the container (docker --device=/dev/infiniband/uverbsN for each, "
              "Kubernetes vpc.amazonaws.com/efa resources) and check `fi_info -p efa -t FI_EP_RDM` inside it "
              "(aws/aws-ofi-nccl #1020)",
          .fallback = k_net_plugin_fallback};
}

constexpr line_list k_stack{lines::call_errno, lines::versions, lines::gpu};
constexpr line_list k_device{lines::call_errno, lines::versions, lines::device_count};

constexpr std::array k_rows{
    // EINVAL. awsome-distributed-ai #203: libfabric of EFA installers before 1.29.1 with NCCL >= 2.19.
    cause_row{.err = EINVAL,
              .call_class = calls::registration,
              .when = [](const case_ctx& c) { return c.ofi(); },
              .evidence = k_stack,
              .what = cause::rdma_stack_mismatch,
              .summary =
                  +[](const case_ctx& c) {
                    return fmt::format(
                        "{} got EINVAL under aws-ofi-nccl: the known incompatibility of the libfabric from "
                        "EFA installers before 1.29.1 with NCCL 2.19 and later (CUDA sync memops)",
                        c.call());
                  },
              .fix = "set FI_EFA_SET_CUDA_SYNC_MEMOPS=0, or upgrade the EFA installer to 1.29.1 or later "
                     "(awslabs/awsome-distributed-ai #203); `mrcheck report` shows the libfabric and aws-ofi-nccl "
                     "versions",
              .fallback = k_net_plugin_fallback},
    cause_row{.err = EINVAL,
              .when = [](const case_ctx& c) { return c.ofi(); },
              .evidence = k_stack,
              .summary =
                  +[](const case_ctx& c) {
                    return fmt::format(
                        "{} got EINVAL from libfabric: the provider rejected the request (a libfabric or "
                        "aws-ofi-nccl that does not match the EFA driver, or an EFA device not usable from "
                        "this process)",
                        c.call());
                  },
              .fix =
                  "check `fi_info -p efa -t FI_EP_RDM` on the node and that libfabric and aws-ofi-nccl come from one "
                  "EFA installer (`mrcheck report` lists their versions)",
              .fallback = k_net_plugin_fallback},
    cause_row{.err = EINVAL,
              .when = mismatch,
              .evidence = k_stack,
              .what = cause::rdma_stack_mismatch,
              .confirmed = yes,
              .summary =
                  +[](const case_ctx& c) {
                    return fmt::format("{} got EINVAL and {}", c.call(), c.stack_mismatch_text());
                  },
              .fix = mismatch_fix,
              .fallback = k_tcp_fallback},
    cause_row{.err = EINVAL,
              .names = "ibv_modify_qp",
              .evidence = k_stack,
              .summary = "ibv_modify_qp got EINVAL: the QP attributes do not fit the port (on RoCE usually the GID "
                         "index, on IB a port that is not ACTIVE)",
              .fix = "check the port state (`mrcheck report`, ibstat) and, on RoCE, set NCCL_IB_GID_INDEX to a RoCE v2 "
                     "GID",
              .fallback = k_tcp_fallback},
    cause_row{.err = EINVAL,
              .evidence = k_stack,
              .summary =
                  +[](const case_ctx& c) {
                    return fmt::format(
                        "{} got EINVAL: the kernel rejected the arguments (address vs iova page offset, "
                        "access flags the device does not support, zero or overflowing size); NCCL's calls "
                        "are page-aligned, so this usually points at the driver stack",
                        c.call());
                  },
              .fix = "run `mrcheck report` to check mlx5_core vs rdma-core vs NVIDIA driver; as an experiment set "
                     "NCCL_IB_PCI_RELAXED_ORDERING=0 (it did not help in NVIDIA/nccl #1842)",
              .fallback = k_tcp_fallback},
    // EOPNOTSUPP on a call that is not a DMA-BUF registration (those are causes_gpu.cpp's).
    cause_row{.err = {EOPNOTSUPP, EPROTONOSUPPORT},
              .when = mismatch,
              .evidence = k_stack,
              .what = cause::rdma_stack_mismatch,
              .confirmed = yes,
              .summary =
                  +[](const case_ctx& c) {
                    return fmt::format("{} got {} and {}", c.call(), errno_name(c.f.err), c.stack_mismatch_text());
                  },
              .fix = mismatch_fix,
              .fallback = k_tcp_fallback},
    cause_row{.err = {EOPNOTSUPP, EPROTONOSUPPORT},
              .evidence = k_stack,
              .summary =
                  +[](const case_ctx& c) {
                    return fmt::format(
                        "{} got {}: the provider or kernel does not implement this request (no matching "
                        "libibverbs provider for the device, or an access flag such as ODP the device "
                        "lacks)",
                        c.call(), errno_name(c.f.err));
                  },
              .fix = "run `mrcheck report` to check that the rdma-core provider (libmlx5) matches the kernel driver",
              .fallback = k_tcp_fallback},
    // ENODEV from a call on a device that is already open (modify_qp, create_qp): the device exists; its port or
    // GID does not work for this QP (NVIDIA/nccl #925).
    cause_row{.err = {ENODEV, ENXIO},
              .call_class = calls::opened_device,
              .evidence = k_device,
              .summary =
                  +[](const case_ctx& c) {
                    return fmt::format(
                        "{} got {} on a device NCCL had already opened: the device exists, but the port or "
                        "GID the QP was moved to is not usable (a port that is down, on RoCE a GID index "
                        "with no address, or the netdev missing from the container's network namespace)",
                        c.call(), errno_name(c.f.err));
                  },
              .fix = "check port state and GIDs (`mrcheck report`, `ibv_devinfo -v`); on RoCE set NCCL_IB_GID_INDEX to "
                     "a RoCE v2 GID with an address, and run containers with the host network namespace",
              .fallback = k_tcp_fallback},
    cause_row{.err = {ENODEV, ENXIO},
              .evidence = k_device,
              .what = cause::no_rdma_device,
              .confirmed = no_devices,
              .summary = no_device_summary,
              .fix = k_no_device_fix},
    cause_row{.kind = k::no_device,
              .evidence = {lines::versions, lines::device_count},
              .what = cause::no_rdma_device,
              .confirmed = no_devices,
              .summary = no_device_summary,
              .fix = k_no_device_fix},
    efa_not_found(ENODATA),
    efa_not_found(0),
    // NCCL prints no errno here; the device exists in sysfs but cannot be opened: /dev/infiniband missing or not
    // accessible (a container without --device=/dev/infiniband), or the provider library is absent.
    cause_row{.err = 0,
              .names = "ibv_open_device|ibv_get_device_list",
              .evidence = k_device,
              .what = cause::no_rdma_device,
              .confirmed = no_devices,
              .summary =
                  +[](const case_ctx& c) {
                    return fmt::format(
                        "{} failed: the RDMA device is listed but cannot be opened (/dev/infiniband not "
                        "passed into the container, permissions, or no libibverbs provider for it)",
                        c.f.call);
                  },
              .fix = k_no_device_fix},
    cause_row{.err = 0,
              .evidence = {lines::call_errno, lines::limits},
              .summary =
                  +[](const case_ctx& c) {
                    return fmt::format("{} failed and the log does not say with which errno", c.call());
                  },
              .fix =
                  +[](const case_ctx& c) {
                    return std::string(
                        is_registration(c.f.call) || is_queue_call(c.f.call)
                            ? "run `mrcheck probe mr` as the job user on that node (registers memory the "
                              "way NCCL does and names the errno), or rerun with NCCL_DEBUG=INFO "
                              "NCCL_DEBUG_SUBSYS=INIT,NET"
                            : "rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET to see the errno");
                  },
              .fallback = k_tcp_fallback},
    // Every other errno (ENODATA from anything but fi_getinfo included): named, with the two checks that find most.
    cause_row{.evidence = {lines::call_errno},
              .summary =
                  +[](const case_ctx& c) { return fmt::format("{} failed with {}", c.call(), errno_text(c.f.err)); },
              .fix = "run `mrcheck report` and `mrcheck probe mr` on that node",
              .fallback = k_tcp_fallback},
};

}  // namespace

std::span<const cause_row> stack_rows() { return k_rows; }

}  // namespace mrcheck::cause_rows
