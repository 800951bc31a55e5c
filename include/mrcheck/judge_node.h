// Judging one node, the one sequence behind `mrcheck report`, `mrcheck fleet` (for a dump tree) and
// mrcheck-prolog: the node's facts, the matrix facts (slurm.conf where slurm_conf_path() says), a selection of
// checks under the rules, and the stack fingerprint (history.h). What the front ends do with the result -
// print it, compare it, drain the node - stays theirs. Implemented in src/checks/judge_node.cpp.
#pragma once

#include <mrcheck/check.h>
#include <mrcheck/check_registry.h>
#include <mrcheck/facts.h>
#include <mrcheck/history.h>
#include <mrcheck/job_nccl.h>
#include <mrcheck/matrix.h>
#include <mrcheck/sysroot.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>

namespace mrcheck {

struct config;

struct judge_options {
  check_selection selection;  // report_selection() or prolog_selection() (check_registry.h)
  // mrcheck.conf: the memlock group's limits and verbs_library; nullptr: the checks that need it report an
  // error, and the libraries load under config's defaults.
  const config* cfg = nullptr;
  // `mrcheck report` in a job's shell: the NCCL this process's environment would load (LD_LIBRARY_PATH,
  // python3's wheel, VIRTUAL_ENV, CONDA_PREFIX; read from the file, never loaded) is what the `nccl` rule
  // judges when it is not the system's own. Host only; the prolog runs in slurmd's environment, not a job's.
  bool job_nccl_from_env = false;
  // dlopen libibverbs, libcuda and libnccl on the host to read their versions. Off: they read as not loaded
  // (`mrcheck fleet`, which promises no dlopen whatever PATH names). A tree never loads them.
  bool load_libraries = true;
  std::int64_t now = 0;  // the clock the fingerprint's boot time is counted from (read_boot_info)
  // Called after each phase ("sysfs+procfs", "libraries", "matrix facts", "judge", "fingerprint"): --timings.
  std::function<void(std::string_view phase)> phase_done;
};

struct node_judgement {
  node_facts facts;
  matrix_facts extra;
  std::optional<job_nccl> job;  // when job_nccl_from_env, on the host
  report rep;                   // the selection's checks, in its order
  stack_fingerprint fp;
};

// Reads and judges the node under `root`. On the host the libraries (dlopen of libibverbs, libcuda and
// libnccl to read their versions: the slowest facts on a GPU node) load on a second thread while this one
// reads sysfs and procfs; the facts are the same as collect_facts() gathers in one go. Under a dump tree
// nothing is loaded (its .mrcheck/libraries.json stands for the libraries). Never fails as a whole: each fact
// and check carries its own status.
node_judgement judge_node(const sysroot& root, const matrix_rules& rules, const judge_options& o);

}  // namespace mrcheck
