// errno + node evidence -> cause, summary, evidence, fix. diagnose() takes the first cause row that matches the
// failure (src/explain/causes/cause_rows.h; the rows by family in causes_*.cpp). The rules follow
// docs/facts/verbs-and-nccl.md §2 (where each errno comes from in the kernel) and the reports cited in
// docs/facts/verbs-and-nccl.md §3; every row has a unit test.
#include <mrcheck/diagnosis.h>

#include "cause_rows.h"

#include <mrcheck/owner.h>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace mrcheck {

namespace {

using namespace cause_rows;

// The families in the order they are tried. The HCA's own limits lead the memory family and come before every
// errno row; the stack family ends with the row that takes every other errno.
constexpr std::array k_families = {own_rows, nccl_rows, memory_rows, gpu_rows, stack_rows};

diagnosis apply(const cause_row& row, const case_ctx& c) {
  diagnosis d;
  add_lines(c, row.evidence, d.evidence);
  d.what = row.what;
  d.confirmed = row.confirmed(c);
  d.summary = row.summary(c);
  d.fix = row.fix(c);
  d.fallback = std::string(row.fallback);
  d.owner = row.owner;
  return d;
}

// The owner of mrcheck's own verdict: the one its line names ("set by srun's propagation (job)"), else its check's
// (owner.h). The job's own stays unnamed, as in every row (docs/schema/explain.schema.json).
fix_owner own_owner(const failure& f) {
  fix_owner o = default_owner(f.call);
  for (fix_owner named : {fix_owner::job, fix_owner::node, fix_owner::site}) {
    if (f.detail.find(fmt::format("({})", to_string(named))) != std::string::npos) o = named;
  }
  return o == fix_owner::job ? fix_owner::none : o;
}

// The fallback must fit the transport: NCCL_IB_DISABLE=1 does nothing under aws-ofi-nccl or in UCX.
diagnosis finish(diagnosis d, const failure& f) {
  if (f.what == failure::kind::own_verdict) d.owner = own_owner(f);
  if (d.fallback.empty()) return d;
  if (is_ofi_family(f)) {
    d.fallback = std::string(k_net_plugin_fallback);
  } else if (f.transport == "ucx") {
    d.fallback = std::string(k_ucx_fallback);
  }
  return d;
}

}  // namespace

bool is_ofi_family(const failure& f) {
  return f.transport == "ofi" || f.transport == "libfabric" ||
         (f.transport == "kernel" && f.provider.starts_with("efa"));
}

std::string_view to_string(cause c) {
  switch (c) {
    case cause::memlock: return "memlock";
    case cause::capability: return "capability";
    case cause::pinning_resources: return "pinning_resources";
    case cause::rdma_stack_mismatch: return "rdma_stack_mismatch";
    case cause::gpu_peer_memory: return "gpu_peer_memory";
    case cause::dmabuf_unsupported: return "dmabuf_unsupported";
    case cause::duplicate_gpu: return "duplicate_gpu";
    case cause::no_rdma_device: return "no_rdma_device";
    case cause::unknown: return "unknown";
    case cause::hca_resources: return "hca_resources";
    case cause::gpu_out_of_memory: return "gpu_out_of_memory";
    case cause::imex_channel: return "imex_channel";
    case cause::socket_interface: return "socket_interface";
    case cause::stack_limit: return "stack_limit";
    case cause::open_files: return "open_files";
    case cause::gpu_peer_limit: return "gpu_peer_limit";
    case cause::data_plane: return "data_plane";
  }
  return "unknown";
}

std::string_view hca_object(std::string_view call) {
  auto has = [&](std::string_view w) { return call.find(w) != std::string_view::npos; };
  if (has("devx_alloc_uar") || has("alloc_uar") || call == "ibv_open_device") return "uar";
  if (has("devx_obj_create")) return "devx";
  if (has("alloc_pd")) return "pd";
  if (has("create_qp") || call == "fi_enable" || call == "fi_endpoint") return "qp";
  if (has("create_cq") || call == "fi_cq_open") return "cq";
  if (has("mkey") || has("reg_mr") || has("mr_reg") || has("reg_dmabuf")) return "mkey";
  return {};
}

std::string_view to_string(rdma_flavour f) {
  switch (f) {
    case rdma_flavour::inbox: return "inbox";
    case rdma_flavour::ofed: return "MLNX/DOCA-OFED";
    case rdma_flavour::unknown: return "unknown";
  }
  return "unknown";
}

diagnosis diagnose(const failure& f, const node_evidence& given) {
  // A limit the failing process printed itself (UCX: "Please set max locked memory (ulimit -l) to 'unlimited'
  // (current: 64 kbytes)") is the task's own: it wins over the limit of another process (memlock_source set:
  // explain's own shell, a --root tree's pid), whose hard limit, hop and CAP_IPC_LOCK then say nothing about the
  // task either. Evidence of the failed task itself (memlock_source empty) is not replaced.
  node_evidence with_log_limit;
  const bool use_log_limit = f.log_memlock && (!given.memlock_soft || !given.memlock_source.empty());
  if (use_log_limit) {
    with_log_limit = given;
    with_log_limit.memlock_soft = *f.log_memlock;
    with_log_limit.memlock_hard.reset();
    with_log_limit.memlock_hop.clear();
    with_log_limit.cap_ipc_lock.reset();
    with_log_limit.is_root.reset();
    with_log_limit.memlock_source = "the failed process (its own message)";
  }
  const case_ctx c{f, use_log_limit ? with_log_limit : given};
  for (auto family : k_families) {
    for (const cause_row& row : family()) {
      if (row.match(c)) return finish(apply(row, c), f);
    }
  }
  return {};  // not reached: every kind has a last row that matches whatever is left
}

void to_json(nlohmann::json& j, const diagnosis& d) {
  j = nlohmann::json{{"cause", to_string(d.what)},
                     {"confirmed", d.confirmed},
                     {"summary", d.summary},
                     {"evidence", d.evidence},
                     {"fix", d.fix},
                     {"fallback", d.fallback}};
  if (d.owner != fix_owner::none) j["owner"] = to_string(d.owner);
}

}  // namespace mrcheck
