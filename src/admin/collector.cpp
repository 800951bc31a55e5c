// slurmstepd's side of the admins' record: start, control socket, log pipe, wait and reap of the root collector
// (include/mrcheck/admin_collector.h).
#include <mrcheck/admin_collector.h>
#include <mrcheck/admin_protocol.h>
#include <mrcheck/admin_record.h>
#include <mrcheck/check.h>
#include <mrcheck/step.h>
#include <mrcheck/units.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace mrcheck {

namespace {

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

std::vector<std::string> admin_collector_argv(const admin_step& s, const config& c) {
  std::uint32_t node_id = s.node_id, nnodes = s.nnodes;
  // The batch step runs on one node; slurmstepd leaves its nnodes at 0 (slurmstepd_job.c).
  if (s.batch_step || nnodes == 0) {
    nnodes = 1;
    node_id = 0;
  }
  auto own = c.probe_timeout + c.nccl_timeout + std::chrono::seconds(30);
  return {c.admin_helper_path(),
          std::string(k_admin_collect_command),
          "--job",
          std::to_string(s.job_id),
          "--step",
          std::to_string(s.step_id),
          "--node-id",
          std::to_string(node_id),
          "--nnodes",
          std::to_string(nnodes),
          "--node",
          s.node,
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
          std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(own).count())};
}

std::chrono::milliseconds admin_collector_wait(const config& c) {
  // + 12 s: the collector's own read, write and read-back of AdminComment and its retries (admin_collect.cpp),
  // after up to 5 s on the per-node lock behind the steps before it, with one read held up by slurmctld: 24.11
  // answers job reads about 5 s late behind a step's completion (docs/slurm-releases.md, 24.11). With + 5 s,
  // collectors of concurrent steps were stopped there before their record was written.
  return std::chrono::duration_cast<std::chrono::milliseconds>(c.report_timeout + std::chrono::seconds(12));
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

void admin_collector::start(const admin_step& s, const config& c, log_sink& log, const child_spawner& spawn) {
  if (!c.admin_comment && c.report_dir.empty()) return;
  if (s.extern_step || child_ != nullptr) return;
  // Close-on-exec on both: the task children inherit slurmstepd's end until task_init or exec, never the job's
  // own program; the collector gets its end as fd 3 (spawn_child clears the flag there).
  int ctl[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) != 0) {
    mrcheck::log(log, log_level::error, "admin: socketpair: {}", std::strerror(errno));
    return;
  }
  int logp[2];
  if (::pipe2(logp, O_CLOEXEC) != 0) {
    mrcheck::log(log, log_level::error, "admin: pipe: {}", std::strerror(errno));
    ::close(ctl[0]);
    ::close(ctl[1]);
    return;
  }
  child_spec spec;
  spec.argv = admin_collector_argv(s, c);
  spec.env = current_environment();
  spec.out = child_stream::null;
  // Its stderr goes where its log lines go: an exec failure ("mrcheck: child: execve PATH: ...") reaches
  // slurmd's log once per step.
  spec.err = child_stream::inherit;
  spec.extra_fds = {{STDERR_FILENO, logp[1]}, {k_admin_control_fd, ctl[1]}, {k_admin_log_fd, logp[1]}};
  // Its own session, so its group is its own (the handle's kill_group stops the collector's detached process
  // too: admin_protocol.h).
  spec.new_session = true;
  spec.contain = false;
  auto started = spawn(spec);
  // The collector's ends are its own from here: the log pipe's EOF says it has ended, the socket's close (every
  // copy of slurmstepd's end gone) that slurmstepd has.
  ::close(logp[1]);
  ::close(ctl[1]);
  if (!started) {
    mrcheck::log(log, log_level::error, "admin: {}", started.error().message());
    ::close(logp[0]);
    ::close(ctl[0]);
    return;
  }
  child_ = std::move(*started);
  ctl_ = ctl[0];
  log_r_ = logp[0];
}

void admin_collector::task_begin(int local_task_id, bool checks, log_sink& log) {
  if (ctl_ < 0) return;
  // This task child's copy of slurmstepd's end: only local task 0 sends on it, once, here; no task keeps it (nor
  // does the post-exec watcher it may fork, nor the job's program).
  int ctl = ctl_;
  ctl_ = -1;
  if (local_task_id != 0) {
    ::close(ctl);
    return;
  }
  // B7 (SECURITY.md): the record pipe's write end is this task child's (and the post-exec watcher's, forked from
  // it) until exec. A process of the job user could open it through /proc/PID/fd while the probes run if the
  // child were dumpable (a container plugin may leave it so after the switch to the user): never, from here on.
  // exec() gives the job's program its ordinary dumpable state back.
  if (checks) ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    mrcheck::log(log, log_level::error, "admin: pipe: {}", std::strerror(errno));
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
    rec_w_ = fds[1];
  } else {
    ::close(fds[1]);
  }
}

int admin_collector::take_record_fd(int local_task_id) {
  if (rec_w_ < 0 || local_task_id != 0) return -1;
  int fd = rec_w_;
  rec_w_ = -1;
  return fd;
}

// Forwards the collector's lines ("I mrcheck: ..." / "E mrcheck: ...") to `log`.
void admin_collector::forward_lines(bool flush, log_sink& log) {
  std::size_t nl;
  while ((nl = partial_.find('\n')) != std::string::npos || (flush && !partial_.empty())) {
    std::string line = partial_.substr(0, nl);
    partial_.erase(0, nl == std::string::npos ? std::string::npos : nl + 1);
    // An error line in slurmstepd also reaches the user's srun; the record is the admins' business, so every
    // line goes at info, to slurmd's log only (the collector's "E"/"I" level is dropped: the text says what
    // failed).
    if (line.size() > 2 && (line[0] == 'E' || line[0] == 'I') && line[1] == ' ') line.erase(0, 2);
    if (forwarded_ == k_admin_log_lines_max) {
      mrcheck::log(log, log_level::info, "admin: further collector lines of this step not shown (at most {})",
                   k_admin_log_lines_max);
    }
    if (forwarded_++ >= k_admin_log_lines_max) continue;
    log.write(log_level::info, escape_line(line, 1000));
  }
}

// Reads the collector's log until EOF or `bound`; true at EOF (the collector has ended).
bool admin_collector::drain_log(std::chrono::milliseconds bound, log_sink& log) {
  auto until = std::chrono::steady_clock::now() + bound;
  while (log_r_ >= 0 && !log_eof_) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    struct pollfd p {
      log_r_, POLLIN, 0
    };
    int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    char buf[4096];
    ssize_t r = ::read(log_r_, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      forward_lines(true, log);
      log_eof_ = true;
      return true;
    }
    if (partial_.size() < 64 * 1024) partial_.append(buf, static_cast<std::size_t>(r));
    forward_lines(false, log);
  }
  return true;
}

void admin_collector::reap(bool stop_it) {
  if (child_ == nullptr || reaped_) return;
  reaped_ = true;
  // The collector detaches (admin_protocol.h): the child is its first process, which exits at once; the
  // collector itself is in the child's group, and while fd 4 is open (no EOF yet) it is alive and holds that
  // group's id, so the group cannot name anyone else.
  if (stop_it && log_r_ >= 0 && !log_eof_) child_->kill_group();
  // slurmstepd's own wait3() in its task loop may have reaped the first process already, and a clone child
  // running task_exit is not its parent: the handle's end is then `lost`, which is fine. Bounded: one second at
  // most, then slurmstepd's wait3() or init reaps it.
  (void)child_->wait_until(child_handle::clock::now() + std::chrono::seconds(1));
}

void admin_collector::task_exit(std::uint32_t local_task_count, std::chrono::milliseconds wait, log_sink& log) {
  if (!collecting() || finished_) return;
  if (++exited_ < local_task_count) return;
  finished_ = true;
  // Every local task has ended, so local task 0 has sent its pipe, if it got that far, before this (it sends
  // before exec, and slurmstepd runs this hook after its exit): the collector needs no EOF from a pipe it never
  // got. A copy of slurmstepd's end, whichever process runs this hook (admin_collector.h).
  // Not sent (EPIPE): the collector has ended already, its record written; nothing to say (an error line here
  // would reach the user's srun).
  (void)admin_send_tasks_ended(ctl_);
  if (!drain_log(wait, log)) {
    mrcheck::log(log, log_level::error, "admin: the collector did not finish within {} ms; stopped",
                 static_cast<long long>(wait.count()));
    reap(true);
  } else {
    reap(false);
  }
}

void admin_collector::finish(log_sink& log) {
  if (child_ != nullptr && !reaped_) {
    // No task_exit for the last task (the tasks never started, or slurmstepd is failing): the socket's close
    // below tells the collector too; it gets a second to finish.
    if (!finished_) {
      finished_ = true;
      (void)admin_send_tasks_ended(ctl_);
      drain_log(std::chrono::milliseconds(1000), log);
    }
    reap(true);
  }
  close_fd(ctl_);
  close_fd(log_r_);
  close_fd(rec_w_);
  child_.reset();
}

}  // namespace mrcheck
