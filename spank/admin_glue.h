// The SPANK side of the admins' record: the control socket, the pipes and the root collector around the step's
// tasks (admin_protocol.h).
// plugin.cpp calls these from its hooks with the step's items (job_info.h: read there, once per hook); the
// logic of the record lives in the core (admin_record.h) and in the collector (prolog/admin_collect.cpp,
// `mrcheck-prolog admin-collect`).
//
//   init_post_opt    slurmstepd's main process (root), before the tasks fork: start the collector with one end
//                    of a control socket; slurmstepd keeps the other, the task children inherit it
//   task_init        task child of local task 0 (job user, before exec): make the record pipe, send its read
//                    end to the collector over the socket, write the node record, close; or hand the pipe to
//                    the post-exec watcher, which writes it with the verdict after exec. Other tasks close
//                    their copy of the socket.
//   task_exit        slurmstepd, last local task: "tasks ended" on the socket, then wait for the collector
//                    (bounded) so node 0's AdminComment update lands before srun hears the step ended
//   exit             slurmstepd's main process: kill and reap whatever is left; close everything
// Only init_post_opt and exit are sure to run in slurmstepd's main process: SlurmdParameters=contain_spank
// runs user_init, task_post_fork and task_exit in clone(CLONE_VM) children with copies of its descriptors
// (_run_spank_func in Slurm's src/slurmd/slurmstepd/mgr.c), so nothing is made or closed there for later hooks.
// One path on every release and setting (docs/DESIGN.md §3).
#pragma once

extern "C" {
#include <slurm/spank.h>
}

#include "job_info.h"

#include <mrcheck/step.h>

namespace mrcheck::spank_glue {

// slurmstepd's main process, init_post_opt of a step that may check something (plugin.cpp's gate): start the
// collector, when the site keeps records.
void admin_step_init(const spank_items& it, const config& c);
// A collector was started: task_exit has work.
bool admin_collecting();
// Every task, at the start of task_init: local task 0 sends its record pipe to the collector (with the begin
// marker when `checks`, this node checks the step, so that a task ended before its record - a cancelled step -
// is told apart from a node that had nothing to check); every task closes its copy of the control socket.
void admin_task_begin(const spank_items& it, bool checks);
// What the step engine (send_task_record, src/step/task_step.cpp) is given to send the node record, now or
// later from the post-exec watcher: the record pipe's write end for local task 0 (-1 for the other tasks or
// when no record is kept; the task keeps no other end), the message, and the non-blocking write.
int admin_take_record_fd(const task_facts& t);
std::string admin_record_message(const task_facts& t, const node_state& st, const report& rep);
void admin_write_record(int fd, const std::string& msg);
void admin_task_exit(const spank_items& it, const config& c);
void admin_exit();

}  // namespace mrcheck::spank_glue
