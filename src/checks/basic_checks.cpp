#include <mrcheck/check_registry.h>
#include <mrcheck/checks.h>
#include <mrcheck/matrix.h>

namespace mrcheck {

report run_basic_checks(const node_facts& f, const config& c, const matrix_rules& rules) {
  return run_checks(check_selection{{check_group::memlock, check_group::memory}}, node_check_inputs(f, rules, &c));
}

}  // namespace mrcheck
