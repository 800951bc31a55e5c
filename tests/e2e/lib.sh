# Shared helpers for tests/e2e/*_test.sh. Source it; it sets -euo pipefail.
#   MRCHECK_BUILD_DIR   build tree (cli/mrcheck, prolog/mrcheck-prolog, spank/spank_mrcheck.so + mrcheck_spank_core.so, fakes)
#   MRCHECK_SOURCE_DIR  source tree
#   MRCHECK_SLURM_DIR   the local Slurm's private directory (default /tmp/mrcheck-slurm)
set -euo pipefail

: "${MRCHECK_SOURCE_DIR:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
: "${MRCHECK_BUILD_DIR:=$MRCHECK_SOURCE_DIR/build}"
: "${MRCHECK_SLURM_DIR:=/tmp/mrcheck-slurm}"
export MRCHECK_SOURCE_DIR MRCHECK_BUILD_DIR MRCHECK_SLURM_DIR
E2E_USER=${E2E_USER:-mrtest}
E2E_NAME=$(basename "${BASH_SOURCE[1]:-$0}" .sh)
E2E_FAILS=0
E2E_PASSES=0

e2e_log() { printf '%s: %s\n' "$E2E_NAME" "$*" >&2; }
e2e_skip() { e2e_log "SKIP: $*"; exit 77; }
e2e_fail() { e2e_log "FAIL: $*"; E2E_FAILS=$((E2E_FAILS + 1)); }
e2e_pass() { e2e_log "ok: $*"; E2E_PASSES=$((E2E_PASSES + 1)); }
# Call at the end of every test script.
e2e_done() {
  printf '%s: %d passed, %d failed\n' "$E2E_NAME" "$E2E_PASSES" "$E2E_FAILS" >&2
  ((E2E_FAILS == 0))
}

# expect_contains "what" "$haystack" "needle"
expect_contains() {
  if [[ "$2" == *"$3"* ]]; then e2e_pass "$1"; else e2e_fail "$1: expected to find [$3] in: ${2:0:2000}"; fi
}
expect_not_contains() {
  if [[ "$2" != *"$3"* ]]; then e2e_pass "$1"; else e2e_fail "$1: did not expect [$3] in: ${2:0:2000}"; fi
}
expect_eq() {
  if [[ "$2" == "$3" ]]; then e2e_pass "$1"; else e2e_fail "$1: expected [$3], got [$2]"; fi
}

# Starts the local Slurm (idempotent) and loads its environment (SLURM_CONF, ...).
e2e_slurm_up() {
  bash "$MRCHECK_SOURCE_DIR/tests/slurm/slurm-up.sh" "$MRCHECK_SLURM_DIR" >&2
  # shellcheck disable=SC1091
  source "$MRCHECK_SLURM_DIR/env.sh"
}

# Copies the built binaries where the job user can execute them (the build tree may sit under a
# root-only directory): $MRCHECK_SLURM_DIR/install/{bin,sbin,lib/slurm,lib/fake}.
# A node's drain reason without its "[user@time]" tail ("" when none), whether it is usable (idle, mixed,
# allocated or completing: other tests may run jobs on it), and resuming it until it is usable again (10 s at most).
e2e_node_reason() { scontrol show node "$1" | sed -n 's/^ *Reason=\(.*\) \[[^]]*\]$/\1/p'; }
e2e_node_usable() {
  case "$(sinfo -h -N -n "$1" -o '%T' | head -n1)" in idle | mixed | allocated | completing) echo usable ;; *) echo no ;; esac
}
e2e_resume_node() {
  scontrol update nodename="$1" state=resume >/dev/null 2>&1 || true
  local _
  for _ in $(seq 1 50); do
    [[ "$(e2e_node_usable "$1")" == usable ]] && return 0
    sleep 0.2
  done
}

e2e_stage() {
  local d=$MRCHECK_SLURM_DIR/install
  mkdir -p "$d/bin" "$d/sbin" "$d/lib/slurm" "$d/lib/fake"
  install -m 0755 "$MRCHECK_BUILD_DIR/cli/mrcheck" "$d/bin/mrcheck"
  [[ -x $MRCHECK_BUILD_DIR/prolog/mrcheck-prolog ]] && install -m 0755 "$MRCHECK_BUILD_DIR/prolog/mrcheck-prolog" "$d/sbin/"
  # The loader and the checks it loads from its own directory (spank/shim.cpp).
  if [[ -f $MRCHECK_BUILD_DIR/spank/spank_mrcheck.so ]]; then
    install -m 0755 "$MRCHECK_BUILD_DIR/spank/spank_mrcheck.so" "$MRCHECK_BUILD_DIR/spank/mrcheck_spank_core.so" "$d/lib/slurm/"
  fi
  local fake
  fake=$(find "$MRCHECK_BUILD_DIR" -name 'libibverbs.so.1' -path '*fake*' 2>/dev/null | head -1 || true)
  if [[ -n $fake ]]; then
    install -m 0755 "$fake" "$d/lib/fake/libibverbs.so.1"
    # NCCL dlopens "libibverbs.so" before "libibverbs.so.1": both names must find the fake.
    ln -sf libibverbs.so.1 "$d/lib/fake/libibverbs.so"
  fi
  # The hostile libraries: for the probe (tests/fakes/hostile_probe.c, hostile_drain_test) and for srun
  # (tests/spank/hostile_srun.c, hostile_nodelist_test).
  local hostile lib
  for lib in hostile_probe.so hostile_srun.so; do
    hostile=$(find "$MRCHECK_BUILD_DIR" -name "$lib" -path '*fakes*' 2>/dev/null | head -1 || true)
    [[ -n $hostile ]] && install -m 0755 "$hostile" "$d/lib/fake/$lib"
  done
  chmod -R a+rX "$MRCHECK_SLURM_DIR/install"
  E2E_INSTALL=$d
}

# Writes the plugstack drop-in for the plugin with the given arguments (key=value ...), or removes it.
e2e_plugin() {
  local dropin=$MRCHECK_SLURM_DIR/plugstack.conf.d/mrcheck.conf
  mkdir -p "$(dirname "$dropin")"
  if (($# == 1)) && [[ $1 == none ]]; then rm -f "$dropin"; return; fi
  echo "${E2E_PLUGIN_KIND:-optional} $MRCHECK_SLURM_DIR/install/lib/slurm/spank_mrcheck.so helper=$MRCHECK_SLURM_DIR/install/bin/mrcheck $*" >"$dropin"
}

# e2e_gated_helper PATH GATE TICKS: writes a probe helper at PATH that waits for the file GATE (at most TICKS
# times 10 ms) before it runs the real mrcheck: the window in which a test can find, kill or cancel what runs,
# and the way to release many steps at one moment. Point the plugin's helper= at it.
e2e_gated_helper() {
  cat >"$1" <<EOF
#!/bin/sh
i=0
while [ ! -e $2 ] && [ \$i -lt $3 ]; do sleep 0.01; i=\$((i + 1)); done
exec $E2E_INSTALL/bin/mrcheck "\$@"
EOF
  chmod 0755 "$1"
}

# Runs a command as the unprivileged job user, keeping this shell's limits (setpriv, no PAM: a test sets
# `ulimit -l` or `prlimit` and the user's srun must see exactly that), from a directory the user can write.
as_user() {
  (cd "${MRCHECK_SLURM_WORK:-/tmp}" &&
    setpriv --reuid="$E2E_USER" --regid="$E2E_USER" --init-groups -- \
      env -i SLURM_CONF="${SLURM_CONF:-}" PATH=/usr/bin:/bin:/usr/sbin:/sbin HOME="/home/$E2E_USER" \
      USER="$E2E_USER" LOGNAME="$E2E_USER" LANG=C.UTF-8 "$@")
}

# e2e_netns_up: the three nodes with a network stack and /run each (slurm-up.sh --netns), a cluster of its own beside
# the shared one: MRCHECK_SLURMNS_DIR (default the shared DIR + "-netns") at MRCHECK_SLURMNS_PORT_BASE (default the
# shared base + 500); sources its env.sh. Skips (77) where namespaces cannot be made. e2e_netns_down stops it
# again unless it was up before.
e2e_netns_up() {
  ((${MRCHECK_SLURM_PORT_BASE:-16800} + 500 < 65000)) || e2e_skip "port base too high"
  export MRCHECK_SLURM_DIR=${MRCHECK_SLURMNS_DIR:-${MRCHECK_SLURM_DIR}-netns}
  export MRCHECK_SLURM_PORT_BASE=${MRCHECK_SLURMNS_PORT_BASE:-$((${MRCHECK_SLURM_PORT_BASE:-16800} + 500))}
  E2E_NETNS_WAS_UP=0
  [[ -f $MRCHECK_SLURM_DIR/env.sh ]] && E2E_NETNS_WAS_UP=1
  local up
  set +e
  bash "$MRCHECK_SOURCE_DIR/tests/slurm/slurm-up.sh" --netns "$MRCHECK_SLURM_DIR" >&2
  up=$?
  set -e
  ((up != 77)) || e2e_skip "slurm-up.sh --netns skipped (its reason is above: no ip, no CAP_NET_ADMIN, or a chroot)"
  ((up == 0)) || { e2e_log "FAIL: slurm-up.sh --netns failed"; exit 1; }
  # shellcheck disable=SC1091
  source "$MRCHECK_SLURM_DIR/env.sh"
  [[ ${MRCHECK_SLURM_NETNS:-0} == 1 ]] || { e2e_log "FAIL: $MRCHECK_SLURM_DIR is not a --netns cluster"; exit 1; }
}
e2e_netns_down() {
  ((${E2E_NETNS_WAS_UP:-1})) || bash "$MRCHECK_SOURCE_DIR/tests/slurm/slurm-down.sh" "$MRCHECK_SLURM_DIR" >&2 || true
}

# e2e_admin_comment JOBNAME: sets AC to the job's AdminComment once the job has ended and slurmdbd has it.
e2e_admin_comment() {
  local out="" _i
  for _i in $(seq 1 75); do
    out=$(sacct -X -n -P --name="$1" -S now-1hour -o JobID,State,AdminComment%4000 2>/dev/null | tail -1)
    [[ -n $out && $out != *RUNNING* && $out != *PENDING* && $out != *"|" ]] && break
    sleep 0.2
  done
  AC=${out#*|}  # JobID|State|AdminComment: the record itself holds " | "
  AC=${AC#*|}
}
