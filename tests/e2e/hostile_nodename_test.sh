#!/bin/bash
# B6 (issue 37): the job's SLURMD_NODENAME must not pick whose slurmd root reads. On three nodes (slurm-up.sh --netns:
# one slurmd each, SlurmdPidFile .../slurmd-%n.pid), node2's slurmd runs under a 4 MiB hard memlock and the others
# under 8 MiB (memlock_min 8 MiB): node2's steps fail, and the cause is node2's slurmd. Root fills %n from the
# node's real name, so the verdict and the record must name node2's slurmd (its pid) when
#   - the user's srun exports SLURMD_NODENAME=node3 (an attacker choosing another node's slurmd), and
#   - an srun inside sbatch runs on node2 while the batch host is node1 (every such srun carries the batch host's
#     name: the misfire without an attacker).
# Fails on the code before 84452dd: %n came from the job's environment, root read node3's (node1's) slurmd, found
# 8 MiB there, and blamed slurmstepd ("FAIL memlock=4MiB (slurmstepd limit)", no slurmd in the cause).
source "$(dirname "$0")/lib.sh"
[[ -f $MRCHECK_BUILD_DIR/spank/spank_mrcheck.so ]] || e2e_skip "spank_mrcheck.so not built"
[[ -x $MRCHECK_BUILD_DIR/prolog/mrcheck-prolog ]] || e2e_skip "mrcheck-prolog not built"
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
W=$MRCHECK_SLURM_WORK
plugin_slurmd_restart --node node2 --memlock-hard 4M
plugin_load required memlock_min=8M $ADMIN
P2=$(cat "$MRCHECK_SLURM_DIR/run/slurmd-node2.pid")
CAUSE="lowered at slurmd: slurmd pid $P2 on node2 runs with hard 4 MiB"

# 1. The user's srun exports SLURMD_NODENAME=node3 (srun exports the whole environment by default).
run_user env SLURMD_NODENAME=node3 srun -J b6-env-$$ -w node2 -N1 -n1 --mr-check=memlock true
[[ $RC != 0 ]] && e2e_pass "job's node3: the step fails (node2's limit)" || { show_run "env"; e2e_fail "job's node3: the step should fail"; }
expect_contains "job's node3: the verdict names node2's slurmd and its pid" "$ERR" "$CAUSE"
expect_not_contains "job's node3: no other node's slurmd in the verdict" "$ERR" "on node3"
e2e_admin_comment b6-env-$$
expect_eq "job's node3: the record blames node2's slurmd" "$AC" "mrcheck: step 0: FAIL memlock=4MiB (slurmd limit) on node2"

# 2. srun inside sbatch: the batch host is node1, the step runs on node2 only.
cat >"$W/b6.$$.sh" <<EOF
#!/bin/bash
echo "batch host \$SLURMD_NODENAME"
srun -N1 -n1 -w node2 --mr-check=memlock true
EOF
chmod 0755 "$W/b6.$$.sh"
rm -f "$W/b6.$$.out"
run_user sbatch --wait -J b6-batch-$$ -w node1,node2 -N2 -n2 -o "$W/b6.$$.out" "$W/b6.$$.sh"
BOUT=$(cat "$W/b6.$$.out" 2>/dev/null || true)
expect_contains "batch: the batch host is node1" "$BOUT" "batch host node1"
expect_contains "batch: the verdict names node2's slurmd and its pid" "$BOUT" "$CAUSE"
e2e_admin_comment b6-batch-$$
expect_eq "batch: the record blames node2's slurmd" "$AC" "mrcheck: step 0: FAIL memlock=4MiB (slurmd limit) on node2"
e2e_done
