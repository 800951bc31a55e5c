// Runs a helper as a child process with a hard timeout: the probes (libibverbs, CUDA, NCCL) are never
// loaded into slurmstepd, and a probe that hangs or crashes becomes a verdict, not a hung job step.
// Follows pyxis' enroot_exec checklist: stdin from /dev/null, output captured (bounded), oom_score_adj
// reset, other fds closed, privileges dropped, own process group so a timeout kills all of it.
#pragma once

#include <mrcheck/status.h>

#include <sys/resource.h>
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace mrcheck {

struct child_rlimit {
  int resource;  // RLIMIT_MEMLOCK, ...
  rlim_t soft;
  rlim_t hard;
};

struct child_spec {
  std::vector<std::string> argv;           // argv[0] must be an absolute path (no PATH search)
  std::vector<std::string> env;            // the complete environment, "KEY=VALUE"
  std::chrono::milliseconds timeout{30000};
  std::size_t max_output = 256 * 1024;     // per stream; the rest is dropped and `truncated` set
  std::optional<uid_t> uid;                // switch to this uid/gid (with `groups`) before exec; needs root
  std::optional<gid_t> gid;
  std::vector<gid_t> groups;
  std::vector<child_rlimit> rlimits;       // applied in the child before the uid switch and exec
  std::string cwd;                         // "" = keep
  bool reset_oom_score_adj = true;         // slurmstepd runs at -1000; a probe must not inherit that
  // Containers (src/container/enter.cpp): exec this descriptor (execveat AT_EMPTY_PATH, a file opened before the
  // caller entered another mount namespace) instead of argv[0], after `before_exec` ran in the child (after the
  // limits and the uid switch; async-signal-safe only; returns 0 or an errno, named by `before_exec_what`).
  int exec_fd = -1;
  int (*before_exec)(const void* arg) noexcept = nullptr;
  const void* before_exec_arg = nullptr;
  const char* before_exec_what = "before exec";
};

struct child_outcome {
  bool exited = false;     // normal exit: exit_code is valid
  int exit_code = -1;
  bool signaled = false;   // killed by a signal it did not ask for (crash): term_signal is valid
  int term_signal = 0;
  bool timed_out = false;  // we killed it at the timeout
  bool truncated = false;  // some output was dropped at max_output
  std::string out;
  std::string err;
  std::chrono::milliseconds elapsed{0};

  // "exit 0", "exit 3", "killed by SIGSEGV", "timed out after 30 s"
  std::string describe() const;
};

// Runs the child to completion or timeout. The status is an error only when the child could not be started
// (fork/pipe failure); an exec failure shows up as exit code 127 with the reason on `err`.
// Does not change signal dispositions of the caller; reaps only its own child.
result<child_outcome> run_child(const child_spec& spec);

// The current environment as "KEY=VALUE" strings.
std::vector<std::string> current_environment();

}  // namespace mrcheck
