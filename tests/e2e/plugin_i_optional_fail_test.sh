#!/bin/bash
# on_fail=fail with an `optional` plugin: Slurm ignores an optional plugin's task_init error (docs/facts/slurm-spank.md
# §5), so the plugin ends the failing task itself, before exec, with slurmstepd's own status for a failed
# required plugin (_exit(1), task.c exec_task). The same run with a `required` plugin ends the same way;
# on_fail=warn lets the task run.
source "$(dirname "$0")/lib.sh"
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
plugin_setup
((PLUGIN_HARD_KIB >= 8192)) || e2e_skip "hard memlock here is ${PLUGIN_HARD_KIB} KiB, below the 8 MiB policy"

for mode in optional required; do
  plugin_load "$mode" memlock_min=8M on_fail=fail
  run_user bash -c "ulimit -S -l 64; srun --mr-check=memlock bash -c 'echo ran'; exit \$?"
  show_run "i: $mode"
  expect_not_contains "i: $mode: the task never ran" "$OUT" "ran"
  expect_contains "i: $mode: one FAIL line" "$ERR" "mrcheck: memlock: FAIL: task will start with memlock soft 64 KiB"
  expect_eq "i: $mode: exactly one mrcheck line" "$(grep -c '^mrcheck: ' <<<"$ERR")" "1"
  expect_contains "i: $mode: the task exited with status 1" "$ERR" "Exited with exit code 1"
  [[ $RC != 0 ]] && e2e_pass "i: $mode: srun fails" || e2e_fail "i: $mode: srun should fail (rc=$RC)"
done

# Two tasks on the node: both end (each task child judges itself), one line for the node.
plugin_load optional memlock_min=8M on_fail=fail
run_user bash -c "ulimit -S -l 64; srun -n2 --mr-check=memlock bash -c 'echo ran'; exit \$?"
show_run "i: two tasks"
expect_not_contains "i: two tasks: none ran" "$OUT" "ran"
expect_eq "i: two tasks: one FAIL line" "$(grep -c '^mrcheck: memlock: FAIL: ' <<<"$ERR")" "1"

# A batch step: the script itself never runs, the job fails with exit code 1.
run_user bash -c "ulimit -S -l 64; cd '$MRCHECK_SLURM_WORK' && sbatch --parsable --wait --mr-check=memlock -o /dev/null \
  --wrap 'touch $MRCHECK_SLURM_WORK/plugin_i_batch_ran' 2>&1; exit \$?"
show_run "i: batch"
[[ ! -e $MRCHECK_SLURM_WORK/plugin_i_batch_ran ]] && e2e_pass "i: batch: the script never ran" ||
  e2e_fail "i: batch: the script ran"
rm -f "$MRCHECK_SLURM_WORK/plugin_i_batch_ran"
[[ $RC != 0 ]] && e2e_pass "i: batch: sbatch --wait fails" || e2e_fail "i: batch: sbatch --wait should fail (rc=$RC)"

plugin_load optional memlock_min=8M on_fail=warn
run_user bash -c "ulimit -S -l 64; srun --mr-check=memlock bash -c 'echo ran'; exit \$?"
show_run "i: warn"
expect_eq "i: warn: the task runs" "$OUT" "ran"
expect_eq "i: warn: rc" "$RC" "0"
expect_contains "i: warn: one WARN line" "$ERR" "mrcheck: memlock: WARN: "
e2e_done
