// Every read of /proc, /sys and /etc goes through a sysroot, so a tree captured on a real node with
// `mrcheck dump` replays it exactly (`--root DIR`), like libibverbs' SYSFS_PATH or hwloc's HWLOC_FSROOT.
#pragma once

#include <mrcheck/status.h>

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace mrcheck {

class sysroot {
 public:
  // Default maximum file size for read(): sysfs/procfs files are small; a bigger file is an error, never truncated.
  static constexpr std::size_t k_default_max = 1 << 20;

  // The real root "/".
  sysroot() = default;
  // Opens DIR as the root. Error if it does not exist or is not a directory.
  static result<sysroot> open(const std::filesystem::path& dir);
  // A process's root as it sees it: /proc/PID/root, kept as that path. open() would resolve the link to the
  // path of the root in this process's namespace ("/" for a task in a mount namespace of its own) and so read
  // this process's mounts instead of the task's (tests/unit/imex_channel_test.cpp). Error when the process is
  // gone or its root cannot be read (ptrace access: another user's process).
  static result<sysroot> open_process_root(int pid);

  bool is_host() const { return root_ == "/"; }
  const std::filesystem::path& root() const { return root_; }

  // `path` is absolute as seen on the node ("/proc/1/limits"); host_path() maps it into the root.
  std::filesystem::path host_path(std::string_view path) const;

  // Whole file; error (errno context, path named) if missing, unreadable or larger than `max` (rdma-core's
  // rule: fail rather than truncate).
  result<std::string> read(std::string_view path, std::size_t max = k_default_max) const;
  // Same, with trailing whitespace and newlines removed (sysfs values).
  result<std::string> read_value(std::string_view path) const;
  // Names in a directory, sorted; "." and ".." excluded.
  result<std::vector<std::string>> list(std::string_view path) const;
  // The names in a directory for which `keep` is true, sorted. Where only some names of a directory matter
  // (rdma-core's providers, libibverbs.so.1.* in a library directory), a dump records those entries alone, as
  // names: it recreates each one empty (or as the link it is), not the directory's thousands of others.
  result<std::vector<std::string>> list_matching(std::string_view path,
                                                 const std::function<bool(std::string_view)>& keep) const;
  // Target text of a symlink (not resolved).
  result<std::string> read_link(std::string_view path) const;
  bool exists(std::string_view path) const;

  // Recording for `mrcheck dump`: called with (kind, node path) for every successful access. `name`: an entry
  // whose name was used, never its content (list_matching).
  enum class access { file, dir, link, name };
  using recorder = std::function<void(access, const std::string&)>;
  void set_recorder(recorder r) { recorder_ = std::move(r); }

 private:
  explicit sysroot(std::filesystem::path root) : root_(std::move(root)) {}
  void record(access a, std::string_view path) const;

  std::filesystem::path root_ = "/";
  recorder recorder_;
};

}  // namespace mrcheck
