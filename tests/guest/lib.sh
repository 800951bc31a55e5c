# Shared helpers for tests/guest/*_test.sh: the expectations of tests/e2e/lib.sh, and commands on the guests that
# tests/guest/CMakeLists.txt's guest.up booted (scripts/guest.sh). Source it; it sets -euo pipefail.
# shellcheck source=../e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../e2e/lib.sh"
E2E_NAME=$(basename "${BASH_SOURCE[1]:-$0}" .sh)
guest_sh=$MRCHECK_SOURCE_DIR/scripts/guest.sh

# on NODE CMD: CMD (as root) on guest NODE; its stdout in $out, stderr in $err, status in $rc (never exits the test).
on() { guest_call run "$@"; }
# as_mrtest NODE CMD: CMD as mrtest on NODE through `guest.sh slurm` (memlock unlimited unless CMD lowers it), the
# user who runs srun on the guests' Slurm; $out, $err, $rc as on.
as_mrtest() { guest_call slurm "$@"; }
guest_call() {
  local verb=$1 n=$2
  shift 2
  set +e
  out=$(bash "$guest_sh" "$verb" "$n" "$*" 2>"${TMPDIR:-/tmp}/guest-err.$$")
  rc=$?
  set -e
  err=$(cat "${TMPDIR:-/tmp}/guest-err.$$")
  rm -f "${TMPDIR:-/tmp}/guest-err.$$"
  # 125: the channel, not the command (scripts/guest/client.py): the guest is gone, which is a failure.
  ((rc != 125)) || { e2e_fail "node$n did not answer: $err"; e2e_done; exit 1; }
}

# as_user LIMIT CMD: CMD as the unprivileged user mrtest (uid 1000 in the image) under RLIMIT_MEMLOCK LIMIT
# (bytes or "unlimited"), soft and hard, as slurmstepd would leave a task.
as_user() { echo "prlimit --memlock=$1:$1 setpriv --reuid=1000 --regid=1000 --clear-groups env -i PATH=/usr/bin:/bin HOME=/home/mrtest ${*:2}"; }

# json_get EXPR: a python expression on `j`, the JSON in $out.
json_get() { python3 -c "import json,sys; j=json.loads(sys.stdin.read()); print($1)" <<<"$out" 2>/dev/null || echo "<bad json>"; }

# --- the guests' Slurm (scripts/guest.sh up: slurmctld on node1, slurmd on each node, mrcheck's plugin through
# /etc/slurm/plugstack.conf.d/mrcheck.conf and /etc/slurm/mrcheck.conf, the .deb's examples) ---------------------
guest_nodes() { cat "${MRCHECK_GUEST_DIR:-/tmp/mrcheck-guest}/nodes"; }

# plugin_policy [KEY=VALUE...]: on every node, the plugin `required` and mrcheck.conf the .deb's example with these
# keys changed (every key is in the example); none: the example as installed, plugin `optional` (guest.sh's state).
plugin_policy() {
  local n kv edits="" mode=optional
  (($# == 0)) || mode=required
  for kv in "$@"; do edits+=" -e 's|^${kv%%=*}=.*|$kv|'"; done
  for ((n = 1; n <= $(guest_nodes); n++)); do
    on "$n" "sed -i 's/^\(optional\|required\) /$mode /' /etc/slurm/plugstack.conf.d/mrcheck.conf &&
      cp /usr/share/mrcheck/mrcheck.conf /etc/slurm/mrcheck.conf${edits:+ && sed -i$edits /etc/slurm/mrcheck.conf}"
    ((rc == 0)) || e2e_fail "node$n: the plugin policy $* not set: $err"
  done
}

# admin_comment JOBNAME: the AdminComment of the job of that name, as slurmctld has it (the guests have no
# slurmdbd: `scontrol show job`, kept for MinJobAge), in $AC once the step's record is there (10 s at most), and
# the job's id in $AC_JOB.
admin_comment() {
  local _
  for _ in $(seq 1 20); do
    on 1 "scontrol show job | awk '/^JobId=/ { j = (\$0 ~ / JobName=$1\$/); id = substr(\$1, 7) }
      j && sub(/^ *AdminComment=/, \"\") { print id \" \" \$0 }'"
    out=$(tail -n1 <<<"$out") # the newest job of that name
    AC_JOB=${out%% *}
    AC=${out#* }
    AC=${AC% }
    [[ $AC != mrcheck:* ]] || return 0
    sleep 0.5
  done
}

# slurmd_memlock NODE LIMIT: restart NODE's slurmd under RLIMIT_MEMLOCK LIMIT (soft and hard: bytes or unlimited,
# as a unit's LimitMEMLOCK) and wait until slurmctld has it back idle.
slurmd_memlock() {
  on "$1" "pid=\$(cat /run/slurmd.pid) && kill \$pid && while kill -0 \$pid 2>/dev/null; do sleep 0.1; done &&
    prlimit --memlock=$2:$2 slurmd </dev/null >/dev/null 2>&1"
  ((rc == 0)) || { e2e_fail "node$1: slurmd did not start again under memlock $2: $err"; return; }
  local _
  for _ in $(seq 1 30); do
    on 1 "sinfo -h -N -n node$1 -o %T"
    [[ $out != idle ]] || return 0
    sleep 1
  done
  e2e_fail "node$1 is $out, not idle, after its slurmd restarted"
}
