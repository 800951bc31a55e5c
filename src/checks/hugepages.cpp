// hugepages: informational. NCCL does not need hugepages; RDMA registration of hugepage-backed memory pins
// fewer, larger pages, and some stacks (UCX, DPDK, MLNX "HUGE" allocations) use them when reserved. A pool
// that is reserved but fully used is worth a warning - whoever reserved it expects pages to be there - and
// reserved hugepages are memory the rest of the node cannot use, which the detail line shows.
#include <mrcheck/checks.h>

#include <fmt/format.h>

namespace mrcheck {

check_result check_hugepages(const node_facts& f, const config&) {
  check_result r;
  r.id = "hugepages";
  if (!f.hugepages) {
    r.result = verdict::error;
    r.summary = fmt::format("could not read /proc/meminfo: {}", f.hugepages.error().message());
    return r;
  }
  const hugepages_fact& h = *f.hugepages;
  std::uint64_t reserved = h.total * h.page_size;
  r.detail = fmt::format("HugePages_Total {} HugePages_Free {} Hugepagesize {} MemTotal {} MemAvailable {}", h.total,
                         h.free, format_bytes(h.page_size), format_bytes(h.mem_total), format_bytes(h.mem_available));
  if (h.total == 0) {
    r.result = verdict::pass;
    r.summary = "no hugepages reserved (NCCL does not need them)";
    return r;
  }
  if (h.free == 0) {
    r.result = verdict::warn;
    r.summary = fmt::format("all {} hugepages ({}) are in use", h.total, format_bytes(reserved));
    r.hint = "raise vm.nr_hugepages if a job here expects free hugepages, or find who holds them (grep Huge /proc/*/smaps)";
    return r;
  }
  r.result = verdict::pass;
  r.summary = fmt::format("{} of {} hugepages of {} free ({} reserved)", h.free, h.total, format_bytes(h.page_size),
                          format_bytes(reserved));
  return r;
}

}  // namespace mrcheck
