// The stack fingerprint: the versions a change of which has broken NCCL registrations before (kernel and its
// modules, rdma-core, HCA firmware, the NVIDIA driver, CUDA, NCCL, libfabric / aws-ofi-nccl), the limits that
// decide them (slurmd's memlock, vm.max_map_count, hugepages) and mrcheck's own version and rules. Built from
// the facts the run already holds; only the boot id and uptime are read here.
#include <mrcheck/build_config.h>
#include <mrcheck/history.h>
#include <mrcheck/nic_family.h>
#include <mrcheck/units.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>

namespace mrcheck {

namespace {

// The RDMA modules: an out-of-tree build of these is MLNX/DOCA-OFED's (docs/facts/kernel-and-drivers.md §3):
// ib_core and the modules of the family OFED ships (include/mrcheck/nic_family.h).
bool ofed_module(std::string_view name) {
  if (name == "ib_core") return true;
  for (const nic_family& fam : nic_families()) {
    if (fam.ofed_stack && std::find(fam.modules.begin(), fam.modules.end(), name) != fam.modules.end()) return true;
  }
  return false;
}

std::string clean(std::string_view s, std::size_t max = 128) { return escape_line(trim_space(s), max); }

std::string memlock_words(const memlock_limit& m) {
  return fmt::format("soft {}, hard {}", format_bytes(m.soft), format_bytes(m.hard));
}

// "1.14.2410mlnx54" (libibverbs.so.1.<abi>.<rdma-core>) -> "2410mlnx54".
std::string rdma_core_of_library(const std::string& v) {
  auto a = v.find('.');
  if (a == std::string::npos) return v;
  auto b = v.find('.', a + 1);
  return b == std::string::npos ? v : v.substr(b + 1);
}

}  // namespace

boot_info read_boot_info(const sysroot& root, std::int64_t now) {
  boot_info b;
  if (auto id = root.read_value(k_boot_id_path)) b.boot_id = clean(*id, 64);
  if (auto up = root.read_value("/proc/uptime")) {
    // "12345.67 23456.78": seconds since boot, then idle time.
    char* end = nullptr;
    double s = std::strtod(up->c_str(), &end);
    if (end != up->c_str() && s >= 0 && s < 1e10) b.boot_time = now - static_cast<std::int64_t>(s);
  }
  return b;
}

namespace {

bool out_of_tree(const kmodule_fact& m) {
  return m.taint.find('O') != std::string::npos || m.taint.find('P') != std::string::npos;
}

// The compressions kmod loads (CONFIG_MODULE_COMPRESS_*), and none.
constexpr std::string_view k_module_suffixes[] = {".ko", ".ko.xz", ".ko.zst", ".ko.gz"};

bool module_file_in(const sysroot& root, const std::string& dir, const std::string& name) {
  for (auto suffix : k_module_suffixes) {
    if (root.exists(fmt::format("{}/{}{}", dir, name, suffix))) return true;
  }
  return false;
}

// A kernel release or module name as a path component: never "..", never a slash.
bool plain_component(std::string_view s) {
  return !s.empty() && s != "." && s != ".." && s.find('/') == std::string_view::npos;
}

}  // namespace

std::set<std::string> read_dkms_modules(const sysroot& root, const node_facts& f) {
  std::set<std::string> out;
  if (!f.kernel_release || !plain_component(*f.kernel_release)) return out;
  const std::string& krel = *f.kernel_release;
  std::vector<const kmodule_fact*> candidates;
  for (const auto& [name, m] : f.modules) {
    if (m.loaded && out_of_tree(m) && plain_component(name)) candidates.push_back(&m);
  }
  if (candidates.empty()) return out;
  // Where dkms installs on Debian, Ubuntu and Arch whatever dkms.conf asks (its override_dest_module_location);
  // "-" and "_" are one in module names, the file keeps the build's spelling.
  std::vector<const kmodule_fact*> rest;
  for (const kmodule_fact* m : candidates) {
    std::string dash = m->name;
    std::replace(dash.begin(), dash.end(), '_', '-');
    std::string dir = fmt::format("/lib/modules/{}/updates/dkms", krel);
    if (module_file_in(root, dir, m->name) || (dash != m->name && module_file_in(root, dir, dash))) {
      out.insert(m->name);
    } else {
      rest.push_back(m);
    }
  }
  if (rest.empty()) return out;
  // Fedora/RHEL (/extra) and SUSE (/updates) share the directory with kmod packages, and a distribution dkms does
  // not know keeps the package's own DEST_MODULE_LOCATION: dkms' tree says what it installed for this kernel.
  auto packages = root.list("/var/lib/dkms");
  if (!packages) return out;
  const std::string installed = fmt::format("kernel-{}-", krel);
  std::size_t looked = 0;
  for (const auto& pkg : *packages) {
    if (!plain_component(pkg) || pkg.starts_with(".") || ++looked > 64) continue;
    auto entries = root.list(fmt::format("/var/lib/dkms/{}", pkg));
    if (!entries) continue;
    for (const auto& e : *entries) {
      if (!e.starts_with(installed)) continue;
      auto target = root.read_link(fmt::format("/var/lib/dkms/{}/{}", pkg, e));
      // VER/KREL/ARCH, relative to the package's directory.
      if (!target || target->empty() || target->front() == '/' || target->find("..") != std::string::npos) continue;
      // Its middle part is the kernel: "kernel-6.1.0-28-" is also the start of another release's entry.
      auto a = target->find('/');
      auto b = a == std::string::npos ? a : target->find('/', a + 1);
      if (b == std::string::npos || target->substr(a + 1, b - a - 1) != krel) continue;
      std::string dir = fmt::format("/var/lib/dkms/{}/{}/module", pkg, *target);
      for (const kmodule_fact* m : rest) {
        if (module_file_in(root, dir, m->name)) out.insert(m->name);
      }
    }
  }
  return out;
}

std::string module_origin(const kmodule_fact& m, const result<std::string>& kernel_release, bool dkms) {
  const bool oot = out_of_tree(m);
  const bool own_version = m.version && !m.version->empty() && (!kernel_release || *m.version != *kernel_release);
  bool rdma = ofed_module(m.name);
  dkms = dkms && oot;
  if (rdma && (oot || own_version)) return dkms ? "OFED DKMS" : "OFED";
  if (dkms) return "DKMS";
  if (oot) return "out-of-tree";
  return "inbox";
}

stack_fingerprint make_fingerprint(const node_facts& f, const matrix_facts& extra, const matrix_rules& rules,
                                   const boot_info& boot, const std::set<std::string>& dkms) {
  stack_fingerprint fp;
  fp.boot_id = boot.boot_id;
  fp.boot_time = boot.boot_time;
  auto& it = fp.items;
  if (f.kernel_release) it["kernel"] = clean(*f.kernel_release);
  for (const auto& [name, m] : f.modules) {
    if (!m.loaded) continue;
    // An inbox module has no version of its own (or the kernel's): the kernel release is its version.
    std::string version = m.version && !m.version->empty() ? clean(*m.version)
                          : f.kernel_release               ? clean(*f.kernel_release)
                                                           : "?";
    it[name] = fmt::format("{} ({})", version, module_origin(m, f.kernel_release, dkms.contains(name)));
    if (m.srcversion && !m.srcversion->empty()) it[name + ".srcversion"] = clean(*m.srcversion, 64);
  }
  // rdma-core: the library the loader picks, else the files on disk; its flavour from ofed_info and the markers.
  std::string rdma_core;
  if (f.libibverbs) {
    rdma_core = rdma_core_of_library(f.libibverbs->version);
  } else if (!extra.rdma_core_files.empty()) {
    rdma_core = extra.rdma_core_files.front();
  }
  if (!rdma_core.empty()) {
    bool ofed = extra.ofed_user_release.has_value();
    for (const auto& mk : rules.ofed_user_markers)
      ofed = ofed || (!mk.empty() && rdma_core.find(mk) != std::string::npos);
    if (f.rdma_packages && f.rdma_packages->ofed) ofed = true;
    it["rdma-core"] = fmt::format("{} ({})", clean(rdma_core), ofed ? "OFED" : "distro");
  }
  if (extra.ofed_user_release) it["ofed_info"] = clean(*extra.ofed_user_release);
  if (f.rdma_packages && !f.rdma_packages->libibverbs_package.empty()) {
    it["package." + clean(f.rdma_packages->libibverbs_package, 32)] = clean(f.rdma_packages->libibverbs_version);
  }
  if (!f.verbs_providers.empty()) {
    std::vector<std::string> p;
    for (const auto& v : f.verbs_providers) p.push_back(clean(v, 32));
    it["verbs_providers"] = fmt::format("{}", fmt::join(p, ","));
  }
  if (f.rdma_devices) {
    for (const auto& d : *f.rdma_devices) {
      std::string n = clean(d.name, 32);
      if (!d.fw_ver.empty()) it[n + ".fw"] = clean(d.fw_ver, 64);
      if (!d.board_id.empty()) it[n + ".psid"] = clean(d.board_id, 64);
    }
  }
  if (f.nvidia) it["nvidia_driver"] = fmt::format("{} ({})", clean(f.nvidia->version), to_string(f.nvidia->flavour));
  if (f.cuda_driver_version) it["cuda_driver"] = cuda_version_from_int(*f.cuda_driver_version).to_string();
  if (f.nccl_version) it["nccl"] = nccl_version_from_int(*f.nccl_version).to_string();
  std::string libfabric, ofi_nccl;
  if (f.rdma_packages) {
    libfabric = f.rdma_packages->libfabric_version;
    ofi_nccl = f.rdma_packages->ofi_nccl_version;
  }
  if (f.efa_installer) {
    if (libfabric.empty()) libfabric = f.efa_installer->libfabric_version;
    if (ofi_nccl.empty()) ofi_nccl = f.efa_installer->ofi_nccl_version;
    if (!f.efa_installer->installer_version.empty()) it["efa_installer"] = clean(f.efa_installer->installer_version);
  }
  if (!libfabric.empty()) it["libfabric"] = clean(libfabric);
  if (!ofi_nccl.empty()) it["aws-ofi-nccl"] = clean(ofi_nccl);
  if (f.slurmd && f.slurmd->memlock) it["slurmd_memlock"] = memlock_words(*f.slurmd->memlock);
  if (f.max_map_count) it["max_map_count"] = std::to_string(*f.max_map_count);
  if (f.hugepages) {
    it["hugepages"] = fmt::format("{} x {}", f.hugepages->total, format_bytes(f.hugepages->page_size));
  }
  it["mrcheck"] = MRCHECK_VERSION;
  it["rules"] = rules.hash;
  return fp;
}

nlohmann::json fingerprint_to_json(const stack_fingerprint& fp) {
  nlohmann::json j = {{"items", fp.items}};
  if (!fp.boot_id.empty()) j["boot_id"] = fp.boot_id;
  if (fp.boot_time) j["boot_time"] = *fp.boot_time;
  return j;
}

stack_fingerprint fingerprint_from_json(const nlohmann::json& j) {
  stack_fingerprint fp;
  if (!j.is_object()) return fp;
  if (auto i = j.find("items"); i != j.end() && i->is_object()) {
    for (const auto& [k, v] : i->items()) {
      if (v.is_string()) fp.items[escape_line(k, 64)] = escape_line(v.get<std::string>(), 160);
    }
  }
  if (auto b = j.find("boot_id"); b != j.end() && b->is_string()) fp.boot_id = escape_line(b->get<std::string>(), 64);
  if (auto b = j.find("boot_time"); b != j.end() && b->is_number_integer()) fp.boot_time = b->get<std::int64_t>();
  return fp;
}

std::vector<std::string_view> checks_for_key(std::string_view key) {
  auto base = key.substr(0, key.find('.'));
  if (key.ends_with(".fw") || key.ends_with(".psid")) return {"hca_fw"};
  if (key == "kernel") return {"rdma_stack", "gpudirect"};
  if (base == "ib_core") return {"rdma_stack", "gpudirect"};
  if (base == "nvidia_peermem" || base == "nv_peer_mem") return {"gpudirect"};
  if (base == "nvidia" || key == "nvidia_driver") return {"gpu_driver", "gpudirect", "bar1"};
  if (key == "cuda_driver") return {"cuda_driver", "gpudirect"};
  if (key == "nccl") return {"nccl"};
  if (key == "slurmd_memlock") return {"slurmd_memlock"};
  if (key == "max_map_count") return {"max_map_count"};
  if (key == "hugepages") return {"hugepages"};
  if (key == "mrcheck" || key == "rules") return {};
  // The RDMA modules of every family, rdma-core, its providers and packages, libfabric, aws-ofi-nccl.
  return {"rdma_stack"};
}

}  // namespace mrcheck
