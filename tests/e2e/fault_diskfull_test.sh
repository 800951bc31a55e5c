#!/bin/bash
# Faults (SECURITY.md): the prolog's state_dir on a full filesystem (a 16 KiB tmpfs, filled), with slurmctld down so
# the prolog must record a drain there. What was promised must not be lost: in prolog mode the failing node
# still exits 1 (Slurm drains it and requeues the job) with a line naming the unsaved drain and ENOSPC; no
# partial temp file is left; once slurmctld is back, the next run drains the node with mrcheck's reason even
# though the filesystem is still full. slurmd is the same process throughout; the node is resumed at the end.
source "$(dirname "$0")/lib.sh"
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
source "$(dirname "$0")/hardening_lib.sh"
prolog=$MRCHECK_BUILD_DIR/prolog/mrcheck-prolog
[[ -x $prolog ]] || e2e_skip "mrcheck-prolog not built ($prolog)"
[[ "$(id -u)" == 0 ]] || e2e_skip "needs root (mount, slurm_update_node)"
e2e_slurm_up
node=$(hard_node)
mnt=$(mktemp -d /tmp/fault-diskfull.XXXXXX)
mount -t tmpfs -o size=16k,nr_inodes=64,mode=0700 tmpfs "$mnt" 2>/dev/null || { rmdir "$mnt"; e2e_skip "cannot mount a tmpfs here"; }
resume() {
  scontrol update nodename="$node" state=resume >/dev/null 2>&1 || true
  local _
  for _ in $(seq 1 50); do
    case "$(hard_node_state)" in idle | mixed | allocated | completing) return 0 ;; esac
    sleep 0.2
  done
}
cleanup() {
  bash "$MRCHECK_SOURCE_DIR/tests/slurm/slurm-up.sh" >/dev/null 2>&1 || true
  resume
  umount "$mnt" 2>/dev/null || true
  rmdir "$mnt" 2>/dev/null || true
}
trap cleanup EXIT
hard_snapshot
prolog_run() {  # prolog_run FIXTURE MODE: sets out, rc
  set +e
  out=$("$prolog" --root "$MRCHECK_SOURCE_DIR/tests/fixtures/$1" --node "$node" --state-dir "$mnt" \
    --rules "$MRCHECK_SOURCE_DIR/etc/mrcheck-rules.conf" --mode "$2" --timeout 2s 2>&1)
  rc=$?
  set -e
}
reason="mrcheck: hca_fw mlx5_0 (node): ConnectX-7 fw 28.33.0800 < 28.35.1012"

# Full twice over: first every block (a new file can be created but not written), then every inode too.
{ head -c 16384 /dev/zero >"$mnt/fill"; } 2>/dev/null || true
if { printf x >"$mnt/probe"; } 2>/dev/null; then e2e_fail "the tmpfs still takes data"; else e2e_pass "state_dir has no free block"; fi
rm -f "$mnt/probe"

bash "$MRCHECK_SOURCE_DIR/tests/slurm/slurm-down.sh" --only slurmctld >&2
for phase in blocks inodes; do
  if [[ $phase == inodes ]]; then
    i=0
    while { : >"$mnt/f$i"; } 2>/dev/null && ((i < 100)); do i=$((i + 1)); done
    if { : >"$mnt/probe"; } 2>/dev/null; then e2e_fail "the tmpfs still takes files"; else e2e_pass "no free inode either ($i files)"; fi
  fi
  prolog_run matrix_hca_fw_old prolog
  expect_eq "$phase full, prolog, slurmctld down: still exits 1 (Slurm drains and requeues)" "$rc" "1"
  expect_contains "$phase full, prolog: the FAIL line" "$out" "mrcheck: hca_fw: FAIL: "
  expect_contains "$phase full, prolog: says the drain could not be saved" "$out" "and the pending drain could not be saved"
  expect_contains "$phase full, prolog: names the cause" "$out" "No space left on device"
  expect_eq "$phase full: no temp or partial file left behind" "$(find "$mnt" -name 'pending-*' | wc -l)" "0"
  prolog_run matrix_hca_fw_old healthcheck
  expect_eq "$phase full, healthcheck, slurmctld down: exits 0 (Slurm ignores its status)" "$rc" "0"
  expect_contains "$phase full, healthcheck: says the drain could not be saved" "$out" "and the pending drain could not be saved"
done

bash "$MRCHECK_SOURCE_DIR/tests/slurm/slurm-up.sh" >/dev/null
prolog_run matrix_hca_fw_old healthcheck
expect_contains "slurmctld back, disk still full: the next run drains" "$out" "drained node $node"
expect_eq "the drain reason is mrcheck's" "$(hard_node_reason)" "$reason"
prolog_run matrix_aligned healthcheck
expect_contains "aligned again: resumed" "$out" "resumed node $node"
resume
hard_invariants "after a full state_dir"
e2e_done
