#include "job_info.h"

#include <mrcheck/slurm_conf.h>
#include <mrcheck/sysroot.h>

#include <fmt/format.h>

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace mrcheck::spank_glue {

namespace {

// The one buffer for a job environment value: MRCHECK_SUBMIT is bounded to 1 KiB. Anything larger is not ours, or
// too long to be worth passing on. (The step's node list is not read here: the job's SLURM_STEP_NODELIST is what the
// user's srun sent; the admins' collector asks slurmctld, prolog/admin_collect.cpp.)
constexpr std::size_t k_env_max = 8192;
// slurm/slurm.h's SLURM_BATCH_SCRIPT and SLURM_EXTERN_CONT (22.05), without pulling in all of slurm.h.
constexpr std::uint32_t k_batch_step = 0xfffffffb;
constexpr std::uint32_t k_extern_step = 0xfffffffc;

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  std::string h(buf);
  return h.substr(0, h.find('.'));
}

// The one getter of a SPANK item.
template <class T>
bool item(spank_t sp, spank_item_t it, const char* what, T* out) {
  spank_err_t rc = spank_get_item(sp, it, out);
  if (rc != ESPANK_SUCCESS) {
    slurm_debug("mrcheck: spank_get_item(%s): %s", what, spank_strerror(rc));
    return false;
  }
  return true;
}

// The one getter of the job's environment (S_CTX_REMOTE). A value longer than the buffer comes back as a
// string every decoder refuses as too long; nullopt when it is not set.
std::optional<std::string> job_getenv(spank_t sp, const char* name) {
  char buf[k_env_max];
  spank_err_t rc = spank_getenv(sp, name, buf, sizeof buf);
  if (rc == ESPANK_SUCCESS) return std::string(buf);
  if (rc == ESPANK_NOSPACE) return std::string(k_env_max, '?');
  return std::nullopt;
}

}  // namespace

std::string submit_tool(spank_context_t ctx) {
  if (ctx == S_CTX_LOCAL) return "srun";
  std::string_view self = program_invocation_short_name ? program_invocation_short_name : "";
  return self == "salloc" ? "salloc" : "sbatch";
}

spank_items read_spank_items(spank_t sp) {
  spank_items it;
  item(sp, S_JOB_ID, "S_JOB_ID", &it.job_id);
  item(sp, S_JOB_STEPID, "S_JOB_STEPID", &it.step_id);
  it.batch_step = it.step_id == k_batch_step;
  it.extern_step = it.step_id == k_extern_step;
  item(sp, S_JOB_NODEID, "S_JOB_NODEID", &it.node_id);
  item(sp, S_JOB_NNODES, "S_JOB_NNODES", &it.nnodes);
  item(sp, S_JOB_LOCAL_TASK_COUNT, "S_JOB_LOCAL_TASK_COUNT", &it.local_task_count);
  // S_TASK_ID is a task's item only: outside the task hooks Slurm refuses it (no log line for that).
  int task = 0;
  if (spank_get_item(sp, S_TASK_ID, &task) == ESPANK_SUCCESS) it.local_task_id = task;
  // B6 (SECURITY.md): the node's name from slurmstepd's own environment (slurmstepd.c sets SLURMD_NODENAME there),
  // never the job's: the job's copy is the user's to set, and every srun inside sbatch carries the batch host's.
  // It fills %n of SlurmdPidFile, read as root. Unset (srun, sbatch): the host's name (make_task_facts).
  if (const char* me = std::getenv("SLURMD_NODENAME"); me && *me) it.nodename = std::string(me);
  it.env_checks = job_getenv(sp, "MRCHECK_CHECKS");
  it.rlimit_memlock = job_getenv(sp, "SLURM_RLIMIT_MEMLOCK");
  it.rlimit_stack = job_getenv(sp, "SLURM_RLIMIT_STACK");
  it.rlimit_nofile = job_getenv(sp, "SLURM_RLIMIT_NOFILE");
  it.submit_raw = job_getenv(sp, "MRCHECK_SUBMIT");
  if (auto h = job_getenv(sp, "SLURM_SUBMIT_HOST")) it.submit_host = *h;
  // The task's command, to know a container launcher (`srun apptainer exec IMAGE cmd`, docs/containers.md).
  int argc = 0;
  char** argv = nullptr;
  if (spank_err_t rc = spank_get_item(sp, S_JOB_ARGV, &argc, &argv); rc == ESPANK_SUCCESS && argv) {
    for (int i = 0; i < argc && i < 8 && argv[i]; ++i) it.argv.emplace_back(argv[i]);
  } else if (rc != ESPANK_SUCCESS) {
    slurm_debug("mrcheck: spank_get_item(S_JOB_ARGV): %s", spank_strerror(rc));
  }
  return it;
}

task_facts make_task_facts(const spank_items& it, spank_t sp, bool with_env) {
  task_facts t;
  t.host = host_name();
  t.node = it.nodename ? *it.nodename : t.host;
  t.job_id = it.job_id;
  t.step_id = it.step_id;
  t.batch_step = it.batch_step;
  t.extern_step = it.extern_step;
  t.local_task_id = it.local_task_id.value_or(0);
  t.task_pid = ::getpid();  // S_TASK_PID is 0 in the task child (docs/facts/slurm-spank.md §1)
  t.request.env_checks = it.env_checks;
  t.rlimit_memlock = it.rlimit_memlock;
  t.rlimit_stack = it.rlimit_stack;
  t.rlimit_nofile = it.rlimit_nofile;
  t.submit_raw = it.submit_raw;
  t.submit_host = it.submit_host;
  // slurmstepd's own $SLURM_CONF (slurmd's environment), not the job's: the job's SLURM_CONF is the user's to set.
  t.slurm_conf_path = slurm_conf_path(sysroot());
  t.job_argv = it.argv;
  if (with_env) {
    char** env = nullptr;
    if (item(sp, S_JOB_ENV, "S_JOB_ENV", &env) && env) {
      for (char** e = env; *e; ++e) t.job_env.emplace_back(*e);
    }
  }
  return t;
}

submit_inputs read_submit_inputs(spank_context_t ctx) {
  submit_inputs in;
  in.tool = submit_tool(ctx);
  in.host = host_name();
  const char* job = std::getenv("SLURM_JOB_ID");
  if (job) in.job_id = job;
  in.self = ::getpid();
  if (const char* c = std::getenv("MRCHECK_CHECKS")) in.request.env_checks = std::string(c);
  return in;
}

}  // namespace mrcheck::spank_glue
