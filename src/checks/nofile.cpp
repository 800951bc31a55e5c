// nofile: the soft RLIMIT_NOFILE of the process that ran mrcheck (and, in the plugin, of the Slurm task) against
// nofile_min. NCCL, UCX and the frameworks open sockets and descriptors per peer: a login shell's low limit,
// propagated by srun, fails a large job at bootstrap with "Too many open files" (docs/facts/limits.md §3).
#include <mrcheck/checks.h>
#include <mrcheck/limit_chain.h>

namespace mrcheck {

check_result check_nofile(const node_facts& f, const config& c) {
  return judge_chain_limit(rlimit_kind::nofile, f.chain, c);
}

}  // namespace mrcheck
