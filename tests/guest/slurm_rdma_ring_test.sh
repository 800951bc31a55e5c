#!/usr/bin/env bash
# `srun -N3 --mr-check=rdma` on the guests' Slurm: three kernels in a ring (src/rdma/rdma_peers.cpp's
# rdma_pair_roles, unit-tested in tests/unit/rdma_pair_test.cpp): node k sends and writes to node k+1 (pair k-1,
# "sending") and echoes node k-1 (pair k-2, "echoing"), the last node sending to the first, both pairs of a node
# at once; every node names both its peers with their GIDs, and the record of the three reaches node1. Needs a
# cluster of three guests (tests/guest/CMakeLists.txt's guest.up).
source "$(dirname "$0")/lib.sh"
(($(guest_nodes) >= 3)) || { e2e_fail "the guests are $(guest_nodes) node(s): the ring needs 3 (guest.sh up 3)"; e2e_done; exit 1; }
trap 'plugin_policy' EXIT

plugin_policy admin_comment=yes
t0=$SECONDS
as_mrtest 1 "srun -J ring -N3 --mr-check=rdma,verbose true"
e2e_log "srun -N3 --mr-check=rdma,verbose: $((SECONDS - t0)) s"
expect_eq "ring: exit 0" "$rc" 0
expect_eq "ring: three data_plane verdicts, all pass" \
  "$(grep -c 'mrcheck: data_plane: ' <<<"$err") $(grep -c 'mrcheck: data_plane: pass: ' <<<"$err")" "3 3"
for n in 1 2 3; do
  next=$((n % 3 + 1)) prev=$(((n + 1) % 3 + 1))
  line=$(grep "mrcheck: data_plane: pass: RC loopback on 1 port(s), every byte verified: rxe0:1 GID 1 ::ffff:10.77.0.$n (RoCE v2)" <<<"$err" || true)
  expect_eq "ring: node$n's verdict, once" "$(grep -c . <<<"$line")" 1
  # Both pairs on node n's own line, each with its peer, its role and both GIDs; every byte verified.
  expect_contains "ring: node$n sent to node$next (pair $((n - 1)))" "$line" \
    "pair $((n - 1)) with node$next (sending): rxe0:1 ::ffff:10.77.0.$n -> ::ffff:10.77.0.$next MTU 1024: 4 KiB send/recv"
  expect_contains "ring: node$n echoed node$prev (pair $((prev - 1)))" "$line" \
    "pair $((prev - 1)) with node$prev (echoing): rxe0:1 ::ffff:10.77.0.$n -> ::ffff:10.77.0.$prev MTU 1024: 4 KiB send/recv"
  expect_eq "ring: node$n paired with two peers" "$(grep -o 'pair [0-9] with node[0-9]' <<<"$line" | sort | paste -sd ,)" \
    "$(printf 'pair %d with node%d\n' $((n - 1)) "$next" $((prev - 1)) "$prev" | sort | paste -sd ,)"
done
admin_comment ring
expect_eq "ring: the record of the three nodes" "$AC" "mrcheck: step 0: pass on 3 nodes (data_plane per the job's probe)"
e2e_done
