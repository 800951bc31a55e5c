// The one list of checks (check_registry.h). Adding a check: write src/checks/<id>.cpp (its function declared in
// include/mrcheck/checks.h, or matrix.h for a rule-judged one), add its row here and its row in README.md's check
// table. check_registry_test compares the two and derives each front end's list from the rows, so nothing else
// changes: `mrcheck report`, mrcheck-prolog, the JSON and the Prometheus textfile list it by its group.
#include <mrcheck/check_registry.h>

#include <mrcheck/checks.h>
#include <mrcheck/config.h>
#include <mrcheck/fabric.h>
#include <mrcheck/limit_chain.h>
#include <mrcheck/matrix.h>
#include <mrcheck/memlock_chain.h>

#include "checks/matrix_checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace mrcheck {

namespace {

// A check whose inputs the caller did not give: the checker's own error, never a verdict about the node.
check_result missing(std::string_view id, std::string_view what) {
  check_result r;
  r.id = std::string(id);
  r.result = verdict::error;
  r.summary = fmt::format("not run: {} not given", what);
  return r;
}

// The owner of the hop that lowered the task's memlock (memlock_hop.h): the submit side is the job's, slurmd and
// slurmstepd the node's, the task's setup (another plugin, a runtime) the site's. none: the check's own.
fix_owner memlock_hop_owner(memlock_hop h) {
  switch (h) {
    case memlock_hop::submit_host:
    case memlock_hop::job_script:
    case memlock_hop::submit_unknown: return fix_owner::job;
    case memlock_hop::slurmd:
    case memlock_hop::step_daemon: return fix_owner::node;
    case memlock_hop::task_setup: return fix_owner::site;
    case memlock_hop::none:
    case memlock_hop::enforced: return fix_owner::none;
  }
  return fix_owner::none;
}

check_result run_memlock(const check_inputs& in) {
  if (in.task && in.task->prediction) {
    check_result r = judge_memlock(*in.task->prediction, in.task->required, in.task->enf);
    if (r.result == verdict::fail || r.result == verdict::warn) r.owner = memlock_hop_owner(in.task->prediction->hop);
    return r;
  }
  if (!in.facts || !in.cfg) return missing("memlock", "the process chain and the config");
  return check_memlock(*in.facts, *in.cfg);
}

// stack and nofile: the plugin's prediction for the task, else the calling process's chain.
template <check_result (*F)(const node_facts&, const config&)>
check_result run_limit(const check_inputs& in, rlimit_kind k) {
  const auto id = rlimit_info(k).id;
  if (in.task) {
    const limit_prediction* p = k == rlimit_kind::stack ? in.task->stack : in.task->nofile;
    if (!p || !p->made || p->kind != k) {
      // The plugin predicts both whenever it predicts memlock (node_privileged); a caller that gave memlock's
      // prediction alone asked for memlock alone.
      check_result r = missing(id, "the task's prediction");
      r.result = verdict::skip;
      return r;
    }
    if (!in.cfg) return missing(id, "the config");
    return judge_task_limit(*p, *in.cfg);
  }
  if (!in.facts || !in.cfg) return missing(id, "the process chain and the config");
  return F(*in.facts, *in.cfg);
}

// The rule-judged checks read node_facts and the rules; rdma_stack and propagate_limits may also read the
// matrix facts.
template <check_result (*F)(const node_facts&, const matrix_rules&)>
check_result with_rules(const check_inputs& in, std::string_view id) {
  if (!in.facts || !in.rules) return missing(id, "the node facts and the rules");
  return F(*in.facts, *in.rules);
}

#define MRCHECK_RULES_CHECK(NAME, FN) [](const check_inputs& in) { return with_rules<FN>(in, NAME); }

check_result run_rdma_stack(const check_inputs& in) {
  if (!in.facts || !in.rules) return missing("rdma_stack", "the node facts and the rules");
  return matrix::check_rdma_stack(*in.facts, *in.rules, in.extra);
}

check_result run_mnnvl(const check_inputs& in) {
  if (!in.facts) return missing("mnnvl", "the node facts");
  if (in.extra && in.extra->mnnvl) return check_mnnvl(*in.extra->mnnvl);
  // Node facts without the matrix facts (judged without them, as propagate_limits is): not asked, no verdict.
  check_result r = missing("mnnvl", "NVML's fabric facts");
  r.result = verdict::skip;
  return r;
}

check_result run_propagate_limits(const check_inputs& in) {
  if (!in.rules) return missing("propagate_limits", "the rules");
  return matrix::check_propagate_limits(*in.rules, in.extra);
}

const auto k_checks = std::to_array<check_def>({
    {"memlock", check_group::memlock,
     "soft RLIMIT_MEMLOCK of the caller (or of the Slurm task, in the plugin) against memlock_min; names the hop "
     "that lowered it",
     run_memlock},
    {"stack", check_group::memlock,
     "soft RLIMIT_STACK of the caller (or of the Slurm task) within stack_max; names the hop that set it and its "
     "owner",
     [](const check_inputs& in) { return run_limit<check_stack>(in, rlimit_kind::stack); }},
    {"nofile", check_group::memlock,
     "soft RLIMIT_NOFILE of the caller (or of the Slurm task) at least nofile_min; names the hop that set it and "
     "its owner",
     [](const check_inputs& in) { return run_limit<check_nofile>(in, rlimit_kind::nofile); }},
    {"rdma_stack", check_group::matrix, "kernel mlx5_core/ib_core (inbox or OFED) and user-space rdma-core agree",
     run_rdma_stack},
    {"hca_fw", check_group::matrix, "HCA firmware at least the minimum of its family",
     MRCHECK_RULES_CHECK("hca_fw", matrix::check_hca_fw)},
    {"gpu_driver", check_group::matrix, "NVIDIA driver loaded, of the flavour the site requires",
     MRCHECK_RULES_CHECK("gpu_driver", matrix::check_gpu_driver)},
    {"gpudirect", check_group::matrix, "nvidia_peermem or DMA-BUF usable on a node with an HCA and a GPU",
     MRCHECK_RULES_CHECK("gpudirect", matrix::check_gpudirect)},
    {"cuda_driver", check_group::matrix, "CUDA driver at least the minimum, where installed",
     MRCHECK_RULES_CHECK("cuda_driver", matrix::check_cuda_driver)},
    {"nccl", check_group::matrix, "the job's NCCL (else the system's) at least the minimum",
     MRCHECK_RULES_CHECK("nccl", matrix::check_nccl)},
    {"bar1", check_group::matrix, "GPU BAR1 aperture at least the GPU's memory",
     MRCHECK_RULES_CHECK("bar1", matrix::check_bar1)},
    {"slurmd_memlock", check_group::matrix, "slurmd's RLIMIT_MEMLOCK (every task's hard limit)",
     MRCHECK_RULES_CHECK("slurmd_memlock", matrix::check_slurmd_memlock)},
    {"mnnvl", check_group::matrix,
     "GPUs that report a multi-node NVLink fabric have it completed and healthy, with the IMEX daemon running",
     run_mnnvl},
    {"propagate_limits", check_group::matrix, "slurm.conf keeps MEMLOCK from propagating from the submit host",
     run_propagate_limits},
    {"max_map_count", check_group::memory, "vm.max_map_count",
     MRCHECK_RULES_CHECK("max_map_count", check_max_map_count)},
    {"hugepages", check_group::memory, "the hugepage pool leaves memory to pin",
     MRCHECK_RULES_CHECK("hugepages", check_hugepages)},
    {"mr_host", check_group::mr, "register host memory the way NCCL does", nullptr, check_origin::probe},
    {"dmabuf", check_group::mr, "DMA-BUF registration support, probed like NCCL", nullptr, check_origin::probe},
    {"mr_gpu", check_group::mr, "register GPU memory (peer memory and DMA-BUF)", nullptr, check_origin::probe},
    {"mnnvl_handle", check_group::mr,
     "on GPUs that report a multi-node NVLink fabric: a fabric-handle buffer made, exported and imported as NCCL does",
     nullptr, check_origin::probe},
    {"nccl_pair", check_group::nccl, "two NCCL ranks initialise and all-reduce", nullptr, check_origin::probe},
    {"data_plane", check_group::rdma,
     "an RC queue pair through INIT/RTR/RTS on each active port: send/recv and RDMA write, bytes verified "
     "(loopback; and with the next node of a multi-node step)",
     nullptr, check_origin::probe},
    // A task in its container (src/container/, docs/containers.md): the plugin's probe groups come from the
    // container helper instead of `mrcheck probe`.
    {"container", check_group::mr, "the image's rdma-core and devices against the host's kernel", nullptr,
     check_origin::container},
    {"container_mr", check_group::mr, "register memory inside the task's container", nullptr, check_origin::container},
    {"container_nccl", check_group::nccl, "the image's NCCL against the host's CUDA driver", nullptr,
     check_origin::container},
    // After the task's exec (src/step/post_exec.cpp): the task's own limit, lowered after exec, reported in the
    // AdminComment record (spank/plugin.cpp).
    {"memlock_exec", check_group::memlock, "the task's RLIMIT_MEMLOCK after its exec, against memlock_min", nullptr,
     check_origin::post_exec},
    // The same watcher, on a node that serves an IMEX domain: the channel devices the task sees.
    {"imex_channel", check_group::memlock,
     "on a node with IMEX: an IMEX channel in the task's mount namespace after its exec, read-write for the job user",
     nullptr, check_origin::post_exec},
    // mrcheck-prolog after a stack change (prolog/revalidate.h): both probes as nobody.
    {"revalidate", check_group::revalidation,
     "after a stack change, the registration probe, the NCCL pair and the data-plane probe as nobody", nullptr,
     check_origin::prolog},
});

#undef MRCHECK_RULES_CHECK

}  // namespace

std::string_view to_string(check_group g) {
  switch (g) {
    case check_group::memlock: return "memlock";
    case check_group::memory: return "memory";
    case check_group::matrix: return "matrix";
    case check_group::mr: return "mr";
    case check_group::nccl: return "nccl";
    case check_group::rdma: return "rdma";
    case check_group::revalidation: return "revalidation";
  }
  return "unknown";
}

check_inputs node_check_inputs(const node_facts& facts, const matrix_rules& rules, const config* cfg,
                               const matrix_facts* extra) {
  check_inputs in;
  in.facts = &facts;
  in.rules = &rules;
  in.cfg = cfg;
  in.extra = extra;
  return in;
}

const check_def* find_check(std::string_view id) {
  auto it = std::find_if(k_checks.begin(), k_checks.end(), [&](const check_def& d) { return d.id == id; });
  return it == k_checks.end() ? nullptr : &*it;
}

std::vector<std::string_view> check_ids(check_origin origin, check_group group) {
  std::vector<std::string_view> out;
  for (const auto& d : k_checks) {
    if (d.origin == origin && d.group == group) out.push_back(d.id);
  }
  return out;
}

bool from_job_probe(std::string_view id) {
  const check_def* d = find_check(id);
  return d && (d->origin == check_origin::probe || d->origin == check_origin::container);
}

check_selection report_selection() { return {{check_group::memlock, check_group::memory, check_group::matrix}}; }
check_selection prolog_selection() { return {{check_group::matrix, check_group::memory}}; }

check_selection plugin_selection(const check_groups& g, bool first_task) {
  check_selection s;
  if (g.memlock) s.groups.push_back(check_group::memlock);
  if (first_task && g.mr) s.groups.push_back(check_group::mr);
  if (first_task && g.nccl) s.groups.push_back(check_group::nccl);
  if (first_task && g.rdma) s.groups.push_back(check_group::rdma);
  return s;
}

namespace {

// The selection's groups without repeats, in its order.
std::vector<check_group> distinct(const check_selection& s) {
  std::vector<check_group> out;
  for (auto g : s.groups) {
    if (std::find(out.begin(), out.end(), g) == out.end()) out.push_back(g);
  }
  return out;
}

bool is_probe(check_group g) { return g == check_group::mr || g == check_group::nccl || g == check_group::rdma; }

// Made by run_checks (itself or through check_inputs::probe); post_exec and prolog checks are made elsewhere.
bool selectable(const check_def& d) { return d.origin != check_origin::post_exec && d.origin != check_origin::prolog; }

}  // namespace

std::vector<std::string_view> selected_ids(const check_selection& s) {
  std::vector<std::string_view> ids;
  for (auto g : distinct(s)) {
    for (const auto& d : k_checks) {
      if (d.group == g && selectable(d)) ids.push_back(d.id);
    }
  }
  return ids;
}

report run_checks(const check_selection& s, const check_inputs& in) {
  report r;
  for (auto g : distinct(s)) {
    if (is_probe(g)) {
      if (!in.probe) continue;
      for (auto& c : in.probe(g)) r.checks.push_back(std::move(c));
      continue;
    }
    for (const auto& d : k_checks) {
      if (d.group == g && d.run) r.checks.push_back(d.run(in));
    }
  }
  return r;
}

}  // namespace mrcheck
