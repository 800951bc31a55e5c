#include <mrcheck/child.h>

#include <fmt/format.h>

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

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

[[noreturn]] void child_fail(const char* what, int err) {
  write_all_raw(STDERR_FILENO, "mrcheck: child: ");
  write_all_raw(STDERR_FILENO, what);
  write_all_raw(STDERR_FILENO, ": ");
  write_all_raw(STDERR_FILENO, strerrordesc_np(err) ? strerrordesc_np(err) : "error");
  write_all_raw(STDERR_FILENO, "\n");
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

const char* signal_name(int sig) {
  const char* d = sigabbrev_np(sig);
  return d ? d : "?";
}

}  // namespace

std::string child_outcome::describe() const {
  if (timed_out) return fmt::format("timed out after {:.1f} s and was killed", static_cast<double>(elapsed.count()) / 1000.0);
  if (signaled) return fmt::format("killed by SIG{}", signal_name(term_signal));
  if (exited) return fmt::format("exit {}", exit_code);
  return "did not run";
}

std::vector<std::string> current_environment() {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  return env;
}

result<child_outcome> run_child(const child_spec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty() || spec.argv[0][0] != '/') {
    return status::error("run child: argv[0] must be an absolute path");
  }
  // Everything the child needs is prepared before fork.
  std::vector<char*> argv;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  int out_pipe[2];
  int err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return status::from_errno("run child: pipe", errno);
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    int e = errno;
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return status::from_errno("run child: pipe", e);
  }

  auto start = clock::now();
  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) ::close(fd);
    return status::from_errno("run child: fork", e);
  }
  if (pid == 0) {
    // Own process group: the timeout kills the probe and anything it started (NCCL ranks, proxies).
    ::setpgid(0, 0);
    // Default signal handling in the child: slurmstepd may have handlers or blocked masks we inherit.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig : {SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGCHLD, SIGALRM, SIGUSR1, SIGUSR2}) ::signal(sig, SIG_DFL);

    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull < 0) child_fail("open /dev/null", errno);
    if (::dup2(devnull, STDIN_FILENO) < 0) child_fail("dup2 stdin", errno);
    if (::dup2(out_pipe[1], STDOUT_FILENO) < 0) child_fail("dup2 stdout", errno);
    if (::dup2(err_pipe[1], STDERR_FILENO) < 0) child_fail("dup2 stderr", errno);
    // A descriptor to exec survives as fd 3 (container probes, spec.exec_fd).
    if (spec.exec_fd >= 0 && ::dup2(spec.exec_fd, 3) < 0) child_fail("dup2 exec fd", errno);
    close_from(spec.exec_fd >= 0 ? 4 : 3);

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
      struct rlimit rl {l.soft, l.hard};
      if (::setrlimit(l.resource, &rl) != 0) child_fail("setrlimit", errno);
    }
    if (spec.gid || spec.uid) {
      if (spec.gid) {
        if (::setgroups(spec.groups.size(), spec.groups.data()) != 0) child_fail("setgroups", errno);
        if (::setresgid(*spec.gid, *spec.gid, *spec.gid) != 0) child_fail("setresgid", errno);
      }
      if (spec.uid && ::setresuid(*spec.uid, *spec.uid, *spec.uid) != 0) child_fail("setresuid", errno);
    }
    if (spec.before_exec) {
      if (int e = spec.before_exec(spec.before_exec_arg); e != 0) child_fail(spec.before_exec_what, e);
    }
    if (spec.exec_fd >= 0) {
      ::syscall(SYS_execveat, 3, "", argv.data(), envp.data(), AT_EMPTY_PATH);
      child_fail("execveat", errno);
    }
    ::execve(argv[0], argv.data(), envp.data());
    child_fail("execve", errno);
  }

  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  child_outcome o;
  auto deadline = start + spec.timeout;
  struct pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* bufs[2] = {&o.out, &o.err};
  int open_fds = 2;
  char buf[16384];
  bool killed = false;
  while (open_fds > 0) {
    auto now = clock::now();
    if (now >= deadline) {
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
      killed = true;
      break;
    }
    int wait_ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count()) + 1;
    int n = ::poll(fds, 2, wait_ms);
    if (n < 0) {
      if (errno == EINTR) continue;
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
      killed = true;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t r = ::read(fds[i].fd, buf, sizeof buf);
      if (r > 0) {
        std::size_t room = spec.max_output > bufs[i]->size() ? spec.max_output - bufs[i]->size() : 0;
        std::size_t take = std::min(room, static_cast<std::size_t>(r));
        bufs[i]->append(buf, take);
        if (take < static_cast<std::size_t>(r)) o.truncated = true;
      } else if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds) {
    if (f.fd >= 0) ::close(f.fd);
  }

  // The pipes closed (or we killed it); the child may still be running if it closed its fds itself.
  int wstatus = 0;
  for (;;) {
    pid_t w = ::waitpid(pid, &wstatus, killed ? 0 : WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      o.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - start);
      return status::from_errno("run child: waitpid", errno);
    }
    if (clock::now() >= deadline) {
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
      killed = true;
      continue;
    }
    struct timespec ts {0, 5 * 1000 * 1000};
    ::nanosleep(&ts, nullptr);
  }
  // Whatever the probe left behind in its group goes too: no orphans from a probe.
  ::kill(-pid, SIGKILL);
  o.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - start);
  if (killed) {
    o.timed_out = true;
  } else if (WIFEXITED(wstatus)) {
    o.exited = true;
    o.exit_code = WEXITSTATUS(wstatus);
  } else if (WIFSIGNALED(wstatus)) {
    o.signaled = true;
    o.term_signal = WTERMSIG(wstatus);
  }
  return o;
}

}  // namespace mrcheck
