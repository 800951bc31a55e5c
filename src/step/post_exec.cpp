// After exec. TaskProlog and set_user_limits() run after every SPANK task callback, and a wrapper can lower
// the limit after exec, so only the running task's /proc/PID/limits tells the truth. A short-lived watcher
// (forked from task_init, as the job user, holding the task's stderr) reads it right after exec.
#include <mrcheck/memlock_step.h>
#include <mrcheck/step.h>

#include <mrcheck/checks.h>
#include <mrcheck/child.h>
#include <mrcheck/fabric.h>
#include <mrcheck/proc_tree.h>
#include <mrcheck/units.h>

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

namespace mrcheck {

namespace {

struct task_sample {
  bool alive = false;
  bool zombie = false;
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

// The task's /proc files, opened once at the start: a read is then one pread (the watcher must be quick
// between an exec and the reap), and a recycled pid can never be read for the task (the open files stay
// bound to the task they were opened for; once it is reaped they read nothing).
struct task_files {
  int stat = -1;
  int limits = -1;
  explicit task_files(const std::string& task_dir)
      : stat(::open((task_dir + "/stat").c_str(), O_RDONLY | O_CLOEXEC)),
        limits(::open((task_dir + "/limits").c_str(), O_RDONLY | O_CLOEXEC)) {}
  ~task_files() {
    if (stat >= 0) ::close(stat);
    if (limits >= 0) ::close(limits);
  }
  task_files(const task_files&) = delete;
  task_files& operator=(const task_files&) = delete;
};

std::optional<std::string> read_whole(int fd) {
  if (fd < 0) return std::nullopt;
  char buf[8192];
  ssize_t n;
  while ((n = ::pread(fd, buf, sizeof buf, 0)) < 0 && errno == EINTR) {
  }
  if (n <= 0) return std::nullopt;
  return std::string(buf, static_cast<std::size_t>(n));
}

// The limits first, then the state and name: the limits read by the time the name shows the program are
// the ones it ran with (a setrlimit comes before the exec).
task_sample sample(const task_files& f) {
  task_sample s;
  std::optional<memlock_limit> memlock;
  if (auto lim = read_whole(f.limits)) {
    if (auto m = parse_memlock_from_limits(*lim)) memlock = *m;
  }
  auto stat = read_whole(f.stat);
  if (!stat) return s;
  auto st = parse_proc_stat(*stat);
  if (!st || st->state == 'X') return s;
  s.comm = st->comm;
  // A zombie (exited, not yet reaped by slurmstepd) keeps its limits: /proc/PID/limits reads them until the
  // reap. Its executable and auxv are gone with its memory, so only its name tells whether it had exec'd.
  s.zombie = st->state == 'Z';
  s.alive = !s.zombie;
  s.memlock = memlock;
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

// Waits up to `d` for the task to exit or to exec (`exec_fd` reads end-of-file: the task's close-on-exec write end
// is gone), whichever comes first. True when the task exited. An exec notice closes `exec_fd` and sets it to -1:
// it fires once.
bool wait_exit(const exit_watch& task_exit, int& exec_fd, std::chrono::microseconds d) {
  exit_watch::woken w = task_exit.wait(d, exec_fd);
  if (w.fd_ready) {
    char c;
    if (::read(exec_fd, &c, 1) <= 0) {  // end-of-file (or an error): nothing more to learn from it
      ::close(exec_fd);
      exec_fd = -1;
    }
  }
  return w.exited;
}

}  // namespace

post_exec_observation observe_post_exec(pid_t task, const memlock_limit& predicted, const std::string& task_prolog,
                                        std::chrono::milliseconds window, int exec_fd,
                                        const std::function<void()>& at_exec) {
  using clock = std::chrono::steady_clock;
  post_exec_observation o;
  o.predicted = predicted;
  o.task_prolog = task_prolog;
  // The watcher must cost the step nothing measurable (bench/plugin): it sleeps between samples with a
  // growing interval instead of spinning, and it learns of the task's exit at once from a pidfd, so it never
  // holds the task's stderr (and the step) open after the task is gone.
  const exit_watch task_exit(task);
  // Before exec the task is a copy of this process (forked from the same slurmstepd task child, or, in the
  // tests, from this process): the same executable and auxv. A TaskProlog can take a while.
  const exec_image before = image_of("/proc/self");
  const std::string task_dir = fmt::format("/proc/{}", task);
  const task_files files(task_dir);
  auto exec_deadline = clock::now() + std::chrono::seconds(60);
  auto pause = std::chrono::microseconds(100);
  task_sample s;
  while (true) {
    // The image first, then the limits: once the image shows the exec, the limits read after it are the ones
    // the program started with. The other order could take limits read just before a setrlimit+exec for the
    // limits at exec (seen under ASan and load: MemlockChainPostExecWatch.SeesTheLimitAChildExecsWith).
    exec_image now = image_of(task_dir);
    s = sample(files);
    if (!s.alive) break;  // gone, or a zombie (below)
    if (!before.read || !now.read) {
      if (!is_slurm_daemon(s.comm, "slurmstepd")) break;  // no /proc/PID/exe or auxv to read: the name is all there is
    } else if (!(now == before)) {
      break;
    }
    if (clock::now() > exec_deadline) {
      s.alive = false;
      break;
    }
    const bool had_notice = exec_fd >= 0;
    const bool exited = wait_exit(task_exit, exec_fd, pause);
    if (had_notice && exec_fd < 0) {
      // The exec notice: read at once, before anything else, while the task may still be there. Its new name
      // says it was the exec (an exit before exec closes the pipe too, under the old name).
      s = sample(files);
      if ((s.alive || s.zombie) && !is_slurm_daemon(s.comm, "slurmstepd")) break;
    }
    if (exited) continue;  // sample again: as a zombie the task still shows its limits
    // At most 1 ms apart when the task has no exec notice (the tests' children); with one, the exec itself
    // wakes the watcher, so a short task (`true`, gone about a millisecond after exec) is still seen.
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
  // A task that exec'd, ran and exited before the watcher looked (`srun true` on a loaded node): its limits are
  // still there until slurmstepd reaps it, and they are the ones it ran with. Its name is all that tells an
  // exec apart (a task that died before exec is still "slurmstepd").
  if (s.zombie && s.memlock && !is_slurm_daemon(s.comm, "slurmstepd")) o.at_exec = s.memlock;
  if (s.alive) {
    o.at_exec = s.memlock;
    if (at_exec) at_exec();
    // A wrapper that lowers the limit does it within moments of starting: sample at 10, 20, 40 ms ... to the
    // end of the window.
    auto end = clock::now() + window;
    auto step = std::chrono::microseconds(10000);
    while (clock::now() < end) {
      auto left = std::chrono::duration_cast<std::chrono::microseconds>(end - clock::now());
      if (wait_exit(task_exit, exec_fd, std::min(step, left))) break;
      step *= 2;
      task_sample later = sample(files);
      if (!later.alive) break;
      if (later.memlock && o.at_exec && later.memlock->soft != o.at_exec->soft) {
        o.later = later.memlock;
        o.later_comm = later.comm;
        break;
      }
    }
  }
  if (exec_fd >= 0) ::close(exec_fd);
  return o;
}

status spawn_post_exec_watcher(const post_exec_watch& w, const post_exec_done& done, int record_fd) {
  const pid_t task = w.task;
  const int fd = w.fd;
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
  // The exec notice: called in the task itself (task_init), this process keeps a close-on-exec write end and
  // the watcher gets the read end (as the next fd, 3 or 4: an fd left unplaced below it would stay open). The task's execve() closes the write end, and the watcher wakes
  // on that end-of-file at the moment of the exec instead of finding it at its next sample (a task that exits
  // a millisecond after exec was missed on a loaded node: tests/e2e/plugin_h_taskprolog_test.sh "short task").
  int notice[2] = {-1, -1};
  const int notice_at = record_fd >= 0 ? 4 : 3;
  if (task == ::getpid() && ::pipe2(notice, O_CLOEXEC) == 0) spec.extra_fds.push_back({notice_at, notice[0]});
  const bool has_notice = notice[0] >= 0;
  spec.run_in_child = [=]() -> int {
    // The task's mount namespace as it runs (a container entered before exec included), read at its exec: a
    // task that fails within the window (NCCL's MNNVL set-up, seconds) is gone once the window ends.
    std::optional<task_imex_view> imex;
    auto o = observe_post_exec(task, w.predicted, w.task_prolog, w.window, has_notice ? notice_at : -1, [&] {
      if (w.node_imex) imex = read_task_imex(task);
    });
    o.batch_step = w.batch_step;
    report rep;
    if (auto r = judge_post_exec(o, w.required)) rep.checks.push_back(*r);
    if (w.node_imex && imex) {
      if (auto r = check_imex_channel(*w.node_imex, *imex)) rep.checks.push_back(*r);
    }
    for (const auto& l : failure_lines(rep)) write_all(2, escape_line(l, 1500) + "\n");
    // The verdicts after exec reach the admins' record too (it used to be sent before exec
    // and said pass where the task's stderr said FAIL).
    if (done) done(rep.checks, record_fd >= 0 ? 3 : -1);
    return 0;
  };
  auto c = child_process::spawn(spec);  // detached: the handle only closes its descriptors
  if (notice[0] >= 0) ::close(notice[0]);
  // The write end stays open here on purpose, until this process execs (or exits): that is the notice.
  if (!c) {
    if (notice[1] >= 0) ::close(notice[1]);
    return c.error().with_context("post-exec watcher");
  }
  return status::ok();
}

}  // namespace mrcheck
