#!/bin/bash
# mrcheck-prolog drains only for what the node fixes (docs/drain-reasons.md, owner): a fail of the node's stack
# drains with `(node)`; a fail the site fixes (propagate_limits: slurm.conf) leaves the node usable, the prolog
# exits 0, unless mrcheck.conf says drain_site=yes (then `(site)`). The node is resumed after each case.
source "$(dirname "$0")/lib.sh"

prolog=$MRCHECK_BUILD_DIR/prolog/mrcheck-prolog
[[ -x $prolog ]] || e2e_skip "mrcheck-prolog not built ($prolog)"
[[ "$(id -u)" == 0 ]] || e2e_skip "needs root (slurm_update_node as SlurmUser/root)"
e2e_slurm_up
node=${MRCHECK_SLURM_NODES%%,*}
fixtures=$MRCHECK_SOURCE_DIR/tests/fixtures
work=$(mktemp -d /tmp/mrcheck-prolog-owner.XXXXXX)  # root-owned 0700, as state_dir must be
chmod 0700 "$work"
mkdir -m 0700 "$work/state"

node_reason() { e2e_node_reason "$node"; }
node_usable() { e2e_node_usable "$node"; }
resume_node() { e2e_resume_node "$node"; }
cleanup() {
  resume_node
  rm -rf "$work"
}
trap cleanup EXIT

# The aligned tree with slurm.conf propagating MEMLOCK, and rules that make that a fail.
cp -a "$fixtures/matrix_aligned" "$work/site_tree"
echo "ClusterName=fixture" >"$work/site_tree/etc/slurm/slurm.conf"
sed 's/^propagate_limits .*/propagate_limits fail/' "$MRCHECK_SOURCE_DIR/etc/mrcheck-rules.conf" >"$work/rules.conf"
grep -q '^propagate_limits fail' "$work/rules.conf" || e2e_fail "rules: propagate_limits line not found"
: >"$work/default.conf"
echo "drain_site=yes" >"$work/drain_site.conf"
run_prolog() {  # run_prolog TREE CONFIG: sets out, rc
  set +e
  rm -f "$work/state/history-$node.json"
  out=$("$prolog" --root "$1" --config "$2" --node "$node" --state-dir "$work/state" --rules "$work/rules.conf" \
    --mode prolog 2>&1)
  rc=$?
  set -e
}

resume_node
run_prolog "$work/site_tree" "$work/default.conf"
e2e_log "site fail, default: rc=$rc"$'\n'"$out"
expect_contains "site fail: reported" "$out" "mrcheck: propagate_limits: FAIL: MEMLOCK propagated from the submit host"
expect_eq "site fail: the prolog passes the job" "$rc" "0"
expect_eq "site fail: no reason" "$(node_reason)" ""
expect_eq "site fail: node usable" "$(node_usable)" "usable"

run_prolog "$work/site_tree" "$work/drain_site.conf"
e2e_log "site fail, drain_site=yes: rc=$rc"$'\n'"$out"
expect_eq "drain_site=yes: the prolog fails" "$rc" "1"
expect_eq "drain_site=yes: reason with (site)" "$(node_reason)" \
  "mrcheck: propagate_limits (site): MEMLOCK propagated from the submit host (PropagateResourceLimits unset (default ALL))"
resume_node

run_prolog "$fixtures/matrix_hca_fw_old" "$work/default.conf"
expect_eq "node fail: the prolog fails" "$rc" "1"
expect_eq "node fail: reason with (node)" "$(node_reason)" \
  "mrcheck: hca_fw mlx5_0 (node): ConnectX-7 fw 28.33.0800 < 28.35.1012"
resume_node
expect_eq "node ends usable" "$(node_usable)" "usable"
e2e_done
