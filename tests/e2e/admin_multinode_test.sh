#!/bin/bash
# The admins' record on three slurmd of one host (slurm-up.sh --nodes 3, its own directory and ports, stopped at
# the end): one record per step for all nodes - a bad node named with "pass on 2 nodes", a silent node as "no report"
# within report_timeout (and slurmstepd not held past its bound) - and the controller RPCs of the record
# (sdiag: REQUEST_UPDATE_JOB, REQUEST_JOB_INFO_SINGLE) the same for 1, 8 and 32 tasks on 1 and 3 nodes.
source "$(dirname "$0")/lib.sh"
[[ -f $MRCHECK_BUILD_DIR/spank/spank_mrcheck.so ]] || e2e_skip "spank_mrcheck.so not built"
[[ -x $MRCHECK_BUILD_DIR/prolog/mrcheck-prolog ]] || e2e_skip "mrcheck-prolog not built"
((${MRCHECK_SLURM_PORT_BASE:-16800} + 400 < 65000)) || e2e_skip "port base too high"
# Its own 3-node cluster beside the shared one, ports at base+400 (MRCHECK_SLURM3_DIR to reuse one already
# running, which is then left running; MRCHECK_SLURM3_PORT_BASE to move its ports).
export MRCHECK_SLURM_DIR=${MRCHECK_SLURM3_DIR:-${MRCHECK_SLURM_DIR}-3n}
export MRCHECK_SLURM_PORT_BASE=${MRCHECK_SLURM3_PORT_BASE:-$((${MRCHECK_SLURM_PORT_BASE:-16800} + 400))}
WAS_UP=0
[[ -f $MRCHECK_SLURM_DIR/env.sh ]] && WAS_UP=1
bash "$MRCHECK_SOURCE_DIR/tests/slurm/slurm-up.sh" --nodes 3 "$MRCHECK_SLURM_DIR" >&2
# shellcheck disable=SC1091
source "$MRCHECK_SLURM_DIR/env.sh"
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
cleanup() {
  plugin_cleanup
  ((WAS_UP)) || bash "$MRCHECK_SOURCE_DIR/tests/slurm/slurm-down.sh" "$MRCHECK_SLURM_DIR" >&2 || true
}
trap cleanup EXIT
e2e_stage
(($(ulimit -H -l) >= 8192)) || e2e_skip "hard memlock here is below the 8 MiB policy"
ADMIN="admin_comment=yes admin_helper=$E2E_INSTALL/sbin/mrcheck-prolog report_timeout=2s"

# admin_comment NAME -> AC, the AdminComment once the job has ended and slurmdbd has it.
admin_comment() {
  local out="" _i
  for _i in $(seq 1 50); do
    out=$(sacct -X -n -P --name="$1" -S now-1hour -o JobID,State,AdminComment%1000 2>/dev/null | tail -1)
    [[ -n $out && $out != *RUNNING* && $out != *PENDING* && $out != *"|" ]] && break
    sleep 0.2
  done
  AC=${out#*|}  # JobID|State|AdminComment: the record itself holds " | "
  AC=${AC#*|}
}

# One bad node: node2's slurmd under a 4 MiB hard limit (memlock_min 8 MiB): named, the others counted.
plugin_slurmd_restart --node node2 --memlock-hard 4M
plugin_load required memlock_min=8M $ADMIN
run_user srun -J admin-bad-$$ -N3 -n3 --mr-check=memlock true
show_run "bad node"
[[ $RC != 0 ]] && e2e_pass "bad node: the step fails" || e2e_fail "bad node: the step should fail"
admin_comment admin-bad-$$
expect_eq "bad node: one record naming node2" "$AC" "mrcheck: step 0: FAIL memlock=4MiB (slurmd limit) on node2; pass on 2 nodes"
plugin_slurmd_restart --node node2
PLUGIN_SLURMD_CHANGED=0

# A node that never reports: node3's collector is stopped before it hands its record in (a slow probe helper
# keeps every node's task_init busy for 2 s, the window to find it).
cat >"$E2E_INSTALL/bin/slow-mrcheck" <<EOF
#!/bin/sh
sleep 2
exec $E2E_INSTALL/bin/mrcheck "\$@"
EOF
chmod 0755 "$E2E_INSTALL/bin/slow-mrcheck"
echo "optional $E2E_INSTALL/lib/slurm/spank_mrcheck.so helper=$E2E_INSTALL/bin/slow-mrcheck memlock_min=8M $ADMIN" >"$PLUGIN_DROPIN"
T0=$(date +%s%N)
as_user srun -J admin-silent-$$ -N3 -n3 --mr-check=memlock,mr true >/dev/null 2>&1 &
SRUN=$!
# The collector detaches (prolog/admin_collect.cpp): for a moment its first process and the collector both match,
# and the first one may fork after the snapshot. Every matching process is stopped until all that match are
# stopped (state T; the first one, once exited, no longer matches: a zombie has no command line). STOPPED is the
# newest, the collector.
STOPPED=""
J=""
for _ in $(seq 1 100); do
  # This step's collector only (the job's id in its arguments): another cluster on this machine has its own.
  [[ -n $J ]] || J=$(squeue -h -n admin-silent-$$ -o %i 2>/dev/null | head -1)
  [[ -n $J ]] || { sleep 0.05 && continue; }
  pids=$(pgrep -f "admin-collect --job $J .*--node node3 " || true)
  if [[ -n $pids ]]; then
    # shellcheck disable=SC2086 # one pid per word
    kill -STOP $pids 2>/dev/null || true
    running=0
    for p in $(pgrep -f "admin-collect --job $J .*--node node3 " || true); do
      [[ $(ps -o stat= -p "$p" 2>/dev/null) == T* ]] || running=1
      STOPPED=$p
    done
    ((running == 0)) && [[ -n $STOPPED ]] && break
    STOPPED=""
    sleep 0.01
    continue
  fi
  sleep 0.05
done
wait "$SRUN" || true
T1=$(date +%s%N)
[[ -n $STOPPED ]] && e2e_pass "silent node: node3's collector stopped (pid $STOPPED)" || e2e_fail "silent node: no collector of node3 found"
admin_comment admin-silent-$$
expect_eq "silent node: reported as no report" "$AC" "mrcheck: step 0: pass on 2 nodes; no report from node3"
ELAPSED=$(((T1 - T0) / 1000000))
e2e_log "figure: 3-node step with a silent node took ${ELAPSED} ms (probe helper 2 s, report_timeout 2 s)"
# The bound: probes (2 s), then slurmstepd waits for the stopped collector report_timeout + 12 s
# (src/admin/collector.cpp) before it stops it.
((ELAPSED < 22000)) && e2e_pass "silent node: the step ended within its bounds" || e2e_fail "silent node: took ${ELAPSED} ms"
# The collector detaches from slurmstepd (admin_protocol.h): killed by its process group, it is reaped by init,
# not by slurmstepd, so it may show as a zombie for a moment.
alive() { local st; st=$(ps -o stat= -p "$1" 2>/dev/null) && [[ $st != Z* ]]; }
for _ in $(seq 1 30); do [[ -n $STOPPED ]] && alive "$STOPPED" || break; sleep 0.1; done
[[ -n $STOPPED ]] && ! alive "$STOPPED" && e2e_pass "silent node: the stopped collector is gone" ||
  e2e_fail "silent node: collector $STOPPED still alive"

# Controller RPCs per step: the same for 1, 8, 32 tasks on 1 and 3 nodes.
# sdiag: "	REQUEST_UPDATE_JOB   ( 3001) count:1  ave_time:..."
rpc() { sdiag | awk -v m="$1" '$1 == m { for (i = 2; i <= NF; i++) if ($i ~ /^count:/) { sub(/count:/, "", $i); print $i; f = 1 } } END { if (!f) print 0 }'; }
count_step() {  # count_step ARGS... -> "update info" RPCs of one srun
  sdiag --reset >/dev/null
  run_user srun -J admin-rpc-$$ -O "$@" --mr-check=memlock true
  [[ $RC == 0 ]] || show_run "rpc $*"
  echo "$(rpc REQUEST_UPDATE_JOB) $(rpc REQUEST_JOB_INFO_SINGLE)"
}
plugin_load required memlock_min=8M
BASE=$(count_step -N1 -n1)
plugin_load required memlock_min=8M $ADMIN
declare -A SEEN=()
for shape in "-N1 -n1" "-N1 -n8" "-N1 -n32" "-N3 -n3" "-N3 -n8" "-N3 -n32"; do
  # shellcheck disable=SC2086
  got=$(count_step $shape)
  e2e_log "figure: srun $shape: REQUEST_UPDATE_JOB REQUEST_JOB_INFO_SINGLE = $got (without admin_comment: $BASE)"
  SEEN[$got]=1
  expect_eq "rpc $shape: one job update" "${got%% *}" "$((${BASE%% *} + 1))"
done
expect_eq "rpc: the same counts for every shape" "${#SEEN[@]}" "1"
e2e_done
