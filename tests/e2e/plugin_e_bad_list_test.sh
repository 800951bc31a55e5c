#!/bin/bash
# Plugin scenario e: `--mr-check=bogus` -> srun (and sbatch) exit non-zero before anything is launched,
# with a clear message.
source "$(dirname "$0")/lib.sh"
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
plugin_setup
plugin_load optional memlock_min=8M
marker=$MRCHECK_SLURM_WORK/plugin_e.$$
rm -f "$marker"

run_user srun --mr-check=bogus touch "$marker"
show_run "e: srun"
[[ $RC != 0 ]] && e2e_pass "e: srun exits non-zero" || e2e_fail "e: srun should fail"
expect_contains "e: clear message" "$ERR" "mrcheck: --mr-check: unknown check 'bogus' (known: memlock, mr, nccl, rdma, all, off, verbose)"
[[ ! -e $marker ]] && e2e_pass "e: nothing was launched" || e2e_fail "e: the task ran"

run_user srun "--mr-check=memlock,off" true
expect_contains "e: off with a check is refused" "$ERR" "'off' cannot be combined with a check"

run_user sbatch --mr-check='x;y' --wrap "touch $marker"
show_run "e: sbatch"
[[ $RC != 0 ]] && e2e_pass "e: sbatch exits non-zero" || e2e_fail "e: sbatch should fail"
expect_not_contains "e: sbatch submitted nothing" "$OUT" "Submitted batch job"
expect_contains "e: sbatch message" "$ERR" "mrcheck: --mr-check: check list"
sleep 1
[[ ! -e $marker ]] && e2e_pass "e: no batch job ran" || e2e_fail "e: the batch job ran"
rm -f "$marker"
e2e_done
