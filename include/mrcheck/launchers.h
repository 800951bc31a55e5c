// The container launchers' table by program name (src/explain/causes/container_runtime.cpp), for the watcher that
// follows a host task's processes (src/container/enter.cpp). Apart from container_runtime.h, which most of the
// diagnosis includes, so that this lookup stays next to the table without touching them.
#pragma once

#include <string_view>

namespace mrcheck {

// `file_name` (a program's, without its directory) is one of the launchers in launcher_runtime's table, whatever
// its arguments: a process running it may be a launcher between entering its container and exec'ing the
// container's program (`chroot` between its chroot() and its execve()).
bool is_launcher_program(std::string_view file_name);

}  // namespace mrcheck
