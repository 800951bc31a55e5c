// node facts -> node_evidence: what diagnose() knows about the node (include/mrcheck/diagnosis.h). Kept apart from
// the rules in diagnosis.cpp: the rules never read facts, only this evidence.
#include <mrcheck/container_runtime.h>
#include <mrcheck/diagnosis.h>
#include <mrcheck/memlock_hop.h>
#include <mrcheck/sysroot.h>

#include <mrcheck/units.h>

#include <fmt/format.h>

#include <algorithm>

namespace mrcheck {

namespace {

std::optional<std::uint64_t> opt_from(const result<std::uint64_t>& r) {
  if (r.is_ok()) return r.value();
  return std::nullopt;
}

// The kernel RDMA stack: MLNX/DOCA-OFED or inbox mlx5_core.
void kernel_stack_from(const node_facts& facts, node_evidence& e) {
  if (auto it = facts.modules.find("mlx5_core"); it != facts.modules.end() && it->second.loaded) {
    const kmodule_fact& m = it->second;
    const std::string release = facts.kernel_release.is_ok() ? facts.kernel_release.value() : "";
    // docs/facts/kernel-and-drivers.md §3: inbox mlx5_core has no version file (or one equal to the kernel release);
    // OFED keeps its own and is out of tree (taint O).
    const bool out_of_tree = m.taint.find('O') != std::string::npos;
    const bool own_version = m.version && !m.version->empty() && *m.version != release;
    if (out_of_tree || own_version) {
      e.kernel_stack = rdma_flavour::ofed;
      e.kernel_stack_detail = fmt::format("mlx5_core {}{}", m.version ? escape_line(*m.version, 64) : "?",
                                          out_of_tree ? " (out of tree)" : "");
    } else {
      e.kernel_stack = rdma_flavour::inbox;
      e.kernel_stack_detail = release.empty() ? "mlx5_core in tree"
                                              : fmt::format("mlx5_core of kernel {}", escape_line(release, 64));
    }
  }
}

// The peer-memory module and its nv_mem client.
void peer_memory_from(const node_facts& facts, node_evidence& e) {
  bool peer = facts.memory_peers && std::find_if(facts.memory_peer_clients.begin(), facts.memory_peer_clients.end(),
                                                 [](const std::string& c) { return c.starts_with("nv_mem"); }) !=
                                        facts.memory_peer_clients.end();
  if (facts.memory_peers || facts.modules.count("nvidia_peermem") != 0) e.peer_memory_client = peer;
  for (const char* name : {"nvidia_peermem", "nv_peer_mem"}) {
    if (auto it = facts.modules.find(name); it != facts.modules.end() && it->second.loaded) peer = true;
  }
  // Only claim "no peer memory" when the module facts were actually read.
  if (peer || facts.modules.count("nvidia_peermem") != 0) e.peer_memory = peer;
}

// The NVIDIA driver and user-space rdma-core.
void driver_and_user_space_from(const node_facts& facts, node_evidence& e) {
  if (facts.nvidia.is_ok()) {
    e.driver_flavour = facts.nvidia->flavour;
    e.driver_version = facts.nvidia->version;
  }
  if (facts.libibverbs.is_ok()) {
    const library_fact& lib = facts.libibverbs.value();
    // "1.14.44.0" -> rdma-core "44.0" (SONAME . ABI . PACKAGE_VERSION, docs/facts/verbs-and-nccl.md §1).
    std::string_view v = lib.version;
    std::size_t first = v.find('.');
    std::size_t second = first == std::string_view::npos ? first : v.find('.', first + 1);
    e.rdma_core_version = second == std::string_view::npos ? std::string(v) : std::string(v.substr(second + 1));
    for (const auto& [sym, present] : lib.symbols) {
      if (sym.find("IBVERBS_1.8") != std::string::npos && sym.starts_with("ibv_reg_mr_iova2")) e.has_iova2 = present;
      if (sym.find("IBVERBS_1.12") != std::string::npos && sym.starts_with("ibv_reg_dmabuf_mr"))
        e.has_dmabuf_mr = present;
    }
    if (lib.version.find("mlnx") != std::string::npos) e.user_stack = rdma_flavour::ofed;
  }
}

}  // namespace

node_evidence evidence_from_facts(const node_facts& facts) {
  node_evidence e;
  if (!facts.chain.empty()) {
    const process_fact& p = facts.chain.front();
    if (p.memlock.is_ok()) {
      e.memlock_soft = p.memlock->soft;
      e.memlock_hard = p.memlock->hard;
    }
    e.memlock_source = fmt::format("pid {} ({})", p.pid, escape_line(p.comm, 32));
    if (p.uid) e.is_root = *p.uid == 0;
    // The hop that set the limit in force: the one picking rule (memlock_hop.h).
    e.memlock_hop = describe_lowering_hop(facts.chain);
  }
  e.max_map_count = opt_from(facts.max_map_count);
  if (facts.hugepages.is_ok()) {
    const hugepages_fact& h = facts.hugepages.value();
    e.hugepages_total = h.total;
    e.hugepages_free = h.free;
    if (h.page_size) e.hugepage_size = h.page_size;
    if (h.mem_total) e.mem_total = h.mem_total;
    if (h.mem_total) e.mem_available = h.mem_available;
    e.cma_total = h.cma_total;
    e.cma_free = h.cma_free;
  }
  if (facts.rdma_devices.is_ok()) {
    e.rdma_devices = static_cast<int>(facts.rdma_devices->size());
    for (const rdma_device_fact& d : facts.rdma_devices.value()) {
      if (!e.rdma_device_list.empty()) e.rdma_device_list += ", ";
      e.rdma_device_list += fmt::format("{} ({}, fw {})", escape_line(d.name, 32), escape_line(d.hca_type, 32),
                                        escape_line(d.fw_ver, 32));
    }
  }
  if (facts.gpus.is_ok()) {
    for (const gpu_fact& g : facts.gpus.value()) {
      if (g.bar1_bytes && (!e.gpu_bar1 || g.bar1_bytes < *e.gpu_bar1)) e.gpu_bar1 = g.bar1_bytes;
    }
  }

  kernel_stack_from(facts, e);
  peer_memory_from(facts, e);
  driver_and_user_space_from(facts, e);
  return e;
}

namespace {

// The file system type mounted last on "/" (/proc/self/mountinfo: "ID PARENT MAJ:MIN ROOT POINT ... - TYPE ...").
std::string root_fs_type(const sysroot& root) {
  auto mi = root.read("/proc/self/mountinfo", 1u << 20);
  if (!mi) return "";
  std::string type;
  std::string_view text = *mi;
  while (!text.empty()) {
    std::size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    std::size_t a = 0;
    for (int field = 0; field < 4 && a != std::string_view::npos; ++field) a = line.find(' ', a + 1);
    if (a == std::string_view::npos || line.substr(a + 1, 2) != "/ ") continue;
    std::size_t dash = line.find(" - ");
    if (dash == std::string_view::npos) continue;
    std::string_view rest = line.substr(dash + 3);
    type = std::string(rest.substr(0, rest.find(' ')));
  }
  return type;
}

// The container engine PID 1's cgroup names ("" for none): a process of the host shows its own slice.
std::string_view cgroup_engine(const sysroot& root) {
  auto cg = root.read("/proc/1/cgroup", 64 * 1024);
  if (!cg) return {};
  for (std::string_view engine : {"docker", "containerd", "kubepods", "libpod", "crio"}) {
    if (cg->find(engine) != std::string::npos) return engine;
  }
  return {};
}

}  // namespace

void container_evidence(const sysroot& root, const std::vector<std::string>& env, node_evidence& e) {
  runtime_signs all = signs_from_root(root, env);
  runtime_signs strong = all;
  std::erase_if(strong.marker_files,
                [](const std::string& m) { return m == "/.dockerenv" || m == "/run/.containerenv"; });
  strong.containerenv.clear();
  if (runtime_guess g = guess_runtime(strong); g.runtime != container_runtime::none) {
    e.in_container = true;
    e.runtime = g.runtime;
    e.container_why = g.evidence;
    return;
  }
  const std::string_view engine = cgroup_engine(root);
  const runtime_guess weak = guess_runtime(all);
  if (weak.runtime == container_runtime::none) {
    if (engine.empty()) return;
    e.in_container = true;
    e.runtime = engine == "kubepods" ? container_runtime::kubernetes : container_runtime::unknown;
    e.container_why = fmt::format("PID 1's cgroup names {}", engine);
    return;
  }
  // A marker alone: "/" (read only here) or the cgroup must say so too.
  const std::string fs = root_fs_type(root);
  std::string second;
  if (fs == "overlay" || fs == "fuse-overlayfs" || fs == "aufs") second = fmt::format("/ is {}", fs);
  if (second.empty() && !engine.empty()) second = fmt::format("PID 1's cgroup names {}", engine);
  const std::string marker = weak.evidence.substr(0, weak.evidence.find(' '));
  if (second.empty()) {
    e.container_why = fmt::format("{} exists, but / is {} and PID 1's cgroup names no container engine", marker,
                                  fs.empty() ? std::string("unknown") : fs);
    return;
  }
  e.in_container = true;
  e.runtime = weak.runtime;
  e.container_why = fmt::format("{} and {}", marker, second);
}

node_evidence build_evidence(const evidence_inputs& in) {
  node_evidence e = in.facts ? evidence_from_facts(*in.facts) : node_evidence{};
  if (in.own) {
    if (in.own->memlock) {
      e.memlock_soft = in.own->memlock->soft;
      e.memlock_hard = in.own->memlock->hard;
    }
    if (in.own->euid) e.is_root = *in.own->euid == 0;
    e.cap_ipc_lock = in.own->cap_ipc_lock;
  } else if (in.facts && in.root && !in.facts->chain.empty()) {
    if (auto st = in.root->read(fmt::format("/proc/{}/status", in.facts->chain.front().pid), 64 * 1024)) {
      e.cap_ipc_lock = cap_ipc_lock_from_status(*st);
    }
  }
  return e;
}

rdma_flavour user_stack_from_dpkg_status(std::string_view text, std::string* version) {
  // One reader of dpkg's status file for the whole program (src/facts/parsers.cpp).
  auto p = parse_dpkg_rdma(text, "dpkg");
  if (!p || p->libibverbs_package.empty()) return rdma_flavour::unknown;
  if (version) *version = p->libibverbs_version;
  return p->ofed ? rdma_flavour::ofed : rdma_flavour::inbox;
}

}  // namespace mrcheck
