#!/usr/bin/env bash
# mrcheck-prolog judging a real rxe node of the guests' Slurm and draining it through slurmctld on node1, as
# slurmd's HealthCheckProgram would run it (root, slurmd's RLIMIT_MEMLOCK unlimited), with a state_dir of its own:
#   - healthy: passes, node2 stays idle, its stack history starts;
#   - Soft-RoCE's user-space provider gone (librxe, as a partial rdma-core upgrade leaves a node): rdma_stack fails,
#     node2 is drained with a reason of docs/drain-reasons.md's grammar naming the check, the owner and the change;
#   - the provider back: the history sees the change, re-validation runs the probes on rxe0 and passes, and
#     mrcheck resumes node2.
source "$(dirname "$0")/lib.sh"
provider=/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so
state=/var/lib/mrcheck-drain-test
prolog="prlimit --memlock=unlimited:unlimited mrcheck-prolog --mode healthcheck --node node2 --state-dir $state"
trap 'on 2 "[ -e $provider ] || mv /root/librxe-rdmav34.so $provider; rm -rf $state"
  on 1 "scontrol update nodename=node2 state=resume 2>/dev/null"' EXIT
# docs/drain-reasons.md: group 1 the check, 6 the owner, 7 the text.
grammar='^mrcheck: ([a-z0-9_]{1,32})( ([^ :(][^ :]*(:[^ :]+)*))?( \((job|node|site)\))?: ([ -~]*)$'
reason() { on 1 "scontrol show node node2 | sed -n 's/^ *Reason=\(.*\) \[[^]]*\]\$/\1/p'"; }
node_state() { on 1 "sinfo -h -N -n node2 -o %T"; }

on 2 "rm -rf $state && mkdir -m 0700 $state && $prolog"
expect_eq "healthy: exit 0" "$rc" 0
expect_contains "healthy: the history starts" "$err" "stack history: no history yet for node2"
node_state
expect_eq "healthy: node2 idle" "$out" idle

on 2 "mv $provider /root/ && $prolog"
expect_contains "no librxe: rdma_stack fails on rxe0" "$err" \
  "mrcheck: rdma_stack: FAIL: rxe0 (rxe) has no rdma-core provider librxe in user space"
expect_contains "no librxe: drained through slurmctld" "$err" "drained node node2: mrcheck: rdma_stack (node): "
node_state
expect_eq "no librxe: node2 drained" "$out" drained
reason
e2e_log "drain reason: $out"
if [[ $out =~ $grammar ]]; then
  e2e_pass "no librxe: the reason has the documented grammar"
  expect_eq "no librxe: the reason's check" "${BASH_REMATCH[1]}" rdma_stack
  expect_eq "no librxe: the reason's owner" "${BASH_REMATCH[6]}" node
  expect_contains "no librxe: the reason names the change" "${BASH_REMATCH[7]}" "verbs_providers -rxe since "
  # The change in few words, so the cause the prolog printed fits the 200 bytes (it was two provider lists, cut).
  expect_contains "no librxe: the reason names the cause" "${BASH_REMATCH[7]}" \
    "rxe0 (rxe) has no rdma-core provider librxe in user space"
else
  e2e_fail "no librxe: the reason [$out] does not match $grammar"
fi

on 2 "mv /root/librxe-rdmav34.so $provider && $prolog"
expect_contains "librxe back: re-validated on rxe0" "$err" "revalidate: probe mr: pass; probe nccl: skip; probe rdma: pass"
expect_contains "librxe back: resumed" "$err" "resumed node node2 (was: mrcheck: rdma_stack (node): "
reason
expect_eq "librxe back: no reason left" "$out" ""
for _ in $(seq 1 20); do
  node_state
  [[ $out != idle ]] || break
  sleep 1
done
expect_eq "librxe back: node2 idle again" "$out" idle
e2e_done
