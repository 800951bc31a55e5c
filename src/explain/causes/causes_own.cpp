// The cause rows of mrcheck's own FAIL lines (src/explain/causes/cause_rows.h): a job log that holds the plugin's or
// a probe's verdict ("mrcheck: data_plane: FAIL: ... (fix: ...)", src/report/check.cpp failure_lines) is explained by
// that verdict: the check measured the cause, so its words are the summary and its fix is the fix. Which cause a
// check id stands for follows the checks' own families (README.md, "Checks").
#include "cause_rows.h"

#include <fmt/format.h>

namespace mrcheck::cause_rows {

namespace {

using k = failure::kind;

bool says(const case_ctx& c, std::string_view w) { return c.f.detail.find(w) != std::string::npos; }

std::string own_summary(const case_ctx& c) {
  return fmt::format("mrcheck's {} check failed: {}", c.f.call, c.f.detail);
}

std::string own_fix(const case_ctx& c) {
  if (!c.f.fix_given.empty()) return c.f.fix_given;
  return fmt::format("run `mrcheck report` (or `mrcheck probe`) on the node for the {} check's fix", c.f.call);
}

// A row for the checks whose id names the cause; the registration probes say the cause in their summary instead.
constexpr cause_row own(std::string_view names, cause what, predicate when = yes) {
  return {.kind = k::own_verdict,
          .names = names,
          .when = when,
          .what = what,
          .confirmed = yes,
          .summary = own_summary,
          .fix = own_fix};
}

constexpr std::string_view k_probes = "mr_host|mr_gpu|container_mr";

const cause_row k_rows[] = {
    own("memlock|memlock_exec|slurmd_memlock|propagate_limits", cause::memlock),
    own("stack", cause::stack_limit),
    own("nofile", cause::open_files),
    own("max_map_count|hugepages|bar1", cause::pinning_resources),
    own("rdma_stack", cause::rdma_stack_mismatch),
    own("gpudirect", cause::gpu_peer_memory),
    own("dmabuf", cause::dmabuf_unsupported),
    own("mnnvl|imex_channel", cause::imex_channel),
    own("data_plane", cause::data_plane),
    own(k_probes, cause::memlock,
        [](const case_ctx& c) { return says(c, "memlock") || says(c, "MEMLOCK") || says(c, "locked memory"); }),
    own(k_probes, cause::dmabuf_unsupported, [](const case_ctx& c) { return says(c, "DMA-BUF"); }),
    own(k_probes, cause::gpu_peer_memory,
        [](const case_ctx& c) { return says(c, "peer memory") || says(c, "peermem"); }),
    // Every other check (firmware, drivers, the NCCL pair...): its own words, no cause of the taxonomy.
    cause_row{.kind = k::own_verdict, .what = cause::unknown, .summary = own_summary, .fix = own_fix},
};

}  // namespace

std::span<const cause_row> own_rows() { return k_rows; }

}  // namespace mrcheck::cause_rows
