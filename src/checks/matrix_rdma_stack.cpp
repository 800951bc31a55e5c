// rdma_stack: the kernel's mlx5_core/ib_core and the user-space rdma-core must come from one stack. An inbox
// mlx5_core under an MLNX/DOCA-OFED user space (a kernel upgrade the OFED modules were not rebuilt for), an
// OFED mlx5_core under the distro's rdma-core, or ib_core and mlx5_core from different builds all make
// registrations fail in ways that look like memory errors. Discriminators: docs/facts/kernel-and-drivers.md §3.
#include "checks/matrix_checks.h"

#include <fmt/format.h>

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

}  // namespace

check_result check_rdma_stack(const node_facts& f, const matrix_rules& r, const matrix_facts* extra) {
  if (r.rdma_stack == rule_action::off) return skipped(k_id, "rule off");
  const kmodule_fact* mlx = loaded_module(f, "mlx5_core");
  const kmodule_fact* ib = loaded_module(f, "ib_core");
  if (!mlx && !has_rdma_devices(f)) return skipped(k_id, "no mlx5_core loaded and no RDMA device");

  std::vector<std::string> detail;
  std::string kernel = f.kernel_release ? clean(*f.kernel_release) : std::string("unknown");
  detail.push_back(fmt::format("kernel {}", kernel));

  // Kernel side. OFED keeps MODULE_VERSION (the OFED release) and is built out of tree (taint O); current
  // inbox mlx5_core has no version file (or the kernel release) and no taint.
  bool kernel_ofed = false;
  std::string kernel_desc = "no mlx5_core";
  if (mlx) {
    bool version_says_ofed = mlx->version && !mlx->version->empty() && (!f.kernel_release || *mlx->version != *f.kernel_release);
    kernel_ofed = version_says_ofed || has_taint(*mlx, 'O');
    kernel_desc = kernel_ofed ? fmt::format("OFED mlx5_core {}", mlx->version ? clean(*mlx->version) : "(no version)")
                              : "inbox mlx5_core";
    detail.push_back(fmt::format("mlx5_core: version {}, taint '{}'", mlx->version ? clean(*mlx->version) : "(none)",
                                 clean(mlx->taint, 16)));
  }
  if (ib) detail.push_back(fmt::format("ib_core: taint '{}'", clean(ib->taint, 16)));
  detail.push_back(fmt::format("memory_peers (PeerDirect ib_core): {}", f.memory_peers ? "yes" : "no"));

  // User side: what the loader picks, else the library files on disk, else ofed_info alone.
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
  std::optional<std::string> ofed_release = extra ? extra->ofed_user_release : std::nullopt;
  if (ofed_release) detail.push_back(fmt::format("ofed_info: {}", clean(*ofed_release)));
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
  bool user_known = ofed_release.has_value() || !user_versions.empty();
  bool user_ofed = ofed_release.has_value() || marker;
  std::string user_desc = ofed_release ? clean(*ofed_release)
                          : marker     ? fmt::format("OFED rdma-core {}", clean(user_versions.front()))
                          : !user_versions.empty() ? fmt::format("distro rdma-core {}", clean(user_versions.front()))
                                                   : "unknown";
  if (!user_known) detail.push_back("user space: not determined (no libibverbs loaded or found, no ofed_info)");

  std::vector<std::string> problems;
  std::string hint;
  if (mlx && ib && has_taint(*mlx, 'O') != has_taint(*ib, 'O')) {
    problems.push_back(fmt::format("mlx5_core ({}) and ib_core ({}) from different stacks",
                                   has_taint(*mlx, 'O') ? "out-of-tree" : "inbox", has_taint(*ib, 'O') ? "out-of-tree" : "inbox"));
    hint = "reinstall the OFED kernel modules for this kernel (or remove them all) so ib_core and mlx5_core match, then reboot";
  }
  if (mlx && user_known && !kernel_ofed && user_ofed) {
    problems.push_back(fmt::format("inbox mlx5_core (kernel {}) under OFED user space {}", kernel, user_desc));
    if (hint.empty()) {
      hint = fmt::format("rebuild the OFED kernel modules for kernel {} (mlnxofedinstall --add-kernel-support or the "
                         "DKMS packages) and reboot, or remove the OFED user space", kernel);
    }
  }
  if (mlx && user_known && kernel_ofed && !user_ofed) {
    problems.push_back(fmt::format("{} under {}", kernel_desc, user_desc));
    if (hint.empty()) hint = "install the OFED user space (rdma-core, libibverbs) of the same release as the kernel modules, or remove the OFED kernel modules";
  }
  if (f.uverbs_abi) {
    detail.push_back(fmt::format("uverbs ABI {}", *f.uverbs_abi));
    bool ok = std::find(r.uverbs_abi.begin(), r.uverbs_abi.end(), *f.uverbs_abi) != r.uverbs_abi.end();
    if (!ok) {
      problems.push_back(fmt::format("kernel uverbs ABI {} not supported", *f.uverbs_abi));
      if (hint.empty()) hint = "install an rdma-core that supports this kernel's uverbs ABI (or the kernel that matches it)";
    }
  } else if (has_rdma_devices(f)) {
    detail.push_back(fmt::format("uverbs ABI: {}", clean(f.uverbs_abi.error().message(), 128)));
  }

  // Secondary: both sides OFED but of different releases (the modules say 5.8-1, ofed_info says 5.8-3).
  bool version_mismatch = false;
  if (mlx && kernel_ofed && mlx->version && ofed_release && problems.empty()) {
    std::string_view kv = *mlx->version;
    std::string_view uv = release_number(*ofed_release);
    if (!kv.empty() && !uv.starts_with(kv)) {
      version_mismatch = true;
      detail.push_back(fmt::format("OFED kernel modules {} vs user space {}", clean(kv), clean(uv)));
    }
  }

  std::string stacks = fmt::format("{}, user space {}", kernel_desc, user_desc);
  if (!problems.empty()) {
    return make(k_id, verdict_for(r.rdma_stack), problems.front(), join(detail, "\n"), hint);
  }
  if (version_mismatch && r.rdma_stack_ofed_version != rule_action::off) {
    return make(k_id, verdict_for(r.rdma_stack_ofed_version),
                fmt::format("OFED kernel modules {} but user space {}", clean(*mlx->version), clean(*ofed_release)),
                join(detail, "\n"), "install one OFED release for both kernel modules and user space");
  }
  return make(k_id, verdict::pass, stacks, join(detail, "\n"));
}

}  // namespace mrcheck::matrix
