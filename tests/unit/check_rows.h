// Every row of the check registry (src/checks/registry.cpp), in its order, for the tests that hold the registry
// against README's table and the sources. Built from check_ids() over every origin and group: the registry
// offers no list of its own rows, since no product code reads one. A group or origin added to
// check_registry.h and not here leaves its rows out, and CheckRegistry.IdsAreUniqueAndEqualTheDocumentedOnes
// then fails on README's table.
#pragma once

#include <mrcheck/check_registry.h>

#include <algorithm>
#include <functional>
#include <vector>

namespace mrcheck::test {

inline std::vector<const check_def*> all_check_rows() {
  std::vector<const check_def*> out;
  for (auto origin : {check_origin::registry, check_origin::probe, check_origin::container, check_origin::post_exec,
                      check_origin::prolog}) {
    for (auto group : {check_group::memlock, check_group::memory, check_group::matrix, check_group::mr,
                       check_group::nccl, check_group::rdma, check_group::revalidation}) {
      for (auto id : check_ids(origin, group)) out.push_back(find_check(id));
    }
  }
  // The rows are one array: their addresses are the registry's order.
  std::sort(out.begin(), out.end(), std::less<const check_def*>());
  return out;
}

}  // namespace mrcheck::test
