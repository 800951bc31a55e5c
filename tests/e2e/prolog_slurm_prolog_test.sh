#!/bin/bash
# mrcheck-prolog as the cluster's real Prolog= (run by slurmd at job launch, node name from SLURMD_NODENAME):
# a misaligned node is drained with mrcheck's reason - Slurm keeps it, it does not overwrite it with
# "Prolog error" - and the job is requeued held instead of failing; an aligned node runs the job.
# Restores slurm.conf (Prolog removed) and resumes the node on exit.
source "$(dirname "$0")/lib.sh"

[[ "$(id -u)" == 0 ]] || e2e_skip "needs root"
[[ -x $MRCHECK_BUILD_DIR/prolog/mrcheck-prolog ]] || e2e_skip "mrcheck-prolog not built"
e2e_slurm_up
# Only the prolog is needed (e2e_stage would also want the CLI and the plugin).
E2E_INSTALL=$MRCHECK_SLURM_DIR/install
mkdir -p "$E2E_INSTALL/sbin"
install -m 0755 "$MRCHECK_BUILD_DIR/prolog/mrcheck-prolog" "$E2E_INSTALL/sbin/mrcheck-prolog"
node=${MRCHECK_SLURM_NODES%%,*}
conf_set=$MRCHECK_SOURCE_DIR/tests/slurm/slurm-conf-set.sh
# slurmd runs the Prolog with no arguments: a root-owned wrapper picks the fixture.
wrapper=$E2E_INSTALL/sbin/mrcheck-prolog-e2e.sh
state=$(mktemp -d /tmp/mrcheck-prolog-e2e.XXXXXX)
jobs=()

node_reason() { scontrol show node "$node" | sed -n 's/^ *Reason=\(.*\) \[[^]]*\]$/\1/p'; }
node_state() { sinfo -h -N -n "$node" -o '%T' | head -n1; }
resume_node() {
  scontrol update nodename="$node" state=resume >/dev/null 2>&1 || true
  local _
  for _ in $(seq 1 50); do
    case "$(node_state)" in idle | mixed | allocated | completing) return 0 ;; esac
    sleep 0.2
  done
}
cleanup() {
  local j
  for j in "${jobs[@]}"; do scancel "$j" >/dev/null 2>&1 || true; done
  local _
  for _ in 1 2 3; do
    bash "$conf_set" Prolog '' >/dev/null 2>&1 && break
    sleep 2
  done
  grep -qi '^Prolog=' "$SLURM_CONF" && e2e_log "WARNING: could not remove Prolog= from $SLURM_CONF"
  resume_node
  rm -rf "$state" "$wrapper"
}
trap cleanup EXIT

use_fixture() {
  cat >"$wrapper" <<EOF
#!/bin/bash
exec $E2E_INSTALL/sbin/mrcheck-prolog --root $MRCHECK_SOURCE_DIR/tests/fixtures/$1 --rules $MRCHECK_SOURCE_DIR/etc/mrcheck-rules.conf --state-dir $state
EOF
  chmod 0755 "$wrapper"
}

job_state() { squeue -h -j "$1" -o '%T %r' 2>/dev/null; }
wait_for() {  # wait_for SECONDS CMD...
  local limit=$1
  shift
  for _ in $(seq 1 $((limit * 5))); do
    "$@" && return 0
    sleep 0.2
  done
  return 1
}

resume_node
use_fixture matrix_hca_fw_old
bash "$conf_set" Prolog "$wrapper" >/dev/null
cd "$MRCHECK_SLURM_WORK" || exit 1
job=$($MRCHECK_AS_USER sbatch --parsable -N1 -w "$node" -o /dev/null --wrap true)
jobs+=("$job")
requeued() { [[ "$(job_state "$job")" == *"held"* ]]; }
if wait_for 30 requeued; then e2e_pass "misaligned: job requeued held ($(job_state "$job"))"; else e2e_fail "misaligned: job state '$(job_state "$job")'"; fi
expect_eq "misaligned: Slurm kept mrcheck's reason" "$(node_reason)" "mrcheck: hca_fw mlx5_0 (node): ConnectX-7 fw 28.33.0800 < 28.35.1012"
expect_contains "misaligned: node drained" "$(node_state)" "drain"
scancel "$job"

# Fixed node: the HealthCheck-style run resumes it, and a job passes the Prolog and completes.
use_fixture matrix_aligned
out=$("$E2E_INSTALL/sbin/mrcheck-prolog" --root "$MRCHECK_SOURCE_DIR/tests/fixtures/matrix_aligned" \
  --rules "$MRCHECK_SOURCE_DIR/etc/mrcheck-rules.conf" --state-dir "$state" --node "$node" --mode healthcheck 2>&1)
expect_contains "aligned: healthcheck resumes" "$out" "resumed node $node"
job=$($MRCHECK_AS_USER sbatch --parsable -N1 -w "$node" -o /dev/null --wrap true)
jobs+=("$job")
finished() { [[ -z "$(job_state "$job")" ]]; }
if wait_for 60 finished; then e2e_pass "aligned: job ran through the Prolog"; else e2e_fail "aligned: job state '$(job_state "$job")'"; fi
# slurmdbd records the end a moment after the job leaves squeue: wait for a final state, then assert it.
acct_state() { sacct -n -X -j "$job" -o State%20 2>/dev/null | tr -d ' ' | head -n1; }
acct_final() { [[ -n "$(acct_state)" && "$(acct_state)" != RUNNING && "$(acct_state)" != PENDING ]]; }
wait_for 30 acct_final || true
expect_eq "aligned: job completed" "$(acct_state)" "COMPLETED"
expect_eq "aligned: node not drained" "$(node_reason)" ""
e2e_done
