// The protocol between the SPANK plugin (src/admin/collector.cpp) and the root collector it starts,
// `mrcheck-prolog admin-collect` (prolog/admin_collect.cpp). Both ends include this header; nothing of it is
// spelled out anywhere else.
//
//   argv   ADMIN_HELPER admin-collect --job J --step S --node-id I --nnodes N --node NAME
//          --admin-comment 0|1 --report-dir DIR --max BYTES --timeout-ms MS --own-ms MS
//   fd 3   a control socket (AF_UNIX SOCK_SEQPACKET; the messages: admin_record.h, admin_read_control): the
//          other end is slurmstepd's main process's, which starts the collector from init_post_opt before the
//          tasks fork, and which the task children inherit. Local task 0, in task_init, makes the record pipe,
//          writes the begin marker line when it starts checking and sends the pipe's read end here ("pipe",
//          SCM_RIGHTS); then it (or the post-exec watcher, which sends it after exec) writes the node record (one
//          JSON line, admin_record.h), the node's report (one JSON line, optional) and the end marker line into
//          the pipe; at most k_admin_message_max bytes in all. The pipe's EOF before the end marker: the task
//          ended before its record. slurmstepd sends "ended" once every local task has ended (task_exit): with
//          no pipe before it, local task 0 never reached task_init's record.
//          Why a socket and not a pipe made in user_init: SlurmdParameters=contain_spank (24.05 and later) runs
//          user_init, task_post_fork and task_exit in clone(CLONE_VM) children of slurmstepd with their own copy
//          of its descriptors (_run_spank_func in Slurm's src/slurmd/slurmstepd/mgr.c), so a descriptor made
//          there never reaches the tasks; init_post_opt and exit run in the main process on every release.
//   fd 4   write end of a pipe slurmstepd reads: "E mrcheck: ..." / "I mrcheck: ..." lines for slurmd's log; its
//          EOF tells slurmstepd the collector is done
//   0-2    /dev/null; its own session; oom_score_adj 0
// The collector detaches at once (it forks, the first process exits): the step's teardown signals slurmstepd's
// process tree (proctrack/linuxproc), and node 0 must outlive that long enough to write the record of a cancelled
// step. slurmstepd still waits for it through fd 4 (bounded) and, while fd 4 is open, can stop it with
// its process group (the session slurmstepd made for it). When slurmstepd goes away (fd 4 reports POLLERR) the
// collector gives the other nodes at most report_timeout more.
#pragma once

#include <cstddef>
#include <string_view>

namespace mrcheck {

inline constexpr std::string_view k_admin_collect_command = "admin-collect";
inline constexpr int k_admin_control_fd = 3;
inline constexpr int k_admin_log_fd = 4;
inline constexpr std::string_view k_admin_end_marker = "end";
// Written by local task 0 when this node checks the step, before its probes: a collector that then sees the pipe
// close without a record knows the task ended (cancelled, killed) before it reported, not that the node had
// nothing to check.
inline constexpr std::string_view k_admin_begin_marker = "begin";
// Below a pipe's default 64 KiB capacity, so the task's non-blocking write never stops short, and the most the
// collector reads from fd 3.
inline constexpr std::size_t k_admin_message_max = 60 * 1024;
// The most lines slurmstepd forwards from fd 4 to slurmd's log for one step (a bounded log).
inline constexpr std::size_t k_admin_log_lines_max = 64;

}  // namespace mrcheck
