/* A job user's srun that lies about the step's nodes: LD_PRELOAD into srun (the user's own program), it makes
 * the step launch send HOSTILE_NODELIST as the step's node list. Slurm's step launch writes that list into the
 * job's SLURM_STEP_NODELIST, SLURM_JOB_NODELIST and SLURM_NODELIST (the het-job node list, src/api/step_launch.c);
 * slurmd and slurmstepd run the step on the nodes of its credential all the same. Test data for
 * tests/e2e/hostile_nodelist_test.sh: whatever root does with the job's node list, this decides. Never installed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>

#include <slurm/slurm.h>

typedef int (*launch_fn)(slurm_step_ctx_t*, const slurm_step_launch_params_t*, const slurm_step_launch_callbacks_t*);

int slurm_step_launch(slurm_step_ctx_t* ctx, const slurm_step_launch_params_t* params,
                      const slurm_step_launch_callbacks_t* callbacks) {
  launch_fn real = (launch_fn)dlsym(RTLD_NEXT, "slurm_step_launch");
  const char* list = getenv("HOSTILE_NODELIST");
  if (!real) return -1;
  if (!list || !*list) return real(ctx, params, callbacks);
  slurm_step_launch_params_t lie = *params;
  lie.het_job_node_list = (char*)list;
  return real(ctx, &lie, callbacks);
}
