# shellcheck shell=bash
# Helpers for tests/e2e/plugin_*_test.sh (sourced after tests/e2e/lib.sh). Every test that changes the shared
# cluster (plugstack drop-in, slurm.conf, slurmd's limits) puts it back on exit, pass or fail.

PLUGIN_DROPIN=$MRCHECK_SLURM_DIR/plugstack.conf.d/mrcheck.conf
PLUGIN_CONF_CHANGED=0
PLUGIN_SLURMD_CHANGED=0

plugin_cleanup() {
  rm -f "$PLUGIN_DROPIN"
  if ((PLUGIN_CONF_CHANGED)); then bash "$MRCHECK_SOURCE_DIR/tests/slurm/slurm-conf-set.sh" --reset >&2 || true; fi
  if ((PLUGIN_SLURMD_CHANGED)); then bash "$MRCHECK_SOURCE_DIR/tests/slurm/slurmd-restart.sh" >&2 || true; fi
}

# plugin_setup: cluster up, binaries staged, cleanup armed. Skips when the plugin was not built.
plugin_setup() {
  [[ -f $MRCHECK_BUILD_DIR/spank/spank_mrcheck.so ]] || e2e_skip "spank_mrcheck.so not built (no Slurm headers?)"
  e2e_slurm_up
  e2e_stage
  trap plugin_cleanup EXIT
  # Jobs must start from a shell with the machine's ordinary limit (8 MiB here), whatever ctest runs under.
  PLUGIN_HARD_KIB=$(ulimit -H -l)
}

# plugin_load required|optional KEY=VALUE...: the plugstack drop-in (one line: two would register
# --mr-check twice). `required` is what makes a task_init error end the task (docs/facts/slurm-spank.md §5).
plugin_load() {
  local mode=$1
  shift
  mkdir -p "$(dirname "$PLUGIN_DROPIN")"
  echo "$mode $MRCHECK_SLURM_DIR/install/lib/slurm/spank_mrcheck.so helper=$MRCHECK_SLURM_DIR/install/bin/mrcheck $*" \
    >"$PLUGIN_DROPIN"
}

plugin_conf_set() {
  PLUGIN_CONF_CHANGED=1
  bash "$MRCHECK_SOURCE_DIR/tests/slurm/slurm-conf-set.sh" "$@" >&2
}

plugin_slurmd_restart() {
  PLUGIN_SLURMD_CHANGED=1
  bash "$MRCHECK_SOURCE_DIR/tests/slurm/slurmd-restart.sh" "$@" >&2
}

# run_user CMD...: as the job user; sets OUT (stdout), ERR (stderr), RC.
run_user() {
  local o e
  o=$(mktemp) e=$(mktemp)
  set +e
  as_user "$@" >"$o" 2>"$e"
  RC=$?
  set -e
  OUT=$(cat "$o")
  # srun's own scheduling lines ("job N queued and waiting for resources", "... has been allocated resources")
  # depend on whether the previous job has left its CPUs yet (a loaded machine, seen on Slurm 26.05), never
  # on the plugin: ERR is stderr without them, ERR_RAW all of it.
  ERR_RAW=$(cat "$e")
  ERR=$(grep -vE '^srun: job [0-9]+ (queued and waiting for resources|has been allocated resources)$' "$e" || true)
  rm -f "$o" "$e"
}

# show: what a failing expectation prints alongside, and what the report quotes.
show_run() { printf '%s: rc=%s\n--- stdout\n%s\n--- stderr\n%s\n' "$1" "$RC" "$OUT" "$ERR" >&2; }
