// The basic checks of `mrcheck report`: pure functions of the node facts and the site config. Each returns
// one check_result with a stable id (memlock, max_map_count, hugepages); thresholds and their sources are
// documented next to each check in src/checks/.
#pragma once

#include <mrcheck/check.h>
#include <mrcheck/config.h>
#include <mrcheck/fabric.h>
#include <mrcheck/facts.h>

#include <optional>

namespace mrcheck {

struct matrix_rules;

// memlock: the soft RLIMIT_MEMLOCK of the start process (facts.chain[0], the shell or job that ran mrcheck)
// against config.memlock_min. fail below it, naming the hop of the chain where the limit dropped; error when
// the chain or the limit could not be read. For a Slurm task the SPANK plugin is the real check (it sees the
// task's final limit); this one is for login shells and nodes, whose soft limit srun propagates.
check_result check_memlock(const node_facts& f, const config& c);

// stack and nofile: the same for the soft RLIMIT_STACK (above config.stack_max fails) and RLIMIT_NOFILE (below
// config.nofile_min fails), naming the process that set it and who fixes it (include/mrcheck/limit_chain.h).
check_result check_stack(const node_facts& f, const config& c);
check_result check_nofile(const node_facts& f, const config& c);

// The node's memory checks with the rules' thresholds (src/checks/max_map_count.cpp, hugepages.cpp), run by
// mrcheck-prolog after the matrix group. Pure. Unreadable fact: error; rule set to off: skip. The overloads
// above, taking a config, are these with default_matrix_rules().
check_result check_max_map_count(const node_facts& f, const matrix_rules& r);
check_result check_hugepages(const node_facts& f, const matrix_rules& r);

// The matrix check `mnnvl` (owner node, src/checks/mnnvl.cpp) on the facts of fabric.h: skip without a fabric; fail when a GPU's fabric is not completed, its
// status an error, its cluster UUID zero, or the IMEX daemon not running; warn on degraded bandwidth; error when
// NVML could not be asked on a node with the NVIDIA driver.
check_result check_mnnvl(const mnnvl_facts& f);

// The plugin's post-exec check `imex_channel` (owner site, src/checks/imex_channel.cpp): on a node that serves an
// IMEX domain (node_serves_imex), the task's mount namespace has an IMEX channel the job user may open read-write.
// No verdict where the node serves none or the task was gone before its namespace was read.
std::optional<check_result> check_imex_channel(const imex_facts& node, const task_imex_view& task);

}  // namespace mrcheck
