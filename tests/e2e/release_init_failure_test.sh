#!/bin/bash
# What a broken mrcheck does to a node, on every supported release (docs/slurm-releases.md). From Slurm 25.05 a
# `required` plugin whose slurm_spank_init fails drains the node by default; mrcheck declares
# slurm_spank_init_failure_mode = ESPANK_JOB_FAILURE there and never fails init in slurmstepd, so:
#   - a mrcheck.conf broken after slurmd started: a checked step says why; the node is never drained, whether
#     mrcheck is optional or required (the step's slurmstepd reads the broken file)
#   - optional, broken at slurmd's start: slurmd starts, logs the error; the node stays in service
#   - required, broken at slurmd's start: slurmd refuses to start and says why (README.md, "Install")
source "$(dirname "$0")/lib.sh"
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
plugin_setup
node=${MRCHECK_SLURM_NODES%%,*}
conf=$MRCHECK_SLURM_DIR/mrcheck-init-failure.conf
cleanup_all() {
  printf 'memlock_min=64K\n' >"$conf"
  plugin_cleanup
  # Whatever happened above, the node ends usable: slurm-up.sh restarts slurmd and resumes a drained node.
  rm -f "$PLUGIN_DROPIN"
  bash "$MRCHECK_SOURCE_DIR/tests/slurm/slurmd-restart.sh" >&2 || true
  bash "$MRCHECK_SOURCE_DIR/tests/slurm/slurm-up.sh" "$MRCHECK_SLURM_DIR" >/dev/null 2>&1 || true
  rm -f "$conf"
}
trap cleanup_all EXIT
state() { sinfo -h -N -n "$node" -o '%T' | head -n1; }
reason() { sinfo -h -N -n "$node" -o '%E' | head -n1; }

for mode in optional required; do
  printf 'memlock_min=64K\n' >"$conf"
  plugin_load "$mode" "config=$conf"
  plugin_slurmd_restart
  printf 'memlock_min=64K\nthis is not a setting\n' >"$conf"
  run_user srun -n1 --mr-check=memlock bash -c 'echo RAN'
  show_run "init: $mode, config broken after slurmd started"
  expect_contains "init: $mode: the step says the configuration is broken" "$ERR" "mrcheck: "
  expect_contains "init: $mode: ... and where" "$ERR" "$conf"
  sleep 1
  st=$(state)
  [[ $st != drain* && $st != down* ]] && e2e_pass "init: $mode: node not drained ($st)" ||
    e2e_fail "init: $mode: node is $st: $(reason)"
done

# Broken before slurmd starts.
printf 'memlock_min=64K\nthis is not a setting\n' >"$conf"
plugin_load optional "config=$conf"
plugin_slurmd_restart
run_user srun -n1 bash -c 'echo RAN'
show_run "init: optional, broken at slurmd start"
expect_eq "init: optional: slurmd started and a step runs" "$OUT" "RAN"
st=$(state)
[[ $st != drain* && $st != down* ]] && e2e_pass "init: optional at start: node not drained ($st)" ||
  e2e_fail "init: optional at start: node is $st: $(reason)"
log=$(ls "$MRCHECK_SLURM_DIR"/log/slurmd-*.log | head -n1)
expect_contains "init: optional at start: slurmd's log names the file" "$(tail -n 50 "$log")" "$conf"

plugin_load required "config=$conf"
before=$(wc -l <"$log")
set +e
bash "$MRCHECK_SOURCE_DIR/tests/slurm/slurmd-restart.sh" >/dev/null 2>&1
restart_rc=$?
set -e
PLUGIN_SLURMD_CHANGED=1
[[ $restart_rc != 0 ]] && e2e_pass "init: required at start: slurmd does not start" ||
  e2e_fail "init: required at start: slurmd started with a broken mrcheck.conf"
expect_contains "init: required at start: slurmd's log says why" "$(tail -n +"$before" "$log")" "$conf"
e2e_done
