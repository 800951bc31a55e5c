// Processes mrcheck did not start, seen from outside: a process's children and its tree read from /proc, and the
// wait for a process that is not our child (a task of the step: slurmstepd reaps it, so no waitpid here).
// Part of the child seam (include/mrcheck/child.h), base layer.
//
// Users: src/sys/child.cpp (run_child's containment: the children a probe left behind), src/container/enter.cpp
// (the task's tree, where a launcher or a host task starts its container; the container watcher's wait for the
// task), src/step/post_exec.cpp (the post-exec watcher's wait for the task, beside its exec notice).
#pragma once

#include <mrcheck/sysroot.h>

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <vector>

namespace mrcheck {

// The direct children of `pid` now, in the order the kernel lists them: /proc/PID/task/TID/children, every
// thread's (Linux 3.5, CONFIG_PROC_CHILDREN); where none of those files exists, the parent field of every
// /proc/N/stat. Empty when `pid` has none, does not exist, or /proc cannot be read. Entries that are not a
// positive pid, and stat lines without a parent field, are skipped. Read through `root`, so that a test can
// hand it a /proc of its own.
std::vector<pid_t> children_of(pid_t pid, const sysroot& root = sysroot{});

// `pid` and its descendants, breadth first, at most `max` in all (a process that forks many children costs no
// more): `pid` first, then its children, their children ... Read as children_of reads. `pid` is the first entry
// even when it does not exist (its tree is then just itself); empty only when `max` is 0.
std::vector<pid_t> process_tree(pid_t pid, std::size_t max, const sysroot& root = sysroot{});

// The exit of a process mrcheck did not start, through a pidfd (pidfd_open, Linux 5.3) opened when the watch is
// made. A pid that no longer exists then has exited already. Without a pidfd (an older kernel) the wait cannot
// see the exit: it waits out its time (or the caller's other descriptor), and the caller's own look at /proc
// tells it the process is gone. A pid reused after the watch was made is not mistaken for the process.
class exit_watch {
 public:
  explicit exit_watch(pid_t pid);
  exit_watch(const exit_watch&) = delete;
  exit_watch& operator=(const exit_watch&) = delete;
  ~exit_watch();

  // Whether the wait can see the exit (a pidfd, or the process was gone when the watch was made).
  bool sees_exit() const { return pidfd_ >= 0 || gone_; }

  struct woken {
    bool exited = false;    // the process has exited (a zombie counts: it runs no more)
    bool fd_ready = false;  // `also` is readable, at end-of-file, or failed: the caller reads it
  };
  // Waits up to `d` for the process to exit or for `also` (the caller's descriptor, -1 for none) to be ready,
  // whichever comes first; both may be reported. An exit seen once is seen by every later wait at once.
  woken wait(std::chrono::microseconds d, int also = -1) const;

 private:
  int pidfd_ = -1;
  bool gone_ = false;  // no such process when the watch was made
};

}  // namespace mrcheck
