// The SPANK side of the admins' record: pipes and the root collector around the step's tasks.
// plugin.cpp calls these from its hooks with the step's items (job_info.h: read there, once per hook); the
// logic of the record lives in the core (admin_record.h) and in the collector (prolog/admin_collect.cpp,
// `mrcheck-prolog admin-collect`).
//
//   user_init        slurmstepd, before the tasks fork: the record pipe (inherited by the task children)
//   task_post_fork   slurmstepd (root), task 0: start the collector with the pipe's read end
//   task_init        task child of local task 0 (job user, before exec): write the node record, close; or
//                    hand the pipe to the post-exec watcher, which writes it with the verdict after exec
//   task_exit        slurmstepd, last local task: wait for the collector (bounded) so node 0's AdminComment
//                    update lands before srun hears the step ended (and the job may complete)
//   exit             slurmstepd: kill and reap whatever is left; close everything
#pragma once

extern "C" {
#include <slurm/spank.h>
}

#include "job_info.h"

#include <mrcheck/step.h>

namespace mrcheck::spank_glue {

// slurmstepd, in init_post_opt (its own process): which process the pipes belong to.
void admin_step_init();
// user_init of a step that may check something (plugin.cpp's gate): the record pipe, when the site keeps records.
void admin_user_init(const spank_items& it, const config& c);
// A collector was started or is about to be (user_init made the pipe): task_post_fork and task_exit have work.
bool admin_collecting();
// Local task 0, at the start of task_init when this node checks the step: tells the collector so, so that a task
// ended before its record (a cancelled step) is told apart from a node that had nothing to check.
void admin_task_begin(const spank_items& it);
// What the step engine (send_task_record, src/step/task_step.cpp) is given to send the node record, now or
// later from the post-exec watcher: the record pipe's write end for local task 0 (-1 for the other tasks or
// when no record is kept; the task keeps no other end), the message, and the non-blocking write.
int admin_take_record_fd(const task_facts& t);
std::string admin_record_message(const task_facts& t, const node_state& st, const report& rep);
void admin_write_record(int fd, const std::string& msg);
void admin_task_post_fork(const spank_items& it, const config& c);
void admin_task_exit(const spank_items& it, const config& c);
void admin_exit();

}  // namespace mrcheck::spank_glue
