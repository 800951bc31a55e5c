// Files root writes into directories it trusts only by descriptor: every name is opened relative to an open
// directory with O_NOFOLLOW, a new file is written as a temporary and renamed over the old one, so a reader never
// sees half a file and a symlink planted under the name is never followed (src/admin/report_spool.cpp,
// src/history/store.cpp).
#pragma once

#include <mrcheck/status.h>

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace mrcheck {

// Writes `body` to `name` in the directory `dfd` (a name, no '/'): ".<name>.<pid>.tmp" created O_EXCL|O_NOFOLLOW
// with `mode`, written, fsync'd when `sync`, renamed over `name`. The temporary is removed on failure; the old
// file is kept. The error names `what` and the file.
status write_file_at(int dfd, const std::string& name, std::string_view body, mode_t mode, bool sync,
                     std::string_view what);

// Reads `name` in `dfd` with O_NOFOLLOW: a regular file owned by `owner`, writable by nobody else, at most `max`
// bytes; anything else is an error naming `what` and the file. ENOENT is an error whose err() is ENOENT.
result<std::string> read_file_at(int dfd, const std::string& name, uid_t owner, std::size_t max, std::string_view what);

}  // namespace mrcheck
