#!/bin/bash
# Plugin scenario k: RLIMIT_STACK and RLIMIT_NOFILE on the chain (include/mrcheck/limit_chain.h). `ulimit -s
# unlimited` and `ulimit -n 256` in the shell that runs `srun --mr-check` reach the task through srun's
# propagation (SLURM_RLIMIT_STACK / SLURM_RLIMIT_NOFILE): each fails naming that hop and the owner `job`, memlock
# unchanged; a malformed SLURM_RLIMIT_STACK is one note, the checks unchanged.
source "$(dirname "$0")/lib.sh"
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
plugin_setup
[[ $(ulimit -H -s) == unlimited ]] || e2e_skip "hard stack limit here is $(ulimit -H -s) KiB: cannot set unlimited"

plugin_load required memlock_min=8M
run_user bash -c "ulimit -s unlimited; srun --mr-check=memlock bash -c 'echo ran'; exit \$?"
show_run "k: stack unlimited"
[[ $RC != 0 ]] && e2e_pass "k: the step fails" || e2e_fail "k: the step should fail (rc=$RC)"
expect_not_contains "k: the task never ran" "$OUT" "ran"
expect_contains "k: one stack FAIL line with owner job" "$ERR" "mrcheck: stack: FAIL: task will start with stack soft unlimited (above stack_max 1 GiB); set at srun's propagation (job): SLURM_RLIMIT_STACK=18446744073709551615 from the shell that ran srun/sbatch on $(hostname -s)"
expect_contains "k: stack fix" "$ERR" "ulimit -s 8192"
expect_not_contains "k: memlock still passes" "$ERR" "mrcheck: memlock:"
expect_eq "k: exactly one mrcheck line" "$(grep -c '^mrcheck: ' <<<"$ERR")" "1"

run_user bash -c "ulimit -n 256; srun --mr-check=memlock bash -c 'echo ran'; exit \$?"
show_run "k: nofile 256"
[[ $RC != 0 ]] && e2e_pass "k: nofile: the step fails" || e2e_fail "k: nofile: the step should fail (rc=$RC)"
expect_contains "k: one nofile FAIL line with owner job" "$ERR" "mrcheck: nofile: FAIL: task will start with nofile soft 256 (below nofile_min 1024); set at srun's propagation (job): SLURM_RLIMIT_NOFILE=256"
expect_eq "k: nofile: exactly one mrcheck line" "$(grep -c '^mrcheck: ' <<<"$ERR")" "1"

# The chain table (verbose), for the record and README.
plugin_load optional memlock_min=8M
run_user bash -c "ulimit -s unlimited; ulimit -n 256; srun --mr-check=memlock,verbose true; exit \$?"
show_run "k: verbose"
expect_contains "k: stack table" "$ERR" "mrcheck: stack: set at srun's propagation (job): "
expect_contains "k: nofile table" "$ERR" "mrcheck: nofile: set at srun's propagation (job): "

# enforce=yes: SLURM_RLIMIT_STACK=U<stack_max> and SLURM_RLIMIT_NOFILE=U<nofile_min> in the job env; the task
# starts within both rules and runs.
plugin_load required memlock_min=8M enforce=yes
run_user bash -c "ulimit -s unlimited; ulimit -n 256; srun --mr-check=memlock,verbose bash -c 'echo ran \$(ulimit -s) \$(ulimit -n)'; exit \$?"
show_run "k: enforce"
expect_eq "k: enforce: the task ran within both rules" "$OUT" "ran 1048576 1024"
expect_contains "k: enforce: stack note" "$ERR" "mrcheck: stack: note: enforce=yes: SLURM_RLIMIT_STACK=U1073741824 written into the job's environment"
expect_not_contains "k: enforce: no FAIL" "$ERR" "FAIL"

# A site rule: nofile_min above what the node gives; on_fail=warn runs the task.
plugin_load optional memlock_min=8M nofile_min=300 on_fail=warn
run_user bash -c "ulimit -n 256; srun --mr-check=memlock bash -c 'echo ran'; exit \$?"
show_run "k: warn"
expect_eq "k: on_fail=warn: the task ran" "$OUT" "ran"
expect_contains "k: on_fail=warn: WARN, owner job" "$ERR" "mrcheck: nofile: WARN: task will start with nofile soft 256 (below nofile_min 300); set at srun's propagation (job): "
# The prediction is what the task gets: on_fail=warn lets it run and print its own limits.
run_user bash -c "ulimit -s unlimited; ulimit -n 256; srun --mr-check=memlock bash -c 'echo \$(ulimit -s) \$(ulimit -n)'; exit \$?"
show_run "k: warn, both"
expect_eq "k: the task runs with the predicted limits" "$OUT" "unlimited 256"
expect_contains "k: warn, both: stack named" "$ERR" "mrcheck: stack: WARN: task will start with stack soft unlimited"

# A malformed SLURM_RLIMIT_STACK: slurmstepd ignores it; the task keeps the node's stack, every check passes.
# Where STACK is not propagated srun does not write the variable, so the user's own value arrives.
plugin_conf_set PropagateResourceLimitsExcept STACK
plugin_load required memlock_min=8M
run_user bash -c "SLURM_RLIMIT_STACK=lots srun --mr-check=memlock,verbose bash -c 'echo ran'; exit \$?"
show_run "k: malformed"
expect_eq "k: malformed: the task ran" "$OUT" "ran"
expect_not_contains "k: malformed: no FAIL" "$ERR" "FAIL"
expect_contains "k: malformed: one note" "$ERR" "mrcheck: stack: note: SLURM_RLIMIT_STACK 'lots' is not a number (slurmstepd ignores it)"
expect_contains "k: malformed: stack passes" "$ERR" "mrcheck: stack: pass: task will start with stack soft 8 MiB"
# Excluded from propagation, the login shell's unlimited stack no longer reaches the task.
run_user bash -c "ulimit -s unlimited; srun --mr-check=memlock bash -c 'echo ran'; exit \$?"
show_run "k: except STACK"
expect_eq "k: except STACK: the task ran" "$OUT" "ran"
e2e_done
