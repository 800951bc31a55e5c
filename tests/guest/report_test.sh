#!/usr/bin/env bash
# `mrcheck report` and `mrcheck-prolog` from the installed .deb on a real kernel with Soft-RoCE: they see rxe0
# (family rxe), rdma_rxe and ib_core among the modules with their srcversion as sysfs has it (none, on Debian),
# and judge the stack: rdma_stack passes (Debian's inbox kernel with Debian's rdma-core).
source "$(dirname "$0")/lib.sh"

on 1 "mrcheck report --json"
expect_eq "report: JSON" "$(json_get 'j["schema_version"]')" 1
expect_eq "report: rxe0 seen" "$(json_get '[d["name"] for d in j["facts"]["rdma_devices"]]')" "['rxe0']"
expect_eq "report: family rxe" "$(json_get 'j["facts"]["rdma_devices"][0]["family"]')" rxe
expect_eq "report: rdma_stack passes" "$(json_get '[c["verdict"] for c in j["checks"] if c["id"]=="rdma_stack"][0]')" pass
expect_eq "report: rdma_rxe loaded" "$(json_get 'j["facts"]["modules"]["rdma_rxe"]["loaded"]')" True
srcversion=$(json_get 'j["facts"]["modules"]["ib_core"]["srcversion"]')
# Debian's in-tree modules carry no srcversion (no MODULE_VERSION): the fact is absent, never guessed.
on 1 "cat /sys/module/ib_core/srcversion 2>/dev/null || echo None"
expect_eq "report: ib_core's srcversion as the kernel has it" "$srcversion" "$out"
on 1 "uname -r"
kernel=$out
on 1 "mrcheck report --json"
expect_eq "report: the guest's own kernel" "$(json_get 'j["facts"]["kernel_release"]')" "$kernel"

# The prolog judges the same node (no slurmctld: --dry-run judges and prints only).
on 1 "mrcheck-prolog --dry-run --json"
expect_eq "prolog: exit 0 on a healthy rxe node" "$rc" 0
expect_contains "prolog: judged rdma_stack" "$out" '"rdma_stack"'
expect_not_contains "prolog: nothing failed" "$(json_get '[c["id"] for c in j["checks"] if c["verdict"]=="fail"]')" "'"
e2e_done
