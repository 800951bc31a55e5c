#!/bin/bash
# B5 (issue 37): a stranger plays the other node of a job's node-pair NCCL probe. The rendezvous port is a public
# function of job and step (src/nccl/mode.cpp nccl_pair_port). On three nodes with their own network stacks
# (slurm-up.sh --netns), another unprivileged user (nobody) listens on the first port of the step's sequence on
# node1's stack before the step starts (the job is held until then) and answers the joining node: with a MUNGE
# credential of its own where the joiner sends a nonce (the fixed protocol), with "ok" where it does not (the old
# one). The step's two nodes run `probe nccl --mode node-pair` through the test-only front end with scripted fake
# ranks (tests/doubles/probe_nccl_stand_in.cpp, tests/unit/fake_nccl_rank.cpp, as admin_netns_test does): no GPU.
# They must meet each other (both pass), and the joining node must name the refused stranger.
# Fails on the code before 9b3b33d: node2 takes the stranger for its peer and waits for an NCCL id that never
# comes, node1 waits for a peer that never comes: both fail after the timeout.
source "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || e2e_skip "no python3 (the stranger)"
id nobody >/dev/null 2>&1 || e2e_skip "no user nobody (the stranger)"
for prog in mrcheck_fake_nccl_rank mrcheck_probe_nccl_stand_in; do
  [[ -x $MRCHECK_BUILD_DIR/tests/$prog ]] || { echo "FAIL: $MRCHECK_BUILD_DIR/tests/$prog is not built (ninja $prog)"; exit 1; }
done
e2e_netns_up
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
source "$MRCHECK_SOURCE_DIR/tests/slurm/lib.sh" # netns_of (resolve_dir)
resolve_dir "$MRCHECK_SLURM_DIR"
STRANGER=""
cleanup() {
  [[ -n $STRANGER ]] && kill "$STRANGER" 2>/dev/null
  plugin_cleanup
  e2e_netns_down
}
trap cleanup EXIT
e2e_stage
for prog in mrcheck_fake_nccl_rank mrcheck_probe_nccl_stand_in; do install -m 0755 "$MRCHECK_BUILD_DIR/tests/$prog" "$E2E_INSTALL/bin/"; done
rm -f "$PLUGIN_DROPIN" # the probe alone
W=$MRCHECK_SLURM_WORK
addr_of() { awk -v n="$1" '$1 == n {print $3}' "$MRCHECK_SLURM_DIR/run/nodes"; }

cat >"$W/stranger.$$.py" <<'EOF'
import socket, subprocess, sys
port, log, sock = int(sys.argv[1]), sys.argv[2], sys.argv[3]
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.bind(("0.0.0.0", port))
s.listen(16)
with open(log, "a") as f:
    f.write("bound %d\n" % port)
held = []
while True:
    c, peer = s.accept()
    c.settimeout(1.0)
    try:
        hello = c.recv(4096).decode("ascii", "replace").strip()
        if len(hello.split()) >= 4:  # the fixed joiner's hello carries its nonce: answer with our credential
            cred = subprocess.run(["munge", "-n", "-S", sock], capture_output=True).stdout.strip()
            c.sendall(b"auth " + cred + b"\n")
            c.recv(4096)
        c.sendall(b"ok\n")  # the old joiner's peer: and then nothing, as a stranger that only listens
    except OSError:
        pass
    held.append(c)
    with open(log, "a") as f:
        f.write("peer %s %d: %s\n" % (peer[0], peer[1], hello[:40]))
EOF
# The first port of the rendezvous sequence of JOB.STEP (mode.cpp nccl_pair_port, attempt 0).
cat >"$W/pair_port.$$.py" <<'EOF'
import sys
h = 1469598103934665603
for v in (int(sys.argv[1]), int(sys.argv[2])):
    for i in range(8):
        h ^= (v >> (8 * i)) & 0xFF
        h = (h * 1099511628211) % (1 << 64)
print(20000 + h % 9000)
EOF
chmod 0644 "$W/stranger.$$.py" "$W/pair_port.$$.py"
OUTF=$W/b5.$$.out
cat >"$W/b5.$$.sh" <<EOF
#!/bin/bash
srun -N2 -n2 $E2E_INSTALL/bin/mrcheck_probe_nccl_stand_in probe nccl --mode node-pair --peer $(addr_of node1) \
  --stand-in $E2E_INSTALL/bin/mrcheck_fake_nccl_rank --spec0 action=pass --spec1 action=pass --timeout 8 --json
EOF
chmod 0755 "$W/b5.$$.sh"
rm -f "$OUTF"
run_user sbatch --parsable -H -J b5-$$ -w node1,node2 -N2 -n2 -o "$OUTF" "$W/b5.$$.sh"
J=${OUT%%;*}
[[ $J =~ ^[0-9]+$ ]] || { show_run "sbatch"; e2e_fail "sbatch gave no job id"; e2e_done; exit 1; }
SLOG=$W/stranger.$$.log
: >"$SLOG"
chmod 0666 "$SLOG"
PORT=$(python3 "$W/pair_port.$$.py" "$J" 0)
ip netns exec "$(netns_of node1)" setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups -- \
  python3 "$W/stranger.$$.py" "$PORT" "$SLOG" "$MRCHECK_SLURM_MUNGE_SOCKET" 2>>"$SLOG" &
STRANGER=$!
for _ in $(seq 1 50); do grep -q '^bound' "$SLOG" && break; sleep 0.1; done
grep -q '^bound' "$SLOG" && e2e_pass "the stranger holds port $PORT on node1" || e2e_fail "the stranger did not bind: $(cat "$SLOG")"
T0=$(date +%s)
scontrol release "$J"
for _ in $(seq 1 300); do
  [[ -n $(squeue -h -j "$J" 2>/dev/null) ]] || break
  sleep 0.1
done
T1=$(date +%s)
RES=$(cat "$OUTF" 2>/dev/null || true)
e2e_log "the pair took $((T1 - T0)) s; the stranger saw: $(grep -c '^peer' "$SLOG") connection(s)"
[[ $(grep -c '^peer' "$SLOG") -ge 1 ]] && e2e_pass "the joining node reached the stranger first" ||
  e2e_fail "nobody connected to the stranger on port $PORT"
expect_eq "both nodes report node-pair, and pass" \
  "$(grep -c '"mode": "node-pair"' <<<"$RES") $(grep -Ec '"verdict": "(fail|error|skip|warn)"' <<<"$RES")" "2 0"
expect_contains "the joining node names the refused stranger" "$RES" "refused peer $(addr_of node1)"
expect_contains "... and the port it squatted" "$(grep 'refused peer' <<<"$RES" | head -1)" "$PORT"
e2e_done
