#!/bin/bash
# A job user must not be able to get a node drained through the probe. The probes run in
# slurmstepd's task child before exec (comm "slurmstepd", which proctrack/linuxproc never signals). A probe
# that ignores SIGTERM and leaves a detached grandchild holding its output pipes (tests/fakes/hostile_probe.c)
# used to keep task_init waiting on the pipes for probe_timeout plus nccl_timeout (90 s by default), past
# UnkillableStepTimeout (60 s): slurmctld drained the node "Kill task failed" and the grandchild lived on.
# Each case: the hostile library in the probe, by the job user (LD_PRELOAD) or by the site (verbs_library=),
# then scancel or a probe timeout. Asserted: the step ends soon after the cancel (well below
# UnkillableStepTimeout), nothing the probe started survives, the node is not drained, slurmd is the same.
# On the old code the LD_PRELOAD case ran 90 s and drained the node; the other two left "mrcheck-escape"
# running and the cancelled one took 30 s.
source "$(dirname "$0")/lib.sh"
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
source "$(dirname "$0")/hardening_lib.sh"
plugin_setup
hard_hostile_setup
hard_snapshot
cd "$MRCHECK_SLURM_WORK"
# The grandchildren the hostile library leaves (comm "mrcheck-escape") on this cluster (hard_ours).
escape_pids() {
  local p
  for p in $(pgrep -u "$E2E_USER" -x mrcheck-escape 2>/dev/null || true); do hard_ours "$p" && echo "$p"; done
  return 0
}
escapes() { escape_pids | wc -l; }
kill_escapes() {
  local p
  for p in $(escape_pids); do kill -KILL "$p" 2>/dev/null || true; done
}
# The old code drained the node: resume it so that the next case (and the next test) can run at all.
undrain() {
  local _
  for _ in $(seq 1 100); do [[ -z $(hard_stepd_pids) ]] && break; sleep 0.2; done
  if [[ $(hard_node_state) == *drain* ]]; then scontrol update nodename="$(hard_node)" state=resume >/dev/null 2>&1 || true; fi
}
cleanup() {
  # The old code left these behind; never leave them for the next test.
  kill_escapes
  undrain
  plugin_cleanup
}
trap cleanup EXIT
small="NCCL_BUFFSIZE=65536,NCCL_LL_BUFFSIZE=65536,NCCL_LL128_BUFFSIZE=65536"
name=hostile-drain-$$

# probe_running: a `mrcheck probe` of the job user on this cluster's node runs (the hostile library hangs it).
probe_running() {
  local p
  for p in $(pgrep -u "$E2E_USER" -f "$E2E_INSTALL/bin/mrcheck probe" 2>/dev/null || true); do
    [[ -r /proc/$p/cmdline ]] && return 0
  done
  return 1
}

# cancel_case WHAT SRUN-ARGS...: starts the step, waits for a probe (or the task), cancels the job, and
# checks the step ended within 20 s of the cancel and nothing was left behind.
cancel_case() {
  local what=$1 o e pid job start took _
  shift
  o=$(mktemp) e=$(mktemp)
  as_user srun --job-name="$name" "$@" >"$o" 2>"$e" &
  pid=$!
  for _ in $(seq 1 150); do probe_running && break; grep -q task-ran "$o" && break; sleep 0.1; done
  sleep 2  # the hostile library has forked its grandchild and hangs by now
  job=$(squeue -h -n "$name" -o '%i' | head -n1)
  start=$SECONDS
  [[ -n $job ]] && scancel "$job"
  RC=0
  wait "$pid" || RC=$?
  # srun leaves as soon as it hears of the cancel; the step has ended when its slurmstepd has (the task child
  # that runs the probes keeps it), at most 100 s here.
  for _ in $(seq 1 500); do
    [[ -z $(hard_stepd_pids) ]] && break
    sleep 0.2
  done
  took=$((SECONDS - start))
  OUT=$(cat "$o") ERR=$(cat "$e")
  rm -f "$o" "$e"
  if ((took <= 20)); then e2e_pass "$what: the step's slurmstepd ended ${took} s after scancel"; else e2e_fail "$what: the step's slurmstepd ended ${took} s after scancel (UnkillableStepTimeout is 60 s)"; show_run "$what"; fi
  for _ in $(seq 1 50); do [[ $(escapes) == 0 ]] && break; sleep 0.2; done
  expect_eq "$what: nothing the probe started is left" "$(escapes)" "0"
  expect_eq "$what: no process of the job user left" "$(hard_settled_procs "$E2E_USER" 0)" "0"
  expect_eq "$what: no slurmstepd left" "$(hard_settled_stepds 0)" "0"
  hard_invariants "$what"
  kill_escapes
  undrain
}

# --- 1. the job user: LD_PRELOAD in the job's environment, both probes, the default timeouts (30 s + 60 s) ---
plugin_load optional verbs_library="$fake" memlock_min=1M
cancel_case "user LD_PRELOAD, scancel" --mr-check=mr,nccl --export="ALL,$small,LD_PRELOAD=$hostile" bash -c 'echo task-ran; sleep 20'

# --- 2. the site's verbs library misbehaves the same way; scancel while it hangs ----------------------------
plugin_load optional verbs_library="$hostile" memlock_min=1M
cancel_case "site library, scancel" --mr-check=mr --export="ALL,$small" bash -c 'echo task-ran'
expect_eq "site library, scancel: the task never ran" "$OUT" ""

# --- 3. the same library, no cancel: the probe timeout ends it, and ends all of it -------------------------
plugin_load optional verbs_library="$hostile" memlock_min=1M probe_timeout=3s on_fail=warn
start=$SECONDS
run_user srun --mr-check=mr --export="ALL,$small" bash -c 'echo task-ran'
took=$((SECONDS - start))
# The probe isolates its verbs calls and gives up a tenth (at least 1 s) before the plugin would kill it, so the
# verdict names the call that hung (cli/cmd_probe_mr.cpp, src/step/plugin_engine.cpp).
expect_contains "timeout: the verdict says so" "$ERR" "mrcheck: mr_host: WARN: the registration probe timed out after 2.0 s and was killed"
expect_eq "timeout, on_fail=warn: the task runs" "$OUT" "task-ran"
((took < 15)) && e2e_pass "timeout: bounded (${took} s)" || e2e_fail "timeout: ${took} s"
expect_eq "timeout: nothing the probe started is left" "$(escapes)" "0"
expect_eq "timeout: no process of the job user left" "$(hard_settled_procs "$E2E_USER" 0)" "0"
hard_invariants "after the probe timeout"
e2e_done
