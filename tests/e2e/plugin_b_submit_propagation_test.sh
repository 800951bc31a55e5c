#!/bin/bash
# Plugin scenario b: `ulimit -S -l 64` in the shell that runs `srun --mr-check` (default propagation) fails
# naming submit-host propagation and 64 KiB; with enforce=yes memlock_min=8M the task runs with 8192 KiB.
source "$(dirname "$0")/lib.sh"
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
plugin_setup
((PLUGIN_HARD_KIB >= 8192)) || e2e_skip "hard memlock here is ${PLUGIN_HARD_KIB} KiB, below the 8 MiB policy"

plugin_load required memlock_min=8M
# `; exit` keeps bash from exec'ing srun in its own process, as an interactive shell would.
run_user bash -c "ulimit -S -l 64; srun --mr-check=memlock bash -c 'echo ran; ulimit -l'; exit \$?"
show_run "b: fail"
[[ $RC != 0 ]] && e2e_pass "b: the step fails" || e2e_fail "b: the step should fail (rc=$RC)"
expect_not_contains "b: the task never ran" "$OUT" "ran"
expect_contains "b: one FAIL line" "$ERR" "mrcheck: memlock: FAIL: task will start with memlock soft 64 KiB < required 8 MiB"
expect_contains "b: names submit-host propagation" "$ERR" "lowered at submit-host propagation: bash pid "
expect_contains "b: names the submit host" "$ERR" " on $(hostname -s) set soft 64 KiB"
expect_contains "b: names the fix" "$ERR" "PropagateResourceLimitsExcept=MEMLOCK"
expect_eq "b: exactly one mrcheck line" "$(grep -c '^mrcheck: ' <<<"$ERR")" "1"
# srun exec'd by the shell that lowered the limit: the same process, named as srun.
run_user bash -c "ulimit -S -l 64; exec srun --mr-check=memlock true"
expect_contains "b: exec'd srun is named" "$ERR" "lowered at submit-host propagation: srun pid "

# The chain table (verbose), for the record.
plugin_load optional memlock_min=8M
run_user bash -c "ulimit -S -l 64; srun --mr-check=memlock,verbose true; exit \$?"
show_run "b: chain table"
expect_contains "b: verbose shows the submit chain" "$ERR" "sends SLURM_RLIMIT_MEMLOCK=65536"
expect_contains "b: verbose shows the prediction" "$ERR" "task at exec (predicted)"

plugin_load required memlock_min=8M enforce=yes
run_user bash -c "ulimit -S -l 64; srun --mr-check=memlock bash -c 'ulimit -l'"
show_run "b: enforce"
expect_eq "b: enforce=yes: the task runs with 8 MiB" "$OUT" "8192"
expect_eq "b: enforce=yes: rc" "$RC" "0"
expect_not_contains "b: enforce=yes: no FAIL" "$ERR" "FAIL"

# -n 2: one line per node, not per task.
plugin_load required memlock_min=8M on_fail=warn
run_user bash -c "ulimit -S -l 64; srun -n2 --mr-check=memlock true"
show_run "b: warn, two tasks"
expect_eq "b: on_fail=warn: rc 0" "$RC" "0"
expect_eq "b: one WARN line for two tasks on one node" "$(grep -c '^mrcheck: memlock: WARN: ' <<<"$ERR")" "1"
e2e_done
