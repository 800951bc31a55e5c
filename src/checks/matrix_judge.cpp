// judge_matrix: the matrix group of the check registry (src/checks/registry.cpp), for the callers that want
// only the matrix.
#include <mrcheck/check_registry.h>
#include <mrcheck/matrix.h>

namespace mrcheck {

const std::vector<std::string>& matrix_check_ids() {
  static const std::vector<std::string> ids = [] {
    std::vector<std::string> out;
    for (auto id : selected_ids(matrix_selection())) out.emplace_back(id);
    return out;
  }();
  return ids;
}

report judge_matrix(const node_facts& facts, const matrix_rules& rules, const matrix_facts& extra) {
  return run_checks(matrix_selection(), node_check_inputs(facts, rules, nullptr, &extra));
}

report judge_matrix(const node_facts& facts, const matrix_rules& rules) {
  return run_checks(matrix_selection(), node_check_inputs(facts, rules));
}

}  // namespace mrcheck
