# Shared helpers for tests/guest/*_test.sh: the expectations of tests/e2e/lib.sh, and commands on the guests that
# tests/guest/CMakeLists.txt's guest.up booted (scripts/guest.sh). Source it; it sets -euo pipefail.
# shellcheck source=../e2e/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../e2e/lib.sh"
E2E_NAME=$(basename "${BASH_SOURCE[1]:-$0}" .sh)
guest_sh=$MRCHECK_SOURCE_DIR/scripts/guest.sh

# on NODE CMD: CMD's stdout in $out, stderr in $err, status in $rc (never exits the test).
on() {
  local n=$1
  shift
  set +e
  out=$(bash "$guest_sh" run "$n" "$*" 2>"${TMPDIR:-/tmp}/guest-err.$$")
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
