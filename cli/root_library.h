// Root's library loads through a checked descriptor (cli/root_library.cpp).
#pragma once

#include <mrcheck/status.h>

#include <string>

namespace mrcheck::cli {

// `path` opened read-only after a walk from `/` with O_NOFOLLOW in which every directory and the file are root's
// and not writable by group or others (sticky directories allowed). The descriptor is close-on-exec.
result<int> open_root_library(const std::string& path);

// What another process of root loads for `fd` of this one while this one lives: "/proc/PID/fd/N".
std::string loadable_path(int fd);

}  // namespace mrcheck::cli
