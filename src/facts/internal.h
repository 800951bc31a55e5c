// Helpers shared by the facts sources; not part of the public API.
#pragma once

#include <mrcheck/facts.h>

namespace mrcheck::detail {}

namespace mrcheck {

// dlopen(name), call `int fn_name(int*)`, return the value; fills *lib_out with the loaded file when given.
// The library stays loaded (libcuda/libnccl must not be unloaded under their own threads).
result<int> call_version(const std::string& name, const char* fn_name, library_fact* lib_out);

}  // namespace mrcheck
