// Parts of the front ends' selections over a node's facts, as the tests judge fixture trees with them: run_checks
// (include/mrcheck/check_registry.h) over the matrix group alone, and over `mrcheck report`'s node checks but the
// matrix.
#pragma once

#include <mrcheck/check_registry.h>
#include <mrcheck/matrix.h>

namespace mrcheck {

// The matrix group alone: no front end runs it without the memory group, the tests judge it on its own.
inline check_selection matrix_only() { return {{check_group::matrix}}; }

inline report judge_matrix(const node_facts& facts, const matrix_rules& rules, const matrix_facts& extra) {
  return run_checks(matrix_only(), node_check_inputs(facts, rules, nullptr, &extra));
}
// Without the extra facts: propagate_limits skips, rdma_stack judges user space from node_facts only.
inline report judge_matrix(const node_facts& facts, const matrix_rules& rules) {
  return run_checks(matrix_only(), node_check_inputs(facts, rules));
}

// memlock against the config, then max_map_count and hugepages under the site's matrix rules, the rules
// mrcheck-prolog judges them by.
inline report run_basic_checks(const node_facts& f, const config& c, const matrix_rules& rules) {
  return run_checks(check_selection{{check_group::memlock, check_group::memory}}, node_check_inputs(f, rules, &c));
}

}  // namespace mrcheck
