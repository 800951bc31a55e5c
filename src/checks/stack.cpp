// stack: the soft RLIMIT_STACK of the process that ran mrcheck (and, in the plugin, of the Slurm task) against
// stack_max. glibc gives every new thread a stack of the soft limit's size, and an unlimited one crashes NCCL
// 2.27.x's multi-node NVLink set-up (docs/facts/limits.md §2); srun propagates the submit shell's value to the
// tasks (§1). The model and the hop are include/mrcheck/limit_chain.h's.
#include <mrcheck/checks.h>
#include <mrcheck/limit_chain.h>

namespace mrcheck {

check_result check_stack(const node_facts& f, const config& c) {
  return judge_chain_limit(rlimit_kind::stack, f.chain, c);
}

}  // namespace mrcheck
