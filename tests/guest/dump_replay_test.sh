#!/usr/bin/env bash
# `mrcheck dump` of a real guest node (kernel, rdma_rxe, rxe0's sysfs), carried to the host and replayed there with
# `mrcheck report --root`: the host's own build sees the guest's device, modules and kernel, not the host's.
source "$(dirname "$0")/lib.sh"
mrcheck=$MRCHECK_BUILD_DIR/cli/mrcheck
[[ -x $mrcheck ]] || { e2e_fail "no $mrcheck (build target mrcheck)"; e2e_done; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/mrcheck-guest-dump.XXXXXX")
trap 'rm -rf "$work"' EXIT

on 1 "mrcheck report --json"
live=$out
on 1 "rm -rf /tmp/dump && mrcheck dump --out /tmp/dump >/dev/null && tar -C /tmp -czf - dump | base64 -w0"
expect_eq "dump in the guest: exit 0" "$rc" 0
base64 -d <<<"$out" | tar -C "$work" -xzf - || e2e_fail "the dump did not come back as a tar"
set +e
out=$("$mrcheck" report --json --root "$work/dump" 2>"$work/err")
rc=$?
set -e
expect_eq "replay: JSON" "$(json_get 'j["schema_version"]')" 1
expect_eq "replay: rxe0 from the guest" "$(json_get '[d["name"] for d in j["facts"]["rdma_devices"]]')" "['rxe0']"
replayed=$out
out=$live
expect_eq "replay: the guest's kernel" "$(out=$replayed json_get 'j["facts"]["kernel_release"]')" "$(json_get 'j["facts"]["kernel_release"]')"
expect_eq "replay: the guest's ib_core srcversion" "$(out=$replayed json_get 'j["facts"]["modules"]["ib_core"]["srcversion"]')" \
  "$(json_get 'j["facts"]["modules"]["ib_core"]["srcversion"]')"
expect_eq "replay: rdma_stack as judged live" "$(out=$replayed json_get '[c["verdict"] for c in j["checks"] if c["id"]=="rdma_stack"][0]')" \
  "$(json_get '[c["verdict"] for c in j["checks"] if c["id"]=="rdma_stack"][0]')"
e2e_done
