#!/bin/bash
# spank_mrcheck.so is a loader; the checks are mrcheck_spank_core.so beside it (spank/shim.cpp). On the real
# Slurm: a step that checks something loads them and gets its verdict; an idle step never opens them (it runs
# even with the file gone, output untouched); a step that asks for a check on a node where the checks cannot
# be loaded is refused before launch with one line naming the file, and a site default_checks step is not
# silently left unchecked (slurmstepd logs why).
source "$(dirname "$0")/lib.sh"
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
plugin_setup
core=$MRCHECK_SLURM_DIR/install/lib/slurm/mrcheck_spank_core.so
[[ -f $core ]] || { e2e_fail "e2e_stage did not install $core"; e2e_done; exit 1; }
restore_core() { [[ -f $core.away ]] && mv -f "$core.away" "$core"; plugin_cleanup; }
trap restore_core EXIT

plugin_load optional memlock_min=64K
run_user srun -n1 --mr-check=memlock,verbose bash -c 'echo RAN'
show_run "j: core present"
expect_eq "j: a checked step runs" "$RC" 0
expect_contains "j: the checks ran (verbose chain table)" "$ERR" "mrcheck: memlock"

mv "$core" "$core.away"
run_user bash -c 'srun -n1 bash -c "echo RAN; echo err >&2"'
show_run "j: idle, core gone"
expect_eq "j: an idle step does not need the checks" "$RC" 0
expect_eq "j: idle stdout untouched" "$OUT" "RAN"
expect_eq "j: idle stderr untouched" "$ERR" "err"

run_user srun -n1 --mr-check=memlock bash -c 'echo RAN'
show_run "j: --mr-check, core gone"
if [[ $RC -ne 0 ]]; then e2e_pass "j: srun refuses the step"; else e2e_fail "j: srun refuses the step: rc 0"; fi
expect_not_contains "j: nothing was launched" "$OUT" "RAN"
expect_contains "j: one line names the missing file" "$ERR" "mrcheck: cannot load the checks ($core)"

# A site default: the submit side cannot load them either; srun says so (optional plugin: the step runs).
plugin_load optional memlock_min=64K default_checks=memlock
run_user srun -n1 bash -c 'echo RAN'
show_run "j: default_checks, core gone"
expect_contains "j: default_checks: the missing checks are said, not skipped in silence" "$ERR" \
  "mrcheck: cannot load the checks ($core)"
mv "$core.away" "$core"

run_user srun -n1 bash -c 'echo RAN'
show_run "j: default_checks, core back"
expect_eq "j: default_checks step runs" "$RC" 0
expect_not_contains "j: no load error once the file is back" "$ERR" "cannot load the checks"
e2e_done
