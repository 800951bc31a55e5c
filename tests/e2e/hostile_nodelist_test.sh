#!/bin/bash
# A job user's srun that lies about the step's nodes, against the admins' record (admin_comment=yes). srun is the
# user's program: tests/spank/hostile_srun.c, LD_PRELOAD into it, makes the launch send a node list of the user's
# choosing, which the tasks see as SLURM_STEP_NODELIST (and SLURM_JOB_NODELIST). The root collectors must take the
# step's nodes from slurmctld and their addresses from slurm.conf: on three nodes with their own network stack
# (slurm-up.sh --netns; node 0 reachable only at its own address), the record of a step whose list says
# "attacker-PID" (a name that resolves nowhere) and whose node3 is really bad (slurmd under a 4 MiB hard limit,
# memlock_min 8 MiB) must name node3 and count the other two, and no collector may look the user's name up.
# Fails on the code that read the job's SLURM_STEP_NODELIST: "pass on 1 node; no report from node index
# 1,node index 2", and slurmd's log shows the collectors resolving attacker-PID as root.
source "$(dirname "$0")/lib.sh"
[[ -f $MRCHECK_BUILD_DIR/spank/spank_mrcheck.so ]] || e2e_skip "spank_mrcheck.so not built"
[[ -x $MRCHECK_BUILD_DIR/prolog/mrcheck-prolog ]] || e2e_skip "mrcheck-prolog not built"
[[ -n $(find "$MRCHECK_BUILD_DIR" -name hostile_srun.so -path '*fakes*' 2>/dev/null) ]] ||
  { echo "FAIL: hostile_srun.so is not built (ninja hostile_srun)"; exit 1; }
e2e_netns_up
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
cleanup() {
  plugin_cleanup
  e2e_netns_down
}
trap cleanup EXIT
e2e_stage
(($(ulimit -H -l) >= 8192)) || e2e_skip "hard memlock here is below the 8 MiB policy"
ADMIN="admin_comment=yes admin_helper=$E2E_INSTALL/sbin/mrcheck-prolog report_timeout=2s admin_comment_max=8192"
LIAR="LD_PRELOAD=$E2E_INSTALL/lib/fake/hostile_srun.so"
EVIL=attacker-$$
log_lines() { cat "$MRCHECK_SLURM_DIR"/log/slurmd-node*.log 2>/dev/null | wc -l; }

# The lie reaches the job (no plugin loaded): every task sees the user's list, not the step's.
rm -f "$PLUGIN_DROPIN"
run_user env "$LIAR" HOSTILE_NODELIST="$EVIL" srun -J nl-env-$$ -N3 -n3 printenv SLURM_STEP_NODELIST
expect_eq "the lie: every task's SLURM_STEP_NODELIST is the user's" "$(sort -u <<<"$OUT")" "$EVIL"

plugin_slurmd_restart --node node3 --memlock-hard 4M
plugin_load required memlock_min=8M $ADMIN

# The record of a lied-about step is the record of the step.
BEFORE=$(log_lines)
T0=$(date +%s%N)
run_user env "$LIAR" HOSTILE_NODELIST="$EVIL" srun -J nl-lie-$$ -N3 -n3 --mr-check=memlock true
T1=$(date +%s%N)
[[ $RC != 0 ]] && e2e_pass "lie: the step fails (node3's limit)" || { show_run "lie"; e2e_fail "lie: the step should fail"; }
e2e_admin_comment nl-lie-$$
e2e_log "figure: the 3-node step took $(((T1 - T0) / 1000000)) ms; AdminComment [$AC]"
expect_eq "lie: one record naming node3 and counting the other two" "$AC" \
  "mrcheck: step 0: FAIL memlock=4MiB (slurmd limit) on node3; pass on 2 nodes"
NEW=$(cat "$MRCHECK_SLURM_DIR"/log/slurmd-node*.log 2>/dev/null | tail -n +$((BEFORE + 1)) | grep 'mrcheck: admin' || true)
expect_not_contains "lie: no collector looked up the user's name" "$NEW" "$EVIL"
expect_not_contains "lie: every node handed its record in" "$NEW" "admin handoff"

# A list naming the step's own nodes in another order: the names in the record are still slurmctld's.
run_user env "$LIAR" HOSTILE_NODELIST=node3,node2,node1 srun -J nl-order-$$ -N3 -n3 --mr-check=memlock true
e2e_admin_comment nl-order-$$
expect_eq "reordered: node3 is still node3" "$AC" "mrcheck: step 0: FAIL memlock=4MiB (slurmd limit) on node3; pass on 2 nodes"
e2e_done
