#!/bin/bash
# Hostile user and faults (SECURITY.md) for report_dir= (the per-node JSON report the root collector writes at step
# end): a site that put report_dir under a world-writable directory, where the user plants a symlink to a
# directory of their own, a dangling symlink, or a directory of their own; then report_dir on a full filesystem.
# Each: the step's outcome is untouched (rc 0, the task ran, the verdict shown), nothing is written where the
# user pointed, no partial file is left, the node is not drained and slurmd is the same process. A root-owned
# report_dir in the same place is the control: there the report is written, so "nothing written" means refused.
source "$(dirname "$0")/lib.sh"
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
source "$(dirname "$0")/hardening_lib.sh"
plugin_setup
[[ -x $E2E_INSTALL/sbin/mrcheck-prolog ]] || e2e_skip "mrcheck-prolog not built (the admin helper)"
hard_snapshot
node=$(hard_node)
cd "$MRCHECK_SLURM_WORK"
w=$MRCHECK_SLURM_WORK/hostile_report_dir.$$  # world-writable and sticky, like /tmp
mkdir -m 1777 "$w"
mnt=""
cleanup() {
  plugin_cleanup
  [[ -n $mnt ]] && { umount "$mnt" 2>/dev/null || true; rmdir "$mnt" 2>/dev/null || true; }
  rm -rf "$w"
}
trap cleanup EXIT
user() { setpriv --reuid="$E2E_USER" --regid="$E2E_USER" --init-groups -- "$@"; }
step() {  # step REPORT_DIR NAME: a checked step with the collector writing to REPORT_DIR; sets JOB
  plugin_load optional memlock_min=1M admin_helper="$E2E_INSTALL/sbin/mrcheck-prolog" report_dir="$1" report_timeout=3s
  run_user srun -J "$2" --mr-check=memlock,verbose bash -c 'echo task-ran'
  JOB=$(sed -n 's/.*chain on [^ ]* (job \([0-9]*\) step.*/\1/p' <<<"$ERR" | head -1)
  expect_eq "$2: the step's rc" "$RC" "0"
  expect_eq "$2: the task ran" "$OUT" "task-ran"
  expect_contains "$2: the verdict is shown" "$ERR" "mrcheck: memlock: pass: "
  sleep 1  # the collector runs at step end
}

# Control: a root-owned report_dir next to the planted ones gets the report.
mkdir -m 0755 "$w/good"
step "$w/good" hrd-good
if [[ -n $JOB && -f $w/good/job$JOB.step_0.$node.json ]]; then e2e_pass "control: the report is written"; else e2e_fail "control: no report in $w/good: $(ls -A "$w/good")"; fi

# 1. A symlink to the user's own directory.
user mkdir "$w/mine"
user ln -s "$w/mine" "$w/link"
step "$w/link" hrd-link
expect_eq "symlink to the user's dir: nothing written there" "$(ls -A "$w/mine")" ""
# 2. A dangling symlink: its target must not be created.
user ln -s "$w/not-yet" "$w/dangling"
step "$w/dangling" hrd-dangling
hard_absent "dangling symlink: target not created" "$w/not-yet"
# 3. A directory the user made.
user mkdir -m 0755 "$w/users"
step "$w/users" hrd-users
expect_eq "user's directory: nothing written there" "$(ls -A "$w/users")" ""

# The refusals are said where the admin looks (the user's step is not the place): slurmd's log. (For a symlink
# the line is open(2)'s "Not a directory", from O_DIRECTORY|O_NOFOLLOW.)
log=$MRCHECK_SLURM_DIR/log/slurmd-$node.log
for d in link dangling users; do
  if grep -q "mrcheck: admin: report_dir $w/${d}[: ]" "$log"; then e2e_pass "$d: slurmd's log names the refused report_dir"; else e2e_fail "$d: no line for $w/$d in $log"; fi
done
grep -q "report_dir $w/users must be owned by root and not writable by group or others (owner uid $(id -u "$E2E_USER")" "$log" &&
  e2e_pass "user's directory: the reason names the owner" || e2e_fail "user's directory: no owner reason in $log"

# 4. A full filesystem (root's, 0755: acceptable but full).
mnt=$(mktemp -d /tmp/hostile-report-dir.XXXXXX)
if mount -t tmpfs -o size=16k,nr_inodes=64,mode=0755 tmpfs "$mnt" 2>/dev/null; then
  { head -c 16384 /dev/zero >"$mnt/fill"; } 2>/dev/null || true
  step "$mnt" hrd-full
  expect_eq "full report_dir: no report and no partial file" "$(find "$mnt" -name '*.json*' -o -name '.*tmp' | wc -l)" "0"
  if grep -q "report_dir $mnt.*No space left on device" "$log"; then e2e_pass "full report_dir: slurmd's log says why"; else
    e2e_fail "full report_dir: no ENOSPC line for $mnt in $log: $(grep "report_dir" "$log" | tail -3)"; fi
else
  rmdir "$mnt"
  mnt=""
  e2e_log "cannot mount a tmpfs here: full-filesystem case not run"
fi
hard_invariants "after hostile report_dirs"
e2e_done
