#include "admin_glue.h"

#include <mrcheck/admin_protocol.h>
#include <mrcheck/admin_record.h>
#include <mrcheck/child.h>
#include <mrcheck/units.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
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

// Per slurmstepd (and inherited by its task children through fork). Under SlurmdParameters=contain_spank the
// clone(CLONE_VM) children that run task_exit share this memory but hold their own copies of the descriptors
// (admin_protocol.h): so a hook there never closes a descriptor by these numbers; only the main process does,
// in exit (admin_exit), or a task child in its own table before exec.
struct admin_state {
  int ctl = -1;    // the control socket's slurmstepd end (admin_protocol.h, fd 3 of the collector)
  int rec_w = -1;  // local task 0 only: its record pipe's write end
  int log_r = -1;  // the collector's log lines; EOF = it has ended
  bool log_eof = false;
  pid_t pid = -1;
  bool finished = false;
  std::uint32_t exited = 0;
  std::string partial;
  std::size_t forwarded = 0;  // lines forwarded to slurmd's log this step
};
admin_state& astate() {
  static admin_state s;
  return s;
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
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
    if (a.forwarded == k_admin_log_lines_max) {
      slurm_info("mrcheck: admin: further collector lines of this step not shown (at most %zu)", k_admin_log_lines_max);
    }
    if (a.forwarded++ >= k_admin_log_lines_max) continue;
    line = escape_line(line, 1000);
    slurm_info("%s", line.c_str());
  }
}

// Reads the collector's log until EOF or `bound`; true at EOF (the collector has ended).
bool drain_log(admin_state& a, std::chrono::milliseconds bound) {
  auto until = std::chrono::steady_clock::now() + bound;
  while (a.log_r >= 0 && !a.log_eof) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    struct pollfd p {
      a.log_r, POLLIN, 0
    };
    int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    char buf[4096];
    ssize_t r = ::read(a.log_r, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      forward_lines(a, true);
      a.log_eof = true;
      return true;
    }
    if (a.partial.size() < 64 * 1024) a.partial.append(buf, static_cast<std::size_t>(r));
    forward_lines(a, false);
  }
  return true;
}

void reap(admin_state& a, bool kill_it) {
  if (a.pid <= 0) return;
  // The collector detaches (admin_protocol.h): a.pid is its first process, which exits at once; the collector
  // itself is in the process group a.pid, and while fd 4 is open (no EOF yet) it is alive and holds that
  // group's id, so the group cannot name anyone else.
  if (kill_it && a.log_r >= 0 && !a.log_eof) ::kill(-a.pid, SIGKILL);
  int st = 0;
  // slurmstepd's own wait3() in its task loop may have reaped it already, and a clone child running task_exit
  // is not its parent (ECHILD): that is fine. Bounded: one second at most, then slurmstepd's wait3() or init
  // reaps it.
  for (int i = 0; i < 100; ++i) {
    if (::waitpid(a.pid, &st, WNOHANG) != 0) break;
    ::usleep(10000);
  }
  a.pid = -1;
}

}  // namespace

bool admin_collecting() { return astate().pid > 0; }

void admin_step_init(const spank_items& it, const config& c) {
  auto& a = astate();
  if (!c.admin_comment && c.report_dir.empty()) return;
  if (it.extern_step || a.pid > 0) return;
  std::uint32_t job = it.job_id, step = it.step_id, node_id = it.node_id, nnodes = it.nnodes;
  // The batch step runs on one node; slurmstepd leaves its nnodes at 0 (slurmstepd_job.c).
  if (it.batch_step || nnodes == 0) {
    nnodes = 1;
    node_id = 0;
  }
  // slurmstepd sets SLURMD_NODENAME in its own environment (slurmstepd.c): trusted, unlike the job's.
  const char* me = std::getenv("SLURMD_NODENAME");
  std::string node = me ? me : "";
  auto own = c.probe_timeout + c.nccl_timeout + std::chrono::seconds(30);
  std::vector<std::string> args = {c.admin_helper_path(),
                                   std::string(k_admin_collect_command),
                                   "--job",
                                   std::to_string(job),
                                   "--step",
                                   std::to_string(step),
                                   "--node-id",
                                   std::to_string(node_id),
                                   "--nnodes",
                                   std::to_string(nnodes),
                                   "--node",
                                   node,
                                   "--admin-comment",
                                   c.admin_comment ? "1" : "0",
                                   "--report-dir",
                                   c.report_dir,
                                   "--state-dir",
                                   c.report_dir.empty() ? std::string() : c.state_dir,
                                   "--max",
                                   std::to_string(c.admin_comment_max),
                                   "--timeout-ms",
                                   std::to_string(c.report_timeout.count()),
                                   "--own-ms",
                                   std::to_string(own.count())};
  // Close-on-exec on both: the task children inherit slurmstepd's end until task_init or exec, never the job's
  // own program; the collector gets its end as fd 3 (spawn_child clears the flag there).
  int ctl[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) != 0) {
    slurm_error("mrcheck: admin: socketpair: %s", std::strerror(errno));
    return;
  }
  int logp[2];
  if (::pipe2(logp, O_CLOEXEC) != 0) {
    slurm_error("mrcheck: admin: pipe: %s", std::strerror(errno));
    ::close(ctl[0]);
    ::close(ctl[1]);
    return;
  }
  child_spec spec;
  spec.argv = std::move(args);
  spec.env = current_environment();
  spec.out = child_stream::null;
  // Its stderr goes where its log lines go: an exec failure ("mrcheck: child: execve PATH: ...") reaches
  // slurmd's log once per step.
  spec.err = child_stream::inherit;
  spec.extra_fds = {{STDERR_FILENO, logp[1]}, {k_admin_control_fd, ctl[1]}, {k_admin_log_fd, logp[1]}};
  spec.new_session = true;
  spec.contain = false;
  auto started = spawn_child(spec);
  // The collector's ends are its own from here: the log pipe's EOF says it has ended, the socket's close (every
  // copy of slurmstepd's end gone) that slurmstepd has.
  ::close(logp[1]);
  ::close(ctl[1]);
  if (!started) {
    slurm_error("mrcheck: admin: %s", started.error().message().c_str());
    ::close(logp[0]);
    ::close(ctl[0]);
    return;
  }
  close_fd(started->pidfd);
  a.pid = started->pid;
  a.ctl = ctl[0];
  a.log_r = logp[0];
}

std::string admin_record_message(const task_facts& t, const node_state& st, const report& rep) {
  node_record r = make_node_record(0, t.node, st, rep);
  std::string json = report_to_json(rep).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
  std::string msg = encode_node_record(r) + "\n";
  std::string end = std::string(k_admin_end_marker) + "\n";
  if (msg.size() + json.size() + 1 + end.size() <= k_admin_message_max) msg += json + "\n";
  return msg + end;
}

void admin_write_record(int fd, const std::string& msg) {
  if (fd < 0) return;
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  const char* p = msg.data();
  std::size_t left = msg.size();
  while (left > 0) {
    ssize_t w = ::write(fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;  // collector gone or pipe full: the node shows as "no report", the task goes on
    p += w;
    left -= static_cast<std::size_t>(w);
  }
}

void admin_task_begin(const spank_items& it, bool checks) {
  auto& a = astate();
  if (a.ctl < 0) return;
  // This task child's copy of slurmstepd's end: only local task 0 sends on it, once, here; no task keeps it (nor
  // does the post-exec watcher it may fork, nor the job's program).
  int ctl = a.ctl;
  a.ctl = -1;
  if (it.local_task_id != 0) {
    ::close(ctl);
    return;
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    slurm_error("mrcheck: admin: pipe: %s", std::strerror(errno));
    ::close(ctl);
    return;
  }
  // Not checked here: an empty pipe, closed at once, ends the collector's wait (nothing to record).
  if (checks) admin_write_record(fds[1], std::string(k_admin_begin_marker) + "\n");
  auto sent = admin_send_record_pipe(ctl, fds[0]);
  ::close(fds[0]);
  ::close(ctl);
  if (!sent) {
    // The collector is gone (it could not start: slurmd's log says why): the node shows as "no report", the task
    // goes on, as for a write into a closed record pipe (admin_write_record); nothing for the user's terminal.
    ::close(fds[1]);
    return;
  }
  if (checks) {
    a.rec_w = fds[1];
  } else {
    ::close(fds[1]);
  }
}

int admin_take_record_fd(const task_facts& t) {
  auto& a = astate();
  if (a.rec_w < 0 || t.local_task_id != 0) return -1;
  int fd = a.rec_w;
  a.rec_w = -1;
  return fd;
}

void admin_task_exit(const spank_items& it, const config& c) {
  auto& a = astate();
  if (a.pid <= 0 || a.finished) return;
  if (++a.exited < it.local_task_count) return;
  a.finished = true;
  // Every local task has ended, so local task 0 has sent its pipe, if it got that far, before this (it sends
  // before exec, and slurmstepd runs this hook after its exit): the collector needs no EOF from a pipe it never
  // got. A copy of slurmstepd's end, whichever process runs this hook (admin_state).
  // Not sent (EPIPE): the collector has ended already, its record written; nothing to say (slurm_error here
  // would reach the user's srun).
  (void)admin_send_tasks_ended(a.ctl);
  // + 12 s: the collector's own read, write and read-back of AdminComment and its retries (admin_collect.cpp),
  // after up to 5 s on the per-node lock behind the steps before it, with one read held up by slurmctld: 24.11
  // answers job reads about 5 s late behind a step's completion (docs/slurm-releases.md, 24.11). With
  // + 5 s, collectors of concurrent steps were stopped there before their record was written.
  auto bound = c.report_timeout + std::chrono::seconds(12);
  if (!drain_log(a, std::chrono::duration_cast<std::chrono::milliseconds>(bound))) {
    slurm_error("mrcheck: admin: the collector did not finish within %lld ms; stopped",
                static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(bound).count()));
    reap(a, true);
  } else {
    reap(a, false);
  }
}

void admin_exit() {
  auto& a = astate();
  if (a.pid > 0) {
    // No task_exit for the last task (the tasks never started, or slurmstepd is failing): the socket's close
    // below tells the collector too; it gets a second to finish.
    if (!a.finished) {
      (void)admin_send_tasks_ended(a.ctl);
      drain_log(a, std::chrono::milliseconds(1000));
    }
    reap(a, true);
  }
  close_fd(a.ctl);
  close_fd(a.log_r);
  close_fd(a.rec_w);
}

}  // namespace mrcheck::spank_glue
