// rdma_stack: the kernel's mlx5_core/ib_core and the user-space rdma-core must come from one stack. An inbox
// mlx5_core under an MLNX/DOCA-OFED user space (a kernel upgrade the OFED modules were not rebuilt for), an
// OFED mlx5_core under the distro's rdma-core, or ib_core and mlx5_core from different builds all make
// registrations fail in ways that look like memory errors. Discriminators: docs/facts/kernel-and-drivers.md §3.
// Other NIC families (docs/transports.md): every RDMA device's family needs its rdma-core provider in user space
// (else libibverbs cannot open it); module versions and the EFA installer's versions are listed. The user-space
// flavour comes from the loaded library, the files on disk, ofed_info and the package database; on an mlx5 node
// where none of them tells it, the check warns and names what could not be read.
#include "checks/matrix_checks.h"

#include <mrcheck/nic_family.h>

#include <fmt/format.h>

#include <algorithm>

namespace mrcheck::matrix {

namespace {

constexpr std::string_view k_id = "rdma_stack";

bool has_taint(const kmodule_fact& m, char t) { return m.taint.find(t) != std::string::npos; }

// "MLNX_OFED_LINUX-5.8-3.0.7.0" -> "5.8-3.0.7.0": the release without its product prefix.
std::string_view release_number(std::string_view release) {
  std::size_t i = 0;
  while (i < release.size() && !(release[i] >= '0' && release[i] <= '9')) ++i;
  return release.substr(i);
}
// The kernel side, in words for the summary.
struct kernel_side {
  bool ofed = false;
  std::string desc = "no mlx5_core";
};

// The user side: whether its flavour is known, whether it is OFED's, in words for the summary.
struct user_side {
  bool known = false;
  bool ofed = false;
  std::string desc;
  std::string unknown_why;  // what could not be read, when !known
  std::optional<std::string> ofed_release;
};

// Kernel side. OFED keeps MODULE_VERSION (the OFED release) and is built out of tree (taint O); current
// inbox mlx5_core has no version file (or the kernel release) and no taint.
kernel_side read_kernel_side(const node_facts& f, const kmodule_fact* mlx, const kmodule_fact* ib,
                             std::vector<std::string>& detail) {
  kernel_side k;
  if (mlx) {
    bool version_says_ofed = mlx->version && !mlx->version->empty() &&
                             (!f.kernel_release || *mlx->version != *f.kernel_release);
    k.ofed = version_says_ofed || has_taint(*mlx, 'O');
    k.desc = k.ofed ? fmt::format("OFED mlx5_core {}", mlx->version ? clean(*mlx->version) : "(no version)")
                    : "inbox mlx5_core";
    detail.push_back(fmt::format("mlx5_core: version {}, taint '{}'", mlx->version ? clean(*mlx->version) : "(none)",
                                 clean(mlx->taint, 16)));
  }
  if (ib) detail.push_back(fmt::format("ib_core: taint '{}'", clean(ib->taint, 16)));
  detail.push_back(fmt::format("memory_peers (PeerDirect ib_core): {}", f.memory_peers ? "yes" : "no"));
  return k;
}

// User side: what the loader picks, else the library files on disk, else ofed_info alone; the package database
// last.
user_side read_user_side(const node_facts& f, const matrix_rules& r, const matrix_facts* extra,
                         std::vector<std::string>& detail) {
  user_side u;
  std::vector<std::string> user_versions;
  if (f.libibverbs) {
    std::string v = f.libibverbs->version;
    // "1.14.44.0" -> "44.0"
    if (auto a = v.find('.'); a != std::string::npos) {
      if (auto b = v.find('.', a + 1); b != std::string::npos) v = v.substr(b + 1);
    }
    user_versions.push_back(v);
    detail.push_back(fmt::format("libibverbs loaded: {} (rdma-core {})", clean(f.libibverbs->path, 128), clean(v)));
  } else if (extra && !extra->rdma_core_files.empty()) {
    user_versions = extra->rdma_core_files;
    std::vector<std::string> shown;
    for (const auto& v : user_versions) shown.push_back(clean(v));
    detail.push_back(fmt::format("rdma-core on disk: {}", join(shown, ", ")));
  }
  u.ofed_release = extra ? extra->ofed_user_release : std::nullopt;
  if (u.ofed_release) detail.push_back(fmt::format("ofed_info: {}", clean(*u.ofed_release)));
  bool marker = false;
  for (const auto& v : user_versions) {
    for (const auto& m : r.ofed_user_markers) {
      if (!m.empty() && v.find(m) != std::string::npos) marker = true;
    }
  }
  if (f.libibverbs) {
    for (const auto& m : r.ofed_user_markers) {
      if (!m.empty() && f.libibverbs->path.find(m) != std::string::npos) marker = true;
    }
  }
  u.known = u.ofed_release.has_value() || !user_versions.empty();
  u.ofed = u.ofed_release.has_value() || marker;
  // The package database knows which build is installed even when the library's file name cannot tell
  // (MLNX/DOCA-OFED's libibverbs.so.1.14.N.0 looks like upstream's).
  const bool pkg_known = f.rdma_packages.is_ok() && !f.rdma_packages->libibverbs_package.empty();
  if (f.rdma_packages) {
    const rdma_packages_fact& p = *f.rdma_packages;
    if (!p.libibverbs_package.empty()) {
      detail.push_back(fmt::format("{}: {} {} ({})", clean(p.source), clean(p.libibverbs_package),
                                   clean(p.libibverbs_version),
                                   p.ofed ? "MLNX/DOCA-OFED build" : "distribution build"));
    }
  } else if (has_rdma_devices(f)) {
    detail.push_back(fmt::format("package database: {}", clean(f.rdma_packages.error().message(), 200)));
  }
  if (pkg_known && f.rdma_packages->ofed && !u.ofed) {
    u.ofed = true;
    marker = true;
  }
  const std::string first_version = !user_versions.empty() ? user_versions.front()
                                    : pkg_known            ? f.rdma_packages->libibverbs_version
                                                           : std::string();
  if (!u.known && pkg_known) u.known = true;
  u.desc = u.ofed_release ? clean(*u.ofed_release)
           : marker       ? fmt::format("OFED rdma-core {}", clean(first_version))
           : u.known      ? fmt::format("distro rdma-core {}", clean(first_version))
                          : "unknown";
  if (!u.known) {
    u.unknown_why = fmt::format(
        "no libibverbs loaded ({}), no libibverbs.so.1.* in the library directories, no /usr/bin/ofed_info, package "
        "database: {}",
        f.libibverbs ? "loaded" : clean(f.libibverbs.error().message(), 120),
        f.rdma_packages ? "no libibverbs package" : clean(f.rdma_packages.error().message(), 160));
    detail.push_back("user space: not determined: " + u.unknown_why);
  }
  return u;
}

// Other NIC families: each device's rdma-core provider, and what the node says about its modules. Returns the
// families seen; a device without its provider is a problem (the first one's fix is the hint).
std::vector<std::string> check_families(const node_facts& f, std::vector<std::string>& detail,
                                        std::vector<std::string>& problems, std::string& hint) {
  std::vector<std::string> families;
  if (f.rdma_devices) {
    for (const auto& d : *f.rdma_devices) {
      const nic_family* row = nic_family_of(d);
      std::string fam = row ? std::string(row->name) : std::string();
      detail.push_back(fmt::format("{}: family {}, driver {}, fw {}", clean(d.name), fam.empty() ? "unknown" : fam,
                                   d.driver.empty() ? "-" : clean(d.driver), d.fw_ver.empty() ? "-" : clean(d.fw_ver)));
      if (!row || std::find(families.begin(), families.end(), fam) != families.end()) continue;
      families.push_back(fam);
      if (!row->ofed_stack) {
        for (std::string_view m : row->modules) {
          if (const kmodule_fact* k = loaded_module(f, m)) {
            detail.push_back(fmt::format("{}: version {}, taint '{}'", m, k->version ? clean(*k->version) : "(none)",
                                         clean(k->taint, 16)));
          }
        }
      }
      std::string_view provider = row->provider;
      if (!f.verbs_providers.empty() &&
          std::find(f.verbs_providers.begin(), f.verbs_providers.end(), provider) == f.verbs_providers.end()) {
        problems.push_back(
            fmt::format("{} ({}) has no rdma-core provider lib{} in user space", clean(d.name), fam, provider));
        if (hint.empty()) {
          hint = fmt::format("install the rdma-core providers ({}) so that libibverbs can open {}",
                             row->provider_source, clean(d.name));
        }
      }
    }
  }
  return families;
}

// The providers, the EFA installer, libfabric and its environment: listed, not judged.
void list_userspace_extras(const node_facts& f, std::vector<std::string>& detail) {
  if (!f.verbs_providers.empty()) {
    std::vector<std::string> shown;
    for (const auto& p : f.verbs_providers) shown.push_back(clean(p, 32));
    detail.push_back(fmt::format("rdma-core providers: {}", join(shown, ", ")));
  } else if (has_rdma_devices(f)) {
    detail.push_back("rdma-core providers: none found in the libibverbs directories (not checked)");
  }
  if (f.efa_installer) {
    detail.push_back(
        fmt::format("EFA installer {}: libfabric {}, aws-ofi-nccl {}", clean(f.efa_installer->installer_version),
                    f.efa_installer->libfabric_version.empty() ? "?" : clean(f.efa_installer->libfabric_version),
                    f.efa_installer->ofi_nccl_version.empty() ? "?" : clean(f.efa_installer->ofi_nccl_version)));
  }
  if (f.rdma_packages && !f.rdma_packages->libfabric_version.empty()) {
    detail.push_back(fmt::format("libfabric package {}", clean(f.rdma_packages->libfabric_version)));
  }
  for (const auto& [k, v] : f.net_env) {
    if (k.starts_with("FI_") || k.starts_with("OFI_NCCL_"))
      detail.push_back(fmt::format("{}={}", clean(k, 64), clean(v, 128)));
  }
}

// The kernel side against the user side, and the kernel's uverbs ABI against what rdma-core supports.
void check_stack_match(const node_facts& f, const matrix_rules& r, const kmodule_fact* mlx, const kmodule_fact* ib,
                       const std::string& kernel, const kernel_side& ks, const user_side& us,
                       std::vector<std::string>& detail, std::vector<std::string>& problems, std::string& hint) {
  if (mlx && ib && has_taint(*mlx, 'O') != has_taint(*ib, 'O')) {
    problems.push_back(fmt::format("mlx5_core ({}) and ib_core ({}) from different stacks",
                                   has_taint(*mlx, 'O') ? "out-of-tree" : "inbox",
                                   has_taint(*ib, 'O') ? "out-of-tree" : "inbox"));
    hint =
        "reinstall the OFED kernel modules for this kernel (or remove them all) so ib_core and mlx5_core match, then "
        "reboot";
  }
  if (mlx && us.known && !ks.ofed && us.ofed) {
    problems.push_back(fmt::format("inbox mlx5_core (kernel {}) under OFED user space {}", kernel, us.desc));
    if (hint.empty()) {
      hint = fmt::format(
          "rebuild the OFED kernel modules for kernel {} (mlnxofedinstall --add-kernel-support or the "
          "DKMS packages) and reboot, or remove the OFED user space",
          kernel);
    }
  }
  if (mlx && us.known && ks.ofed && !us.ofed) {
    problems.push_back(fmt::format("{} under {}", ks.desc, us.desc));
    if (hint.empty())
      hint =
          "install the OFED user space (rdma-core, libibverbs) of the same release as the kernel modules, or remove "
          "the OFED kernel modules";
  }
  if (f.uverbs_abi) {
    detail.push_back(fmt::format("uverbs ABI {}", *f.uverbs_abi));
    bool ok = std::find(r.uverbs_abi.begin(), r.uverbs_abi.end(), *f.uverbs_abi) != r.uverbs_abi.end();
    if (!ok) {
      problems.push_back(fmt::format("kernel uverbs ABI {} not supported", *f.uverbs_abi));
      if (hint.empty())
        hint = "install an rdma-core that supports this kernel's uverbs ABI (or the kernel that matches it)";
    }
  } else if (has_rdma_devices(f)) {
    detail.push_back(fmt::format("uverbs ABI: {}", clean(f.uverbs_abi.error().message(), 128)));
  }
}

}  // namespace

check_result check_rdma_stack(const node_facts& f, const matrix_rules& r, const matrix_facts* extra) {
  if (r.rdma_stack == rule_action::off) return skipped(k_id, "rule off");
  const kmodule_fact* mlx = loaded_module(f, "mlx5_core");
  const kmodule_fact* ib = loaded_module(f, "ib_core");
  if (!mlx && !has_rdma_devices(f)) return skipped(k_id, "no mlx5_core loaded and no RDMA device");

  std::vector<std::string> detail;
  std::string kernel = f.kernel_release ? clean(*f.kernel_release) : std::string("unknown");
  detail.push_back(fmt::format("kernel {}", kernel));
  const kernel_side ks = read_kernel_side(f, mlx, ib, detail);
  const user_side us = read_user_side(f, r, extra, detail);

  std::vector<std::string> problems;
  std::string hint;
  const std::vector<std::string> families = check_families(f, detail, problems, hint);
  list_userspace_extras(f, detail);
  check_stack_match(f, r, mlx, ib, kernel, ks, us, detail, problems, hint);

  // Secondary: both sides OFED but of different releases (the modules say 5.8-1, ofed_info says 5.8-3).
  const std::optional<std::string>& ofed_release = us.ofed_release;
  bool version_mismatch = false;
  if (mlx && ks.ofed && mlx->version && ofed_release && problems.empty()) {
    std::string_view kv = *mlx->version;
    std::string_view uv = release_number(*ofed_release);
    if (!kv.empty() && !uv.starts_with(kv)) {
      version_mismatch = true;
      detail.push_back(fmt::format("OFED kernel modules {} vs user space {}", clean(kv), clean(uv)));
    }
  }

  std::string stacks = fmt::format("{}, user space {}", ks.desc, us.desc);
  if (!mlx) {
    std::string fams = families.empty() ? std::string("unknown") : join(families, ", ");
    stacks = fmt::format("{} device(s), rdma-core providers {}", fams,
                         f.verbs_providers.empty() ? "not checked" : "present");
  }
  // mlx5_core without an RDMA device (an Ethernet-only ConnectX, a VM with the module loaded): no stack in use, so
  // nothing to pass, and nothing to drain a node for either.
  if (!has_rdma_devices(f)) {
    std::string devices = f.rdma_devices.is_ok()
                              ? std::string("no RDMA device")
                              : fmt::format("RDMA devices not read ({})", clean(f.rdma_devices.error().message(), 96));
    return make(k_id, verdict::skip,
                fmt::format("{} loaded, but {}: the stack was not checked{}", ks.desc, devices,
                            problems.empty() ? "" : fmt::format(" (would be: {})", problems.front())),
                join(detail, "\n"));
  }
  if (!problems.empty()) {
    return make(k_id, verdict_for(r.rdma_stack), problems.front(), join(detail, "\n"), hint);
  }
  if (mlx && !us.known) {
    return make(k_id, verdict::warn, fmt::format("{}, user-space flavour unknown", ks.desc), join(detail, "\n"),
                fmt::format("mrcheck could not tell the rdma-core flavour ({}); run `ofed_info -s` and `dpkg -l "
                            "libibverbs1` or `rpm -q libibverbs` on the node",
                            us.unknown_why));
  }
  if (version_mismatch && r.rdma_stack_ofed_version != rule_action::off) {
    return make(k_id, verdict_for(r.rdma_stack_ofed_version),
                fmt::format("OFED kernel modules {} but user space {}", clean(*mlx->version), clean(*ofed_release)),
                join(detail, "\n"), "install one OFED release for both kernel modules and user space");
  }
  return make(k_id, verdict::pass, stacks, join(detail, "\n"));
}

}  // namespace mrcheck::matrix
