// collect_facts(): every node fact, each read through the sysroot (so `mrcheck dump` records it and --root
// replays it) and each with its own status. Where each fact lives: docs/facts/kernel-and-drivers.md.
#include <mrcheck/facts.h>
#include <mrcheck/nic_family.h>
#include <mrcheck/slurm_conf.h>

#include "facts/internal.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <charconv>

namespace mrcheck {

namespace {

// The modules read besides each NIC family's own (include/mrcheck/nic_family.h): the RDMA core and the GPU side.
constexpr const char* k_modules[] = {"ib_core", "nvidia", "nvidia_peermem", "nv_peer_mem"};

// Where rdma-core installs its providers (libibverbs/lib<name>-rdmav<N>.so; rdma-core buildlib/provider.cmake).
constexpr const char* k_provider_dirs[] = {"/usr/lib/x86_64-linux-gnu/libibverbs",
                                           "/usr/lib/aarch64-linux-gnu/libibverbs", "/usr/lib64/libibverbs",
                                           "/usr/lib/libibverbs"};

// Only these settings of the start pid's environment are kept: the rest of an environment may hold secrets.
bool net_env_name(std::string_view name) {
  for (std::string_view p : {"FI_", "OFI_NCCL_", "NCCL_NET", "NCCL_IB_", "NCCL_SOCKET_", "UCX_"}) {
    if (name.starts_with(p)) return true;
  }
  return false;
}

result<std::uint64_t> read_u64(const sysroot& root, std::string_view path) {
  auto v = root.read_value(path);
  if (!v) return v.error();
  std::uint64_t n = 0;
  auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
  if (ec != std::errc() || p != v->data() + v->size() || v->empty()) {
    return status::error(fmt::format("{}: '{}' is not a number", path, escape_line(*v, 32)));
  }
  return n;
}

// A sysfs attribute that may legitimately be absent: its value, or "" when missing or unreadable.
std::string attr(const sysroot& root, const std::string& path) {
  auto v = root.read_value(path);
  return v ? escape_line(*v, 128) : std::string();
}

// sysfs never has names starting with '.' in the directories we list; fixture trees in git do (".keep" files
// that keep an empty directory such as /sys/class/infiniband alive), so they are not devices.
bool hidden(const std::string& name) { return name.empty() || name.front() == '.'; }

std::string base_name(std::string_view p) {
  while (!p.empty() && p.back() == '/') p.remove_suffix(1);
  auto s = p.rfind('/');
  return std::string(s == std::string_view::npos ? p : p.substr(s + 1));
}

result<std::vector<rdma_device_fact>> read_rdma(const sysroot& root) {
  auto names = root.list("/sys/class/infiniband");
  // The class directory appears when ib_core registers it; without it there is no RDMA device, which is a
  // fact (an empty list), not an unknown.
  if (!names) {
    if (names.error().err() == ENOENT) return std::vector<rdma_device_fact>{};
    return names.error();
  }
  std::vector<rdma_device_fact> out;
  for (const auto& n : *names) {
    if (hidden(n)) continue;
    std::string d = "/sys/class/infiniband/" + n;
    rdma_device_fact dev;
    dev.name = escape_line(n, 64);
    dev.fw_ver = attr(root, d + "/fw_ver");
    dev.board_id = attr(root, d + "/board_id");
    dev.hca_type = attr(root, d + "/hca_type");
    dev.node_guid = attr(root, d + "/node_guid");
    dev.node_type = attr(root, d + "/node_type");
    if (auto link = root.read_link(d + "/device")) {
      std::string bdf = base_name(*link);
      dev.pci_bdf = escape_line(bdf, 64);
      // The driver of the parent: a PCI function (efa; older kernels' mlx5) has a `driver` link, read through
      // /sys/bus/pci/devices so that a dump records it there and not under the `device` symlink; an auxiliary
      // device ("mlx5_core.rdma.0", "ice.roce.0", "bnxt_en.rdma.0") is named after the driver that created it.
      if (bdf.find(':') != std::string::npos && !hidden(bdf) && bdf.find('/') == std::string::npos) {
        if (auto drv = root.read_link("/sys/bus/pci/devices/" + bdf + "/driver")) {
          dev.driver = escape_line(base_name(*drv), 64);
        }
      } else if (auto dot = bdf.find('.'); dot != std::string::npos && dot > 0) {
        dev.driver = escape_line(std::string_view(bdf).substr(0, dot), 64);
      }
    }
    if (auto ports = root.list(d + "/ports")) {
      for (const auto& p : *ports) {
        int num = 0;  // non-numeric names (".keep") are skipped below
        auto [ptr, ec] = std::from_chars(p.data(), p.data() + p.size(), num);
        if (ec != std::errc() || ptr != p.data() + p.size()) continue;
        std::string pd = d + "/ports/" + p;
        rdma_port_fact port;
        port.number = num;
        port.state = attr(root, pd + "/state");
        port.phys_state = attr(root, pd + "/phys_state");
        port.rate = attr(root, pd + "/rate");
        port.link_layer = attr(root, pd + "/link_layer");
        dev.ports.push_back(std::move(port));
      }
    }
    out.push_back(std::move(dev));
  }
  return out;
}

kmodule_fact read_module(const sysroot& root, const std::string& name) {
  kmodule_fact m;
  m.name = name;
  std::string d = "/sys/module/" + name;
  // list() rather than exists(): a dump must record the directory so that "loaded" replays.
  m.loaded = root.list(d).is_ok();
  if (!m.loaded) return m;
  if (auto v = root.read_value(d + "/version")) m.version = escape_line(*v, 128);
  m.taint = attr(root, d + "/taint");
  if (auto v = root.read_value(d + "/srcversion")) m.srcversion = escape_line(*v, 64);
  return m;
}

result<nvidia_driver_fact> read_nvidia(const sysroot& root, const std::map<std::string, kmodule_fact>& mods) {
  const kmodule_fact* mod = nullptr;
  if (auto it = mods.find("nvidia"); it != mods.end() && it->second.loaded) mod = &it->second;
  auto text = root.read("/proc/driver/nvidia/version", 64 * 1024);
  if (!text) {
    if (mod && mod->version) {
      // No procfs entry (unusual, e.g. a container without /proc/driver): the module still says which driver.
      nvidia_driver_fact f;
      f.version = *mod->version;
      f.flavour = mod->taint.find('P') != std::string::npos ? nvidia_flavour::proprietary : nvidia_flavour::open;
      f.note = fmt::format("from /sys/module/nvidia ({})", text.error().message());
      return f;
    }
    if (text.error().err() == ENOENT)
      return status::error("no NVIDIA driver loaded (/proc/driver/nvidia/version absent)");
    return text.error();
  }
  auto f = parse_nvidia_version(*text);
  if (!f) return f;
  // Open modules are MODULE_LICENSE("Dual MIT/GPL"), proprietary ones "NVIDIA" -> taint P
  // (docs/facts/kernel-and-drivers.md §4).
  if (mod) {
    bool p = mod->taint.find('P') != std::string::npos;
    if (f->flavour == nvidia_flavour::open && p) {
      f->note = "module taint has P (proprietary licence) although the version line says Open Kernel Module";
    } else if (f->flavour == nvidia_flavour::proprietary && !p) {
      f->note = fmt::format("module taint is '{}' without P although the version line says proprietary", mod->taint);
    } else if (f->flavour == nvidia_flavour::unknown) {
      f->flavour = p ? nvidia_flavour::proprietary : nvidia_flavour::open;
      f->note = "flavour from the module taint";
    }
    if (mod->version && *mod->version != f->version) {
      f->note += (f->note.empty() ? "" : "; ") +
                 fmt::format("loaded module version {} differs from /proc ({})", *mod->version, f->version);
    }
  }
  return f;
}

result<std::vector<gpu_fact>> read_gpus(const sysroot& root) {
  auto names = root.list("/sys/bus/pci/devices");
  if (!names) return names.error();
  std::vector<gpu_fact> out;
  for (const auto& n : *names) {
    if (hidden(n)) continue;
    std::string d = "/sys/bus/pci/devices/" + n;
    auto vendor = root.read_value(d + "/vendor");
    if (!vendor || *vendor != "0x10de") continue;
    auto cls = root.read_value(d + "/class");
    // 0x03xxxx = display controller (VGA 0x0300, 3D controller 0x0302); NVSwitches and audio functions are not GPUs.
    if (!cls || !cls->starts_with("0x03")) continue;
    gpu_fact g;
    g.pci_bdf = escape_line(n, 64);
    g.device_id = attr(root, d + "/device");
    auto res = root.read(d + "/resource", 64 * 1024);
    if (!res) {
      g.bar1_error = res.error().message();
    } else if (auto r = parse_pci_resources(*res); !r) {
      g.bar1_error = r.error().with_context(d).message();
    } else {
      int i = find_bar1(*r);
      if (i < 0) {
        g.bar1_error = "no prefetchable memory BAR";
      } else {
        g.bar1_bytes = (*r)[static_cast<std::size_t>(i)].size();
        g.bar1_resource_line = i;
      }
    }
    out.push_back(std::move(g));
  }
  return out;
}

result<process_fact> read_slurmd(const sysroot& root, const collect_options& opts, const nlohmann::json* recorded,
                                 const std::string& host, std::string& used) {
  std::vector<std::string> candidates;
  if (recorded && recorded->contains("slurmd_pid_file") && recorded->at("slurmd_pid_file").is_string()) {
    candidates.push_back(recorded->at("slurmd_pid_file").get<std::string>());
  }
  if (!opts.slurmd_pid_file.empty()) candidates.push_back(opts.slurmd_pid_file);
  if (!opts.slurm_conf.empty()) {
    // slurm.conf may hold AccountingStoragePass: read it without recording, so a dump never copies it.
    sysroot quiet = root;
    quiet.set_recorder(nullptr);
    // SlurmdPidFile may hold %n (node name) and %h (host name) for several slurmd on one host. slurmd's node
    // name is the short host name unless it was started with -N, so both expand to that; a -N node name differs
    // and then the file is simply not found (reported as such).
    if (auto conf = read_slurm_conf_settings(quiet, opts.slurm_conf)) {
      if (const auto* p = conf->find("SlurmdPidFile"); p && p->value.starts_with('/')) {
        const std::string shortname = host.substr(0, host.find('.'));
        candidates.push_back(expand_slurmd_pid_file(p->value, shortname, shortname));
      }
    }
  }
  candidates.push_back("/var/run/slurmd.pid");
  status last = status::error("no pid file");
  for (const auto& c : candidates) {
    auto text = root.read(c, 4096);
    if (!text) {
      last = text.error();
      continue;
    }
    used = c;
    auto pid = parse_pid_file(*text);
    if (!pid) return pid.error().with_context(c);
    auto p = read_process(root, *pid);
    if (!p) return status::error(fmt::format("{} names pid {}, which is not running (stale pid file)", c, *pid));
    if (!is_slurm_daemon(p->comm, "slurmd")) {
      return status::error(
          fmt::format("{} names pid {} ('{}'), not slurmd (stale pid file)", c, *pid, escape_line(p->comm, 32)));
    }
    return p;
  }
  return status::error(fmt::format("slurmd pid file not found ({}); slurmd not running here?", last.message()));
}

// The process chain from `opts.start_pid` (else this process) up to init.
void read_process_chain(const sysroot& root, const collect_options& opts, node_facts& f) {
  pid_t start = opts.start_pid;
  if (start <= 0) {
    auto self = root.read_link("/proc/self");
    if (self) {
      auto p = parse_pid_file(*self);
      if (p) {
        start = *p;
      } else {
        f.chain_status = p.error().with_context("/proc/self");
      }
    } else {
      f.chain_status = self.error();
    }
  }
  if (start > 0) {
    auto c = read_chain(root, start);
    if (c) {
      f.chain = std::move(*c);
    } else {
      f.chain_status = c.error();
    }
  }
}

// The libraries: loaded on the host (unless switched off), from the dump's .mrcheck/libraries.json under --root.
// Returns whether that record was read, into `recorded`.
bool read_libraries(const sysroot& root, const collect_options& opts, node_facts& f, nlohmann::json& recorded) {
  if (root.is_host()) {
    if (opts.load_libraries) {
      f.libibverbs = load_library(opts.verbs_library,
                                  {"ibv_get_device_list@IBVERBS_1.1", "ibv_reg_mr_iova2@IBVERBS_1.8",
                                   "ibv_reg_dmabuf_mr@IBVERBS_1.12"});
      library_fact cuda;
      f.cuda_driver_version = call_version("libcuda.so.1", "cuDriverGetVersion", &cuda);
      f.libcuda = cuda.path.empty() && !f.cuda_driver_version ? result<library_fact>(f.cuda_driver_version.error())
                                                              : result<library_fact>(cuda);
      library_fact nccl;
      f.nccl_version = call_version("libnccl.so.2", "ncclGetVersion", &nccl);
      f.libnccl = nccl.path.empty() && !f.nccl_version ? result<library_fact>(f.nccl_version.error())
                                                       : result<library_fact>(nccl);
    } else {
      status off = status::error("not loaded (library loading switched off)");
      f.libibverbs = f.libcuda = f.libnccl = off;
      f.cuda_driver_version = f.nccl_version = off;
    }
    return false;
  }
  auto text = root.read(k_libraries_json, 256 * 1024);
  if (!text) {
    status none = status::error("not read under --root (the tree has no .mrcheck/libraries.json)");
    f.libibverbs = f.libcuda = f.libnccl = none;
    f.cuda_driver_version = f.nccl_version = none;
    return false;
  }
  recorded = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (recorded.is_discarded()) {
    status bad = status::error("not read under --root (the dump's .mrcheck/libraries.json is not JSON)");
    f.libibverbs = f.libcuda = f.libnccl = bad;
    f.cuda_driver_version = f.nccl_version = bad;
    return false;
  }
  libraries_from_json(recorded, f);
  return true;
}

// The RDMA user space: the package database and the rdma-core providers on disk.
void read_rdma_userspace(const sysroot& root, node_facts& f) {
  if (auto st = root.read("/var/lib/dpkg/status", 64u << 20)) {
    f.rdma_packages = parse_dpkg_rdma(*st, "/var/lib/dpkg/status");
  } else if (root.list("/var/lib/rpm").is_ok()) {
    f.rdma_packages = status::error(
        "the rpm database (/var/lib/rpm) is not read: it is SQLite or Berkeley DB; `rpm -q libibverbs rdma-core "
        "libfabric` lists the packages");
  } else {
    f.rdma_packages = st.error().err() == ENOENT
                          ? status::error("no package database (/var/lib/dpkg/status, /var/lib/rpm)")
                          : st.error();
  }
  // lib<name>-rdmav<N>.so
  auto provider_file = [](std::string_view n) {
    auto dash = n.find("-rdmav");
    return n.starts_with("lib") && dash != std::string_view::npos && dash > 3 && n.ends_with(".so");
  };
  for (const char* dir : k_provider_dirs) {
    auto names = root.list_matching(dir, provider_file);
    if (!names) continue;
    for (const auto& n : *names) {
      std::string name = escape_line(std::string_view(n).substr(3, n.find("-rdmav") - 3), 32);
      if (std::find(f.verbs_providers.begin(), f.verbs_providers.end(), name) == f.verbs_providers.end()) {
        f.verbs_providers.push_back(std::move(name));
      }
    }
  }
  std::sort(f.verbs_providers.begin(), f.verbs_providers.end());
}

// The network variables (net_env_name) of the chain's first process. Read unrecorded: a dump must not copy a
// user's environment.
void read_net_env(const sysroot& root, node_facts& f) {
  sysroot quiet = root;
  quiet.set_recorder(nullptr);
  auto env = quiet.read(fmt::format("/proc/{}/environ", f.chain.front().pid), 1u << 20);
  if (!env) return;
  std::string_view rest = *env;
  while (!rest.empty()) {
    std::size_t z = rest.find('\0');
    std::string_view kv = rest.substr(0, z);
    rest = z == std::string_view::npos ? std::string_view() : rest.substr(z + 1);
    std::size_t eq = kv.find('=');
    if (eq == std::string_view::npos || eq == 0 || !net_env_name(kv.substr(0, eq))) continue;
    if (f.net_env.size() >= 256) break;
    f.net_env.emplace(escape_line(kv.substr(0, eq), 64), escape_line(kv.substr(eq + 1), 256));
  }
}

}  // namespace

node_facts collect_facts(const sysroot& root, const collect_options& opts) {
  node_facts f;
  if (auto h = root.read_value("/proc/sys/kernel/hostname")) {
    f.hostname = escape_line(*h, 128);
    f.hostname_status = f.hostname;
  } else {
    f.hostname_status = h.error();
  }
  if (auto k = root.read_value("/proc/sys/kernel/osrelease")) {
    f.kernel_release = escape_line(*k, 128);
  } else {
    f.kernel_release = k.error();
  }
  read_process_chain(root, opts, f);

  f.max_map_count = read_u64(root, "/proc/sys/vm/max_map_count");
  if (auto m = root.read("/proc/meminfo", 256 * 1024)) {
    f.hugepages = parse_meminfo(*m);
  } else {
    f.hugepages = m.error();
  }
  f.rdma_devices = read_rdma(root);
  if (auto abi = read_u64(root, "/sys/class/infiniband_verbs/abi_version")) {
    f.uverbs_abi = static_cast<int>(*abi);
  } else {
    f.uverbs_abi = abi.error();
  }
  for (const char* m : k_modules) f.modules[m] = read_module(root, m);
  for (const nic_family& fam : nic_families()) {
    for (std::string_view m : fam.modules) {
      if (!f.modules.count(std::string(m))) f.modules[std::string(m)] = read_module(root, std::string(m));
    }
  }
  if (auto peers = root.list("/sys/kernel/mm/memory_peers")) {
    f.memory_peers = true;
    for (const auto& c : *peers) {
      if (!hidden(c)) f.memory_peer_clients.push_back(escape_line(c, 64));
    }
  }
  f.nvidia = read_nvidia(root, f.modules);
  f.gpus = read_gpus(root);

  nlohmann::json recorded;
  bool have_recorded = read_libraries(root, opts, f, recorded);
  f.slurmd = read_slurmd(root, opts, have_recorded ? &recorded : nullptr, f.hostname, f.slurmd_pid_file);

  // The RDMA user space, only where there is an RDMA device: the package database can be megabytes.
  if (f.rdma_devices.is_ok() && !f.rdma_devices->empty()) read_rdma_userspace(root, f);
  if (auto efa = root.read("/opt/amazon/efa_installed_packages", 256 * 1024)) {
    f.efa_installer = parse_efa_installer(*efa);
  } else {
    f.efa_installer = efa.error();
  }
  if (!f.chain.empty()) read_net_env(root, f);
  return f;
}

}  // namespace mrcheck
