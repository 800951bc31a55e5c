// After exec. TaskProlog and set_user_limits() run after every SPANK task callback, and a wrapper can lower
// the limit after exec, so only the running task's /proc/PID/limits tells the truth. A short-lived watcher
// (forked from task_init, as the job user, holding the task's stderr) reads it right after exec.
#include <mrcheck/step.h>

#include <mrcheck/child.h>
#include <mrcheck/units.h>

#include <fmt/format.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>

namespace mrcheck {

namespace {

struct task_sample {
  bool alive = false;
  std::string comm;
  std::optional<memlock_limit> memlock;
};

// What changes at every execve(), whatever the program is called: the executable (/proc/PID/exe, device and
// inode) and the auxiliary vector (/proc/PID/auxv: AT_ENTRY, AT_RANDOM, AT_EXECFN are set anew by each exec).
// The comm name told exec apart before, and a program named "slurmstepd" was never watched
// (tests/e2e/hostile_postexec_test.sh).
struct exec_image {
  dev_t dev = 0;
  ino_t ino = 0;
  std::string auxv;
  bool read = false;
  bool operator==(const exec_image&) const = default;
};

exec_image image_of(const std::string& proc_dir) {
  exec_image im;
  struct stat st {};
  if (::stat((proc_dir + "/exe").c_str(), &st) == 0) {
    im.dev = st.st_dev;
    im.ino = st.st_ino;
    im.read = true;
  }
  int fd = ::open((proc_dir + "/auxv").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    char buf[1024];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0 && im.auxv.size() < 8192)
      im.auxv.append(buf, static_cast<std::size_t>(n));
    ::close(fd);
    im.read = im.read || !im.auxv.empty();
  }
  return im;
}

task_sample sample(const sysroot& root, pid_t task) {
  task_sample s;
  auto stat = root.read(fmt::format("/proc/{}/stat", task), 64 * 1024);
  if (!stat) return s;
  auto f = parse_proc_stat(*stat);
  if (!f || f->state == 'Z' || f->state == 'X') return s;
  s.alive = true;
  s.comm = f->comm;
  if (auto lim = root.read(fmt::format("/proc/{}/limits", task), 64 * 1024)) {
    if (auto m = parse_memlock_from_limits(*lim)) s.memlock = *m;
  }
  return s;
}

void write_all(int fd, std::string_view s) {
  while (!s.empty()) {
    ssize_t n = ::write(fd, s.data(), s.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    s.remove_prefix(static_cast<std::size_t>(n));
  }
}

// Waits up to `d` for the task to exit: on its pidfd when the kernel has pidfd_open (5.3), else a plain sleep.
// True when it exited.
bool wait_exit(int pidfd, std::chrono::microseconds d) {
  if (pidfd >= 0) {
    struct pollfd p {
      pidfd, POLLIN, 0
    };
    auto us = d.count();
    struct timespec ts {
      static_cast<time_t>(us / 1000000), static_cast<long>((us % 1000000) * 1000)
    };
    int rc = ::ppoll(&p, 1, &ts, nullptr);
    return rc > 0;
  }
  std::this_thread::sleep_for(d);
  return false;
}

}  // namespace

post_exec_observation observe_post_exec(pid_t task, const memlock_limit& predicted, const std::string& task_prolog,
                                        std::chrono::milliseconds window) {
  using clock = std::chrono::steady_clock;
  post_exec_observation o;
  o.predicted = predicted;
  o.task_prolog = task_prolog;
  sysroot root;
  // The watcher must cost the step nothing measurable (bench/plugin): it sleeps between samples with a
  // growing interval instead of spinning, and it learns of the task's exit at once from a pidfd, so it never
  // holds the task's stderr (and the step) open after the task is gone.
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, task, 0));
  // Before exec the task is a copy of this process (forked from the same slurmstepd task child, or, in the
  // tests, from this process): the same executable and auxv. A TaskProlog can take a while.
  const exec_image before = image_of("/proc/self");
  const std::string task_dir = fmt::format("/proc/{}", task);
  auto exec_deadline = clock::now() + std::chrono::seconds(60);
  auto pause = std::chrono::microseconds(100);
  task_sample s;
  while (true) {
    // The image first, then the limits: once the image shows the exec, the limits read after it are the ones
    // the program started with. The other order could take limits read just before a setrlimit+exec for the
    // limits at exec (seen under ASan and load: MemlockChainPostExecWatch.SeesTheLimitAChildExecsWith).
    exec_image now = image_of(task_dir);
    s = sample(root, task);
    if (!s.alive) break;
    if (!before.read || !now.read) {
      if (!is_slurm_daemon(s.comm, "slurmstepd")) break;  // no /proc/PID/exe or auxv to read: the name is all there is
    } else if (!(now == before)) {
      break;
    }
    if (clock::now() > exec_deadline || wait_exit(pidfd, pause)) {
      s.alive = false;
      break;
    }
    // At most 1 ms apart: a short task (`true`) lives about that long after exec and must still be seen.
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
  if (s.alive) {
    o.at_exec = s.memlock;
    // A wrapper that lowers the limit does it within moments of starting: sample at 10, 20, 40 ms ... to the
    // end of the window.
    auto end = clock::now() + window;
    auto step = std::chrono::microseconds(10000);
    while (clock::now() < end) {
      auto left = std::chrono::duration_cast<std::chrono::microseconds>(end - clock::now());
      if (wait_exit(pidfd, std::min(step, left))) break;
      step *= 2;
      task_sample later = sample(root, task);
      if (!later.alive) break;
      if (later.memlock && o.at_exec && later.memlock->soft != o.at_exec->soft) {
        o.later = later.memlock;
        o.later_comm = later.comm;
        break;
      }
    }
  }
  if (pidfd >= 0) ::close(pidfd);
  return o;
}

status spawn_post_exec_watcher(pid_t task, const memlock_limit& predicted, std::uint64_t required,
                               const std::string& task_prolog, bool batch_step, int fd,
                               std::chrono::milliseconds window, const post_exec_done& done, int record_fd) {
  child_spec spec;
  // Detached (double fork): the task never has to reap the watcher, and its exit status stays the program's.
  // It holds the task's stderr (`fd`, as fd 2) and, when the admins' record waits for it, the record pipe (as
  // fd 3); nothing else of the task's: an inherited pipe end would keep srun's I/O open.
  spec.detach = true;
  spec.own_group = false;
  spec.contain = false;
  spec.reset_oom_score_adj = false;
  spec.out = child_stream::null;
  spec.err = child_stream::inherit;
  if (fd != 2) spec.extra_fds.push_back({2, fd});
  if (record_fd >= 0) spec.extra_fds.push_back({3, record_fd});
  spec.run_in_child = [=]() -> int {
    auto o = observe_post_exec(task, predicted, task_prolog, window);
    o.batch_step = batch_step;
    auto r = judge_post_exec(o, required);
    if (r) {
      report rep;
      rep.checks.push_back(*r);
      for (const auto& l : failure_lines(rep)) write_all(2, escape_line(l, 1500) + "\n");
    }
    // The verdict after exec reaches the admins' record too (it used to be sent before exec
    // and said pass where the task's stderr said FAIL).
    if (done) done(r, record_fd >= 0 ? 3 : -1);
    return 0;
  };
  auto c = spawn_child(spec);
  if (!c) return c.error().with_context("post-exec watcher");
  close_child(*c);
  return status::ok();
}

}  // namespace mrcheck
