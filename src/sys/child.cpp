#include <mrcheck/child.h>

#include <mrcheck/proc_tree.h>

#include <fmt/format.h>

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <utility>

extern char** environ;

namespace mrcheck {

namespace {

using clock = std::chrono::steady_clock;

// Only async-signal-safe calls between fork and exec: the caller (slurmstepd's task child, NCCL-free but
// possibly multithreaded) may hold locks that the child would deadlock on.
void write_all_raw(int fd, const char* s) {
  size_t n = std::strlen(s);
  while (n > 0) {
    ssize_t w = ::write(fd, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

// child_keep_null_device's descriptor, -1 until then.
int g_null_fd = -1;
// In a detached child only, until exec or run_in_child: the pipe spawn_child reads its set-up failure from.
int g_setup_fd = -1;

[[noreturn]] void child_fail(const char* what, int err) {
  int fd = g_setup_fd >= 0 ? g_setup_fd : STDERR_FILENO;
  write_all_raw(fd, "mrcheck: child: ");
  write_all_raw(fd, what);
  write_all_raw(fd, ": ");
  write_all_raw(fd, strerrordesc_np(err) ? strerrordesc_np(err) : "error");
  write_all_raw(fd, "\n");
  _exit(127);
}

void close_from(int lowfd) {
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, lowfd, ~0U, 0) == 0) return;
#endif
  long max = ::sysconf(_SC_OPEN_MAX);
  if (max < 0 || max > 65536) max = 65536;
  for (int fd = lowfd; fd < max; ++fd) ::close(fd);
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

const char* signal_name(int sig) {
  const char* d = sigabbrev_np(sig);
  return d ? d : "?";
}

int ms_until(clock::time_point t) {
  if (t <= clock::now()) return 0;  // also for time_point::min(), whose distance to now does not fit
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - clock::now()).count();
  return ms <= 0 ? 0 : static_cast<int>(std::min<long long>(ms + 1, 1 << 30));
}

// Kills and reaps every child of ours that was not there before the run (`before`), round after round: a
// killed process's own children come back to us (we are their subreaper) and are found in the next round.
// Bounded by `until`. Returns how many it killed.
std::size_t kill_descendants(const std::set<pid_t>& before, clock::time_point until) {
  std::size_t killed = 0;
  pid_t self = ::getpid();
  for (;;) {
    std::vector<pid_t> ours;
    for (pid_t p : children_of(self)) {
      if (!before.count(p)) ours.push_back(p);
    }
    if (ours.empty()) return killed;
    for (pid_t p : ours) {
      if (::kill(p, SIGKILL) == 0) ++killed;
    }
    for (pid_t p : ours) {
      // A process in uninterruptible sleep may take a moment to die; never wait past `until`.
      for (;;) {
        pid_t w = ::waitpid(p, nullptr, WNOHANG);
        if (w == p || (w < 0 && errno != EINTR)) break;
        if (clock::now() >= until) return killed;
        struct timespec ts {
          0, 2 * 1000 * 1000
        };
        ::nanosleep(&ts, nullptr);
      }
    }
    if (clock::now() >= until) return killed;
  }
}

// Reads what is there without blocking, at most 64 reads (1 MiB): a writer faster than us must not hold the
// caller here. False at EOF or error.
bool drain(int fd, std::string& buf, std::size_t max, bool& truncated) {
  char tmp[16384];
  for (int reads = 0; reads < 64; ++reads) {
    ssize_t r = ::read(fd, tmp, sizeof tmp);
    if (r > 0) {
      std::size_t room = max > buf.size() ? max - buf.size() : 0;
      std::size_t take = std::min(room, static_cast<std::size_t>(r));
      buf.append(tmp, take);
      if (take < static_cast<std::size_t>(r)) truncated = true;
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && errno == EAGAIN) return true;
    return false;
  }
  return true;
}

}  // namespace

std::string child_outcome::describe() const {
  if (timed_out)
    return fmt::format("timed out after {:.1f} s and was killed", static_cast<double>(elapsed.count()) / 1000.0);
  if (signaled) return fmt::format("killed by SIG{}", signal_name(term_signal));
  if (exited) return fmt::format("exit {}", exit_code);
  return "did not run";
}

bool child_outcome::killed_from_outside() const {
  return signaled && !timed_out && (term_signal == SIGKILL || term_signal == SIGTERM);
}

std::vector<std::string> current_environment() {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  return env;
}

void child_keep_null_device() {
  if (g_null_fd < 0) g_null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
}

void close_child(spawned_child& c) {
  close_fd(c.pidfd);
  close_fd(c.out);
  close_fd(c.err);
}

namespace {

// Everything below up to lift_above runs in the forked child: async-signal-safe calls only (see write_all_raw),
// nothing that allocates (but the caller's own run_in_child); the spec is read, never copied.

// The child's process state: detached (a second fork), its session or group, death with the parent, default
// signal handling.
void child_set_process_state(const child_spec& spec, pid_t parent) {
  if (spec.detach) {
    pid_t w = ::fork();
    if (w != 0) _exit(w < 0 ? 127 : 0);
  }
  if (spec.new_session) {
    ::setsid();
  } else if (spec.own_group) {
    ::setpgid(0, 0);
  }
  if (spec.die_with_parent) {
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) child_fail("prctl", errno);
    if (::getppid() != parent) _exit(127);
  }
  // Default signal handling in the child: slurmstepd may have handlers or blocked masks we inherit.
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig : {SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGCHLD, SIGALRM, SIGUSR1, SIGUSR2}) ::signal(sig, SIG_DFL);
}

// Places the child's descriptors: stdin on /dev/null, stdout/stderr as the spec says, the extra fds where they
// belong (lifted above `lift` first so that no dup2 clobbers another), the descriptor to exec right above them;
// closes the rest. Returns where the descriptor to exec is, or -1.
int child_place_fds(const child_spec& spec, int lift, int out_w, int err_w) {
  int lifted[16];
  std::size_t n_extra = std::min<std::size_t>(spec.extra_fds.size(), 16);
  for (std::size_t i = 0; i < n_extra; ++i) {
    lifted[i] = ::fcntl(spec.extra_fds[i].parent_fd, F_DUPFD, lift);
    if (lifted[i] < 0) child_fail("fcntl", errno);
  }
  int lifted_exec = -1;
  if (spec.exec_fd >= 0 && (lifted_exec = ::fcntl(spec.exec_fd, F_DUPFD, lift)) < 0) child_fail("fcntl exec fd", errno);
  if (g_setup_fd >= 0) {  // lifted like the extra fds, then placed right above them (below)
    int was = g_setup_fd;
    if ((g_setup_fd = ::fcntl(was, F_DUPFD_CLOEXEC, lift)) < 0) _exit(127);
    ::close(was);
  }
  int devnull = g_null_fd >= 0 ? ::fcntl(g_null_fd, F_DUPFD, lift) : ::open("/dev/null", O_RDWR);
  if (devnull < 0) child_fail("open /dev/null", errno);
  if (::dup2(devnull, STDIN_FILENO) < 0) child_fail("dup2 stdin", errno);
  auto place = [&](child_stream how, int pipe_w, int target) {
    if (how == child_stream::capture && ::dup2(pipe_w, target) < 0) child_fail("dup2", errno);
    if (how == child_stream::null && ::dup2(devnull, target) < 0) child_fail("dup2", errno);
  };
  place(spec.out, out_w, STDOUT_FILENO);
  place(spec.err, err_w, STDERR_FILENO);
  int first_free = 3;
  for (std::size_t i = 0; i < n_extra; ++i) {
    if (::dup2(lifted[i], spec.extra_fds[i].child_fd) < 0) child_fail("dup2", errno);
    first_free = std::max(first_free, spec.extra_fds[i].child_fd + 1);
  }
  int exec_at = -1;
  if (lifted_exec >= 0) {
    exec_at = first_free++;
    if (::dup2(lifted_exec, exec_at) < 0) child_fail("dup2 exec fd", errno);
    if (::fcntl(exec_at, F_SETFD, FD_CLOEXEC) != 0) child_fail("fcntl exec fd", errno);
  }
  if (g_setup_fd >= 0) {
    if (::dup2(g_setup_fd, first_free) < 0 || ::fcntl(first_free, F_SETFD, FD_CLOEXEC) != 0) _exit(127);
    g_setup_fd = first_free++;
  }
  close_from(first_free);
  // This process's copy of the kept /dev/null is gone (closed above, or replaced by a placed descriptor): a
  // child that goes on to start children of its own (run_in_child: the container watcher) must not hand
  // that number on as their stdin. It keeps a /dev/null of its own with child_keep_null_device() again.
  g_null_fd = -1;
  return exec_at;
}

// The OOM score, working directory, limits and credentials the spec asks for.
void child_set_identity(const child_spec& spec) {
  if (spec.reset_oom_score_adj) {
    // slurmstepd protects itself with -1000, which children inherit (pyxis does the same reset).
    int fd = ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
      (void)!::write(fd, "0", 1);
      ::close(fd);
    }
  }
  if (!spec.cwd.empty() && ::chdir(spec.cwd.c_str()) != 0) child_fail("chdir", errno);
  // Limits first, while still privileged: raising a hard limit needs CAP_SYS_RESOURCE, lowering never does.
  for (const auto& l : spec.rlimits) {
    struct rlimit rl {
      l.soft, l.hard
    };
    if (::setrlimit(l.resource, &rl) != 0) child_fail("setrlimit", errno);
  }
  if (spec.gid || spec.uid) {
    if (spec.gid) {
      if (::setgroups(spec.groups.size(), spec.groups.data()) != 0) child_fail("setgroups", errno);
      if (::setresgid(*spec.gid, *spec.gid, *spec.gid) != 0) child_fail("setresgid", errno);
    }
    if (spec.uid && ::setresuid(*spec.uid, *spec.uid, *spec.uid) != 0) child_fail("setresuid", errno);
  }
}

// The forked child, from fork to exec (or run_in_child). `argv` and `envp` were built before fork.
[[noreturn]] void child_main(const child_spec& spec, pid_t parent, int lift, int out_w, int err_w, int setup_w,
                             char* const* argv, char* const* envp) {
  g_setup_fd = setup_w;
  child_set_process_state(spec, parent);
  int exec_at = child_place_fds(spec, lift, out_w, err_w);
  child_set_identity(spec);
  if (spec.run_in_child) {
    if (g_setup_fd >= 0) ::close(g_setup_fd);  // set up: the caller stops waiting
    g_setup_fd = -1;
    int rc = 127;
    try {
      rc = spec.run_in_child();
    } catch (...) {
    }
    ::_exit(rc);
  }
  if (spec.before_exec) {
    if (int e = spec.before_exec(spec.before_exec_arg); e != 0) child_fail(spec.before_exec_what, e);
  }
  if (exec_at >= 0) {
    ::syscall(SYS_execveat, exec_at, "", argv, envp, AT_EMPTY_PATH);
  } else {
    ::execve(argv[0], argv, envp);
  }
  int e = errno;
  int fd = g_setup_fd >= 0 ? g_setup_fd : STDERR_FILENO;
  write_all_raw(fd, exec_at >= 0 ? "mrcheck: child: execveat " : "mrcheck: child: execve ");
  write_all_raw(fd, argv[0]);
  write_all_raw(fd, ": ");
  write_all_raw(fd, strerrordesc_np(e) ? strerrordesc_np(e) : "error");
  write_all_raw(fd, "\n");
  _exit(127);
}

// The highest descriptor the child must keep before it places them: the extra fds are lifted above it first
// so that no dup2 clobbers another.
int lift_above(const child_spec& spec) {
  int lift = 10;
  for (const auto& f : spec.extra_fds) lift = std::max({lift, f.child_fd + 1, f.parent_fd + 1});
  // The descriptor to exec goes right above the extra fds: one more place below the lifted copies.
  if (spec.exec_fd >= 0) {
    for (const auto& f : spec.extra_fds) lift = std::max(lift, f.child_fd + 2);
    lift = std::max(lift, spec.exec_fd + 1);
  }
  return lift;
}

// A detached child's set-up failure, as it wrote it before exec or run_in_child: "" once the pipe closed
// without a word (it got that far), or after 2 s (it is slow, not failing).
std::string setup_failure(int setup_r) {
  std::string text;
  auto until = clock::now() + std::chrono::seconds(2);
  for (;;) {
    struct pollfd p {
      setup_r, POLLIN, 0
    };
    int n = ::poll(&p, 1, ms_until(until));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return text;
    char buf[512];
    ssize_t r = ::read(setup_r, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0 || text.size() > 4096) return text;
    text.append(buf, static_cast<std::size_t>(r));
  }
}

// The parent's side after fork: its ends of the pipes, the child's group and pidfd.
spawned_child parent_side(const child_spec& spec, spawned_child c, pid_t pid, int out_r, int err_r) {
  if (spec.detach) {
    // Only the middle process is ours; it exits at once.
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    c.out = out_r;
    c.err = err_r;
    return c;
  }
  // Both sides set the group: no window in which a kill of the group misses the child.
  if (!spec.new_session && spec.own_group) ::setpgid(pid, pid);
  c.pid = pid;
  c.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (c.pidfd >= 0) ::fcntl(c.pidfd, F_SETFD, FD_CLOEXEC);
  c.out = out_r;
  c.err = err_r;
  for (int fd : {c.out, c.err}) {
    if (fd >= 0) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  return c;
}

}  // namespace

result<spawned_child> spawn_child(const child_spec& spec) {
  bool exec = !spec.run_in_child;
  if (exec && (spec.argv.empty() || spec.argv[0].empty() || spec.argv[0][0] != '/')) {
    return status::error("run child: argv[0] must be an absolute path");
  }
  // Everything the child needs is prepared before fork.
  std::vector<char*> argv;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  int out_pipe[2] = {-1, -1};
  int err_pipe[2] = {-1, -1};
  auto close_pipes = [&] {
    for (int* p : {out_pipe, err_pipe}) {
      close_fd(p[0]);
      close_fd(p[1]);
    }
  };
  if ((spec.out == child_stream::capture && ::pipe2(out_pipe, O_CLOEXEC) != 0) ||
      (spec.err == child_stream::capture && ::pipe2(err_pipe, O_CLOEXEC) != 0)) {
    int e = errno;
    close_pipes();
    return status::from_errno("run child: pipe", e);
  }
  int lift = lift_above(spec);
  // A detached child is nobody's to wait for: its set-up failure comes back through a pipe of its own.
  int setup_pipe[2] = {-1, -1};
  if (spec.detach && ::pipe2(setup_pipe, O_CLOEXEC) != 0) {
    int e = errno;
    close_pipes();
    return status::from_errno("run child: pipe", e);
  }

  spawned_child c;
  c.start = clock::now();
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    close_pipes();
    close_fd(setup_pipe[0]);
    close_fd(setup_pipe[1]);
    return status::from_errno("run child: fork", e);
  }
  if (pid == 0) child_main(spec, parent, lift, out_pipe[1], err_pipe[1], setup_pipe[1], argv.data(), envp.data());
  close_fd(out_pipe[1]);
  close_fd(err_pipe[1]);
  close_fd(setup_pipe[1]);
  spawned_child started = parent_side(spec, c, pid, out_pipe[0], err_pipe[0]);
  if (setup_pipe[0] >= 0) {
    std::string failed = setup_failure(setup_pipe[0]);
    close_fd(setup_pipe[0]);
    while (!failed.empty() && failed.back() == '\n') failed.pop_back();
    if (!failed.empty()) {
      close_child(started);
      return status::error(failed);
    }
  }
  return started;
}

child_process::child_process(spawned_child c, bool own_group) : c_(c), own_group_(own_group) {}

child_process::child_process(child_process&& o) noexcept
    : c_(std::exchange(o.c_, spawned_child{})), own_group_(o.own_group_), killed_(o.killed_), end_(o.end_) {}

child_process& child_process::operator=(child_process&& o) noexcept {
  if (this != &o) {
    close_child(c_);
    c_ = std::exchange(o.c_, spawned_child{});
    own_group_ = o.own_group_;
    killed_ = o.killed_;
    end_ = o.end_;
  }
  return *this;
}

child_process::~child_process() { close_child(c_); }

result<child_process> child_process::spawn(const child_spec& spec) {
  auto c = spawn_child(spec);
  if (!c) return c.error();
  // With a session of its own the child leads its group too, once it got to setsid (the parent cannot set that
  // group: setsid refuses a group leader). A group kill before then finds no group and the child alone is killed,
  // before it could start anything; after, the group holds what it started in its session (the admins'
  // collector's detached process, src/admin/collector.cpp).
  return child_process(*c, spec.own_group || spec.new_session);
}

result<std::unique_ptr<child_handle>> spawn_child_process(const child_spec& spec) {
  auto c = child_process::spawn(spec);
  if (!c) return c.error();
  return std::unique_ptr<child_handle>(std::make_unique<child_process>(std::move(*c)));
}

// Reaps the child if it has ended; true once it is reaped.
bool child_process::try_reap() {
  int ws = 0;
  child_end e;
  e.killed = killed_;
  for (;;) {
    pid_t w = ::waitpid(c_.pid, &ws, WNOHANG);
    if (w == c_.pid) break;
    if (w < 0 && errno == EINTR) continue;
    if (w == 0) return false;
    e.lost = true;  // ECHILD: reaped elsewhere (SIGCHLD ignored); the status is lost
    end_ = e;
    return true;
  }
  if (WIFEXITED(ws)) {
    e.exited = true;
    e.exit_code = WEXITSTATUS(ws);
  } else if (WIFSIGNALED(ws)) {
    e.signaled = true;
    e.term_signal = WTERMSIG(ws);
  }
  end_ = e;
  return true;
}

// The pidfd says when the child has exited; without one (kernel < 5.3), or when poll fails, waitpid is asked
// every 20 ms.
std::optional<child_end> child_process::wait_until(clock::time_point deadline) {
  if (end_) return end_;
  if (c_.pid <= 0) {  // detached (or never started): nobody's to wait for
    end_ = child_end{};
    end_->lost = true;
    return end_;
  }
  for (;;) {
    if (try_reap()) return end_;
    int ms = ms_until(deadline);
    if (ms == 0) return std::nullopt;
    struct pollfd p {
      c_.pidfd, POLLIN, 0
    };
    if (c_.pidfd < 0 || (::poll(&p, 1, ms) < 0 && errno != EINTR)) ::poll(nullptr, 0, std::min(ms, 20));
  }
}

void child_process::kill_group() {
  if (c_.pid <= 0) return;
  if (own_group_) ::kill(-c_.pid, SIGKILL);
  if (end_) return;  // its pid may be another process's by now
  ::kill(c_.pid, SIGKILL);
  killed_ = true;
}

bool child_process::read_bounded(child_pipe which, std::string& to, std::size_t max, bool& truncated) {
  int& fd = which == child_pipe::out ? c_.out : c_.err;
  if (fd < 0) return false;
  if (drain(fd, to, max, truncated)) return true;
  close_fd(fd);
  return false;
}

namespace {

// One poll over the child's captured streams, and its pidfd when `with_pidfd`, for up to `wait_ms`; what the
// streams have is read into `o`. Returns poll's value (< 0: it failed, errno says why); `pidfd_ready` is set
// when the pidfd said the child has exited.
int poll_streams(child_process& c, child_outcome& o, std::size_t max, bool with_pidfd, int wait_ms, bool& pidfd_ready) {
  const child_pipe pipes[2] = {child_pipe::out, child_pipe::err};
  std::string* bufs[2] = {&o.out, &o.err};
  struct pollfd p[3];
  int n = 0;
  int map[2] = {-1, -1};
  for (int i = 0; i < 2; ++i) {
    if (c.pipe_fd(pipes[i]) >= 0) {
      map[i] = n;
      p[n++] = {c.pipe_fd(pipes[i]), POLLIN, 0};
    }
  }
  int pidfd_at = -1;
  if (with_pidfd && c.pidfd() >= 0) {
    pidfd_at = n;
    p[n++] = {c.pidfd(), POLLIN, 0};
  }
  pidfd_ready = false;
  int r = ::poll(p, static_cast<nfds_t>(n), wait_ms);
  if (r <= 0) return r;
  for (int i = 0; i < 2; ++i) {
    if (map[i] >= 0 && (p[map[i]].revents & (POLLIN | POLLHUP | POLLERR)))
      c.read_bounded(pipes[i], *bufs[i], max, o.truncated);
  }
  pidfd_ready = pidfd_at >= 0 && (p[pidfd_at].revents & POLLIN);
  return r;
}

// Waits for the child's exit, reading its output meanwhile, and reaps it. nullopt: still running at
// `deadline`, or poll failed (the caller kills it). Without a pidfd (kernel < 5.3) poll wakes at least every
// 20 ms to ask waitpid.
std::optional<child_end> wait_reading(child_process& c, child_outcome& o, std::size_t max, clock::time_point deadline) {
  for (;;) {
    int wait_ms = ms_until(deadline);
    if (wait_ms == 0) return std::nullopt;
    if (c.pidfd() < 0) wait_ms = std::min(wait_ms, 20);
    bool exited = false;
    int r = poll_streams(c, o, max, true, wait_ms, exited);
    if (r < 0 && errno != EINTR) return std::nullopt;
    if (c.pidfd() < 0 || exited) {
      if (auto end = c.wait_until(clock::time_point::min())) return end;
    }
  }
}

// What is still in the pipes: a short, bounded read (a writer outside our reach must not hold us).
void read_rest(child_process& c, child_outcome& o, std::size_t max_output) {
  auto read_until = clock::now() + std::chrono::milliseconds(200);
  while ((c.pipe_fd(child_pipe::out) >= 0 || c.pipe_fd(child_pipe::err) >= 0) && clock::now() < read_until) {
    bool unused = false;
    if (poll_streams(c, o, max_output, false, ms_until(read_until), unused) <= 0) break;
  }
}

}  // namespace

result<child_outcome> run_child(const child_spec& spec) {
  // Containment: we become the child subreaper for the run, so a descendant whose parent dies (a detached
  // grandchild, a daemon that double-forked) is reparented to us instead of init and can be killed.
  int was_subreaper = 0;
  bool contain = spec.contain && ::prctl(PR_GET_CHILD_SUBREAPER, &was_subreaper) == 0;
  std::set<pid_t> before;
  if (contain) {
    for (pid_t p : children_of(::getpid())) before.insert(p);
    if (!was_subreaper && ::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) contain = false;
  }
  auto restore = [&] {
    if (contain && !was_subreaper) ::prctl(PR_SET_CHILD_SUBREAPER, 0);
  };
  if (spec.detach) return status::error("run child: a detached child cannot be waited for");
  auto started = child_process::spawn(spec);
  if (!started) {
    restore();
    return started.error();
  }
  child_process& c = *started;
  child_outcome o;
  std::optional<child_end> end = wait_reading(c, o, spec.max_output, c.start() + spec.timeout);
  if (!end) {
    // Its time is up. A SIGKILLed child ends: the wait is for that, however long the kernel takes.
    c.kill_group();
    end = c.wait_until(clock::time_point::max());
  }
  // It has exited. Whatever it left behind goes too: its group (the old rule) and, contained, every
  // descendant that came back to us. Only then is its output complete.
  c.kill_group();
  if (contain) o.left_behind = kill_descendants(before, clock::now() + std::chrono::seconds(2));
  restore();
  read_rest(c, o, spec.max_output);
  o.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - c.start());
  if (!end || (end->lost && !end->killed)) return status::from_errno("run child: waitpid", ECHILD);
  if (end->killed) {
    o.timed_out = true;
  } else if (end->exited) {
    o.exited = true;
    o.exit_code = end->exit_code;
  } else if (end->signaled) {
    o.signaled = true;
    o.term_signal = end->term_signal;
  }
  return o;
}

}  // namespace mrcheck
