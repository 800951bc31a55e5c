#include <mrcheck/checks.h>
#include <mrcheck/matrix.h>

namespace mrcheck {

report run_basic_checks(const node_facts& f, const config& c, const matrix_rules& rules) {
  report r;
  r.checks.push_back(check_memlock(f, c));
  r.checks.push_back(check_max_map_count(f, rules));
  r.checks.push_back(check_hugepages(f, rules));
  return r;
}

}  // namespace mrcheck
