#!/usr/bin/env bash
# `srun -N2 --mr-check=rdma` on the guests' Slurm: the plugin runs the data-plane probe (`mrcheck probe rdma`) as
# the job user on each node of the step, over that node's rxe0 and its own RoCE v2 GID, and the record of both
# nodes reaches node1. What the plugin does today is each node's RC loopback (README, "The data-plane probe"); the
# same test between the step's nodes is not built yet, and this test is where it will be checked.
source "$(dirname "$0")/lib.sh"
trap 'plugin_policy' EXIT

plugin_policy admin_comment=yes
as_mrtest 1 "srun -J rdma -N2 --mr-check=rdma,verbose true"
expect_eq "rdma: exit 0" "$rc" 0
for n in 1 2; do
  expect_contains "rdma: node$n's loopback over its own GID, bytes verified" "$err" \
    "mrcheck: data_plane: pass: RC loopback on 1 port(s), every byte verified: rxe0:1 GID 1 ::ffff:10.77.0.$n (RoCE v2)"
done
admin_comment rdma
expect_eq "rdma: the record of both nodes" "$AC" "mrcheck: step 0: pass on 2 nodes (data_plane per the job's probe)"
e2e_done
