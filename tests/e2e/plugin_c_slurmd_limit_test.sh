#!/bin/bash
# Plugin scenario c: slurmd started under a 4 MiB hard limit -> fail naming slurmd and its unit's
# LimitMEMLOCK; with enforce=yes the hard limit is raised where slurmstepd has CAP_SYS_RESOURCE, else a clear
# "cannot enforce" verdict naming the missing capability (what this build machine shows).
source "$(dirname "$0")/lib.sh"
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
plugin_setup
((PLUGIN_HARD_KIB >= 8192)) || e2e_skip "hard memlock here is ${PLUGIN_HARD_KIB} KiB, below the 8 MiB policy"
plugin_slurmd_restart --memlock-soft 4M --memlock-hard 4M
plugin_load required memlock_min=8M

run_user bash -c "srun --mr-check=memlock bash -c 'echo ran'; exit \$?"
show_run "c: fail"
[[ $RC != 0 ]] && e2e_pass "c: the step fails" || e2e_fail "c: the step should fail"
expect_not_contains "c: the task never ran" "$OUT" "ran"
expect_contains "c: names slurmd" "$ERR" "lowered at slurmd: slurmd pid "
expect_contains "c: says 4 MiB hard" "$ERR" "runs with hard 4 MiB"
expect_contains "c: names the fix" "$ERR" "LimitMEMLOCK=infinity"

plugin_load optional memlock_min=8M
run_user bash -c "srun --mr-check=memlock,verbose true; exit \$?"
show_run "c: chain table"
expect_contains "c: table shows slurmd's 4 MiB" "$ERR" "4 MiB        4 MiB"

plugin_load required memlock_min=8M enforce=yes
run_user bash -c "srun --mr-check=memlock bash -c 'ulimit -l; ulimit -H -l'; exit \$?"
show_run "c: enforce"
stepd_caps=$(awk '/^CapEff/ {print $2}' /proc/self/status)
if (( (0x$stepd_caps >> 24) & 1 )); then
  # CAP_SYS_RESOURCE (24): slurmstepd (root, same capabilities as this root shell) may raise the hard limit.
  expect_eq "c: enforce raised the hard limit" "$OUT" $'8192\n8192'
else
  [[ $RC != 0 ]] && e2e_pass "c: enforce: still fails" || e2e_fail "c: enforce: should fail without CAP_SYS_RESOURCE"
  expect_contains "c: says cannot enforce and why" "$ERR" "cannot enforce: slurmstepd lacks CAP_SYS_RESOURCE (hard limit 4 MiB)"
fi
e2e_done
