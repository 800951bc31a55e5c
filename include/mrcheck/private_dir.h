// Writing as root into a directory that no user may steer (report_dir=, `mrcheck dump --out`): the directory is
// opened once and checked on its descriptor, and every name below it is created relative to a descriptor with
// O_NOFOLLOW|O_EXCL, so no symlink, rename or name a user plants can move a write elsewhere.
#pragma once

#include <mrcheck/status.h>

#include <sys/types.h>

#include <cstddef>

#include <string>
#include <string_view>

namespace mrcheck {

// An open directory, closed by the destructor.
class dir_handle {
 public:
  dir_handle() = default;
  explicit dir_handle(int fd) : fd_(fd) {}
  dir_handle(const dir_handle&) = delete;
  dir_handle& operator=(const dir_handle&) = delete;
  dir_handle(dir_handle&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  dir_handle& operator=(dir_handle&& o) noexcept;
  ~dir_handle();
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

// `path` (absolute) opened as a directory, its last component never followed, and checked on the descriptor:
// owned by root or `owner`, and not writable by group or others. `what` names it in the errors.
result<dir_handle> open_private_dir(const std::string& path, uid_t owner, std::string_view what);

// The directory `name` (one component) in `parent`: created with `mode` (exactly: the umask does not widen or
// narrow it), or opened when it exists, never through a symlink.
result<dir_handle> make_dir_at(const dir_handle& parent, const std::string& name, mode_t mode);

// Writes `body` as the file `name` (one component) in `dir`, created O_CREAT|O_EXCL|O_NOFOLLOW with exactly
// `mode`. With `replace`, through a temporary name, flushed to disk and renamed over `name` (a reader sees the old
// file or the new one, after a crash too); without, an existing `name` is an error.
status write_file_at(const dir_handle& dir, const std::string& name, std::string_view body, mode_t mode, bool replace);

// Reads `name` (one component) in `dir`, never through a symlink: a regular file owned by `owner`, writable by
// nobody else, at most `max` bytes; anything else is an error. A missing file is an error whose err() is ENOENT.
result<std::string> read_file_at(const dir_handle& dir, const std::string& name, uid_t owner, std::size_t max);

}  // namespace mrcheck
