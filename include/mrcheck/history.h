// What changed: a node's stack fingerprint (kernel, modules and their origin, rdma-core, firmware, drivers,
// libraries, the limits NCCL's registrations need, mrcheck and its rules), the history of its changes kept by
// mrcheck-prolog in state_dir, the change lines and drain reasons that name a change, and the fleet view
// (`mrcheck fleet`) that compares many nodes' fingerprints. A node judged as it is now cannot say which change
// broke it; a node that remembers its last stack can (README "What changed").
//
// The fingerprint is built from facts already collected (node_facts, matrix_facts, the rules): nothing is read
// twice. Only the boot id and boot time are read here (two small procfs files).
#pragma once

#include <mrcheck/check.h>
#include <mrcheck/facts.h>
#include <mrcheck/matrix.h>
#include <mrcheck/status.h>
#include <mrcheck/sysroot.h>

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace mrcheck {

// The node's boot: /proc/sys/kernel/random/boot_id and the boot time (now - /proc/uptime). Empty / nullopt when
// not readable (a --root tree captured before this existed).
inline constexpr std::string_view k_boot_id_path = "/proc/sys/kernel/random/boot_id";
struct boot_info {
  std::string boot_id;
  std::optional<std::int64_t> boot_time;  // unix seconds
};
boot_info read_boot_info(const sysroot& root, std::int64_t now);

// key -> value, e.g. "kernel" -> "6.1.0-28-amd64", "mlx5_core" -> "24.10-1.1.4 (OFED)",
// "mlx5_0.fw" -> "28.39.1002". A fact that is unknown has no key. Keys and values are escaped, one line each.
struct stack_fingerprint {
  std::map<std::string, std::string> items;
  std::string boot_id;
  std::optional<std::int64_t> boot_time;
  bool operator==(const stack_fingerprint&) const = default;
};

// The loaded out-of-tree modules of `f` that DKMS built for the running kernel: a file
// /lib/modules/KREL/updates/dkms/NAME.ko[.xz|.zst|.gz], or a DKMS tree installed for KREL
// (/var/lib/dkms/PKG/kernel-KREL-ARCH -> VER/KREL/ARCH, holding module/NAME.ko[...]). A few stats, and a listing of
// /var/lib/dkms only when the first place has none (docs/facts/kernel-and-drivers.md §8).
std::set<std::string> read_dkms_modules(const sysroot& root, const node_facts& f);

// The fingerprint of facts already read. `rules` gives the rules' hash; `dkms` read_dkms_modules().
stack_fingerprint make_fingerprint(const node_facts& f, const matrix_facts& extra, const matrix_rules& rules,
                                   const boot_info& boot, const std::set<std::string>& dkms = {});
// Where a module came from: "inbox" (built with the kernel), "OFED" (an out-of-tree RDMA module: MLNX/DOCA-OFED
// from its kmod packages), "OFED DKMS" (the same built by DKMS: DOCA-OFED's mlnx-ofed-kernel-dkms), "DKMS" (any
// other out-of-tree module DKMS built: NVIDIA's from nvidia-dkms), "out-of-tree" (any other module the kernel marks
// as such: a kmod package, a .run installer's build).
std::string module_origin(const kmodule_fact& m, const result<std::string>& kernel_release, bool dkms = false);

// {"items": {...}, "boot_id": "...", "boot_time": N}
nlohmann::json fingerprint_to_json(const stack_fingerprint& fp);
stack_fingerprint fingerprint_from_json(const nlohmann::json& j);

// The checks a difference in `key` can make fail (rdma_stack for the modules and rdma-core, hca_fw for firmware,
// ...): the rule that makes a change matter.
std::vector<std::string_view> checks_for_key(std::string_view key);

struct stack_change_item {
  std::string key;
  std::string before;  // "" = absent
  std::string after;
};
// One run that saw a different stack: when, on which boot, what.
struct stack_change {
  std::int64_t time = 0;
  std::string boot_id;
  std::optional<std::int64_t> boot_time;
  bool new_boot = false;  // the node had rebooted since the run before
  std::vector<stack_change_item> items;
};

// The differences, in key order. A module's srcversion change is left out when its version line changed too
// (one line per module).
std::vector<stack_change_item> diff_fingerprints(const stack_fingerprint& before, const stack_fingerprint& after);

// "mrcheck: changed: mlx5_core 24.10-1.1.4 (OFED) -> 6.1.0-28-amd64 (inbox) since boot at 2026-11-30T03:12Z"
std::string change_line(const stack_change& c, const stack_change_item& i);
// change_line(), then a line for each release with changed registration defaults that the item crosses
// (default_changes.h): "mrcheck: changed: NCCL 2.26.5 -> 2.27.7: NCCL_NET_GDR_C2C now 1: GPU buffers on Grace are
// registered through the NIC".
std::vector<std::string> change_lines(const stack_change& c, const stack_change_item& i);
// The crossed defaults of `i` as JSON: [{"setting", "since", "reverted", "effect", "source", "line"}], [] when none.
nlohmann::json change_defaults_json(const stack_change_item& i);
// "2026-11-30T03:12Z"
std::string utc_minute(std::int64_t t);

inline constexpr std::size_t k_history_max_changes = 64;
inline constexpr int k_history_version = 1;
inline constexpr std::string_view k_history_format = "mrcheck-stack-history";

// What state_dir remembers about a node: the last stack, its verdicts, whether it was re-validated, and the last
// k_history_max_changes changes (oldest first).
struct stack_history {
  bool has_current = false;
  std::string node;
  stack_fingerprint current;
  std::int64_t since = 0;                       // when `current` was first seen
  std::int64_t last_run = 0;                    // the last run that wrote the file
  std::map<std::string, std::string> verdicts;  // check id -> verdict of the last run
  // Re-validation of `current` (the registration probe and the NCCL pair after a change): "pass" / "fail", "" when
  // not run for this stack; the reason of a failure.
  std::string revalidated;
  std::string revalidate_reason;
  std::int64_t revalidated_time = 0;
  std::vector<stack_change> changes;
};

// Parses a history file. A corrupt file, another node's, another format or a newer version is an error naming it
// (the caller restarts the history); never a guess.
result<stack_history> parse_history(std::string_view text, std::string_view node);
std::string history_to_text(const stack_history& h);

// This run: compares `fp` with the history, appends a change when anything differs (bounded), takes the verdicts.
// Returns the change of this run (nullopt: same stack, or the first run). A first run returns nullopt and leaves
// has_current false before the call: the caller says "no history yet".
std::optional<stack_change> record_run(stack_history& h, const stack_fingerprint& fp, const report& r,
                                       std::int64_t now);

// The latest change that touched a fact `check_id` depends on, nullopt when none.
const stack_change* change_for_check(const stack_history& h, std::string_view check_id,
                                     const stack_change_item** item = nullptr);
// "mlx5_core 24.10-1.1.4 (OFED) -> 6.1.0-28-amd64 (inbox) since reboot 2026-11-30T03:12Z": for a drain reason.
std::string change_words(const stack_change& c, const stack_change_item& i);
// change_words() when it is at most `max` bytes; else a list that changed (verbs providers, modules) by what
// left and what came ("verbs_providers -rxe since ..."), or "KEY changed since ...": a drain reason has 200 bytes,
// and the check's cause must still fit after the change.
std::string change_words_short(const stack_change& c, const stack_change_item& i, std::size_t max = 100);

// "# TYPE mrcheck_stack_changed_timestamp_seconds gauge" (the last change, 0 when none known) and
// "mrcheck_stack_info{kernel=...,mlx5_core=...,...} 1": appended to the prolog's textfile.
std::string prometheus_stack_lines(const stack_fingerprint& fp, const stack_history* h);

// Slurm hostlist form: {"node017","node033","node034"} -> "node[017,033-034]". Names without a trailing number
// are listed as they are.
std::string hostlist(std::vector<std::string> names);

}  // namespace mrcheck
