// The library facts of the host (libibverbs, libcuda, libnccl) on their own, so a caller can gather them on
// a second thread while it reads sysfs and procfs: each is a dlopen, together they are the slowest part of
// collect_facts() on a GPU node (bench/prolog/README.md). Host only; a tree under --root has libraries.json.
#pragma once

#include <mrcheck/facts.h>

#include <string>

namespace mrcheck {

struct library_facts {
  result<library_fact> libibverbs = status::error("not read");
  result<library_fact> libcuda = status::error("not read");
  result<library_fact> libnccl = status::error("not read");
  result<int> cuda_driver_version = status::error("not read");
  result<int> nccl_version = status::error("not read");
};

// Exactly what collect_facts() does with load_libraries on: dlopen `verbs_library` and look up NCCL's
// symbols, dlopen libcuda.so.1 and libnccl.so.2 and call cuDriverGetVersion / ncclGetVersion (libcuda and
// libnccl stay loaded, see call_version). Never throws; each fact carries its own status.
library_facts load_library_facts(const std::string& verbs_library);

// Moves the facts into `f` (replacing whatever collect_facts left there).
void apply_library_facts(library_facts&& l, node_facts& f);

}  // namespace mrcheck
