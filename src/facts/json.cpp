// node_facts as JSON: the "facts" object of `mrcheck report --json` (schema in the README). Limits are bytes
// or "unlimited"; a fact that could not be read is {"unknown": "<reason>"} so a consumer never mistakes a
// missing value for 0.
#include <mrcheck/facts.h>

#include <nlohmann/json.hpp>

namespace mrcheck {

namespace {

using json = nlohmann::json;

json unknown(const status& s) { return {{"unknown", s.message().empty() ? std::string("unknown") : s.message()}}; }

json limit(std::uint64_t v) { return v == k_unlimited ? json("unlimited") : json(v); }

template <class T, class F>
json maybe(const result<T>& r, F&& f) {
  return r ? f(*r) : unknown(r.error());
}

json library(const library_fact& l) {
  return {{"requested", l.requested}, {"path", l.path}, {"version", l.version}, {"symbols", l.symbols}};
}

json rdma_devices_to_json(const std::vector<rdma_device_fact>& devs) {
  json a = json::array();
  for (const auto& d : devs) {
    json ports = json::array();
    for (const auto& p : d.ports) {
      ports.push_back({{"port", p.number},
                       {"state", p.state},
                       {"phys_state", p.phys_state},
                       {"rate", p.rate},
                       {"link_layer", p.link_layer}});
    }
    a.push_back({{"name", d.name},
                 {"fw_ver", d.fw_ver},
                 {"board_id", d.board_id},
                 {"hca_type", d.hca_type},
                 {"node_guid", d.node_guid},
                 {"node_type", d.node_type},
                 {"pci_bdf", d.pci_bdf},
                 {"driver", d.driver},
                 {"family", rdma_family(d)},
                 {"ports", std::move(ports)}});
  }
  return a;
}

json gpus_to_json(const std::vector<gpu_fact>& gs) {
  json a = json::array();
  for (const auto& g : gs) {
    json o = {{"pci_bdf", g.pci_bdf},
              {"device_id", g.device_id},
              {"bar1_bytes", g.bar1_error.empty() ? json(g.bar1_bytes) : json{{"unknown", g.bar1_error}}},
              {"bar1_resource_line", g.bar1_resource_line},
              {"memory_bytes", g.memory_bytes ? json(*g.memory_bytes) : json(nullptr)}};
    a.push_back(std::move(o));
  }
  return a;
}

}  // namespace

json memlock_to_json(const result<memlock_limit>& m, bool hard) {
  if (!m) return unknown(m.error());
  return limit(hard ? m->hard : m->soft);
}

json process_to_json(const process_fact& p) {
  return {{"pid", p.pid},
          {"ppid", p.ppid},
          {"comm", escape_line(p.comm, 64)},
          {"uid", p.uid ? json(*p.uid) : json(nullptr)},
          {"memlock_soft", memlock_to_json(p.memlock, false)},
          {"memlock_hard", memlock_to_json(p.memlock, true)},
          {"stack_soft", memlock_to_json(p.stack, false)},
          {"stack_hard", memlock_to_json(p.stack, true)},
          {"nofile_soft", memlock_to_json(p.nofile, false)},
          {"nofile_hard", memlock_to_json(p.nofile, true)},
          {"lowered", p.lowered}};
}

void to_json(json& j, const node_facts& f) {
  j = json::object();
  j["hostname"] = f.hostname_status ? json(f.hostname) : unknown(f.hostname_status.error());
  j["kernel_release"] = maybe(f.kernel_release, [](const std::string& s) { return json(s); });
  if (f.chain.empty()) {
    j["chain"] = unknown(f.chain_status.is_ok() ? status::error("not read") : f.chain_status);
  } else {
    json c = json::array();
    for (const auto& p : f.chain) c.push_back(process_to_json(p));
    j["chain"] = std::move(c);
  }
  j["max_map_count"] = maybe(f.max_map_count, [](std::uint64_t v) { return json(v); });
  j["hugepages"] = maybe(f.hugepages, [](const hugepages_fact& h) {
    return json{{"total", h.total},
                {"free", h.free},
                {"page_size", h.page_size},
                {"mem_total", h.mem_total},
                {"mem_available", h.mem_available},
                {"cma_total", h.cma_total ? json(*h.cma_total) : json(nullptr)},
                {"cma_free", h.cma_free ? json(*h.cma_free) : json(nullptr)}};
  });
  j["rdma_devices"] = maybe(f.rdma_devices, rdma_devices_to_json);
  j["uverbs_abi"] = maybe(f.uverbs_abi, [](int v) { return json(v); });
  json mods = json::object();
  for (const auto& [name, m] : f.modules) {
    mods[name] = {{"loaded", m.loaded},
                  {"version", m.version ? json(*m.version) : json(nullptr)},
                  {"taint", m.taint},
                  {"srcversion", m.srcversion ? json(*m.srcversion) : json(nullptr)}};
  }
  j["modules"] = std::move(mods);
  j["memory_peers"] = {{"present", f.memory_peers}, {"clients", f.memory_peer_clients}};
  j["nvidia_driver"] = maybe(f.nvidia, [](const nvidia_driver_fact& n) {
    json o = {{"version", n.version}, {"flavour", std::string(to_string(n.flavour))}, {"raw", n.raw}};
    if (!n.note.empty()) o["note"] = n.note;
    return o;
  });
  j["gpus"] = maybe(f.gpus, gpus_to_json);
  j["libibverbs"] = maybe(f.libibverbs, library);
  j["libcuda"] = maybe(f.libcuda, library);
  j["libnccl"] = maybe(f.libnccl, library);
  j["cuda_driver_version"] = maybe(f.cuda_driver_version, [](int v) { return json(v); });
  j["nccl_version"] = maybe(f.nccl_version, [](int v) { return json(v); });
  j["rdma_packages"] = maybe(f.rdma_packages, [](const rdma_packages_fact& p) {
    return json{{"source", p.source},
                {"libibverbs_package", p.libibverbs_package},
                {"libibverbs_version", p.libibverbs_version},
                {"flavour", p.libibverbs_package.empty() ? "unknown"
                            : p.ofed                     ? "ofed"
                                                         : "distribution"},
                {"libfabric_version", p.libfabric_version},
                {"ofi_nccl_version", p.ofi_nccl_version}};
  });
  j["efa_installer"] = maybe(f.efa_installer, [](const efa_installer_fact& e) {
    return json{{"installer_version", e.installer_version},
                {"libfabric_version", e.libfabric_version},
                {"ofi_nccl_version", e.ofi_nccl_version}};
  });
  j["verbs_providers"] = f.verbs_providers;
  j["net_env"] = f.net_env;
  j["slurmd"] = maybe(f.slurmd, [&](const process_fact& p) {
    json o = process_to_json(p);
    o["pid_file"] = f.slurmd_pid_file;
    return o;
  });
}

}  // namespace mrcheck
