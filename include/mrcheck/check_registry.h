// Every check mrcheck has, declared once (src/checks/registry.cpp): its id, the group it belongs to, what it
// reads, and the function that judges it. The front ends pick checks by group and run them with run_checks():
//
//   mrcheck report           report_selection()   memlock, memory, matrix   (cli/cmd_report.cpp)
//   mrcheck-prolog           prolog_selection()   matrix, memory            (prolog/main.cpp)
//   the plugin's task_init   plugin_selection()   memlock; mr, nccl, rdma on local task 0  (src/step/plugin_engine.cpp)
//
// A group the selection names more than once runs once; the report lists groups in the selection's order and
// checks in the registry's order within a group. The probe groups (mr, nccl, rdma) run in a child process
// (`mrcheck probe mr|nccl|rdma --json`), so their checks have no function here: check_inputs::probe runs the
// group and returns all its checks. Two checks are made outside any selection (check_origin): the plugin's
// post-exec watcher's `memlock_exec` and mrcheck-prolog's `revalidate`. Every id a verdict can carry is a row
// here (check_registry_test greps the sources for ids that are not), except the probe group's own name (`mr`,
// `nccl`), the id of the plugin's error when that group's probe did not run or printed no valid report
// (src/step/plugin_engine.cpp).
#pragma once

#include <mrcheck/check.h>

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mrcheck {

struct node_facts;
struct config;
struct check_groups;
struct matrix_rules;
struct matrix_facts;
struct memlock_prediction;
struct enforcement;
struct limit_prediction;

enum class check_group : std::uint8_t {
  memlock,       // RLIMIT_MEMLOCK against memlock_min (and RLIMIT_STACK, RLIMIT_NOFILE against stack_max, nofile_min):
                 // the calling process's chain, or the plugin's task prediction
  memory,        // the node's memory settings under the rules (vm.max_map_count, hugepages)
  matrix,        // the driver/firmware matrix under the rules
  mr,            // `mrcheck probe mr`: registrations through libibverbs, as the caller, under its limits
  nccl,          // `mrcheck probe nccl`: two NCCL ranks
  rdma,          // `mrcheck probe rdma`: an RC queue pair's loopback on each active port (the data plane)
  revalidation,  // mrcheck-prolog's re-validation after a stack change (both probes, as nobody)
};
std::string_view to_string(check_group g);

// The plugin's memlock inputs: its prediction for the task and what enforce=yes did.
struct task_memlock {
  const memlock_prediction* prediction = nullptr;
  std::uint64_t required = 0;
  const enforcement* enf = nullptr;
  // The task's RLIMIT_STACK and RLIMIT_NOFILE (include/mrcheck/limit_chain.h), judged with check_inputs::cfg.
  const limit_prediction* stack = nullptr;
  const limit_prediction* nofile = nullptr;
};

// What the checks of a selection may read. A check whose inputs are missing reports `error` naming them.
struct check_inputs {
  const node_facts* facts = nullptr;
  const config* cfg = nullptr;
  const matrix_rules* rules = nullptr;
  const matrix_facts* extra = nullptr;  // optional
  const task_memlock* task = nullptr;   // set by the plugin: memlock judges the task, not the chain
  // Runs one probe group (mr or nccl) and returns its checks; unset: the probe groups are skipped.
  std::function<std::vector<check_result>(check_group)> probe;
};

// The inputs of the node checks (report, prolog, matrix): facts and rules, the config where memlock runs, the
// matrix facts where the caller read them; no task, no probe.
check_inputs node_check_inputs(const node_facts& facts, const matrix_rules& rules, const config* cfg = nullptr,
                               const matrix_facts* extra = nullptr);

// What makes a check's verdict.
enum class check_origin : std::uint8_t {
  registry,   // check_def::run, called by run_checks()
  probe,      // `mrcheck probe mr|nccl` (the job's own probe, as the job user): check_inputs::probe
  container,  // the container helper, for a task in a container (src/container/): check_inputs::probe too
  post_exec,  // the plugin's post-exec watcher (src/step/post_exec.cpp, spank/plugin.cpp): in no selection
  prolog,     // mrcheck-prolog's re-validation (prolog/revalidate.h): in no selection
};

struct check_def {
  std::string_view id;
  check_group group;
  std::string_view what;  // one line, for docs and --help
  // Set exactly for check_origin::registry.
  check_result (*run)(const check_inputs&);
  check_origin origin = check_origin::registry;
};

const check_def* find_check(std::string_view id);
// The ids of one origin within one group, in the registry's order (the probe's ids: what a probe report may
// carry, src/step/plugin_engine.cpp).
std::vector<std::string_view> check_ids(check_origin origin, check_group group);
// The check's verdict is the job's own word about the node (its probe, or its image in the container helper):
// the AdminComment record says so (README "What the AdminComment record says").
bool from_job_probe(std::string_view id);

struct check_selection {
  std::vector<check_group> groups;  // in the order the report lists them
  bool operator==(const check_selection&) const = default;
};

check_selection report_selection();
check_selection prolog_selection();
// The plugin: memlock when asked; the probe groups only on local task 0 (one probe per node).
check_selection plugin_selection(const check_groups& g, bool first_task);

// The ids a selection reports, in order (the probe groups' ids included; post_exec and prolog never).
std::vector<std::string_view> selected_ids(const check_selection& s);

// Runs the selection's checks and returns them in order.
report run_checks(const check_selection& s, const check_inputs& in);

}  // namespace mrcheck
