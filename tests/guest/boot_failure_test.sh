#!/usr/bin/env bash
# The guest leg never passes silently on a broken guest: `scripts/guest.sh up` fails with one line saying which
# guest and why, and leaves no QEMU running. Its own one-guest cluster beside the leg's (MRCHECK_GUEST_DIR-fail),
# without the .deb (the failures come before it):
#   - a kernel without rdma_rxe (module_blacklist=rdma_rxe on its command line): "no rdma_rxe";
#   - a guest that is not ready in time (a 5 s limit; a TCG boot takes tens of seconds): "did not boot in 5 s";
#   - the third of three guests whose QEMU ends while they boot (no Slurm): "node3: QEMU exited", said at once,
#     not after node1 and node2 have booted, and none of the three left running.
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

# node3's QEMU killed as soon as it has started: up names node3 while node1 and node2 still boot.
rm -f "$fail_dir"/node3/qemu.pid
t0=$SECONDS
env MRCHECK_GUEST_DIR="$fail_dir" MRCHECK_GUEST_DEB=none MRCHECK_GUEST_SLURM=0 bash "$guest_sh" up 3 \
  >/dev/null 2>"$fail_dir.err" &
up_pid=$!
for _ in $(seq 1 300); do [[ -s $fail_dir/node3/qemu.pid ]] && break; sleep 0.1; done
sleep 2 # QEMU's -daemonize returns once the machine is made: a kill before it is "did not start" instead
pids=$(cat "$fail_dir"/node{1,2,3}/qemu.pid 2>/dev/null | paste -sd ' ')
kill "$(cat "$fail_dir/node3/qemu.pid" 2>/dev/null)" 2>/dev/null || true
set +e
wait "$up_pid"
rc=$?
set -e
err=$(cat "$fail_dir.err")
rm -f "$fail_dir.err"
e2e_log "one of three guests gone: up failed after $((SECONDS - t0)) s"
expect_eq "node3 of 3 gone: up fails" "$rc" 1
# One line: no "node1 ready" before it, so up did not wait for the guests before node3.
expect_eq "node3 of 3 gone: one line, an error" "$(wc -l <<<"$err") $(grep -c "^mrcheck: guest: error: " <<<"$err")" "1 1"
expect_contains "node3 of 3 gone: names node3" "$err" "mrcheck: guest: error: node3: QEMU exited before the guest was ready"
expect_eq "node3 of 3 gone: three QEMUs had started" "$(wc -w <<<"$pids")" 3
left=''
for _ in $(seq 1 50); do # SIGTERM from guest.sh's exit: QEMU takes a moment to end
  left=''
  for pid in $pids; do ! kill -0 "$pid" 2>/dev/null || left+=" $pid"; done
  [[ -n $left ]] || break
  sleep 0.2
done
expect_eq "node3 of 3 gone: no QEMU left running" "${left:- none}" " none"
e2e_done
