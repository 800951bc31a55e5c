#!/usr/bin/env bash
# The write-up's root cause on real kernels: a node boots bookworm's main-archive kernel (6.1), then the newer one
# (bookworm-backports) under the same user space, as an upgrade would leave it. mrcheck-prolog's stack history
# (kept in a state_dir carried across the reboot: the guest's root starts from the image at each boot) names the
# kernel change, and re-validation runs the probes on the new kernel before the next job. Its own one-guest
# cluster (MRCHECK_GUEST_DIR-kernel), mrcheck from the .deb; --dry-run with an explicit --state-dir keeps the
# history exactly as a real run (prolog/main.cpp) without a slurmctld.
source "$(dirname "$0")/lib.sh"
export MRCHECK_GUEST_DIR=${MRCHECK_GUEST_DIR:-/tmp/mrcheck-guest}-kernel
# No Slurm in this guest: the prolog runs --dry-run, and a boot without munged and slurmd is seconds shorter.
export MRCHECK_GUEST_SLURM=0
trap 'bash "$guest_sh" down >/dev/null 2>&1 || true' EXIT
kernels=$(bash "$guest_sh" kernels) || { e2e_fail "no kernels in the image: $kernels"; e2e_done; exit 1; }
main=$(sed -n 's/^main //p' <<<"$kernels")
new=$(sed -n 's/^new //p' <<<"$kernels")
e2e_log "kernels: $main -> $new"
bash "$guest_sh" up 1 || { e2e_fail "the guest did not come up"; e2e_done; exit 1; }

state=/var/lib/mrcheck-history
prolog="mrcheck-prolog --dry-run --json --state-dir $state --node node1"
on 1 "mkdir -p -m 0700 $state && $prolog"
expect_eq "main kernel: booted" "$(json_get 'j["stack"]["items"]["kernel"]')" "$main"
expect_eq "main kernel: first run, no history yet" "$(json_get 'j["history"]["state"]')" "no history yet"
on 1 "tar -C /var/lib -czf - mrcheck-history | base64 -w0"
saved=$out

bash "$guest_sh" reboot 1 new || { e2e_fail "the guest did not boot on $new"; e2e_done; exit 1; }
# First on the new kernel under the 8 MiB RLIMIT_MEMLOCK the kernel gives PID 1's children (a slurmd without
# LimitMEMLOCK=infinity): the re-validation's registration probe fails, and the node would drain naming the change.
on 1 "base64 -d <<<'$saved' | tar -C /var/lib -xzf - && $prolog"
expect_eq "new kernel: booted" "$(json_get 'j["stack"]["items"]["kernel"]')" "$new"
expect_eq "new kernel: the history saw a change" "$(json_get 'j["history"]["state"]')" changed
changes=$(json_get '" | ".join(c["line"] for c in j["history"]["changes"])')
e2e_log "changes: $changes"
expect_contains "the change names the kernel" "$changes" "mrcheck: changed: kernel $main -> $new"
expect_contains "the change names ib_core" "$changes" "mrcheck: changed: ib_core $main (inbox) -> $new (inbox)"
expect_contains "the change names rdma_rxe" "$changes" "mrcheck: changed: rdma_rxe $main (inbox) -> $new (inbox)"
expect_eq "8 MiB: re-validation ran" "$(json_get '[c["verdict"] for c in j["checks"] if c["id"]=="revalidate"]')" "['fail']"
expect_contains "8 MiB: the registration probe's memlock failure" "$(json_get 'j["history"]["revalidated"]["reason"]')" \
  "mr_host: rxe0: ibv_reg_mr_iova2 of"
expect_eq "8 MiB: the node would drain" "$(json_get 'j["action"]["want"]')" drain
reason=$(json_get 'j["action"]["reason"]')
e2e_log "drain reason: $reason"
expect_contains "8 MiB: the drain reason names the change" "$reason" "$new"

# Then as a slurmd with LimitMEMLOCK=infinity: tried again, passes, and the pass is recorded.
on 1 "prlimit --memlock=unlimited:unlimited $prolog"
expect_eq "unlimited: re-validation tried again and passed" \
  "$(json_get '[c["verdict"] for c in j["checks"] if c["id"]=="revalidate"]')" "['pass']"
expect_eq "unlimited: the pass recorded" "$(json_get 'j["history"]["revalidated"]["verdict"]')" pass
expect_eq "unlimited: the node would not drain" "$(json_get 'j["action"]["want"]')" resume
on 1 "prlimit --memlock=unlimited:unlimited $prolog"
expect_eq "after the pass: not repeated" "$(json_get '[c["id"] for c in j["checks"] if c["id"]=="revalidate"]')" "[]"
e2e_done
