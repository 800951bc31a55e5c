// The memlock model's functions, implemented in the step layer (src/step/: predict.cpp, enforce.cpp,
// submit_record.cpp, post_exec.cpp): prediction, enforcement, the submit record and what the task runs with
// after exec. Its values (the prediction, the record, the enforcement) are memlock_chain.h's, which the memlock
// check of the checks layer judges (judge_memlock); the step engine that applies the model at each hook is
// step.h.
#pragma once

#include <mrcheck/check.h>
#include <mrcheck/facts.h>
#include <mrcheck/memlock_chain.h>
#include <mrcheck/slurm_conf.h>
#include <mrcheck/status.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mrcheck {

// ---- SLURM_RLIMIT_MEMLOCK against the task's limits ----

// set_user_limits()' _set_limit(): the soft limit a task with limits `cur` gets from a value that applies
// (PropagateResourceLimits covers MEMLOCK, or the `U` prefix). Without `U` a value above the hard limit is
// cut to it; with `U` setrlimit() refuses it and the soft limit stays.
std::uint64_t slurmstepd_soft(const propagated_limit& v, const memlock_limit& cur);

// ---- the submit side's record ----

// Builds the record from a chain read by read_chain() (tool first). Keeps at most k_submit_max_hops.
submit_record make_submit_record(std::string tool, std::string host, std::optional<std::string> sent,
                                 std::string job_id, const std::vector<process_fact>& chain);
// A compact single-line form of at most k_submit_record_max bytes (older ancestors are dropped to fit).
std::string encode_submit_record(const submit_record& r);
// Strict inverse of encode_submit_record; refuses anything longer than k_submit_record_max, unknown
// versions, bad numbers and more than k_submit_max_hops hops.
result<submit_record> decode_submit_record(std::string_view text);

// ---- prediction ----

// Predicts the limit the task starts with and, when it is below `required` (bytes, k_unlimited allowed),
// names the hop that lowered it and the fix. Pure: reads nothing.
memlock_prediction predict_task_memlock(const memlock_inputs& in, std::uint64_t required);

// ---- enforcement ----

// getrlimit/setrlimit for RLIMIT_MEMLOCK of this process, behind an interface so tests can inject EPERM.
class rlimit_ops {
 public:
  virtual ~rlimit_ops() = default;
  virtual result<memlock_limit> get() = 0;
  virtual status set(const memlock_limit& l) = 0;  // errno kept in status::err()
};
rlimit_ops& real_rlimit_ops();

// Raises this process's hard and soft RLIMIT_MEMLOCK to at least `required` (never lowers), and says which
// SLURM_RLIMIT_MEMLOCK value the caller must write so set_user_limits() does not lower it again. When the
// hard limit cannot be raised (EPERM), the soft limit still goes as high as the hard limit allows.
enforcement enforce_memlock(rlimit_ops& ops, std::uint64_t required, const memlock_prediction& before);

// ---- the chain table ----

// The chain table, one line per row, each "mrcheck: memlock: ..." (for verbose and the CLI).
std::vector<std::string> chain_table_lines(const memlock_prediction& p);

// ---- after exec ----

// nullopt when the task runs with what was predicted; else a warn/fail result naming the override.
std::optional<check_result> judge_post_exec(const post_exec_observation& o, std::uint64_t required);

}  // namespace mrcheck
