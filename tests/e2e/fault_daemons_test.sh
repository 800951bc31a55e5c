#!/bin/bash
# Faults in the cluster (SECURITY.md): slurmctld, then slurmdbd, stopped while a step's checks run (a probe helper
# that takes a few seconds; the daemon goes down while it runs) and started again before the step ends. Each:
# the step gets its verdict on the user's stderr while the daemon is down, slurmd's log keeps the admin line
# for the step, the task runs, the job reaches accounting once the daemon is back (nothing promised is lost),
# and slurmd is the same process, the node undrained, afterwards.
source "$(dirname "$0")/lib.sh"
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
source "$(dirname "$0")/hardening_lib.sh"
plugin_setup
fake=$E2E_INSTALL/lib/fake/libibverbs.so.1
[[ -f $fake ]] || e2e_skip "no fake libibverbs.so.1 (build target fake_ibverbs)"
cd "$MRCHECK_SLURM_WORK"
w=$(mktemp -d "$MRCHECK_SLURM_WORK/fault_daemons.XXXXXX")
chmod 1777 "$w"
# The helper: marks that the probe started, waits, then is the real probe.
wrapper=$E2E_INSTALL/bin/fault_daemons_probe.sh
printf '#!/bin/sh\ntouch %s/probe-started\nsleep 3\nexec %s "$@"\n' "$w" "$E2E_INSTALL/bin/mrcheck" >"$wrapper"
chmod 0755 "$wrapper"
restore() {
  bash "$MRCHECK_SOURCE_DIR/tests/slurm/slurm-up.sh" >/dev/null 2>&1 || true
  plugin_cleanup
  rm -rf "$w" "$wrapper"
}
trap restore EXIT
small="NCCL_BUFFSIZE=65536,NCCL_LL_BUFFSIZE=65536,NCCL_LL128_BUFFSIZE=65536"
daemon_alive() { local p; p=$(cat "$MRCHECK_SLURM_DIR/run/$1.pid" 2>/dev/null) && [[ -n $p ]] && kill -0 "$p" 2>/dev/null &&
  [[ $(awk '{print $3}' "/proc/$p/stat" 2>/dev/null) != Z ]]; }
wait_for() {  # wait_for SECONDS CMD...: until CMD succeeds
  local until=$((SECONDS + $1))
  shift
  while ((SECONDS < until)); do "$@" && return 0; sleep 0.2; done
  return 1
}

for daemon in slurmctld slurmdbd; do
  hard_snapshot
  rm -f "$w/probe-started"
  echo "optional $E2E_INSTALL/lib/slurm/spank_mrcheck.so helper=$wrapper verbs_library=$fake memlock_min=1M probe_timeout=30s" >"$PLUGIN_DROPIN"
  out=$w/$daemon.out err=$w/$daemon.err
  as_user srun -J "fault-$daemon" --mr-check=memlock,mr,verbose --export="ALL,$small" bash -c 'sleep 8; echo task-ran' >"$out" 2>"$err" &
  srun_pid=$!
  wait_for 60 test -e "$w/probe-started" && e2e_pass "$daemon: the probe started" || e2e_fail "$daemon: no probe started"
  bash "$MRCHECK_SOURCE_DIR/tests/slurm/slurm-down.sh" --only "$daemon" >&2
  ! daemon_alive "$daemon" && e2e_pass "$daemon: stopped during the check" || e2e_fail "$daemon: still running"
  if wait_for 60 grep -q "mrcheck: mr_host: pass: " "$err"; then
    e2e_pass "$daemon: the verdict arrived while $daemon was down"
  else
    e2e_fail "$daemon: no verdict: $(cat "$err")"
  fi
  daemon_alive "$daemon" && e2e_fail "$daemon: came back before the verdict (the test proved nothing)"
  bash "$MRCHECK_SOURCE_DIR/tests/slurm/slurm-up.sh" >/dev/null
  wait "$srun_pid" && rc=0 || rc=$?
  expect_eq "$daemon: srun rc" "$rc" "0"
  expect_eq "$daemon: the task ran" "$(cat "$out")" "task-ran"
  job=$(sed -n 's/.*chain on [^ ]* (job \([0-9]*\) step.*/\1/p' "$err" | head -1)
  [[ -n $job ]] && e2e_pass "$daemon: job $job" || e2e_fail "$daemon: no job id in: $(cat "$err")"
  log=$MRCHECK_SLURM_DIR/log/slurmd-$(hard_node).log
  if wait_for 10 grep -q "mrcheck: mr_host: pass: job $job step 0 task 0" "$log"; then
    e2e_pass "$daemon: slurmd's log has the step's admin line"
  else
    e2e_fail "$daemon: no admin line for job $job in $log"
  fi
  acct() { [[ $(sacct -n -X -P -j "$job" -o State 2>/dev/null | head -1) == COMPLETED ]]; }
  if wait_for 60 acct; then e2e_pass "$daemon: job $job COMPLETED in accounting"; else e2e_fail "$daemon: sacct: $(sacct -n -X -j "$job" 2>&1)"; fi
  hard_invariants "after $daemon down and up"
done
e2e_done
