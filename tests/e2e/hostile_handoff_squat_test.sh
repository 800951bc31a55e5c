#!/bin/bash
# B8 (issue 37): a user squats node 0's admin handoff port before the step. The port is a public function of job and
# step (src/admin/handoff.cpp admin_port); on three nodes with their own network stacks (slurm-up.sh --netns), a
# listener of another unprivileged user (nobody) on node1's stack, then one of the job user started by the batch
# script itself, binds the first port of the step's sequence and answers whoever connects: nobody's with a MUNGE
# credential of its own and then "ok", the job user's with a bare "ok". node2's slurmd runs under a 4 MiB hard
# memlock (memlock_min 8 MiB), so node2's real verdict is a FAIL. The root collectors of node2 and node3 must
# refuse the squatter (a line in slurmd's log naming its address and port) and hand their records to root's
# listener on the next port: the AdminComment shows node2's FAIL and counts every node.
# Fails on the code before c37316d: the collectors took the squatter's "ok" as delivered, and the record was
# "pass on 1 node; no report from node2,node3" with no slurmd line saying why.
source "$(dirname "$0")/lib.sh"
[[ -f $MRCHECK_BUILD_DIR/spank/spank_mrcheck.so ]] || e2e_skip "spank_mrcheck.so not built"
[[ -x $MRCHECK_BUILD_DIR/prolog/mrcheck-prolog ]] || e2e_skip "mrcheck-prolog not built"
command -v python3 >/dev/null || e2e_skip "no python3 (the squatter)"
id nobody >/dev/null 2>&1 || e2e_skip "no user nobody (the other unprivileged user)"
e2e_netns_up
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
source "$MRCHECK_SOURCE_DIR/tests/slurm/lib.sh" # netns_of (resolve_dir)
resolve_dir "$MRCHECK_SLURM_DIR"
SQUAT_PID=""
cleanup() {
  [[ -n $SQUAT_PID ]] && kill "$SQUAT_PID" 2>/dev/null
  plugin_cleanup
  e2e_netns_down
}
trap cleanup EXIT
e2e_stage
(($(ulimit -H -l) >= 8192)) || e2e_skip "hard memlock here is below the 8 MiB policy"
ADMIN="admin_comment=yes admin_helper=$E2E_INSTALL/sbin/mrcheck-prolog report_timeout=2s admin_comment_max=8192"
W=$MRCHECK_SLURM_WORK

# The squatter: binds the port it is given on every address of its stack, writes "bound" to its log, then
# answers every connection after reading what the peer sends first (at most 0.5 s) and logs the peer. With a
# MUNGE socket as third argument it answers a hello alone (the fixed collector's) with "auth CRED" (a credential of
# its own uid, where the collector expects root's), then "ok" to whatever comes next; a hello with the record
# behind it (the old collector's), or with no socket given, gets a bare "ok" (what the old collector took).
cat >"$W/squat.$$.py" <<'EOF'
import socket, subprocess, sys
port, log = int(sys.argv[1]), sys.argv[2]
sock = sys.argv[3] if len(sys.argv) > 3 else ""
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.bind(("0.0.0.0", port))
s.listen(16)
with open(log, "a") as f:
    f.write("bound %d\n" % port)
while True:
    c, peer = s.accept()
    c.settimeout(0.5)
    try:
        data = c.recv(4096)
        if sock and data.count(b"\n") < 2:  # the fixed collector's hello waits for node 0's credential
            cred = subprocess.run(["munge", "-n", "-S", sock], capture_output=True).stdout.strip()
            c.sendall(b"auth " + cred + b"\n")
            c.recv(4096)
        c.sendall(b"ok\n")
    except OSError:
        pass
    c.close()
    with open(log, "a") as f:
        f.write("peer %s %d\n" % peer)
EOF
# The first port of the admin sequence of JOB.STEP (handoff.cpp admin_port: nccl_pair_port of step ^ salt).
cat >"$W/admin_port.$$.py" <<'EOF'
import sys
job, step = int(sys.argv[1]), int(sys.argv[2]) ^ 0x6D72636B61646D00
h = 1469598103934665603
for v in (job, step):
    for i in range(8):
        h ^= (v >> (8 * i)) & 0xFF
        h = (h * 1099511628211) % (1 << 64)
print(20000 + h % 9000)
EOF
chmod 0644 "$W/squat.$$.py" "$W/admin_port.$$.py"
# lines JOB: the collectors' lines of JOB in the slurmd logs.
lines() { grep -h "mrcheck: admin: job $1 " "$MRCHECK_SLURM_DIR"/log/slurmd-node*.log 2>/dev/null || true; }
wait_bound() { # wait_bound LOG: 5 s at most for the squatter's "bound"
  local _
  for _ in $(seq 1 50); do grep -q '^bound' "$1" 2>/dev/null && return 0; sleep 0.1; done
  return 1
}
# check_record WHAT LOG LINES: the squatter was asked, refused with a slurmd line naming it, node2's FAIL kept.
check_record() {
  local what=$1 sqlog=$2 lines=$3 port
  port=$(sed -n 's/^bound //p' "$sqlog")
  e2e_log "$what: AdminComment [$AC]; squatter on port $port saw $(grep -c '^peer' "$sqlog") connection(s)"
  [[ $(grep -c '^peer' "$sqlog") -ge 1 ]] && e2e_pass "$what: the collectors reached the squatter first" ||
    e2e_fail "$what: nobody connected to the squatter on port $port (the test did not squat the first port)"
  expect_contains "$what: slurmd's log names the refused listener and its port" "$lines" \
    "refused node 0 listener $(addr_of node1) port $port"
  expect_not_contains "$what: every node reported" "$AC" "no report from"
  # (the old code says "slurmstepd limit" where the new one says "slurmd limit": either is node2's verdict)
  if [[ $AC == "mrcheck: step 0: FAIL memlock=4MiB ("*" limit) on node2; pass on 2 nodes" ]]; then
    e2e_pass "$what: node2's FAIL and two passes in the record"
  else
    e2e_fail "$what: expected 'mrcheck: step 0: FAIL memlock=4MiB (... limit) on node2; pass on 2 nodes', got [$AC]"
  fi
}

addr_of() { awk -v n="$1" '$1 == n {print $3}' "$MRCHECK_SLURM_DIR/run/nodes"; }
plugin_slurmd_restart --node node2 --memlock-hard 4M
plugin_load required memlock_min=8M $ADMIN

# 1. Another user (nobody) squats from node1's network stack before the job's step starts (the job is held).
cat >"$W/b8.$$.sh" <<EOF
#!/bin/bash
srun --mr-check=memlock true
EOF
chmod 0755 "$W/b8.$$.sh"
run_user sbatch --parsable -H -J b8-other-$$ -N3 -n3 -o /dev/null "$W/b8.$$.sh"
J=${OUT%%;*}
[[ $J =~ ^[0-9]+$ ]] || { show_run "sbatch"; e2e_fail "sbatch gave no job id"; e2e_done; exit 1; }
SQLOG=$W/squat-other.$$.log
: >"$SQLOG"
chmod 0666 "$SQLOG"
ip netns exec "$(netns_of node1)" setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups -- \
  python3 "$W/squat.$$.py" "$(python3 "$W/admin_port.$$.py" "$J" 0)" "$SQLOG" "$MRCHECK_SLURM_MUNGE_SOCKET" 2>>"$SQLOG" &
SQUAT_PID=$!
wait_bound "$SQLOG" || e2e_fail "other user: the squatter did not bind: $(cat "$SQLOG")"
scontrol release "$J"
e2e_admin_comment b8-other-$$
check_record "other user" "$SQLOG" "$(lines "$J")"
kill "$SQUAT_PID" 2>/dev/null || true
wait "$SQUAT_PID" 2>/dev/null || true
SQUAT_PID=""

# 2. The job user squats from the batch script (on node1, the batch host) before its own step.
SQLOG=$W/squat-self.$$.log
: >"$SQLOG"
chmod 0666 "$SQLOG"
cat >"$W/b8self.$$.sh" <<EOF
#!/bin/bash
python3 $W/squat.$$.py \$(python3 $W/admin_port.$$.py \$SLURM_JOB_ID 0) $SQLOG 2>>$SQLOG &
for i in \$(seq 1 50); do grep -q '^bound' $SQLOG && break; sleep 0.1; done
srun --mr-check=memlock true
kill %1
EOF
chmod 0755 "$W/b8self.$$.sh"
run_user sbatch --parsable -J b8-self-$$ -N3 -n3 -o /dev/null "$W/b8self.$$.sh"
J=${OUT%%;*}
e2e_admin_comment b8-self-$$
check_record "job user" "$SQLOG" "$(lines "$J")"
e2e_done
