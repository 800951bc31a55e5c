// max_map_count: the per-process limit on memory map areas (VMAs).
//
// Why it matters here: libibverbs calls ibv_dontfork_range() (madvise MADV_DONTFORK) on every registered
// range (facts.md §3.1, rdma-core libibverbs/verbs.c), which splits VMAs at the range edges, and NCCL, CUDA
// and PyTorch's caching allocators add many mappings of their own; a process past the limit gets ENOMEM from
// mmap/madvise although memory is free (see e.g. https://alex-cheng.github.io/2022/11/30/max_map_count.html).
// The kernel default is 65530 (DEFAULT_MAX_MAP_COUNT = USHRT_MAX - MAPCOUNT_ELF_CORE_MARGIN,
// include/linux/mm.h). No NCCL or rdma-core document gives a figure (searched: none found); 262144 is the
// minimum that memory-heavy servers document (Elasticsearch's bootstrap check; memgraph recommends one map
// per 128 KiB of RAM, https://github.com/memgraph/documentation/pull/1417), and the H200 node measured in
// facts.md §6.1 ships 8250344. So: warn below 262144, never fail - it is a ceiling few jobs reach.
#include <mrcheck/checks.h>

#include <fmt/format.h>

namespace mrcheck {

check_result check_max_map_count(const node_facts& f, const config&) {
  check_result r;
  r.id = "max_map_count";
  if (!f.max_map_count) {
    r.result = verdict::error;
    r.summary = fmt::format("could not read vm.max_map_count: {}", f.max_map_count.error().message());
    return r;
  }
  std::uint64_t v = *f.max_map_count;
  if (v >= k_max_map_count_min) {
    r.result = verdict::pass;
    r.summary = fmt::format("vm.max_map_count {} >= {}", v, k_max_map_count_min);
    return r;
  }
  r.result = verdict::warn;
  r.summary = fmt::format("vm.max_map_count {} < {}{}", v, k_max_map_count_min, v == 65530 ? " (kernel default)" : "");
  r.detail = "large jobs with many registered buffers can run out of memory map areas (mmap/madvise ENOMEM)";
  r.hint = fmt::format("sysctl -w vm.max_map_count={0} and 'vm.max_map_count = {0}' in /etc/sysctl.d/", 1048576);
  return r;
}

}  // namespace mrcheck
