// Re-validation after a change (README "What changed"): the first time mrcheck-prolog sees a changed stack it runs
// the registration probe (`mrcheck probe mr`), the NCCL pair (`mrcheck probe nccl`: local-pair on a node with
// one GPU, gpu-pair on a node with two or more, so the NET path between two GPUs is what is tested) and the
// data-plane probe (`mrcheck probe rdma`, include/mrcheck/rdma_probe.h) as `nobody`, each in a child bounded by
// probe_timeout / nccl_timeout (include/mrcheck/child.h), before the node
// takes a job. The result is a check of its own, `revalidate`: a failure drains with the change named, a pass is
// recorded in the history so later runs do not repeat it.
#pragma once

#include <mrcheck/check.h>
#include <mrcheck/config.h>
#include <mrcheck/facts.h>
#include <mrcheck/history.h>
#include <mrcheck/nccl_probe.h>

namespace mrcheck::prolog {

inline constexpr const char* k_revalidate_id = "revalidate";

// revalidate=never: no; always: yes; on_change: when the history has a change and this stack has not passed yet.
bool revalidation_due(const std::string& policy, const stack_history& h);
// The NCCL pair's mode for this node: choose_nccl_mode (src/nccl/mode.cpp) over the NVIDIA GPUs the facts found
// (the prolog runs before the job, as root: every GPU of the node is free); local-pair when none were found, and
// the probe says why it skips.
nccl_mode revalidation_nccl_mode(const node_facts& f);
// Runs the three probes through cfg.helper_path(), the NCCL pair in `mode`; pass, fail (a probe failed or timed out),
// skip (nothing to probe here, or no helper) or error (a probe crashed or printed no verdict).
check_result run_revalidation(const config& cfg, nccl_mode mode = nccl_mode::local_pair);

}  // namespace mrcheck::prolog
