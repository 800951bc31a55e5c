#!/bin/bash
# Plugin scenario g: allow_user_off=no with default_checks=memlock -> `--mr-check=off` refused before launch;
# with allow_user_off=yes it turns the site's check off.
source "$(dirname "$0")/lib.sh"
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
plugin_setup
marker=$MRCHECK_SLURM_WORK/plugin_g.$$
rm -f "$marker"
plugin_load optional memlock_min=8M default_checks=memlock allow_user_off=no
run_user bash -c "ulimit -S -l 64; srun --mr-check=off touch $marker; exit \$?"
show_run "g: refused"
[[ $RC != 0 ]] && e2e_pass "g: srun exits non-zero" || e2e_fail "g: off should be refused"
expect_contains "g: clear message" "$ERR" "mrcheck: --mr-check=off refused: this site runs 'memlock' on every step (allow_user_off=no)"
[[ ! -e $marker ]] && e2e_pass "g: nothing was launched" || e2e_fail "g: the task ran"

run_user bash -c "ulimit -S -l 64; srun true; exit \$?"
expect_contains "g: the site's default runs without the option" "$ERR" "mrcheck: memlock: FAIL: "

plugin_load optional memlock_min=8M default_checks=memlock allow_user_off=yes
run_user bash -c "ulimit -S -l 64; srun --mr-check=off bash -c 'ulimit -l'; exit \$?"
show_run "g: allowed"
expect_eq "g: allow_user_off=yes: rc" "$RC" "0"
expect_eq "g: allow_user_off=yes: silent" "$ERR" ""
rm -f "$marker"
e2e_done
