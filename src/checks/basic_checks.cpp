#include <mrcheck/checks.h>

namespace mrcheck {

report run_basic_checks(const node_facts& f, const config& c) {
  report r;
  r.checks.push_back(check_memlock(f, c));
  r.checks.push_back(check_max_map_count(f, c));
  r.checks.push_back(check_hugepages(f, c));
  return r;
}

}  // namespace mrcheck
