#!/bin/bash
# Plugin scenario f: plugin loaded, option not given, no default_checks -> srun's output is byte-identical
# to a run without the plugin, and the job sees no variable of ours.
source "$(dirname "$0")/lib.sh"
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
plugin_setup
# Two tasks' lines interleave in any order: sort both streams; one task's output is compared byte for byte.
cmd=(bash -c "ulimit -S -l 64; { srun -n2 -l bash -c 'echo out \$SLURM_PROCID; echo err >&2; ulimit -l; env | grep -c ^MRCHECK_ || true' 2>&1 1>&3 | sort >&2; } 3>&1 | sort; srun -n1 bash -c 'echo one; echo two >&2; ulimit -l'; exit \$?")

plugin_load none
rm -f "$PLUGIN_DROPIN"
run_user "${cmd[@]}"
base_out=$OUT base_err=$ERR base_rc=$RC
plugin_load optional memlock_min=8M enforce=yes on_fail=fail
run_user "${cmd[@]}"
show_run "f: idle"
expect_eq "f: stdout identical" "$OUT" "$base_out"
# ERR is without srun's scheduling lines (run_user, tests/spank/e2e_helpers.sh).
expect_eq "f: stderr identical" "$ERR" "$base_err"
expect_eq "f: rc identical" "$RC" "$base_rc"
expect_contains "f: no MRCHECK_ variable in the job" "$OUT" "0: 0"
expect_contains "f: the propagated 64 KiB untouched (enforce=yes does nothing when idle)" "$OUT" "0: 64"
e2e_done
