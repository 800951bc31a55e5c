// max_map_count: the per-process limit on memory map areas (VMAs).
//
// Why it matters here: libibverbs calls ibv_dontfork_range() (madvise MADV_DONTFORK) on every registered
// range (docs/facts/verbs-and-nccl.md §1, rdma-core libibverbs/verbs.c), which splits VMAs at the range edges, and
// NCCL, CUDA and PyTorch's caching allocators add many mappings of their own; a process past the limit gets ENOMEM from
// mmap/madvise although memory is free (see e.g. https://alex-cheng.github.io/2022/11/30/max_map_count.html).
// The kernel default is 65530 (DEFAULT_MAX_MAP_COUNT = USHRT_MAX - MAPCOUNT_ELF_CORE_MARGIN,
// include/linux/mm.h). No NCCL or rdma-core document gives a figure (searched: none found); 262144 is the
// minimum that memory-heavy servers document (Elasticsearch's bootstrap check; memgraph recommends one map
// per 128 KiB of RAM, https://github.com/memgraph/documentation/pull/1417), and the H200 node measured in
// docs/facts/nccl-test-harness.md §4 ships 8250344. So by default (etc/mrcheck-rules.conf, README.rules.md): warn below
// 262144, and fail only below the kernel default - a value someone lowered on purpose, which no distribution does.
#include <mrcheck/checks.h>
#include <mrcheck/matrix.h>

#include <fmt/format.h>

namespace mrcheck {

check_result check_max_map_count(const node_facts& f, const matrix_rules& rules) {
  check_result r;
  r.id = "max_map_count";
  if (rules.max_map_count == rule_action::off) {
    r.result = verdict::skip;
    r.summary = "off in the rules";
    return r;
  }
  if (!f.max_map_count) {
    r.result = verdict::error;
    r.summary = fmt::format("could not read vm.max_map_count: {}", f.max_map_count.error().message());
    return r;
  }
  std::uint64_t v = *f.max_map_count;
  const char* why = v == 65530 ? " (kernel default)" : "";
  std::string fix = fmt::format("sysctl -w vm.max_map_count={0} and 'vm.max_map_count = {0}' in /etc/sysctl.d/",
                                std::max<std::uint64_t>(1048576, rules.max_map_count_recommended.value_or(0)));
  if (rules.max_map_count_min && v < *rules.max_map_count_min) {
    r.result = rules.max_map_count == rule_action::warn ? verdict::warn : verdict::fail;
    r.summary = fmt::format("vm.max_map_count {} < {}{}", v, *rules.max_map_count_min, why);
    r.detail =
        "below the kernel default: processes with many mappings (CUDA, NCCL, registered buffers) get "
        "ENOMEM from mmap/madvise although memory is free";
    r.hint = std::move(fix);
    return r;
  }
  if (rules.max_map_count_recommended && v < *rules.max_map_count_recommended) {
    r.result = verdict::warn;
    r.summary = fmt::format("vm.max_map_count {} < {}{}", v, *rules.max_map_count_recommended, why);
    r.detail = "large jobs with many registered buffers can run out of memory map areas (mmap/madvise ENOMEM)";
    r.hint = std::move(fix);
    return r;
  }
  r.result = verdict::pass;
  r.summary = rules.max_map_count_recommended
                  ? fmt::format("vm.max_map_count {} >= {}", v, *rules.max_map_count_recommended)
                  : fmt::format("vm.max_map_count {}", v);
  return r;
}

}  // namespace mrcheck
