#!/usr/bin/env bash
# `mrcheck probe mr` from the installed .deb on a real kernel (a guest's rdma_rxe, scripts/guest.sh), as the
# unprivileged user mrtest: the kernel's own answers, not the fake libibverbs of tests/e2e/probe_cli_test.sh.
#   - the limit raised: the registration of NCCL's estimate passes;
#   - under an 8 MiB memlock limit: the kernel's ENOMEM, diagnosed as memlock with both numbers;
#   - DMA-BUF: rxe has no ibv_reg_dmabuf_mr (EOPNOTSUPP), judged as no DMA-BUF on this device, not a failure;
#   - an unmapped address: the kernel's EFAULT (tests/guest/reg_mr.c), which the probe never causes itself.
source "$(dirname "$0")/lib.sh"

on 1 "$(as_user unlimited mrcheck probe mr --json)"
expect_eq "limit raised: exit 0" "$rc" 0
expect_eq "limit raised: mr_host pass" "$(json_get '[c["verdict"] for c in j["checks"] if c["id"]=="mr_host"][0]')" pass
expect_contains "limit raised: the device is rxe0" "$out" '"rxe0"'
dmabuf_verdict=$(json_get '[c["verdict"] for c in j["checks"] if c["id"]=="dmabuf"][0]')
dmabuf_summary=$(json_get '[c["summary"] for c in j["checks"] if c["id"]=="dmabuf"][0]')
expect_eq "DMA-BUF on rxe: not a failure" "$([[ $dmabuf_verdict == pass || $dmabuf_verdict == warn || $dmabuf_verdict == skip ]] && echo ok || echo "$dmabuf_verdict")" ok
expect_contains "DMA-BUF on rxe: the kernel's EOPNOTSUPP" "$out" EOPNOTSUPP
expect_contains "DMA-BUF on rxe: judged as no DMA-BUF on this device" "$dmabuf_summary" "DMA-BUF unsupported on rxe0"

on 1 "$(as_user 8388608 mrcheck probe mr --json)"
expect_eq "8 MiB: exit 1" "$rc" 1
expect_eq "8 MiB: cause memlock" "$(json_get 'j["probe"]["diagnosis"]["mr_host"]["cause"]')" memlock
expect_eq "8 MiB: the kernel's ENOMEM" "$(json_get 'j["probe"]["diagnosis"]["mr_host"]["errno_name"]')" ENOMEM
summary=$(json_get '[c["summary"] for c in j["checks"] if c["id"]=="mr_host"][0]')
expect_contains "8 MiB: the limit in the summary" "$summary" "8 MiB"
expect_contains "8 MiB: the call named" "$summary" "ibv_reg_mr_iova2"
on 1 "$(as_user 8388608 mrcheck probe mr)"
expect_contains "8 MiB, text: one FAIL line naming memlock" "$out" "mrcheck: mr_host: FAIL: "
expect_contains "8 MiB, text: the soft limit named" "$out" "RLIMIT_MEMLOCK soft limit of the probe"

# EFAULT: the helper is staged through the command channel (base64), then run as the job user.
reg_mr=${MRCHECK_GUEST_REG_MR:-$MRCHECK_BUILD_DIR/tests/guest/mrcheck_guest_reg_mr}
if [[ -x $reg_mr ]]; then
  on 1 "base64 -d >/usr/local/bin/reg_mr <<'B64'
$(base64 -w76 "$reg_mr")
B64
chmod 755 /usr/local/bin/reg_mr"
  on 1 "$(as_user unlimited /usr/local/bin/reg_mr rxe0 1048576 unmapped)"
  expect_eq "unmapped address: exit 1" "$rc" 1
  expect_contains "unmapped address: the kernel's EFAULT" "$out" "Bad address (errno 14)"
  on 1 "$(as_user unlimited /usr/local/bin/reg_mr rxe0 1048576 mapped)"
  expect_eq "the same registration, mapped: ok" "$rc" 0
else
  e2e_fail "no $reg_mr (build target mrcheck_guest_reg_mr; needs libibverbs-dev)"
fi
e2e_done
