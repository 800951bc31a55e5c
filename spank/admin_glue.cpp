#include "admin_glue.h"

#include <mrcheck/admin_record.h>
#include <mrcheck/units.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace mrcheck::spank_glue {

namespace {

constexpr std::uint32_t k_extern_step = 0xfffffffc;
constexpr std::uint32_t k_batch_step = 0xfffffffb;
constexpr std::size_t k_message_max = 60 * 1024;  // below the pipe's 64 KiB: the task never blocks on it

// Per slurmstepd (and inherited by its task children through fork).
struct admin_state {
  int rec_r = -1;   // record pipe, read end: the collector's fd 3
  int rec_w = -1;   // record pipe, write end: local task 0 writes its record
  int log_r = -1;   // the collector's log lines; EOF = it has ended
  pid_t pid = -1;
  bool finished = false;
  std::uint32_t exited = 0;
  std::string partial;
};
admin_state& astate() {
  static admin_state s;
  return s;
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

template <class T>
bool get(spank_t sp, spank_item_t it, T* out) {
  return spank_get_item(sp, it, out) == ESPANK_SUCCESS;
}

std::string job_env(spank_t sp, const char* name) {
  char buf[8192];
  if (spank_getenv(sp, name, buf, sizeof buf) == ESPANK_SUCCESS) return buf;
  return "";
}

// Forwards the collector's lines ("I mrcheck: ..." / "E mrcheck: ...") to slurmd's log.
void forward_lines(admin_state& a, bool flush) {
  std::size_t nl;
  while ((nl = a.partial.find('\n')) != std::string::npos || (flush && !a.partial.empty())) {
    std::string line = a.partial.substr(0, nl);
    a.partial.erase(0, nl == std::string::npos ? std::string::npos : nl + 1);
    // slurm_error in slurmstepd also reaches the user's srun; the record is the admins' business, so every
    // line goes to slurmd's log only (the collector's "E"/"I" level is dropped: the text says what failed).
    if (line.size() > 2 && (line[0] == 'E' || line[0] == 'I') && line[1] == ' ') line.erase(0, 2);
    line = escape_line(line, 1000);
    slurm_info("%s", line.c_str());
  }
}

// Reads the collector's log until EOF or `bound`; true at EOF (the collector has ended).
bool drain_log(admin_state& a, std::chrono::milliseconds bound) {
  auto until = std::chrono::steady_clock::now() + bound;
  while (a.log_r >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    struct pollfd p {a.log_r, POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    char buf[4096];
    ssize_t r = ::read(a.log_r, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      forward_lines(a, true);
      close_fd(a.log_r);
      return true;
    }
    if (a.partial.size() < 64 * 1024) a.partial.append(buf, static_cast<std::size_t>(r));
    forward_lines(a, false);
  }
  return true;
}

void reap(admin_state& a, bool kill_it) {
  if (a.pid <= 0) return;
  if (kill_it) ::kill(a.pid, SIGKILL);
  int st = 0;
  // slurmstepd's own wait3() in its task loop may have reaped it already (ECHILD): that is fine. Bounded:
  // one second at most, then init reaps it when slurmstepd exits.
  for (int i = 0; i < 100; ++i) {
    if (::waitpid(a.pid, &st, WNOHANG) != 0) break;
    ::usleep(10000);
  }
  a.pid = -1;
}

}  // namespace

void admin_user_init(spank_t sp, const config& c, bool maybe_checked) {
  auto& a = astate();
  if (!maybe_checked || (!c.admin_comment && c.report_dir.empty())) return;
  std::uint32_t step = 0;
  if (!get(sp, S_JOB_STEPID, &step) || step == k_extern_step) return;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    slurm_error("mrcheck: admin: pipe: %s", std::strerror(errno));
    return;
  }
  a.rec_r = fds[0];
  a.rec_w = fds[1];
}

void admin_task_record(const config&, const task_facts& t, const node_state& st, const report& rep) {
  auto& a = astate();
  if (a.rec_w < 0) return;
  if (t.local_task_id == 0) {
    node_record r = make_node_record(0, t.node, st, rep);
    std::string json = report_to_json(rep).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
    std::string msg = encode_node_record(r) + "\n";
    if (msg.size() + json.size() + 5 < k_message_max) msg += json + "\n";
    msg += "end\n";
    ::fcntl(a.rec_w, F_SETFL, ::fcntl(a.rec_w, F_GETFL) | O_NONBLOCK);
    const char* p = msg.data();
    std::size_t left = msg.size();
    while (left > 0) {
      ssize_t w = ::write(a.rec_w, p, left);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) break;  // collector gone or pipe full: the node shows as "no report", the task goes on
      p += w;
      left -= static_cast<std::size_t>(w);
    }
  }
  close_fd(a.rec_w);
  close_fd(a.rec_r);
}

void admin_task_post_fork(spank_t sp, const config& c) {
  auto& a = astate();
  int task = -1;
  if (a.rec_r < 0 || a.pid > 0 || !get(sp, S_TASK_ID, &task) || task != 0) return;
  std::uint32_t job = 0, step = 0, node_id = 0, nnodes = 1;
  get(sp, S_JOB_ID, &job);
  get(sp, S_JOB_STEPID, &step);
  get(sp, S_JOB_NODEID, &node_id);
  get(sp, S_JOB_NNODES, &nnodes);
  // The batch step runs on one node; slurmstepd leaves its nnodes at 0 (slurmstepd_job.c).
  if (step == k_batch_step || nnodes == 0) {
    nnodes = 1;
    node_id = 0;
  }
  // slurmstepd sets SLURMD_NODENAME in its own environment (slurmstepd.c): trusted, unlike the job's.
  const char* me = std::getenv("SLURMD_NODENAME");
  std::string node = me ? me : "";
  std::string list = job_env(sp, "SLURM_STEP_NODELIST");
  if (list.empty()) list = job_env(sp, "SLURM_JOB_NODELIST");
  auto own = c.probe_timeout + c.nccl_timeout + std::chrono::seconds(30);
  std::vector<std::string> args = {c.admin_helper_path(), "admin-collect",
                                   "--job", std::to_string(job), "--step", std::to_string(step),
                                   "--node-id", std::to_string(node_id), "--nnodes", std::to_string(nnodes),
                                   "--node", node, "--nodelist", list,
                                   "--admin-comment", c.admin_comment ? "1" : "0", "--report-dir", c.report_dir,
                                   "--max", std::to_string(c.admin_comment_max),
                                   "--timeout-ms", std::to_string(c.report_timeout.count()),
                                   "--own-ms", std::to_string(own.count())};
  std::vector<char*> argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  int logp[2];
  if (::pipe2(logp, O_CLOEXEC) != 0) {
    slurm_error("mrcheck: admin: pipe: %s", std::strerror(errno));
    return;
  }
  std::string exec_failed = fmt::format("E mrcheck: admin: cannot execute admin_helper {}\n", escape_line(args[0], 256));
  // Everything the child needs is prepared above: between fork and exec only async-signal-safe calls, as
  // slurmstepd has threads.
  pid_t pid = ::fork();
  if (pid == 0) {
    int devnull = ::open("/dev/null", O_RDWR);
    // Move both ends above 4 first so the dup2s below cannot clobber each other.
    int r = ::fcntl(a.rec_r, F_DUPFD, 10);
    int l = ::fcntl(logp[1], F_DUPFD, 10);
    if (devnull < 0 || r < 0 || l < 0) ::_exit(127);
    ::dup2(devnull, 0);
    ::dup2(devnull, 1);
    ::dup2(devnull, 2);
    ::dup2(r, 3);
    ::dup2(l, 4);
    ::close_range(5, ~0U, 0);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::setsid();
    // slurmstepd runs at oom_score_adj -1000; the collector must not.
    int oom = ::open("/proc/self/oom_score_adj", O_WRONLY);
    if (oom >= 0) {
      ssize_t w = ::write(oom, "0", 1);
      (void)w;
      ::close(oom);
    }
    ::execve(argv[0], argv.data(), environ);
    ssize_t w = ::write(4, exec_failed.data(), exec_failed.size());  // slurmd's log says why, once per step
    (void)w;
    ::_exit(127);
  }
  ::close(logp[1]);
  if (pid < 0) {
    slurm_error("mrcheck: admin: fork: %s", std::strerror(errno));
    ::close(logp[0]);
    return;
  }
  a.pid = pid;
  a.log_r = logp[0];
  // The task children were all forked before task_post_fork: slurmstepd's own ends are not needed any more.
  close_fd(a.rec_r);
  close_fd(a.rec_w);
}

void admin_task_exit(spank_t sp, const config& c) {
  auto& a = astate();
  if (a.pid <= 0 || a.finished) return;
  std::uint32_t local = 1;
  get(sp, S_JOB_LOCAL_TASK_COUNT, &local);
  if (++a.exited < local) return;
  a.finished = true;
  auto bound = c.report_timeout + std::chrono::seconds(3);
  if (!drain_log(a, std::chrono::duration_cast<std::chrono::milliseconds>(bound))) {
    slurm_error("mrcheck: admin: the collector did not finish within %lld ms; stopped",
                static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(bound).count()));
    reap(a, true);
  } else {
    reap(a, false);
  }
  close_fd(a.log_r);
}

void admin_exit() {
  auto& a = astate();
  if (a.pid > 0) {
    if (!a.finished) drain_log(a, std::chrono::milliseconds(1000));
    reap(a, true);
  }
  close_fd(a.log_r);
  close_fd(a.rec_r);
  close_fd(a.rec_w);
}

}  // namespace mrcheck::spank_glue
