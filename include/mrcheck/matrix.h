// The driver/firmware matrix: kernel mlx5_core vs user-space rdma-core vs HCA firmware vs NVIDIA driver
// flavour, CUDA, NCCL, nvidia_peermem / DMA-BUF, BAR1, and the Slurm limits that NCCL's registrations need.
//
// Rules are data (etc/mrcheck-rules.conf, documented in etc/README.rules.md), never golden version pins:
// minimums and what a violation does (fail, warn or off). The matrix group of the check registry
// (check_registry.h, src/checks/matrix_*.cpp) turns node facts + rules into one check_result per rule, with the
// facts it saw and the fix; mrcheck-prolog drains on fail, `mrcheck report` shows the same checks.
#pragma once

#include <mrcheck/check.h>
#include <mrcheck/fabric.h>
#include <mrcheck/facts.h>
#include <mrcheck/slurm_conf.h>
#include <mrcheck/status.h>
#include <mrcheck/sysroot.h>

#include <algorithm>
#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mrcheck {

// A dotted numeric version: "28.39.1002", "535.104.05", "2.28.9". Components compare numerically, a missing
// trailing component counts as 0 ("12.2" == "12.2.0").
struct dotted_version {
  std::vector<std::uint64_t> parts;
  std::string to_string() const;
  friend auto operator<=>(const dotted_version& a, const dotted_version& b) {
    std::size_t n = std::max(a.parts.size(), b.parts.size());
    for (std::size_t i = 0; i < n; ++i) {
      std::uint64_t x = i < a.parts.size() ? a.parts[i] : 0;
      std::uint64_t y = i < b.parts.size() ? b.parts[i] : 0;
      if (x != y) return x <=> y;
    }
    return std::strong_ordering::equal;
  }
  friend bool operator==(const dotted_version& a, const dotted_version& b) { return (a <=> b) == 0; }
};
// Digits separated by '.', at most 8 components; anything else is an error naming the text.
result<dotted_version> parse_dotted_version(std::string_view text);
// CUDA's cuDriverGetVersion encoding (13000 = 13.0, 12020 = 12.2) and NCCL's ncclGetVersion
// (22809 = 2.28.9 for >= 2.9; 2708 = 2.7.8 before) as dotted versions.
dotted_version cuda_version_from_int(int v);
dotted_version nccl_version_from_int(int v);

// What a violated rule does to the node.
enum class rule_action { fail, warn, off };
std::string_view to_string(rule_action a);

enum class flavour_rule { any, open, proprietary };

struct hca_family_rule {
  std::string name;                   // "ConnectX-7"
  std::optional<dotted_version> min;  // minimum firmware; none = any
};

struct matrix_rules {
  std::string source = "built-in";  // the file the rules came from
  std::string hash = "built-in";    // FNV-1a 64 of the file's text, hex (the stack fingerprint, history.h)

  // rdma_stack: kernel mlx5_core vs user space.
  rule_action rdma_stack = rule_action::fail;
  rule_action rdma_stack_ofed_version = rule_action::warn;  // OFED kernel and user space of different releases
  std::vector<std::string> ofed_user_markers = {"mlnx"};    // in an rdma-core version/path: an OFED build
  std::vector<int> uverbs_abi = {6};                        // kernel uverbs ABI versions accepted

  // hca_fw: firmware major -> family and minimum.
  rule_action hca_fw = rule_action::fail;
  rule_action hca_fw_unknown = rule_action::warn;  // an mlx5 device whose fw major has no family
  std::map<std::uint64_t, hca_family_rule> hca_families;

  // gpu_driver
  rule_action gpu_driver = rule_action::fail;
  std::optional<dotted_version> gpu_driver_min;
  flavour_rule gpu_driver_flavour = flavour_rule::any;

  // gpudirect: nvidia_peermem or DMA-BUF must be usable when the node has both an HCA and a GPU.
  rule_action gpudirect = rule_action::fail;
  dotted_version dmabuf_kernel_min{{5, 12}};
  dotted_version dmabuf_cuda_min{{11, 7}};

  rule_action cuda_driver = rule_action::fail;
  std::optional<dotted_version> cuda_driver_min;
  rule_action nccl = rule_action::fail;
  std::optional<dotted_version> nccl_min;

  // bar1: BAR1 at least the GPU's memory. GPU memory from NVML when known, else this table by PCI device id
  // ("0x2335" -> bytes, upper bounds); a GPU in neither is skipped with the reason.
  rule_action bar1 = rule_action::warn;
  // bar1.too_small: a BAR1 below bar1_min cannot map the GPU buffers NCCL registers with the NICs (GPUDirect RDMA
  // maps them through BAR1). bar1_min nullopt = "auto": NCCL's GPU registrations estimated for one rank with
  // the node's RDMA devices at NCCL's default channel count (estimate_nccl_registration, mr_probe.h).
  rule_action bar1_too_small = rule_action::fail;
  std::optional<std::uint64_t> bar1_min;
  std::map<std::string, std::uint64_t> gpu_memory;

  rule_action slurmd_memlock = rule_action::fail;
  std::uint64_t slurmd_memlock_min = k_unlimited;  // hard limit slurmd must have
  rule_action propagate_limits = rule_action::warn;

  // max_map_count: vm.max_map_count below max_map_count_min gives this action (a value lowered below the
  // kernel default 65530), below max_map_count_recommended a warning.
  rule_action max_map_count = rule_action::fail;
  std::optional<std::uint64_t> max_map_count_min = 65530;
  std::optional<std::uint64_t> max_map_count_recommended = 262144;

  // hugepages: a reserved pool (HugePages_Total x Hugepagesize) above hugepages_reserved_max percent of
  // MemTotal gives this action (memory no 4 KiB allocation, pinned buffer or registration can use), above
  // hugepages_reserved_warn percent a warning; a reserved pool with fewer than hugepages_free_min free pages
  // a warning.
  rule_action hugepages = rule_action::fail;
  std::optional<std::uint64_t> hugepages_reserved_max_pct = 90;
  std::optional<std::uint64_t> hugepages_reserved_warn_pct = 50;
  std::uint64_t hugepages_free_min = 1;
};

// The defaults compiled in; the same values as the shipped etc/mrcheck-rules.conf (a unit test keeps them
// equal), used when no rules file exists.
matrix_rules default_matrix_rules();
// Parses rules text. `file` names the origin in errors: "<file>:<line>: <what>". An unknown key, a bad
// value or a duplicate single-valued key is an error; the first error is returned.
result<matrix_rules> parse_matrix_rules(std::string_view text, std::string_view file);
// Reads and parses PATH (a plain file, at most 1 MiB). A missing file is an error.
result<matrix_rules> load_matrix_rules(const std::string& path);
inline constexpr std::string_view k_default_rules_path = "/etc/slurm/mrcheck-rules.conf";
// PATH when given (must exist); else k_default_rules_path when it exists; else default_matrix_rules().
result<matrix_rules> load_matrix_rules_or_default(const std::string& path);

// Facts the matrix needs beyond node_facts, read through the same sysroot.
struct matrix_facts {
  // slurm.conf at slurm_conf_path (slurm_conf.h): its limit propagation (docs/facts/memlock.md §1). An include
  // the reader could not follow is an error here, as is a propagation list Slurm refuses.
  result<slurm_conf_facts> slurm_conf = status::error("not read");
  // The OFED release installed in user space, from /usr/bin/ofed_info (MLNX_OFED and DOCA-OFED ship it):
  // "MLNX_OFED_LINUX-5.8-3.0.7.0"; nullopt when no ofed_info exists.
  std::optional<std::string> ofed_user_release;
  // rdma-core package versions of the libibverbs.so.1.<abi>.<version> files in the library directories
  // ("44.0", "2307mlnx47"...): seen the same way on the host and in a fixture tree.
  std::vector<std::string> rdma_core_files;
  // NVML's fabric answer and the IMEX service (fabric.h): nullopt where the caller did not collect it.
  std::optional<mnnvl_facts> mnnvl;
};
// `scan_library_dirs`: list the library directories for rdma_core_files. Only needed when node_facts has no
// libibverbs fact (a tree without libraries.json, or dlopen failed): listing /usr/lib* is the slowest read.
matrix_facts collect_matrix_facts(const sysroot& root, const std::string& slurm_conf_path,
                                  bool scan_library_dirs = true);

}  // namespace mrcheck
