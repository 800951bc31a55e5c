#!/bin/bash
# The admin record across real network stacks. Three slurmd, each in its own network and
# mount namespace (slurm-up.sh --netns: own address, own /run), in a cluster of its own (ports at base+500,
# stopped at the end):
#   - the handoff to node 0: nodes 2 and 3 send their record over TCP from their own stack to node 1's address;
#   - the node-pair rendezvous of `mrcheck probe nccl --mode node-pair` (fake ranks) between two stacks;
#   - a node that dies mid-step (every process of node3's namespace killed before it reported): the record
#     names it, and the step ends once the node is marked down, without hanging;
#   - concurrent steps of one job whose first nodes differ (node1, node2, node3; each node's /run and its lock
#     are its own): every step's record is in the AdminComment afterwards;
#   - scancel of a step before node 0 collected: a record saying it was cancelled and which nodes did not
#     report, not nothing;
#   - the controller RPCs of one step's record.
# The last two fail on the code before the fix: 7 of 9 records, and an empty AdminComment.
source "$(dirname "$0")/lib.sh"
[[ -f $MRCHECK_BUILD_DIR/spank/spank_mrcheck.so ]] || e2e_skip "spank_mrcheck.so not built"
[[ -x $MRCHECK_BUILD_DIR/prolog/mrcheck-prolog ]] || e2e_skip "mrcheck-prolog not built"
e2e_netns_up
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
prog=admin_netns_test
source "$MRCHECK_SOURCE_DIR/tests/slurm/lib.sh" # netns_of, node_usable, port_base (resolve_dir)
resolve_dir "$MRCHECK_SLURM_DIR"
cleanup() {
  plugin_cleanup
  e2e_netns_down
}
trap cleanup EXIT
e2e_stage
(($(ulimit -H -l) >= 8192)) || e2e_skip "hard memlock here is below the 8 MiB policy"
ADMIN="admin_comment=yes admin_helper=$E2E_INSTALL/sbin/mrcheck-prolog report_timeout=2s admin_comment_max=8192"
addr_of() { awk -v n="$1" '$1 == n {print $3}' "$MRCHECK_SLURM_DIR/run/nodes"; }
slurmd_pid() { cat "$MRCHECK_SLURM_DIR/run/slurmd-$1.pid"; }

# The layout itself: three network namespaces, three mount namespaces, three addresses.
NETS=$(for n in node1 node2 node3; do readlink "/proc/$(slurmd_pid $n)/ns/net"; done | sort -u | wc -l)
MNTS=$(for n in node1 node2 node3; do readlink "/proc/$(slurmd_pid $n)/ns/mnt"; done | sort -u | wc -l)
expect_eq "layout: three network namespaces" "$NETS" "3"
expect_eq "layout: three mount namespaces" "$MNTS" "3"
expect_not_contains "layout: node2's stack is not the host's" "$(readlink "/proc/$(slurmd_pid node2)/ns/net")" "$(readlink /proc/self/ns/net)"

# A probe helper that waits for a gate file (at most 20 s) before the real probe (e2e_gated_helper, lib.sh).
GATE=$MRCHECK_SLURM_WORK/gate.$$
e2e_gated_helper "$E2E_INSTALL/bin/gated-mrcheck" "$GATE" 2000
gated() { echo "optional $E2E_INSTALL/lib/slurm/spank_mrcheck.so helper=$E2E_INSTALL/bin/gated-mrcheck memlock_min=8M $ADMIN" >"$PLUGIN_DROPIN"; }
collectors() { pgrep -f "admin-collect --job $1 " | wc -l; }
job_of() { squeue -h -n "$1" -o %i 2>/dev/null | head -1; }

# 1. The handoff: node2 and node3 reach node 1's collector at its own address.
plugin_load required memlock_min=8M $ADMIN
run_user srun -J ns-handoff-$$ -N3 -n3 --mr-check=memlock true
[[ $RC == 0 ]] || show_run "handoff"
e2e_admin_comment ns-handoff-$$
expect_eq "handoff: one record with all three nodes" "$AC" "mrcheck: step 0: pass on 3 nodes"

# 2. The node-pair rendezvous between two stacks (scripted stand-in ranks, the test program
# tests/unit/fake_nccl_rank.cpp, run by the test-only front end tests/doubles/probe_nccl_stand_in.cpp, which takes
# `probe nccl ... --stand-in PROG --spec0/--spec1`; the shipped mrcheck has no such options; the peer is node1's
# address).
for prog in mrcheck_fake_nccl_rank mrcheck_probe_nccl_stand_in; do
  [[ -x $MRCHECK_BUILD_DIR/tests/$prog ]] ||
    { echo "FAIL: $MRCHECK_BUILD_DIR/tests/$prog is not built (ninja $prog)"; exit 1; }
  install -m 0755 "$MRCHECK_BUILD_DIR/tests/$prog" "$E2E_INSTALL/bin/"
done
STAND_IN=(--stand-in "$E2E_INSTALL/bin/mrcheck_fake_nccl_rank" --spec0 action=pass --spec1 action=pass)
run_user srun -J ns-pair-$$ -N2 -n2 "$E2E_INSTALL/bin/mrcheck_probe_nccl_stand_in" probe nccl --mode node-pair \
  --peer "$(addr_of node1)" \
  "${STAND_IN[@]}" --timeout 20 --json
[[ $RC == 0 ]] || show_run "node-pair"
expect_eq "node-pair: it ran" "$RC" "0"
expect_eq "node-pair: two reports in node-pair mode, no verdict but pass" \
  "$(grep -c '"mode": "node-pair"' <<<"$OUT") $(grep -Ec '"verdict": "(fail|error|skip|warn)"' <<<"$OUT")" "2 0"

# 3. A node dies mid-step: every process in node3's namespace killed while the probes wait at the gate. The
# other nodes' slurmstepd must end within their bound (report_timeout + a few s) and node 0 name node3; srun
# itself waits for node3 until slurmctld gives the node up (SlurmdTimeout), which is Slurm's business: the
# test cancels the job once it has seen the steps end.
stepds_in() { # stepds_in NODE JOB: slurmstepd processes of JOB's step 0 in NODE's network namespace
  local p n=0
  for p in $(ip netns pids "$(netns_of "$1")"); do
    [[ $(tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline") == "slurmstepd: [$2.0]"* ]] && n=$((n + 1))
  done
  echo "$n"
}
gated
rm -f "$GATE"
as_user srun -J ns-dead-$$ -N3 -n3 --mr-check=memlock,mr true >/dev/null 2>&1 &
SRUN=$!
J=""
for _ in $(seq 1 200); do
  J=$(job_of ns-dead-$$)
  [[ -n $J ]] && (($(collectors "$J") >= 3)) && break
  sleep 0.05
done
NS3=$(netns_of node3)
KILLED=$(ip netns pids "$NS3" | wc -l)
ip netns pids "$NS3" | xargs -r kill -KILL 2>/dev/null || true
T0=$(date +%s)
touch "$GATE"
e2e_log "killed $KILLED processes of node3 (slurmd, slurmstepd, task, collector)"
((KILLED >= 3)) && e2e_pass "dead node: node3's processes killed" || e2e_fail "dead node: only $KILLED processes in $NS3"
LEFT=1
for _ in $(seq 1 150); do
  LEFT=$(($(stepds_in node1 "$J") + $(stepds_in node2 "$J")))
  ((LEFT == 0)) && break
  sleep 0.1
done
T1=$(date +%s)
((LEFT == 0)) && e2e_pass "dead node: node1's and node2's slurmstepd ended $((T1 - T0)) s after the gate opened" ||
  e2e_fail "dead node: $LEFT slurmstepd of the step still on node1/node2 after $((T1 - T0)) s"
scancel "$J" 2>/dev/null || true
scontrol update nodename=node3 state=down reason="admin_netns_test: killed" >/dev/null 2>&1 || true
for _ in $(seq 1 100); do kill -0 "$SRUN" 2>/dev/null || break; sleep 0.1; done
kill "$SRUN" 2>/dev/null || true
wait "$SRUN" 2>/dev/null || true
e2e_admin_comment ns-dead-$$
expect_eq "dead node: the record names node3" "$AC" "mrcheck: step 0: pass on 2 nodes; no report from node3"
bash "$MRCHECK_SOURCE_DIR/tests/slurm/slurmd-restart.sh" --node node3 --no-wait "$MRCHECK_SLURM_DIR" >&2
scontrol update nodename=node3 state=resume >/dev/null 2>&1 || true
for _ in $(seq 1 150); do node_usable node3 && break; sleep 0.2; done
node_usable node3 && e2e_pass "dead node: node3 back" || e2e_fail "dead node: node3 is $(node_state node3)"

# 4. Concurrent steps of one job whose first nodes differ: 3 per node, released by the gate at one moment.
rm -f "$GATE"
cat >"$MRCHECK_SLURM_WORK/conc.$$.sh" <<EOF
#!/bin/bash
for r in 1 2 3; do
  for n in node1 node2 node3; do
    srun --overlap -N1 -n1 -w \$n --mr-check=memlock,mr true &
  done
done
wait
EOF
chmod 0755 "$MRCHECK_SLURM_WORK/conc.$$.sh"
run_user sbatch -J ns-conc-$$ -N3 -n3 -o /dev/null "$MRCHECK_SLURM_WORK/conc.$$.sh"
CJ=$(job_of ns-conc-$$)
for _ in $(seq 1 300); do
  [[ -n $CJ ]] && (($(collectors "$CJ") >= 9)) && break
  sleep 0.05
done
e2e_log "concurrent: $(collectors "$CJ") collectors waiting; gate opens"
touch "$GATE"
e2e_admin_comment ns-conc-$$
STEPS=$(grep -o 'step [0-9]*:' <<<"$AC" | sort -u | wc -l)
e2e_log "concurrent: AdminComment [$AC]"
expect_eq "concurrent: all 9 steps have their record" "$STEPS" "9"

# 5. scancel of a step before node 0 collected: its probes still wait at the gate.
rm -f "$GATE"
as_user srun -J ns-cancel-$$ -N3 -n3 --mr-check=memlock,mr true >/dev/null 2>&1 &
SRUN=$!
J=""
for _ in $(seq 1 200); do
  J=$(job_of ns-cancel-$$)
  [[ -n $J ]] && (($(collectors "$J") >= 3)) && break
  sleep 0.05
done
T0=$(date +%s)
scancel "$J.0" 2>/dev/null || true
wait "$SRUN" 2>/dev/null || true
T1=$(date +%s)
touch "$GATE"
e2e_admin_comment ns-cancel-$$
e2e_log "cancel: srun ended $((T1 - T0)) s after scancel; AdminComment [$AC]"
expect_eq "cancel: a record saying so" "$AC" "mrcheck: step 0: cancelled; no report from node1,node2,node3"
((T1 - T0 <= 12)) && e2e_pass "cancel: the step ended within its bound" || e2e_fail "cancel: took $((T1 - T0)) s"
rm -f "$GATE"

# 6. Controller RPCs of the record, one 3-node step (sdiag): one job update and two job reads (the read and
# the read back, admin_collect.cpp write_admin_comment) beyond the same step without admin_comment, and one read
# of the step's layout per node (the step's nodes as slurmctld has them, load_step_nodes).
rpc() { sdiag | awk -v m="$1" '$1 == m { for (i = 2; i <= NF; i++) if ($i ~ /^count:/) { sub(/count:/, "", $i); print $i; f = 1 } } END { if (!f) print 0 }'; }
count_step() {
  sdiag --reset >/dev/null
  run_user srun -J ns-rpc-$$ -N3 -n3 --mr-check=memlock true
  [[ $RC == 0 ]] || show_run "rpc"
  echo "$(rpc REQUEST_UPDATE_JOB) $(rpc REQUEST_JOB_INFO_SINGLE) $(rpc REQUEST_STEP_LAYOUT)"
}
plugin_load required memlock_min=8M
BASE=$(count_step)
plugin_load required memlock_min=8M $ADMIN
GOT=$(count_step)
e2e_log "figure: 3-node step, REQUEST_UPDATE_JOB REQUEST_JOB_INFO_SINGLE REQUEST_STEP_LAYOUT = $GOT (without admin_comment: $BASE)"
read -r B_UPD B_INFO B_LAYOUT <<<"$BASE"
expect_eq "rpc: one job update, two job reads and a layout read per node" "$GOT" \
  "$((B_UPD + 1)) $((B_INFO + 2)) $((B_LAYOUT + 3))"
e2e_done
