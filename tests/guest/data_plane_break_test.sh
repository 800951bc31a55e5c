#!/usr/bin/env bash
# The data-plane probe between two real kernels, broken four ways, each judged by the verdicts of both nodes. The
# probe runs as the job user would get it from the plugin, but started on each guest by hand with the variables
# of a two-node step (so a broken network never stalls the guests' Slurm); node1 sends and writes (pair 0,
# "serve"), node2 echoes and checks:
#   - a firewall on node2 dropping RoCE v2 (nftables, UDP 4791): node1's send ends IBV_WC_RETRY_EXC_ERR, node2
#     names what node1 said;
#   - node2's NIC at MTU 9000 against node1's 1500: the pair passes at the smaller MTU (as NCCL), and warns;
#   - node2's link down: node2's port is DOWN, node1 names node2 as never come;
#   - node2 on a munged of another key: the meeting is refused on both nodes, naming MUNGE, nothing connects;
#   - node2's IPv4 address removed (an admin's botched netplan): the kernel keeps only the link-local fe80:: GID
#     (a loopback over it passes), node2 fails at its GID naming the netdev without an address, the pair cannot
#     meet (node2 has no route to node1), node1 names node2 as never come.
source "$(dirname "$0")/lib.sh"
# The NIC under node2's rxe0 (the initramfs names it ens3), and its address.
on 2 "rdma link show rxe0/1 | sed -n 's/.* netdev \([^ ]*\).*/\1/p'"
nic=$out
[[ -n $nic ]] || { e2e_fail "node2: no netdev under rxe0: $err"; e2e_done; exit 1; }
on 2 "ip -4 -o addr show dev $nic | awk '{ print \$4 }'"
addr=$out
[[ $addr == 10.77.0.2/24 ]] || { e2e_fail "node2: $nic has address [$addr], not 10.77.0.2/24"; e2e_done; exit 1; }
restore="nft delete table inet mrcheck_drop 2>/dev/null; ip link set $nic mtu 1500; ip link set $nic up;
  ip -4 addr show dev $nic | grep -q inet || ip addr add $addr dev $nic;
  [ -f /tmp/m2/pid ] && kill \$(cat /tmp/m2/pid); rm -rf /tmp/m2; true"
trap 'on 2 "$restore"' EXIT
tmp=$(mktemp -d)
job=900001

# pair SETUP [NODE2_ENV [WAIT]]: SETUP (root) then the probe on node2, and the probe on node1 at the same time,
# for a step of node[1-2] (a fresh job id each time), small (4 KiB, 8 messages: Soft-RoCE under TCG is slow) and
# with WAIT (600 ms) per completion (twice that between the nodes), so a pair waits 6 WAIT (3.6 s) for its peer. What the verdicts say is in F1[...] and F2[...] (fields below), SETUP's status in $setup_rc.
declare -A F1 F2
pair() {
  local n cmd pids=()
  job=$((job + 1))
  for n in 1 2; do
    cmd=$(as_user unlimited SLURM_JOB_ID=$job SLURM_STEP_ID=0 SLURM_NODEID=$((n - 1)) SLURM_STEP_NODELIST='node[1-2]' \
      "$([[ $n == 2 ]] && echo "${2:-}")" mrcheck probe rdma --json --sizes 4K --iters 8 --wait "${3:-600ms}")
    [[ $n == 1 ]] || cmd="{ $1 ; } >&2; echo \"setup_rc \$?\" >&2; $cmd"
    bash "$guest_sh" run "$n" "$cmd" >"$tmp/out$n" 2>"$tmp/err$n" &
    pids+=($!)
  done
  wait "${pids[@]}" || true
  setup_rc=$(sed -n 's/^setup_rc //p' "$tmp/err2")
  local key value
  for n in 1 2; do
    local -n f=F$n
    f=()
    while IFS=$'\t' read -r key value; do f[$key]=$value; done < <(python3 -c '
import json, sys
try:
    j = json.load(open(sys.argv[1]))
except Exception as e:
    print("verdict\t<bad json: %s>" % e); sys.exit()
c, p = j["checks"][0], (j["probe"].get("pairs") or [{}])[0]
for k, v in [("verdict", j["verdict"]), ("summary", c["summary"]), ("hint", c.get("hint", "")),
             ("port_ok", j["probe"]["ports"][0]["ok"]), ("cause", p.get("cause")), ("step", p.get("step")),
             ("wc", p.get("wc_status")), ("message", p.get("message")), ("pair_ok", p.get("ok")),
             ("mtu", p.get("mtu")), ("verified", all(s["verified"] for s in p.get("sizes", [{"verified": 0}])))]:
    print("%s\t%s" % (k, str(v).replace("\n", " ")))' "$tmp/out$n")
  done
}

t0=$SECONDS
# rxe's 7 retries of 67 ms take more than a second under TCG: 2 s waits (4 s between the nodes) for this one.
pair "nft add table inet mrcheck_drop && nft add chain inet mrcheck_drop in '{ type filter hook input priority 0; }' &&
  nft add rule inet mrcheck_drop in udp dport 4791 drop" "" 2s
expect_eq "firewall: nftables drops UDP 4791 on node2" "$setup_rc" 0
expect_eq "firewall: node1 fails" "${F1[verdict]}" fail
expect_eq "firewall: node1's send gets no acknowledgement" "${F1[wc]}" IBV_WC_RETRY_EXC_ERR
expect_contains "firewall: node1's verdict names the pair, the step and the status" "${F1[summary]}" \
  "RDMA between nodes: pair 0 with node2 on rxe0:1: completion: the send (4096 bytes) completed with IBV_WC_RETRY_EXC_ERR"
expect_contains "firewall: the fix names UDP 4791" "${F1[hint]}" "UDP port 4791"
expect_contains "firewall: node2 names what node1 said" "${F2[message]}" "(node1 said: completion: "
expect_eq "firewall: node2's own loopback still passes" "${F2[port_ok]}" True
e2e_log "firewall case: $((SECONDS - t0)) s"

t0=$SECONDS
pair "nft delete table inet mrcheck_drop && ip link set $nic mtu 9000"
expect_eq "mtu: node2's NIC at 9000" "$setup_rc" 0
expect_eq "mtu: node1 warns" "${F1[verdict]}" warn
expect_contains "mtu: node1 names both MTUs" "${F1[summary]}" \
  "MTU mismatch: this node's rxe0:1 has active MTU 1024, node2's 4096: the pair (and NCCL) runs at 1024"
expect_eq "mtu: every byte verified at 1024" "${F1[pair_ok]} ${F1[mtu]} ${F1[verified]}" "True 1024 True"
expect_eq "mtu: node2 warns too" "${F2[verdict]}" warn
e2e_log "mtu case: $((SECONDS - t0)) s"

t0=$SECONDS
pair "ip link set $nic mtu 1500 && ip link set $nic down"
expect_eq "link down: node2's NIC down" "$setup_rc" 0
expect_eq "link down: node2 fails" "${F2[verdict]}" fail
expect_contains "link down: node2's port is DOWN" "${F2[summary]}" "rxe0 port 1: port: rxe0 port 1 is DOWN"
expect_eq "link down: node2 has no route to node1" "${F2[cause]}" no_route
expect_eq "link down: node1 fails" "${F1[verdict]}" fail
expect_eq "link down: node1 names node2 as never come" "${F1[cause]}" no_peer
expect_contains "link down: node1's verdict names node2" "${F1[summary]}" \
  "RDMA between nodes: pair 0 with node2 on rxe0:1: connect: node2's probe never came"
e2e_log "link-down case: $((SECONDS - t0)) s"

t0=$SECONDS
# A second munged on node2 with a key of its own (the cluster's munged stays, so Slurm is unharmed).
pair "ip link set $nic up && mkdir -p /tmp/m2 && chown munge:munge /tmp/m2 &&
  dd if=/dev/urandom of=/tmp/m2/key bs=1024 count=1 2>/dev/null && chown munge:munge /tmp/m2/key &&
  chmod 0400 /tmp/m2/key && setpriv --reuid=munge --regid=munge --init-groups munged --force \
  --socket=/tmp/m2/sock --key-file=/tmp/m2/key --pid-file=/tmp/m2/pid --log-file=/tmp/m2/log \
  --seed-file=/tmp/m2/seed && chmod 0755 /tmp/m2 &&
  for i in \$(seq 50); do ibv_devinfo -d rxe0 | grep -q PORT_ACTIVE && break; sleep 0.1; done" \
  MRCHECK_MUNGE_SOCKET=/tmp/m2/sock
expect_eq "munge: link up, a munged of another key on node2" "$setup_rc" 0
for n in 1 2; do
  declare -n f=F$n
  expect_eq "munge: node$n fails" "${f[verdict]}" fail
  expect_eq "munge: node$n's pair refused at the meeting" "${f[cause]} ${f[step]}" "auth connect"
  expect_contains "munge: node$n names MUNGE" "${f[summary]}" "the MUNGE-authenticated meeting with node$((3 - n)) failed"
  unset -n f
done
# node2 cannot open node1's credential (another key) and refuses it; node1 hears that refusal.
expect_contains "munge: node2 names munged's refusal" "${F2[message]}" "refused credential"
expect_contains "munge: node1 names node2's refusal" "${F1[message]}" "refused peer 10.77.0.2 port"
e2e_log "munge case: $((SECONDS - t0)) s"

t0=$SECONDS
# rxe's GID table follows the netdev's addresses (the kernel's netdev events): wait until the IPv4 GID is gone.
pair "ip -4 addr flush dev $nic && for i in \$(seq 50); do grep -q 0000:ffff: /sys/class/infiniband/rxe0/ports/1/gids/[0-9] || break;
  sleep 0.1; done && ! grep -q 0000:ffff: /sys/class/infiniband/rxe0/ports/1/gids/[0-9]"
expect_eq "address removed: node2's IPv4 gone from $nic and from rxe0's GIDs" "$setup_rc" 0
expect_eq "address removed: node2 fails" "${F2[verdict]}" fail
expect_eq "address removed: node2's port fails" "${F2[port_ok]}" False
expect_contains "address removed: node2 names its netdev without an address, and the GID left" "${F2[summary]}" \
  "rxe0 port 1: gid: rxe0 port 1 has no RoCE GID with an IP address: its network device $nic has no IPv4 (nor global IPv6) address, only the link-local GID 0 fe80::5054:ff:fe77:2 (RoCE v2)"
expect_contains "address removed: the fix gives the netdev an address" "${F2[hint]}" \
  "give the port's network device an IP address"
expect_eq "address removed: node2 cannot reach node1 to meet" "${F2[cause]} ${F2[step]}" "no_route connect"
expect_eq "address removed: node1 fails" "${F1[verdict]}" fail
expect_eq "address removed: node1's own port passes" "${F1[port_ok]}" True
expect_contains "address removed: node1 names node2 as never come" "${F1[summary]}" \
  "RDMA between nodes: pair 0 with node2 on rxe0:1: connect: node2's probe never came"
on 2 "$restore"
# slurmctld may have missed node2 meanwhile (a ping every 40 s): the tests after this one need it idle.
for _ in $(seq 1 60); do
  on 1 "sinfo -h -N -n node2 -o %T"
  [[ $out != idle ]] || break
  sleep 1
done
expect_eq "address removed: node2 idle in Slurm once its address is back" "$out" idle
e2e_log "address-removed case: $((SECONDS - t0)) s"
rm -rf "$tmp"
e2e_done
