#!/bin/bash
# Plugin scenario l: imex_channel under the real slurmstepd (src/checks/imex_channel.cpp, docs/facts/mnnvl.md §4).
# A node that serves an IMEX domain (its /etc/nvidia-imex/nodes_config.cfg) and a task whose mount namespace has no
# IMEX channel: the post-exec watcher names imex_channel on the task's stderr. With a channel in the namespace that
# the job user may open: no verdict line; with one it may not open: the permission line.
#
# The plugin reads the node's own /etc and /dev (no test hook): so the test runs only where those are not the
# machine's, the release legs' roots (scripts/slurm-release.sh 24.11|26.05: the root's own /etc, a private mount
# namespace shared with the private Slurm it starts). The 22.05 leg uses this machine's /etc, shared with every
# other Slurm and prolog here: it skips. The channel device goes into an overlay of /dev (a tmpfs upper layer) mounted
# in the private Slurm's own mount namespace only: nothing is written into the machine's /dev. Its device number is
# /dev/null's: mrcheck checks the file and its access, not the driver behind it. The tasks run for one second, less
# than the watcher's 3 s window: a job whose NCCL fails at once still gets its verdict.
source "$(dirname "$0")/lib.sh"
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"

# Only where scripts/slurm-release.sh says this runs in a release's own root (its in_root sets the release; 22.05
# is this machine). Not from what /proc/1 shows: in a sandbox PID 1 may be unreadable, and a check that cannot read
# it must not conclude that /etc is private (it once did: the nodes file sat in the machine's /etc for 5 s).
case ${MRCHECK_SLURM_RELEASE:-} in
  24.11 | 26.05) ;;
  *) e2e_skip "not in a release root (MRCHECK_SLURM_RELEASE=${MRCHECK_SLURM_RELEASE:-unset}): /etc and /dev here are this machine's, shared with every Slurm and prolog on it; scripts/slurm-release.sh 24.11|26.05 runs this test" ;;
esac
[[ ! -e /etc/nvidia-imex ]] || e2e_skip "/etc/nvidia-imex exists: a real IMEX configuration, left alone"
[[ ! -e /dev/nvidia-caps-imex-channels ]] || e2e_skip "/dev/nvidia-caps-imex-channels exists: real IMEX channels"
command -v mknod >/dev/null || e2e_skip "mknod is needed"
plugin_setup
((PLUGIN_HARD_KIB >= 8192)) || e2e_skip "hard memlock here is ${PLUGIN_HARD_KIB} KiB, below the 8 MiB policy"

# The channel case runs in slurmd's own mount namespace (nsenter): the release legs start the private Slurm in a
# private namespace of its own, which its steps and tasks share; mounts made there reach neither this machine nor
# this test's namespace.
OV=""
SLURMD_PID=""
in_slurmd() { nsenter -t "$SLURMD_PID" -m -- "$@"; }
imex_cleanup() {
  if [[ -n $OV ]]; then
    # shellcheck disable=SC2016
    in_slurmd bash -c '
      OV=$1
      mapfile -t subs < <(tac "$OV/subs" 2>/dev/null)
      for s in "${subs[@]}"; do umount "$s" 2>/dev/null || true; done
      if grep -q "^overlay /dev overlay" /proc/self/mounts; then umount -l /dev; fi
      umount -R -l "$OV" 2>/dev/null || true
      rmdir "$OV" 2>/dev/null || true' bash "$OV" || true
  fi
  rm -rf /etc/nvidia-imex
}
trap 'imex_cleanup; plugin_cleanup' EXIT

# The node serves an IMEX domain: its nodes file (one peer, this node).
mkdir -m 0755 /etc/nvidia-imex
printf '127.0.0.1\n' >/etc/nvidia-imex/nodes_config.cfg
plugin_load optional memlock_min=8M

# 1. No channel in the task's namespace: the site's (switch/nvidia_imex, the container's device list).
run_user srun --mr-check=memlock bash -c 'sleep 1; echo ran'
show_run "l: no channel"
expect_eq "l: no channel: the task runs (the check comes after its exec)" "$OUT" "ran"
expect_contains "l: no channel: imex_channel FAIL on the task's stderr" "$ERR" \
  "mrcheck: imex_channel: FAIL: no IMEX channel in the task's mount namespace (/dev/nvidia-caps-imex-channels is missing; the node has no channel of its own): multi-node NVLink communicators fail (NCCL 2.27.3+)"
expect_contains "l: no channel: the fix names switch/nvidia_imex" "$ERR" "SwitchType=switch/nvidia_imex"

# Without IMEX on the node, no watcher verdict at all.
rm -f /etc/nvidia-imex/nodes_config.cfg
run_user srun --mr-check=memlock bash -c 'sleep 1; echo ran'
show_run "l: no IMEX"
expect_not_contains "l: no IMEX: no imex_channel line" "$ERR" "imex_channel"
printf '127.0.0.1\n' >/etc/nvidia-imex/nodes_config.cfg

# 2. A channel in the namespace: /dev overlaid (a tmpfs upper layer) in slurmd's namespace.
SLURMD_PID=$(cat "$MRCHECK_SLURM_DIR"/run/slurmd-*.pid 2>/dev/null | head -1)
SLURMD_NS=$(readlink "/proc/${SLURMD_PID:-0}/ns/mnt" 2>/dev/null || true)
# In a release root every in_root call has a private mount namespace (scripts/slurm-release.sh): slurmd's is one,
# whether the cluster was started by that script (another namespace) or by a test before this one (this one).
if [[ -z $SLURMD_PID || -z $SLURMD_NS ]]; then
  e2e_log "note: no slurmd mount namespace to read (${SLURMD_PID:-no pid}): no channel case"
  e2e_done
  exit $?
fi
OV=$(mktemp -d /tmp/mrcheck-imex-dev.XXXXXX)
# shellcheck disable=SC2016
if ! in_slurmd bash -c '
  set -e
  OV=$1
  mount -t tmpfs -o mode=0755 tmpfs "$OV"
  mkdir "$OV/lower" "$OV/upper" "$OV/work" "$OV/keep"
  mount --bind /dev "$OV/lower"
  mapfile -t subs < <(awk '"'"'$2 ~ "^/dev/[^/]+$" {print $2}'"'"' /proc/self/mounts | sort -u)
  for s in "${subs[@]}"; do
    mkdir -p "$OV/keep/${s#/dev/}"
    mount --bind "$s" "$OV/keep/${s#/dev/}"
  done
  mount -t overlay overlay -o "lowerdir=$OV/lower,upperdir=$OV/upper,workdir=$OV/work" /dev
  for s in "${subs[@]}"; do mount --bind "$OV/keep/${s#/dev/}" "$s" && echo "$s"; done >"$OV/subs"
  mkdir -m 0755 /dev/nvidia-caps-imex-channels
  mknod -m 0666 /dev/nvidia-caps-imex-channels/channel0 c 1 3
  [[ ! -e $OV/lower/nvidia-caps-imex-channels ]]' bash "$OV"; then
  e2e_fail "l: cannot put a channel into slurmd's /dev (overlayfs, mknod)"
  e2e_done
  exit 1
fi
e2e_pass "l: channel0 made in an overlay of slurmd's /dev, the machine's /dev untouched"
if [[ $SLURMD_NS == "$(readlink /proc/self/ns/mnt)" ]]; then
  e2e_log "note: slurmd shares this test's (private) mount namespace"
elif [[ ! -e /dev/nvidia-caps-imex-channels ]]; then
  e2e_pass "l: not in this test's namespace either"
else
  e2e_fail "l: the channel leaked into this test's /dev"
fi

run_user srun --mr-check=memlock bash -c 'ls /dev/nvidia-caps-imex-channels; sleep 1'
show_run "l: channel0"
expect_eq "l: channel0: the task sees it" "$OUT" "channel0"
expect_not_contains "l: channel0 read-write for the job user: no imex_channel line" "$ERR" "imex_channel"

# 3. The channel present but not the job user's: the permission line.
in_slurmd chmod 0600 /dev/nvidia-caps-imex-channels/channel0
run_user srun --mr-check=memlock bash -c 'sleep 1; echo ran'
show_run "l: channel0 0600"
expect_contains "l: channel0 0600: permission FAIL" "$ERR" \
  "mrcheck: imex_channel: FAIL: the task sees IMEX channel0 but may not open it read-write (permission denied for the job user)"
e2e_done
