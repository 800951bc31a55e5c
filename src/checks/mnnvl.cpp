// The matrix check `mnnvl` (include/mrcheck/fabric.h): a node whose GPUs report a multi-node NVLink fabric has
// it completed, healthy and served by a running IMEX daemon, the conditions NCCL's MNNVL set-up needs
// (docs/facts/mnnvl.md §1, §3). Pure: the facts are read by collect_mnnvl_facts().
#include <mrcheck/checks.h>
#include <mrcheck/fabric.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

namespace mrcheck {

namespace {

// "GPU 2: fabric state in progress" for each GPU whose fabric is not usable. A zero cluster UUID is a fault only
// where other GPUs of the node have one (NCCL then disables MNNVL for all); alone it is a single-node fabric (an
// HGX board's NVSwitches), where MNNVL does not apply.
std::vector<std::string> fabric_faults(const std::vector<gpu_fabric>& gpus, bool multi_node) {
  std::vector<std::string> out;
  for (const auto& g : gpus) {
    if (!g.in_fabric()) continue;
    if (g.state != fabric_state::completed) {
      out.push_back(fmt::format("GPU {}: fabric state {}", g.index, to_string(g.state)));
    } else if (g.status != 0) {
      out.push_back(fmt::format("GPU {}: fabric registration failed (NVML status {})", g.index, g.status));
    } else if (multi_node && g.uuid_zero()) {
      out.push_back(fmt::format("GPU {}: fabric completed with a zero cluster UUID", g.index));
    }
  }
  return out;
}

std::string fabric_detail(const std::vector<gpu_fabric>& gpus) {
  std::string d;
  for (const auto& g : gpus) {
    if (!d.empty()) d += '\n';
    if (g.query_error != 0) {
      d += fmt::format("GPU {}: nvmlDeviceGetGpuFabricInfoV returned {}", g.index, g.query_error);
      continue;
    }
    d += fmt::format("GPU {}: state {}, status {}, clique {}, cluster {}, health mask {:#x}", g.index,
                     to_string(g.state), g.status, g.clique_id, g.uuid_string(), g.health_mask);
  }
  return d;
}

}  // namespace

check_result check_mnnvl(const mnnvl_facts& f) {
  check_result r;
  r.id = "mnnvl";
  if (!f.not_asked.empty()) {
    r.summary = f.not_asked;
    return r;
  }
  if (!f.fabric.gpus) {
    if (!f.nvidia_loaded) {
      r.summary = "no NVIDIA driver loaded: no NVLink fabric to check";
      return r;
    }
    r.result = verdict::error;
    r.summary = fmt::format("NVML could not be asked: {}", f.fabric.gpus.error().message());
    r.hint = "check the driver's libnvidia-ml.so.1 (nvidia-smi -q | grep -A6 Fabric)";
    return r;
  }
  const auto& gpus = *f.fabric.gpus;
  std::size_t n_fabric = 0;
  std::set<unsigned> cliques;
  for (const auto& g : gpus) {
    if (!g.in_fabric()) continue;
    ++n_fabric;
    cliques.insert(g.clique_id);
  }
  r.detail = fabric_detail(gpus);
  if (n_fabric == 0) {
    r.summary = fmt::format("no GPU reports a multi-node NVLink fabric ({} asked): MNNVL not used, nothing to check",
                            gpus.size());
    return r;
  }
  const bool multi_node = std::any_of(gpus.begin(), gpus.end(),
                                      [](const gpu_fabric& g) { return g.in_fabric() && !g.uuid_zero(); });
  r.owner = fix_owner::node;
  if (auto faults = fabric_faults(gpus, multi_node); !faults.empty()) {
    r.result = verdict::fail;
    r.summary = fmt::format("{}: {}", fmt::join(faults, "; "),
                            multi_node ? "NCCL runs without MNNVL" : "NVLink between the GPUs is not ready");
    r.hint = "check the NVLink fabric (nvidia-smi -q -d FABRIC; the fabric manager or NMX of the rack)";
    return r;
  }
  if (!multi_node) {
    r.result = verdict::skip;
    r.owner = fix_owner::none;
    r.summary = fmt::format("{} GPUs in a single-node NVLink fabric (no cluster UUID): MNNVL not used", n_fabric);
    return r;
  }
  if (!f.imex.daemon_pid) {
    r.result = verdict::fail;
    r.summary =
        fmt::format("{} GPUs in an NVLink fabric but no nvidia-imex daemon runs: NCCL 2.27.3+ fails every communicator",
                    n_fabric);
    r.hint = f.imex.nodes_config ? "start the IMEX service (systemctl start nvidia-imex), check nvidia-imex-ctl -N"
                                 : "install and configure IMEX (/etc/nvidia-imex/nodes_config.cfg), then start it";
    return r;
  }
  std::size_t degraded = 0;
  for (const auto& g : gpus) degraded += g.in_fabric() && g.degraded_bandwidth() ? 1 : 0;
  if (degraded > 0) {
    r.result = verdict::warn;
    r.summary = fmt::format("{} of {} GPUs report degraded NVLink fabric bandwidth", degraded, n_fabric);
    r.hint = "check the rack's NVLink links (nvidia-smi -q -d FABRIC)";
    return r;
  }
  const gpu_fabric* first = nullptr;
  for (const auto& g : gpus) {
    if (!first && g.in_fabric()) first = &g;
  }
  r.result = verdict::pass;
  r.summary = fmt::format("{} GPUs in NVLink fabric clique {} of cluster {}, nvidia-imex running (pid {})", n_fabric,
                          fmt::join(cliques, ","), first->uuid_string(), *f.imex.daemon_pid);
  return r;
}

}  // namespace mrcheck
