#!/usr/bin/env bash
# `srun -N2 --mr-check=rdma` on the guests' Slurm: the plugin runs the data-plane probe (`mrcheck probe rdma`) as
# the job user on each node of the step: each node's RC loopback over its own rxe0 and RoCE v2 GID, then the pair
# between the two kernels (node1 sends and writes to node2, node2 echoes and checks every byte), their QPs'
# addresses exchanged as MUNGE credentials of the job's user; the record of both nodes reaches node1. The step
# names node[1-2] (-w): the third guest is the ring's (slurm_rdma_ring_test.sh).
source "$(dirname "$0")/lib.sh"
trap 'plugin_policy' EXIT

plugin_policy admin_comment=yes
t0=$SECONDS
as_mrtest 1 "srun -J rdma -N2 -w 'node[1-2]' --mr-check=rdma,verbose true"
e2e_log "srun -N2 --mr-check=rdma,verbose: $((SECONDS - t0)) s"
expect_eq "rdma: exit 0" "$rc" 0
for n in 1 2; do
  expect_contains "rdma: node$n's loopback over its own GID, bytes verified" "$err" \
    "mrcheck: data_plane: pass: RC loopback on 1 port(s), every byte verified: rxe0:1 GID 1 ::ffff:10.77.0.$n (RoCE v2)"
done
expect_contains "rdma: node1 sent to node2 over real rxe, every byte verified" "$err" \
  "; between nodes, every byte verified: pair 0 with node2 (sending): rxe0:1 ::ffff:10.77.0.1 -> ::ffff:10.77.0.2 MTU 1024: 4 KiB send/recv"
expect_contains "rdma: node2 echoed node1's messages and checked its writes" "$err" \
  "; between nodes, every byte verified: pair 0 with node1 (echoing): rxe0:1 ::ffff:10.77.0.2 -> ::ffff:10.77.0.1 MTU 1024: 4 KiB send/recv"
admin_comment rdma
expect_eq "rdma: the record of both nodes" "$AC" "mrcheck: step 0: pass on 2 nodes (data_plane per the job's probe)"
e2e_done
