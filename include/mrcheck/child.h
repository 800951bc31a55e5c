// The one way mrcheck starts a child process: the probes (libibverbs, CUDA, NCCL) are never
// loaded into slurmstepd, and a probe that hangs or crashes becomes a verdict, not a hung job step.
// Follows pyxis' enroot_exec checklist: stdin from /dev/null, output captured (bounded), oom_score_adj
// reset, other fds closed, privileges dropped. Containment: the caller is the child
// subreaper for the run, so whatever the child starts (a detached grandchild in a new session included)
// comes back to the caller when its parent dies and is killed when the child ends; and the wait is for the
// child's exit (a pidfd), not for its output pipes, which a grandchild may hold open.
//
// Three ways in: run_child (start, wait to exit or timeout, bounded output, containment, all in one call);
// child_process (started, then waited for with a deadline, its group killed, its output read bounded by the
// caller, who has its own loop; child_handle is what such a caller holds, so that a test can stand in for the
// process); spawn_child (started, everything else the caller's).
//
// Users: step/plugin_engine.cpp, cli/ and prolog/revalidate.cpp (run_child: the probes), prolog/slurm_control.cpp
// (run_child: a libslurm call in a forked child without exec), container/enter.cpp (run_child: the container
// helper, exec by descriptor after joining the task's namespaces; and a detached watcher without exec, as
// step/post_exec.cpp's: child_process::spawn, whose handle then only closes its descriptors), nccl/pair.cpp
// (child_process behind child_handle: the rank children with extra fds, waited for and killed from its own poll
// loop; a test's child_spawner stands in for them, tests/unit/nccl_pair_fake_test.cpp), src/admin/collector.cpp
// (child_process behind child_handle: the admins' root collector in its own session, extra fds, waited for with a
// deadline and its group killed; tests/unit/admin_collector_test.cpp stands in for it).
#pragma once

#include <mrcheck/status.h>

#include <sys/resource.h>
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mrcheck {

struct child_rlimit {
  int resource;  // RLIMIT_MEMLOCK, ...
  rlim_t soft;
  rlim_t hard;
};

// Where a child's stdout/stderr goes.
enum class child_stream {
  capture,  // a pipe to the caller (run_child collects it, bounded; spawn_child hands the read end back)
  null,     // /dev/null
  inherit,  // the caller's own fd 1/2
};

// A descriptor of the caller placed at a given number in the child (the rest above 2 is closed).
struct child_fd {
  int child_fd;   // 3, 4, ...
  int parent_fd;  // the caller's descriptor; the caller keeps and closes its own copy
};

struct child_spec {
  std::vector<std::string> argv;  // argv[0] must be an absolute path (no PATH search)
  std::vector<std::string> env;   // the complete environment, "KEY=VALUE"
  // Instead of exec, run this in the forked child and _exit with its value (argv then unused). Only for
  // callers that are single-threaded or accept glibc's fork-safe subset (prolog, the post-exec watcher).
  std::function<int()> run_in_child;
  std::chrono::milliseconds timeout{30000};
  std::size_t max_output = 256 * 1024;  // per stream; the rest is dropped and `truncated` set
  std::optional<uid_t> uid;             // switch to this uid/gid (with `groups`) before exec; needs root
  std::optional<gid_t> gid;
  std::vector<gid_t> groups;
  std::vector<child_rlimit> rlimits;  // applied in the child before the uid switch and exec
  std::string cwd;                    // "" = keep
  bool reset_oom_score_adj = true;    // slurmstepd runs at -1000; a probe must not inherit that
  child_stream out = child_stream::capture;
  child_stream err = child_stream::capture;
  std::vector<child_fd> extra_fds;
  bool own_group = true;         // setpgid(0, 0): a timeout signals the child's whole group
  bool new_session = false;      // setsid(): detached from the caller's session and terminal
  bool die_with_parent = false;  // PR_SET_PDEATHSIG=SIGKILL: ends when the caller does
  // Double fork: the child is not the caller's (the caller reaps only the short-lived middle process), so a
  // program the caller execs later never sees it. spawn_child then returns pid -1 and no pidfd.
  bool detach = false;
  // run_child only: the caller is the child subreaper for the run and kills every descendant the child
  // leaves behind (containment). Off for callers that must not change their own process attributes.
  bool contain = true;
  // Containers (src/container/enter.cpp): exec this descriptor of the caller (execveat AT_EMPTY_PATH; a file
  // opened before the task entered another mount namespace) instead of argv[0], which then only names it. In the
  // child it sits above the extra fds, close-on-exec, so the program never holds it.
  int exec_fd = -1;
  // Run in the child after the limits and the uid switch, just before exec (async-signal-safe calls only);
  // returns 0 or an errno, reported as `before_exec_what` with exit 127.
  int (*before_exec)(const void* arg) noexcept = nullptr;
  const void* before_exec_arg = nullptr;
  const char* before_exec_what = "before exec";
};

struct child_outcome {
  bool exited = false;  // normal exit: exit_code is valid
  int exit_code = -1;
  bool signaled = false;  // killed by a signal we did not send (crash, or killed from outside): term_signal
  int term_signal = 0;
  bool timed_out = false;       // we killed it at the timeout
  bool truncated = false;       // some output was dropped at max_output
  std::size_t left_behind = 0;  // descendants still running when it ended, killed by us (contain)
  std::string out;
  std::string err;
  std::chrono::milliseconds elapsed{0};

  // "exit 0", "exit 3", "killed by SIGSEGV", "timed out after 30 s"
  std::string describe() const;
  // Killed by SIGKILL or SIGTERM that we did not send: someone is ending the step (scancel, proctrack).
  bool killed_from_outside() const;
};

// A started child. The caller owns the descriptors (close_child closes them).
struct spawned_child {
  pid_t pid = -1;
  int pidfd = -1;  // pidfd_open(2), -1 on kernels before 5.3
  int out = -1;    // read ends for child_stream::capture
  int err = -1;
  std::chrono::steady_clock::time_point start;
};

// Starts the child and returns at once (no wait, no containment). Error only when it could not be started
// (pipe/fork failure; for a detached child also its set-up up to exec or run_in_child, which nobody could see
// otherwise); an exec failure of a child that is not detached shows up as exit code 127 with the reason on its
// stderr.
result<spawned_child> spawn_child(const child_spec& spec);

// Opens /dev/null once, close-on-exec, for every later child's stdin and discarded streams. Call it where the
// host's /dev exists (slurmstepd, before a task enters a container): an image without /dev/null then still lets
// mrcheck's children start inside. Without it each child opens /dev/null where it is.
void child_keep_null_device();
void close_child(spawned_child& c);

// How a child ended, as its wait saw it.
struct child_end {
  bool exited = false;  // normal exit: exit_code is valid
  int exit_code = -1;
  bool signaled = false;  // ended by a signal (ours included: see `killed`)
  int term_signal = 0;
  bool killed = false;  // kill_group() was called before it ended: a SIGKILL here is ours
  bool lost = false;    // reaped elsewhere (SIGCHLD ignored): how it ended is unknown
};

// Which captured stream (child_stream::capture).
enum class child_pipe { out, err };

// What a caller does with a started child. child_process is the real one; a test stands in for a process with
// its own (a scripted end, no process at all), where the caller takes a child_spawner.
class child_handle {
 public:
  using clock = std::chrono::steady_clock;
  virtual ~child_handle() = default;
  // Waits until the child has ended or `deadline` (never past it; a deadline already gone only looks), and
  // reaps it. nullopt: still running. Once it has ended, every later call returns the same end.
  virtual std::optional<child_end> wait_until(clock::time_point deadline) = 0;
  // SIGKILL to the child's group (when it has one of its own), then to the child until it has ended: after
  // its end, what it left in its group.
  virtual void kill_group() = 0;
  // Reads what a captured stream has now, without blocking and at most 1 MiB per call, appending up to `max`
  // bytes in all to `to` (the rest is dropped and `truncated` set). False once the stream is at EOF or failed,
  // or was not captured; its descriptor is closed then.
  virtual bool read_bounded(child_pipe which, std::string& to, std::size_t max, bool& truncated) = 0;
  // The stream's descriptor for the caller's own poll, -1 once it is closed (or was never captured).
  virtual int pipe_fd(child_pipe which) const = 0;
};

// A child started by spawn_child, behind one handle: waits bounded by a deadline (its pidfd when the kernel has
// one, waitpid otherwise), the kill of its group, bounded reads of its output. Closes its descriptors when it
// goes; it neither kills nor waits for a child that is still running then.
class child_process final : public child_handle {
 public:
  static result<child_process> spawn(const child_spec& spec);
  child_process() = default;
  child_process(spawned_child c, bool own_group);
  child_process(child_process&& o) noexcept;
  child_process& operator=(child_process&& o) noexcept;
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;
  ~child_process() override;

  pid_t pid() const { return c_.pid; }
  int pidfd() const { return c_.pidfd; }  // for a caller that polls it with its own descriptors; -1 without
  clock::time_point start() const { return c_.start; }
  bool ended() const { return end_.has_value(); }

  std::optional<child_end> wait_until(clock::time_point deadline) override;
  void kill_group() override;
  bool read_bounded(child_pipe which, std::string& to, std::size_t max, bool& truncated) override;
  int pipe_fd(child_pipe which) const override { return which == child_pipe::out ? c_.out : c_.err; }

 private:
  bool try_reap();  // true once it is reaped (WNOHANG)
  spawned_child c_;
  bool own_group_ = false;  // a group of its own that kill_group signals
  bool killed_ = false;
  std::optional<child_end> end_;
};

// How a caller starts the children it then handles; a test passes one that returns its own child_handle.
using child_spawner = std::function<result<std::unique_ptr<child_handle>>(const child_spec&)>;
// child_process::spawn behind a child_spawner.
result<std::unique_ptr<child_handle>> spawn_child_process(const child_spec& spec);

// Runs the child to its exit or timeout, collecting captured output until it exits (not until its pipes
// close). With spec.contain, everything it started is killed and reaped before this returns. The status is
// an error only when the child could not be started. Does not change the caller's signal dispositions;
// reaps only its own child and that child's descendants.
result<child_outcome> run_child(const child_spec& spec);

// The current environment as "KEY=VALUE" strings.
std::vector<std::string> current_environment();

}  // namespace mrcheck
