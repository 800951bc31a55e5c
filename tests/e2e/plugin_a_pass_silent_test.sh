#!/bin/bash
# Plugin scenario a: slurmd with the machine's full limit and PropagateResourceLimitsExcept=MEMLOCK -> pass,
# silent, even when the submitting shell lowered its own limit (it is no longer propagated).
# (slurmd cannot be unlimited here: the inherited hard limit is 8 MiB without CAP_SYS_RESOURCE; the policy is
# therefore 8 MiB, the same situation one step down.)
source "$(dirname "$0")/lib.sh"
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
plugin_setup
((PLUGIN_HARD_KIB >= 8192)) || e2e_skip "hard memlock here is ${PLUGIN_HARD_KIB} KiB, below the 8 MiB policy"
plugin_slurmd_restart --memlock-soft "${PLUGIN_HARD_KIB}K" --memlock-hard "${PLUGIN_HARD_KIB}K"
plugin_conf_set PropagateResourceLimitsExcept MEMLOCK
plugin_load required memlock_min=8M

run_user bash -c "ulimit -S -l 64; srun --mr-check=memlock bash -c 'ulimit -l'; exit \$?"
show_run "a"
expect_eq "a: rc" "$RC" "0"
expect_eq "a: the task has slurmd's limit" "$OUT" "$PLUGIN_HARD_KIB"
expect_eq "a: silent" "$ERR" ""

run_user bash -c "srun -n2 --mr-check=memlock,verbose true; exit \$?"
show_run "a: verbose"
expect_contains "a: verbose names the setting in force" "$ERR" "no SLURM_RLIMIT_MEMLOCK arrived (here: PropagateResourceLimitsExcept=MEMLOCK"
expect_contains "a: verbose says pass" "$ERR" "mrcheck: memlock: pass: task starts with memlock soft 8 MiB"
e2e_done
