// From a probe outcome to evidence, checks, a report and JSON.
#include <mrcheck/child.h>
#include <mrcheck/facts.h>
#include <mrcheck/memlock_chain.h>
#include <mrcheck/memlock_hop.h>
#include <mrcheck/mr_probe.h>
#include <mrcheck/probe_checks.h>
#include <mrcheck/sysroot.h>
#include <mrcheck/units.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <charconv>

namespace mrcheck {

namespace {

// Through the caller's sysroot like every other read (docs/DESIGN.md): a fixture tree stands in for the host in
// tests.
std::optional<std::string> read_small(const sysroot& root, const char* path) {
  auto r = root.read(path);
  if (!r) return std::nullopt;
  return std::move(*r);
}

std::optional<std::uint64_t> meminfo_value(std::string_view text, std::string_view key, bool kib) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    if (!line.starts_with(key) || line.size() <= key.size() || line[key.size()] != ':') continue;
    std::string_view rest = line.substr(key.size() + 1);
    while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
    std::uint64_t v = 0;
    auto r = std::from_chars(rest.data(), rest.data() + rest.size(), v);
    if (r.ec != std::errc()) return std::nullopt;
    return kib ? v * 1024 : v;
  }
  return std::nullopt;
}

}  // namespace

node_evidence probe_evidence(const sysroot& root, const mr_probe_outcome& o, bool deep) {
  // Only when a failure needs explaining: the chain walk (which hop lowered the limit) and the stack facts.
  std::optional<node_facts> facts;
  if (deep) {
    collect_options opts;
    opts.load_libraries = false;
    facts = collect_facts(root, opts);
  }
  evidence_inputs in;
  in.facts = facts ? &*facts : nullptr;
  const own_process_facts own = read_own_process(root);
  in.own = &own;
  node_evidence e = build_evidence(in);
  if (facts) {
    // The same picking rule as evidence_from_facts (memlock_hop.h), naming this process "the probe".
    e.memlock_hop = describe_lowering_hop(facts->chain, "the probe itself");
    // Under Slurm the value usually comes from the submitting shell: slurmstepd applies SLURM_RLIMIT_MEMLOCK
    // (PropagateResourceLimits, docs/facts/memlock.md §1) just before exec, so the chain alone shows only "its
    // launcher". Parsed by the one parser of that variable (parse_propagated_limit).
    auto prop = parse_propagated_limit(o.slurm_rlimit_memlock);
    if (prop && prop->value == o.memlock_soft) {
      e.memlock_hop = fmt::format(
          "the submitting shell: srun/sbatch propagated its `ulimit -l` as SLURM_RLIMIT_MEMLOCK={} "
          "(PropagateResourceLimits), which slurmstepd applied to the task{}",
          o.slurm_rlimit_memlock, e.memlock_hop.empty() ? "" : "; chain: " + e.memlock_hop);
    }
  }
  // What this very process had when it registered - the numbers the kernel compared.
  e.memlock_soft = o.memlock_soft;
  e.memlock_hard = o.memlock_hard;
  e.memlock_source = fmt::format("the probe (pid {}, uid {})", own.pid,
                                 own.euid ? std::to_string(*own.euid) : std::string("unknown"));
  e.is_root = o.is_root;
  if (!e.max_map_count) {
    if (auto m = read_small(root, "/proc/sys/vm/max_map_count")) {
      std::uint64_t v = 0;
      if (std::from_chars(m->data(), m->data() + m->size(), v).ec == std::errc()) e.max_map_count = v;
    }
  }
  if (!e.mem_total) {
    if (auto mi = read_small(root, "/proc/meminfo")) {
      e.mem_total = meminfo_value(*mi, "MemTotal", true);
      e.mem_available = meminfo_value(*mi, "MemAvailable", true);
      e.hugepages_total = meminfo_value(*mi, "HugePages_Total", false);
      e.hugepages_free = meminfo_value(*mi, "HugePages_Free", false);
      e.hugepage_size = meminfo_value(*mi, "Hugepagesize", true);
    }
  }
  if (o.load_error.is_ok() && !o.library.empty()) {
    e.has_iova2 = o.iova2;
    e.has_dmabuf_mr = o.dmabuf_symbol;
  }
  // NCCL's own peer-memory test ([N] net_ib.cc ibGdrSupportInitOnce).
  bool client = root.exists("/sys/kernel/mm/memory_peers/nv_mem/version") ||
                root.exists("/sys/kernel/mm/memory_peers/nv_mem_nc/version");
  bool peer = client || root.exists("/sys/module/nvidia_peermem/version");
  if (peer || !e.peer_memory) e.peer_memory = peer;
  if (client || !e.peer_memory_client) e.peer_memory_client = client;
  if (!e.in_container) container_evidence(root, root.is_host() ? current_environment() : std::vector<std::string>{}, e);
  if (!o.gpu_bdfs.empty() && !e.rdma_devices) e.rdma_devices = static_cast<int>(o.devices.size());
  return e;
}

std::vector<probe_check> mr_probe_checks(const mr_probe_outcome& o, const node_evidence& evidence) {
  std::vector<probe_check> out;
  out.push_back(mr_host_check(o, evidence));
  out.push_back(dmabuf_check(o, evidence));
  if (o.gpu_requested) out.push_back(mr_gpu_check(o, evidence));
  if (o.gpu_requested && o.fabric.asked) out.push_back(mnnvl_handle_check(o));
  return out;
}

report to_report(const std::vector<probe_check>& checks) {
  report r;
  for (const auto& c : checks) r.checks.push_back(c.result);
  return r;
}

namespace {

nlohmann::json attempt_json(const mr_attempt& a) {
  nlohmann::json j = {{"attempted", a.attempted},
                      {"ok", a.ok},
                      {"device", a.device},
                      {"call", a.call},
                      {"bytes", a.bytes},
                      {"registered", a.registered},
                      {"buffers", a.buffers},
                      {"access", access_flags_string(a.access)},
                      {"elapsed_us", a.elapsed.count()}};
  if (!a.ok && a.attempted) {
    j["failed_step"] = a.failed_step;
    j["errno"] = a.err;
    j["errno_name"] = std::string(errno_name(a.err));
    j["message"] = a.message;
    if (a.failed_buffer >= 0) {
      j["failed_buffer"] = a.failed_buffer;
      j["failed_bytes"] = a.failed_bytes;
    }
  }
  return j;
}

// One HCA's attempts: the host registration, the dma-buf probe and, with a GPU, its registrations.
nlohmann::json hca_json(const hca_probe_result& h) {
  nlohmann::json hj = {{"device", h.device}, {"ports", h.ports}, {"why", h.why}, {"host", attempt_json(h.host)}};
  hj["dmabuf_probe"] = {{"attempted", h.dmabuf.attempted},
                        {"symbol", h.dmabuf.symbol},
                        {"errno", h.dmabuf.err},
                        {"errno_name", std::string(errno_name(h.dmabuf.err))},
                        {"support", std::string(to_string(h.dmabuf.support))}};
  if (h.gpu.attempted) {
    hj["gpu"] = {{"cuda_device", h.gpu.cuda_device},       {"pci_bdf", h.gpu.pci_bdf},
                 {"driver_version", h.gpu.driver_version}, {"dmabuf_supported", h.gpu.dmabuf_attr},
                 {"gdr_supported", h.gpu.gdr_attr},        {"bytes", h.gpu.bytes},
                 {"peermem", attempt_json(h.gpu.peermem)}, {"dmabuf", attempt_json(h.gpu.dmabuf)}};
    if (!h.gpu.dmabuf_handle_error.empty()) hj["gpu"]["dmabuf_handle_error"] = h.gpu.dmabuf_handle_error;
    if (!h.gpu.error.empty()) hj["gpu"]["error"] = h.gpu.error;
    // NCCL's distance from this GPU to the HCA, and the cuMem (VMM) buffer NCCL >= 2.19 allocates by default.
    hj["gpu"]["hca_pci_bdf"] = h.pci_bdf;
    hj["gpu"]["path_to_hca"] = std::string(to_string(h.gpu_path));
    hj["gpu"]["vmm"] = {{"supported", h.gpu.vmm_attr},
                        {"gdr_supported", h.gpu.vmm_gdr_attr},
                        {"peermem", attempt_json(h.gpu.vmm_peermem)},
                        {"dmabuf", attempt_json(h.gpu.vmm_dmabuf)}};
    if (!h.gpu.vmm_error.empty()) hj["gpu"]["vmm"]["error"] = h.gpu.vmm_error;
    if (!h.gpu.vmm_dmabuf_handle_error.empty()) {
      hj["gpu"]["vmm"]["dmabuf_handle_error"] = h.gpu.vmm_dmabuf_handle_error;
    }
  }
  if (!h.release.is_ok()) hj["release_error"] = h.release.message();
  return hj;
}

// The mnnvl_handle facts: the fabric NVML reported, the channels the probe saw, the attempt.
nlohmann::json fabric_json(const fabric_probe_result& f) {
  nlohmann::json j = {{"node_fabric", f.node_fabric}};
  if (!f.node_fabric) {
    j["no_fabric"] = f.no_fabric;
    return j;
  }
  j["fabric"] = f.fabric_line;
  j["imex_channels"] = {{"dir", f.channels_dir}, {"seen", f.channels}, {"usable", f.usable}};
  if (!f.cuda_problem.empty()) {
    j["cuda_problem"] = f.cuda_problem;
    return j;
  }
  j["cuda_device"] = f.cuda_device;
  j["pci_bdf"] = f.pci_bdf;
  j["handle_type_fabric_supported"] = f.handle_attr;
  const fabric_handle_attempt& a = f.attempt;
  j["attempt"] = {{"attempted", a.attempted}, {"ok", a.ok}, {"bytes", a.bytes}};
  if (a.attempted && !a.ok) {
    j["attempt"]["call"] = a.call;
    j["attempt"]["cu_error"] = a.cu_error;
    j["attempt"]["error_name"] = a.error_name;
  }
  return j;
}

}  // namespace

nlohmann::json probe_to_json(const mr_probe_outcome& o, const std::vector<probe_check>& checks) {
  const nccl_estimate& e = o.estimate;
  nlohmann::json j;
  j["size"] = o.size;
  j["size_text"] = format_bytes(o.size);
  j["size_source"] = o.size_from_user ? "--size" : "estimate";
  j["buffers"] = o.buffers.size();
  j["estimate"] = {{"is_estimate", true},
                   {"formula", e.formula},
                   {"host_bytes", e.host_bytes},
                   {"dmabuf_host_bytes", e.dmabuf_host_bytes},
                   {"gpu_bytes", e.gpu_bytes},
                   {"p2p_bytes", e.p2p_bytes},
                   {"channels", e.channels},
                   {"channels_from", e.channels_from},
                   {"net_peers", e.net_peers},
                   {"connections", e.connections},
                   {"buff_ll", e.buff_ll},
                   {"buff_ll128", e.buff_ll128},
                   {"buff_simple", e.buff_simple},
                   {"relaxed_ordering", e.relaxed_ordering},
                   {"dmabuf_enabled", e.dmabuf_enabled},
                   {"gdr_off", e.gdr_off},
                   {"gdr_level", e.gdr_level},
                   {"cumem_enable", e.cumem},
                   {"ib_disabled", e.ib_disabled},
                   {"inputs", e.inputs},
                   {"notes", e.notes}};
  j["library"] = o.library;
  if (!o.load_error.is_ok()) j["library_error"] = o.load_error.message();
  j["ibv_reg_mr_iova2"] = o.iova2;
  j["ibv_reg_dmabuf_mr"] = o.dmabuf_symbol;
  j["memlock"] = {{"soft",
                   o.memlock_soft == k_unlimited ? nlohmann::json("unlimited") : nlohmann::json(o.memlock_soft)},
                  {"hard",
                   o.memlock_hard == k_unlimited ? nlohmann::json("unlimited") : nlohmann::json(o.memlock_hard)}};
  j["root"] = o.is_root;
  j["devices"] = o.devices;
  j["gpus"] = o.gpu_bdfs;
  j["selection"] = {{"rule", o.selection.rule}, {"skipped", o.selection.skipped}};
  nlohmann::json hcas = nlohmann::json::array();
  for (const auto& h : o.hcas) hcas.push_back(hca_json(h));
  j["hcas"] = std::move(hcas);
  if (o.fabric.asked) j["fabric"] = fabric_json(o.fabric);
  nlohmann::json diags = nlohmann::json::object();
  for (const auto& c : checks) {
    if (!c.diag) continue;
    nlohmann::json d;
    to_json(d, *c.diag);
    if (!c.what.call.empty()) d["call"] = c.what.call;
    if (c.what.err != 0) {
      d["errno"] = c.what.err;
      d["errno_name"] = std::string(errno_name(c.what.err));
    }
    if (c.what.size) d["size"] = *c.what.size;
    diags[c.result.id] = std::move(d);
  }
  j["diagnosis"] = std::move(diags);
  return j;
}

}  // namespace mrcheck
