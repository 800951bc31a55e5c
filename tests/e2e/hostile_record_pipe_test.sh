#!/bin/bash
# B7 (issue 37): a forged node record through /proc/PID/fd. The test container plugin (tests/container/spank_testct.c,
# before mrcheck in plugstack.conf, as pyxis sits) leaves the task child dumpable when it enters the image. While
# the step's probes run (the container probe hangs in the fake libibverbs' ibv_open_device until probe_timeout),
# the job user's plain host process opens the task child's record pipe (the pipe whose read end the root
# collector holds) through /proc/PID/fd and writes a record of its own first. The open must fail, and the
# AdminComment must be the step's real record.
# Fails on the code before fd670cb: the open succeeds, the forged line is the first record the collector reads,
# and the AdminComment carries the user's verdict.
source "$(dirname "$0")/lib.sh"
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
[[ -f $MRCHECK_BUILD_DIR/tests/container/spank_testct.so ]] || e2e_skip "spank_testct.so not built"
[[ -x $MRCHECK_BUILD_DIR/prolog/mrcheck-prolog ]] || e2e_skip "mrcheck-prolog not built"
if ! userns_err=$(setpriv --reuid=65534 --regid=65534 --clear-groups -- unshare --user --mount true 2>&1); then
  e2e_skip "an unprivileged user cannot create a user namespace here (unshare --user --mount: ${userns_err:-refused})"
fi
set +e
images=$(bash "$MRCHECK_SOURCE_DIR/tests/container/make-images.sh")
rc=$?
set -e
((rc == 77)) && e2e_skip "no container images (mirror unreachable, nothing cached)"
((rc == 0)) || { e2e_fail "make-images.sh failed ($rc)"; e2e_done; }
plugin_setup
d=$E2E_INSTALL
install -m 0755 "$MRCHECK_BUILD_DIR/src/mrcheck-ctprobe" "$d/bin/mrcheck-ctprobe" 2>/dev/null || true
install -m 0755 "$MRCHECK_BUILD_DIR/tests/container/spank_testct.so" "$d/lib/slurm/"
trap 'rm -f "$MRCHECK_SLURM_PLUGSTACK_D/50-testct.conf"; plugin_cleanup' EXIT
[[ -f $d/lib/fake/libibverbs.so.1 ]] || e2e_skip "the fake libibverbs was not built"
mkdir -p "$d/lib/fake/libibverbs" && : >"$d/lib/fake/libibverbs/libfake-rdmav34.so" && chmod -R a+rX "$d/lib/fake"
echo "optional $d/lib/slurm/spank_testct.so" >"$MRCHECK_SLURM_PLUGSTACK_D/50-testct.conf"
echo "optional $d/lib/slurm/spank_mrcheck.so helper=$d/bin/mrcheck memlock_min=8M container_plugins=spank_testct.so" \
  "probe_timeout=5s admin_comment=yes admin_helper=$d/sbin/mrcheck-prolog report_timeout=2s" >"$PLUGIN_DROPIN"
HANG="LD_LIBRARY_PATH=$d/lib/fake,MRCHECK_FAKE_IBV_DEVICES=mlx5_0,MRCHECK_FAKE_IBV_INJECT=open_device=hang"
FORGED='{"v":1,"node_id":0,"node":"x","checks":[{"id":"memlock","verdict":"fail","token":"memlock=FORGED-'$$'"}]}'

# pipe_ends COLL: "PID FD" of every process of the job user (its real uid: a task child that is not dumpable shows
# root as the owner of its /proc files) holding the write end of a pipe whose read end the collector COLL holds:
# the record pipe, held by the task child while it probes.
pipe_ends() {
  local n uid pid fd
  uid=$(id -u "$E2E_USER")
  for n in $(find /proc/"$1"/fd -maxdepth 1 -type l -perm -u=r -printf '%l\n' 2>/dev/null | sed -n 's/^pipe:\[\([0-9]*\)\]$/\1/p' | sort -u); do
    find /proc/[0-9]*/fd -maxdepth 1 -type l -perm -u=w -lname "pipe:\[$n\]" 2>/dev/null
  done | sed -n 's|^/proc/\([0-9]*\)/fd/\([0-9]*\)$|\1 \2|p' | sort -u | while read -r pid fd; do
    [[ $(awk '$1 == "Uid:" {print $2}' "/proc/$pid/status" 2>/dev/null) == "$uid" ]] && echo "$pid $fd"
  done
  return 0
}

as_user srun -J b7-$$ -N1 -n1 --mr-check=mr --container-root="$images/bookworm" --export="ALL,$HANG" true \
  >"$MRCHECK_SLURM_WORK/b7.$$.out" 2>&1 &
SRUN=$!
J="" COLL=""
for _ in $(seq 1 200); do
  J=$(squeue -h -n "b7-$$" -o %i 2>/dev/null | head -1)
  # Not yet there is no error: pgrep's status 1 ended the whole test under `set -e -o pipefail` (lib.sh) when the
  # job was queued before its collector started (the 26.05 leg of the 2026-12-07 CI run: failed in 0.22 s, silent).
  [[ -n $J ]] && COLL=$(pgrep -f "admin-collect --job $J " | head -1 || true)
  [[ -n $J && -n $COLL ]] && pgrep -u "$E2E_USER" -f mrcheck-ctprobe >/dev/null && break
  COLL=""
  sleep 0.05
done
[[ -n $COLL ]] || { e2e_fail "the step's container probe never ran (job '$J')"; wait "$SRUN"; e2e_done; exit 1; }
sleep 0.5 # in ibv_open_device by now
ENDS=$(pipe_ends "$COLL")
e2e_log "job $J collector $COLL; the record pipe's other ends: [${ENDS//$'\n'/; }]"
read -r TASK FD <<<"$(head -1 <<<"$ENDS")"
if [[ -n $TASK ]]; then
  e2e_pass "the task child $TASK holds the record pipe (fd $FD) while the probe hangs"
  set +e
  WRITE=$(as_user sh -c "printf '%s\n' '$FORGED' >/proc/$TASK/fd/$FD" 2>&1)
  WRC=$?
  set -e
  e2e_log "the user's write through /proc/$TASK/fd/$FD: exit $WRC: $WRITE"
  ((WRC != 0)) && e2e_pass "the user's host process cannot open the record pipe" ||
    e2e_fail "the user's host process wrote into the record pipe through /proc/$TASK/fd/$FD"
else
  e2e_fail "no process but the collector holds the record pipe (collector '$COLL', job '$J')"
fi
wait "$SRUN" 2>/dev/null || true
e2e_admin_comment "b7-$$"
e2e_log "AdminComment [$AC]; srun said: $(head -c 600 "$MRCHECK_SLURM_WORK/b7.$$.out")"
expect_not_contains "the record is not the user's" "$AC" "FORGED"
expect_contains "the record is the step's: its hung container probe" "$AC" "mrcheck: step 0: FAIL container (the container probe in a container timed out"
e2e_done
