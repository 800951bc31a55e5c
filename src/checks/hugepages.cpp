// hugepages. NCCL does not need hugepages; RDMA registration of hugepage-backed memory pins fewer, larger
// pages, and some stacks (UCX, DPDK, MLNX "HUGE" allocations) use them when reserved. Two things go wrong:
// - The reserved pool is memory nothing else can use: pages in the persistent pool are not available for
//   ordinary (4 KiB) allocations (kernel Documentation/admin-guide/mm/hugetlbpage.rst), so the kernel,
//   slurmd, the job's pinned host buffers (cudaHostAlloc, NCCL's proxy buffers) and every registration of
//   ordinary memory share what is left, and run into ENOMEM first. Above hugepages.reserved_max percent of
//   MemTotal (default 90) the node fails, above hugepages.reserved_warn (default 50) it warns. No vendor
//   publishes a figure; these are mrcheck's (etc/README.rules.md).
// - A reserved pool that is used up: whoever reserved it expects pages to be there (warn).
#include <mrcheck/checks.h>
#include <mrcheck/matrix.h>

#include <fmt/format.h>

#include <cstdint>

namespace mrcheck {

namespace {

__extension__ using u128 = unsigned __int128;

// Whether `part` is above `pct` percent of `whole`, exactly (part * 100 > pct * whole), in 128 bits: the
// values come from /proc/meminfo and a corrupt file must not wrap around into a pass.
bool above_pct(u128 part, std::uint64_t whole, std::uint64_t pct) { return part * 100 > u128{pct} * whole; }

}  // namespace

check_result check_hugepages(const node_facts& f, const matrix_rules& rules) {
  check_result r;
  r.id = "hugepages";
  if (rules.hugepages == rule_action::off) {
    r.result = verdict::skip;
    r.summary = "off in the rules";
    return r;
  }
  if (!f.hugepages) {
    r.result = verdict::error;
    r.summary = fmt::format("could not read /proc/meminfo: {}", f.hugepages.error().message());
    return r;
  }
  const hugepages_fact& h = *f.hugepages;
  u128 reserved_exact = u128{h.total} * h.page_size;
  std::uint64_t reserved = reserved_exact > UINT64_MAX ? UINT64_MAX : static_cast<std::uint64_t>(reserved_exact);
  r.detail = fmt::format("HugePages_Total {} HugePages_Free {} Hugepagesize {} MemTotal {} MemAvailable {}", h.total,
                         h.free, format_bytes(h.page_size), format_bytes(h.mem_total), format_bytes(h.mem_available));
  if (h.total == 0) {
    r.result = verdict::pass;
    r.summary = "no hugepages reserved (NCCL does not need them)";
    return r;
  }
  // Whole percent for the summary, rounded down (the comparison above is exact).
  std::uint64_t pct = 0;
  if (h.mem_total) {
    u128 p = reserved_exact * 100 / h.mem_total;
    pct = p > UINT64_MAX ? UINT64_MAX : static_cast<std::uint64_t>(p);
  }
  std::string shrink =
      "lower vm.nr_hugepages (sysctl -w vm.nr_hugepages=N, and in /etc/sysctl.d/ or the hugepages= kernel "
      "parameter) to what the node's jobs really use";
  if (h.mem_total && rules.hugepages_reserved_max_pct &&
      above_pct(reserved_exact, h.mem_total, *rules.hugepages_reserved_max_pct)) {
    r.result = rules.hugepages == rule_action::warn ? verdict::warn : verdict::fail;
    r.summary = fmt::format("{} hugepages ({}) reserved = {}% of memory > {}%", h.total, format_bytes(reserved), pct,
                            *rules.hugepages_reserved_max_pct);
    r.hint = std::move(shrink);
    return r;
  }
  if (h.mem_total && rules.hugepages_reserved_warn_pct &&
      above_pct(reserved_exact, h.mem_total, *rules.hugepages_reserved_warn_pct)) {
    r.result = verdict::warn;
    r.summary = fmt::format("{} hugepages ({}) reserved = {}% of memory > {}%", h.total, format_bytes(reserved), pct,
                            *rules.hugepages_reserved_warn_pct);
    r.hint = std::move(shrink);
    return r;
  }
  if (h.free < rules.hugepages_free_min) {
    r.result = verdict::warn;
    r.summary = h.free == 0
                    ? fmt::format("all {} hugepages ({}) are in use", h.total, format_bytes(reserved))
                    : fmt::format("{} of {} hugepages free, fewer than {}", h.free, h.total, rules.hugepages_free_min);
    r.hint =
        "raise vm.nr_hugepages if a job here expects free hugepages, or find who holds them (grep Huge /proc/*/smaps)";
    return r;
  }
  r.result = verdict::pass;
  r.summary = fmt::format("{} of {} hugepages of {} free ({} reserved, {}% of memory)", h.free, h.total,
                          format_bytes(h.page_size), format_bytes(reserved), pct);
  return r;
}

}  // namespace mrcheck
