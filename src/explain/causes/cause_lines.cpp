// The evidence lines a cause row lists (src/explain/causes/cause_rows.h, `lines`): each group states what was known about
// the failure and the node, and only what was known.
#include "cause_rows.h"

#include <mrcheck/units.h>

#include <fmt/format.h>

namespace mrcheck::cause_rows {

namespace {

using out_lines = std::vector<std::string>;

void call_errno_lines(const failure& f, out_lines& out) {
  if (f.err != 0) {
    out.push_back(fmt::format("{} failed with {}", call_or(f.call), errno_text(f.err)));
  } else if (!f.call.empty()) {
    out.push_back(fmt::format("{} failed; the errno is not known", f.call));
  }
  if (f.size) {
    out.push_back(fmt::format("size: {} of {} memory", format_bytes(*f.size),
                              f.gpu_buffer ? (*f.gpu_buffer ? "GPU" : "host") : "unknown"));
  }
}

void limit_lines(const node_evidence& e, out_lines& out) {
  std::string who = e.memlock_source.empty() ? "the task" : e.memlock_source;
  if (e.memlock_soft) {
    std::string line = fmt::format("RLIMIT_MEMLOCK of {}: soft {}", who, limit_text(*e.memlock_soft));
    if (e.memlock_hard) line += fmt::format(", hard {}", limit_text(*e.memlock_hard));
    out.push_back(std::move(line));
  } else {
    out.push_back(fmt::format("RLIMIT_MEMLOCK of {}: not known (check `srun bash -c 'ulimit -l'`)", who));
  }
  if (!e.memlock_hop.empty()) out.push_back(fmt::format("lowered at: {}", e.memlock_hop));
  if (e.cap_ipc_lock) {
    out.push_back(*e.cap_ipc_lock ? "CAP_IPC_LOCK: yes (the kernel skips the memlock check)" : "CAP_IPC_LOCK: no");
  } else if (e.is_root && *e.is_root) {
    out.push_back("running as root (normally CAP_IPC_LOCK, which skips the memlock check)");
  }
  if (e.in_container && *e.in_container) {
    out.push_back(e.container_why.empty() ? std::string("running in a container")
                                          : fmt::format("running in a container ({})", e.container_why));
  } else if (!e.container_why.empty()) {
    out.push_back(fmt::format("not counted as a container: {}", e.container_why));
  }
}

void version_lines(const node_evidence& e, out_lines& out) {
  if (e.kernel_stack != rdma_flavour::unknown || !e.kernel_stack_detail.empty()) {
    out.push_back(fmt::format("kernel RDMA stack: {}{}{}", to_string(e.kernel_stack),
                              e.kernel_stack_detail.empty() ? "" : ", ", e.kernel_stack_detail));
  }
  if (e.user_stack != rdma_flavour::unknown || !e.rdma_core_version.empty()) {
    std::string line = fmt::format("user-space rdma-core: {}", e.rdma_core_version.empty() ? "?" : e.rdma_core_version);
    if (e.user_stack != rdma_flavour::unknown) line += fmt::format(" ({})", to_string(e.user_stack));
    if (e.has_iova2) line += fmt::format(", IBVERBS_1.8 {}", *e.has_iova2 ? "yes" : "no");
    if (e.has_dmabuf_mr) line += fmt::format(", IBVERBS_1.12 {}", *e.has_dmabuf_mr ? "yes" : "no");
    out.push_back(std::move(line));
  }
}

void gpu_lines(const node_evidence& e, out_lines& out) {
  if (e.peer_memory) {
    out.push_back(*e.peer_memory ? "peer memory: nvidia_peermem / memory_peers present"
                                 : "peer memory: no nvidia_peermem, no memory_peers client");
  }
  if (e.driver_flavour != nvidia_flavour::unknown || !e.driver_version.empty()) {
    std::string_view fl = e.driver_flavour == nvidia_flavour::open          ? "open kernel modules"
                          : e.driver_flavour == nvidia_flavour::proprietary ? "proprietary kernel module"
                                                                            : "flavour unknown";
    out.push_back(fmt::format("NVIDIA driver {} ({})", e.driver_version.empty() ? "?" : e.driver_version, fl));
  }
}

void resource_lines(const case_ctx& c, out_lines& out) {
  const node_evidence& e = c.e;
  if (e.max_map_count) {
    out.push_back(fmt::format("vm.max_map_count: {}{}", *e.max_map_count,
                              *e.max_map_count <= k_default_max_map_count ? " (the kernel default)" : ""));
  }
  if (e.hugepages_total && *e.hugepages_total > 0) {
    std::string line = fmt::format("hugepages: {} reserved", *e.hugepages_total);
    if (e.hugepages_free) line += fmt::format(", {} free", *e.hugepages_free);
    if (e.hugepage_size) {
      line += fmt::format(" of {} ({} held back from normal allocations)", format_bytes(*e.hugepage_size),
                          format_bytes(*e.hugepages_total * *e.hugepage_size));
    }
    out.push_back(std::move(line));
  } else if (e.hugepages_total) {
    out.push_back("hugepages: none reserved");
  }
  if (e.mem_available) {
    std::string line = fmt::format("MemAvailable: {}", format_bytes(*e.mem_available));
    if (e.mem_total) line += fmt::format(" of {}", format_bytes(*e.mem_total));
    out.push_back(std::move(line));
  }
  if (e.gpu_bar1 && c.f.gpu_buffer.value_or(false)) {
    out.push_back(fmt::format("GPU BAR1: {} (GPU registrations are mapped through it)", format_bytes(*e.gpu_bar1)));
  }
}

void cma_lines(const case_ctx& c, out_lines& out) {
  const node_evidence& e = c.e;
  if (e.cma_free || e.cma_total) {
    out.push_back(
        fmt::format("CmaTotal {}, CmaFree {}{}", e.cma_total ? format_bytes(*e.cma_total) : "?",
                    e.cma_free ? format_bytes(*e.cma_free) : "?",
                    c.cma_suspect() ? " (free CMA pageblocks that a long-term pin must migrate away from)" : ""));
  }
}

std::string completion_head(const failure& f) {
  const int st = f.wc_status.value_or(-1);
  std::string_view name = wc_status_name(st);
  return fmt::format("RDMA completion error {} ({}){}", name.empty() ? "status" : name, st,
                     f.peer.empty() ? "" : fmt::format(" with peer {}", f.peer));
}

void add_line(const case_ctx& c, lines which, out_lines& out) {
  const failure& f = c.f;
  const node_evidence& e = c.e;
  switch (which) {
    case lines::none: return;
    case lines::call_errno: call_errno_lines(f, out); return;
    case lines::warn_errno:
      if (f.err != 0) out.push_back(fmt::format("{} failed with {}", call_or(f.call), errno_text(f.err)));
      return;
    case lines::limits: limit_lines(e, out); return;
    case lines::resources: resource_lines(c, out); return;
    case lines::cma: cma_lines(c, out); return;
    case lines::efa_pages:
      if (c.ofi()) {
        out.push_back(
            "EFA also limits the host pages one device can register (ofiwg/libfabric #9739): with an "
            "unlimited memlock limit that limit is the next suspect");
      }
      return;
    case lines::versions: version_lines(e, out); return;
    case lines::gpu: gpu_lines(e, out); return;
    case lines::device_count:
      if (e.rdma_devices) out.push_back(fmt::format("RDMA devices in /sys/class/infiniband: {}", *e.rdma_devices));
      return;
    case lines::device_list:
      if (!e.rdma_device_list.empty()) out.push_back("RDMA devices of the node: " + e.rdma_device_list);
      return;
    case lines::firmware:
      if (!f.detail.empty()) out.push_back(fmt::format("firmware status: {}", f.detail));
      return;
    case lines::container_only:
      if (c.container()) out.push_back("running in a container");
      return;
    case lines::completion: out.push_back(completion_head(f)); return;
  }
}

}  // namespace

std::string completion_summary_head(const failure& f) { return completion_head(f); }

void add_lines(const case_ctx& c, const line_list& which, std::vector<std::string>& out) {
  for (lines l : which) add_line(c, l, out);
}

}  // namespace mrcheck::cause_rows
