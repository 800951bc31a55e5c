#!/usr/bin/env bash
# The guest leg never passes silently on a broken guest: `scripts/guest.sh up` fails with one line saying which
# guest and why, and leaves no QEMU running. Its own one-guest cluster beside the leg's (MRCHECK_GUEST_DIR-fail),
# without the .deb (the failures come before it):
#   - a kernel without rdma_rxe (module_blacklist=rdma_rxe on its command line): "no rdma_rxe";
#   - a guest that is not ready in time (a 5 s limit; a TCG boot takes tens of seconds): "did not boot in 5 s".
source "$(dirname "$0")/lib.sh"
fail_dir=${MRCHECK_GUEST_DIR:-/tmp/mrcheck-guest}-fail
trap 'MRCHECK_GUEST_DIR=$fail_dir bash "$guest_sh" down >/dev/null 2>&1 || true' EXIT

# up_fails NAME ENV...: `guest.sh up 1` with ENV; its status in $rc, its stderr in $err.
up_fails() {
  set +e
  err=$(env MRCHECK_GUEST_DIR="$fail_dir" MRCHECK_GUEST_DEB=none "${@:2}" bash "$guest_sh" up 1 2>&1 >/dev/null)
  rc=$?
  set -e
  expect_eq "$1: up fails" "$rc" 1
  expect_eq "$1: one line, an error" "$(wc -l <<<"$err") $(grep -c "^mrcheck: guest: error: " <<<"$err")" "1 1"
  local pid
  pid=$(cat "$fail_dir/node1/qemu.pid" 2>/dev/null || true)
  expect_eq "$1: no QEMU left running" "$([[ -n $pid ]] && kill -0 "$pid" 2>/dev/null && echo running || echo gone)" gone
}

up_fails "no rdma_rxe" MRCHECK_GUEST_APPEND=module_blacklist=rdma_rxe
expect_contains "no rdma_rxe: said so" "$err" "node1: node=1 kernel="
expect_contains "no rdma_rxe: the reason" "$err" "no rdma_rxe"

up_fails "not ready in time" MRCHECK_GUEST_TIMEOUT=5
expect_contains "not ready in time: said so" "$err" "node1 did not boot in 5 s"
e2e_done
