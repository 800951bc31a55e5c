// slurmstepd's side of the admins' record: the root collector (`mrcheck-prolog admin-collect`,
// prolog/admin_collect.cpp) started for a step, its control socket and log pipe, the record pipe of local task
// 0, the wait for it at the step's end and its reap. The wire between the two ends is admin_protocol.h; what the
// record holds is admin_record.h. spank/plugin.cpp calls these from its hooks with plain data (spank/job_info.h)
// and a log sink; nothing here sees spank_t.
//
//   init_post_opt    slurmstepd's main process (root), before the tasks fork: start(): the collector with one end
//                    of a control socket; slurmstepd keeps the other, the task children inherit it
//   task_init        task child (job user, before exec): task_begin(): local task 0 makes the record pipe, sends
//                    its read end to the collector over the socket and keeps the write end for the node record
//                    (take_record_fd; written now or by the post-exec watcher after exec); other tasks close
//                    their copy of the socket
//   task_exit        slurmstepd, each local task: task_exit(); after the last, "tasks ended" on the socket, then
//                    a bounded wait for the collector, so node 0's AdminComment update lands before srun hears
//                    the step ended
//   exit             slurmstepd's main process: finish(): stop and reap whatever is left; close everything
// Only init_post_opt and exit are sure to run in slurmstepd's main process: SlurmdParameters=contain_spank runs
// user_init, task_post_fork and task_exit in clone(CLONE_VM) children with copies of its descriptors
// (_run_spank_func in Slurm's src/slurmd/slurmstepd/mgr.c): this object's memory is shared with them, its
// descriptors are not, so nothing is made for later hooks there and only finish() and a task child before exec
// close a descriptor by its number. One path on every release and setting (docs/DESIGN.md §3).
#pragma once

#include <mrcheck/child.h>
#include <mrcheck/config.h>
#include <mrcheck/log.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mrcheck {

struct node_state;
struct report;
struct task_facts;

// The step as slurmstepd knows it (SPANK items, and SLURMD_NODENAME of slurmstepd's own environment).
struct admin_step {
  std::uint32_t job_id = 0;
  std::uint32_t step_id = 0;
  bool batch_step = false;
  bool extern_step = false;
  std::uint32_t node_id = 0;
  std::uint32_t nnodes = 0;  // 0 in the batch step (slurmstepd_job.c leaves it unset)
  std::string node;
};

// The collector's command line (admin_protocol.h).
std::vector<std::string> admin_collector_argv(const admin_step& s, const config& c);
// How long the last task_exit waits for the collector: report_timeout + 12 s (why: admin_collector.cpp).
std::chrono::milliseconds admin_collector_wait(const config& c);

// What local task 0 writes into its record pipe: the node record, the report when it fits, the end marker.
std::string admin_record_message(const task_facts& t, const node_state& st, const report& rep);
// Writes `msg` without blocking; a collector gone or a full pipe loses the record (the node then shows as "no
// report"), never the task.
void admin_write_record(int fd, const std::string& msg);

// One per slurmstepd (its task children inherit a copy through fork; the clone children of contain_spank share
// it). Every method is a no-op when no collector was started.
class admin_collector {
 public:
  // Starts the collector when the site keeps records (admin_comment= or report_dir=) and the step is not the
  // extern step. `spawn` starts it (a test passes its own); failures go to `log` and start nothing.
  void start(const admin_step& s, const config& c, log_sink& log, const child_spawner& spawn = spawn_child_process);
  // A collector was started and the last task_exit has not waited for it yet: the task hooks have work.
  bool collecting() const { return child_ != nullptr && !finished_; }
  // Every task, at the start of task_init: local task 0 sends its record pipe to the collector (with the begin
  // marker when `checks`, this node checks the step, so that a task ended before its record - a cancelled
  // step - is told apart from a node that had nothing to check); every task closes its copy of the socket.
  void task_begin(int local_task_id, bool checks, log_sink& log);
  // Local task 0's record pipe write end (once; -1 for the other tasks or when no record is kept). The caller
  // owns it (send_task_record, src/step/task_step.cpp).
  int take_record_fd(int local_task_id);
  // slurmstepd, once per local task that ended: after the last of `local_task_count`, "tasks ended", then wait
  // up to `wait` for the collector, forwarding its lines to `log` (info: slurmd's log); stopped after that.
  void task_exit(std::uint32_t local_task_count, std::chrono::milliseconds wait, log_sink& log);
  // slurmstepd's main process, at exit: when task_exit never finished (the tasks never started), "tasks ended"
  // and a second's wait; then the collector is stopped if still running, and every descriptor closed.
  void finish(log_sink& log);

 private:
  bool drain_log(std::chrono::milliseconds bound, log_sink& log);
  void forward_lines(bool flush, log_sink& log);
  void reap(bool stop_it);

  std::unique_ptr<child_handle> child_;
  int ctl_ = -1;    // the control socket's slurmstepd end (admin_protocol.h, fd 3 of the collector)
  int rec_w_ = -1;  // local task 0 only: its record pipe's write end
  int log_r_ = -1;  // the collector's log lines; EOF = it has ended
  bool log_eof_ = false;
  bool finished_ = false;  // task_exit's wait is done (or finish ran)
  bool reaped_ = false;
  std::uint32_t exited_ = 0;
  std::string partial_;
  std::size_t forwarded_ = 0;  // lines forwarded this step
};

}  // namespace mrcheck
