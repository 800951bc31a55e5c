// Facts the matrix needs beyond node_facts: slurm.conf's limit propagation, the OFED release installed in
// user space, and the rdma-core library files on disk. All read through the sysroot, so a fixture tree
// replays them exactly.
#include <mrcheck/matrix.h>
#include <mrcheck/slurm_conf.h>

#include <fmt/format.h>

#include <filesystem>

namespace mrcheck {

namespace {

// slurm.conf through the one reader and value type of the core (slurm_conf.h), shared with the plugin (fuzz
// finding F4). An include that could not be followed makes the whole file unread here: the propagation rule
// must not judge by part of it.
result<slurm_conf_facts> read_slurm_conf(const sysroot& root, const std::string& path) {
  auto c = read_slurm_conf_settings(root, path);
  if (!c) return c.error();
  if (!c->problems.empty()) return status::error(c->problems.front());
  return slurm_conf_facts_of(std::move(*c));
}

// "MLNX_OFED_LINUX-5.8-3.0.7.0" / "OFED-internal-24.10-1.1.4" / "DOCA-...": the first release string in the
// ofed_info script (it echoes it for `ofed_info -s`).
std::optional<std::string> find_ofed_release(std::string_view script) {
  for (std::string_view prefix : {"MLNX_OFED_LINUX-", "OFED-internal-", "DOCA-OFED-", "DOCA_OFED-"}) {
    std::size_t at = script.find(prefix);
    if (at == std::string_view::npos) continue;
    std::size_t end = at + prefix.size();
    while (end < script.size()) {
      char c = script[end];
      bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' || c == '-' ||
                c == '_';
      if (!ok) break;
      ++end;
    }
    if (end > at + prefix.size()) return std::string(script.substr(at, end - at));
  }
  return std::nullopt;
}

}  // namespace

matrix_facts collect_matrix_facts(const sysroot& root, const std::string& slurm_conf_path, bool scan_library_dirs) {
  matrix_facts m;
  {
    // slurm.conf may hold AccountingStoragePass: read without recording, so a dump never copies it.
    sysroot quiet = root;
    quiet.set_recorder(nullptr);
    m.slurm_conf = read_slurm_conf(quiet, slurm_conf_path);
  }
  if (auto script = root.read("/usr/bin/ofed_info", 256 * 1024)) m.ofed_user_release = find_ofed_release(*script);
  // NVML runs (in a child) only where the NVIDIA driver is loaded.
  m.mnnvl = collect_mnnvl_facts(root, root.exists("/proc/driver/nvidia/version"));
  if (!scan_library_dirs) return m;
  // libibverbs.so.1.<abi>.<package version> (rdma-core Documentation/versioning.md,
  // docs/facts/verbs-and-nccl.md §1).
  constexpr std::string_view prefix = "libibverbs.so.1.";
  auto versioned = [prefix](std::string_view n) { return n.starts_with(prefix); };
  for (const char* dir : {"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"}) {
    auto names = root.list_matching(dir, versioned);
    if (!names) continue;
    for (const auto& n : *names) {
      std::string_view rest = std::string_view(n).substr(prefix.size());
      auto dot = rest.find('.');
      if (dot == std::string_view::npos || dot + 1 >= rest.size()) continue;
      m.rdma_core_files.emplace_back(rest.substr(dot + 1));
    }
  }
  return m;
}

}  // namespace mrcheck
