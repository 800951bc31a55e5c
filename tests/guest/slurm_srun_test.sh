#!/usr/bin/env bash
# `srun -N2 --mr-check` across two guests (two kernels, rxe0 each), mrcheck's plugin from the installed .deb, run
# as the unprivileged user mrtest on node1, the plugin `required` with the example's memlock_min=unlimited and
# admin_comment=yes. The kernel answers the registration probe; the record of both nodes reaches node1 through the
# MUNGE-authenticated handoff (src/admin/handoff.cpp) and slurmctld keeps it in the job's AdminComment:
#   - memlock raised (unlimited): passes on both nodes; the record says "pass on 2 nodes";
#   - `ulimit -l 8192` before srun: each node fails naming memlock and the hop (the submit host's propagation), the
#     probe gets the kernel's ENOMEM; with enforce=yes the tasks start with the policy's limit instead;
#   - munge: one key for the cluster, a credential of node1 valid on node2;
#   - node2's slurmd under 8 MiB (a unit without LimitMEMLOCK=infinity): node2 alone fails naming slurmd, and the
#     record names node2 and counts node1: node2's verdict came to node1 over the guest network.
# Every step names node[1-2] (-w): the cluster has a third guest (the ring of slurm_rdma_ring_test.sh).
source "$(dirname "$0")/lib.sh"
trap 'plugin_policy; slurmd_memlock 2 unlimited' EXIT
task='bash -c '\''echo $(hostname) $(ulimit -l)'\'''

# One MUNGE key for the cluster: a credential made on node1 decodes on node2; the key as Debian's munge keeps it.
on 1 "munge -n -s guest-key-check | base64 -w0"
on 2 "base64 -d <<<'$out' | unmunge"
expect_eq "munge: node1's credential decodes on node2" "$(sed -n 's/^STATUS: *//p' <<<"$out")" "Success (0)"
on 2 "stat -c '%a %U:%G' /etc/munge/munge.key"
expect_eq "munge: the key 0400 munge:munge" "$out" "400 munge:munge"

plugin_policy admin_comment=yes
as_mrtest 1 "srun -J raised -N2 -w 'node[1-2]' --mr-check $task"
expect_eq "raised: exit 0" "$rc" 0
expect_eq "raised: the task ran on both guests, memlock unlimited" "$(sort <<<"$out")" $'node1 unlimited\nnode2 unlimited'
expect_not_contains "raised: no verdict on the user's stderr" "$err" "mrcheck:"
admin_comment raised
expect_eq "raised: the record of both nodes" "$AC" "mrcheck: step 0: pass on 2 nodes (mr_host per the job's probe)"
on 1 "grep -c 'mrcheck: admin: job $AC_JOB step 0: AdminComment: mrcheck: step 0: pass on 2 nodes' /var/log/slurm/slurmd.log"
expect_eq "raised: node1's slurmd logged the record it wrote" "$out" 1

as_mrtest 1 "ulimit -l 8192; srun -J low -N2 -w 'node[1-2]' --mr-check $task"
e2e_log "8 MiB: $err"
expect_eq "8 MiB: srun fails" "$([[ $rc != 0 ]] && echo failed)" failed
expect_eq "8 MiB: no task ran" "$out" ""
expect_eq "8 MiB: one memlock FAIL per node, naming the hop" \
  "$(grep -c '^mrcheck: memlock: FAIL: task will start with memlock soft 8 MiB < required unlimited; lowered at submit-host propagation: the submit side.s soft limit 8 MiB was propagated from node1 (SLURM_RLIMIT_MEMLOCK=8388608' <<<"$err")" 2
expect_eq "8 MiB: the kernel's ENOMEM in each node's registration probe" \
  "$(grep -c '^mrcheck: mr_host: FAIL: rxe0: ibv_reg_mr_iova2 of .* failed with ENOMEM' <<<"$err")" 2
expect_contains "8 MiB: the fix" "$err" "set PropagateResourceLimitsExcept=MEMLOCK in slurm.conf"
admin_comment low
expect_contains "8 MiB: the record names memlock, the hop and both nodes" "$AC" \
  "mrcheck: step 0: FAIL memlock=8MiB (submit-host propagation) on node1,node2; FAIL mr_host (rxe0: ibv_reg_mr_iova2"

plugin_policy admin_comment=yes enforce=yes
as_mrtest 1 "ulimit -l 8192; srun -J enforced -N2 -w 'node[1-2]' --mr-check=memlock $task"
expect_eq "8 MiB, enforce=yes: exit 0" "$rc" 0
expect_eq "8 MiB, enforce=yes: both tasks start with the policy's limit" "$(sort <<<"$out")" \
  $'node1 unlimited\nnode2 unlimited'

plugin_policy admin_comment=yes
slurmd_memlock 2 8388608
as_mrtest 1 "srun -J slurmd8m -N2 -w 'node[1-2]' --mr-check=memlock $task"
expect_eq "node2's slurmd at 8 MiB: srun fails" "$([[ $rc != 0 ]] && echo failed)" failed
expect_eq "node2's slurmd at 8 MiB: node1's task ran" "$out" "node1 unlimited"
expect_contains "node2's slurmd at 8 MiB: named, on node2" "$err" \
  "mrcheck: memlock: FAIL: task will start with memlock soft 8 MiB < required unlimited; lowered at slurmd: slurmd pid "
expect_contains "node2's slurmd at 8 MiB: the node and the limit" "$err" " on node2 runs with hard 8 MiB"
expect_eq "node2's slurmd at 8 MiB: one FAIL line" "$(grep -c '^mrcheck: memlock: FAIL' <<<"$err")" 1
admin_comment slurmd8m
expect_eq "node2's slurmd at 8 MiB: the record names node2, counts node1" "$AC" \
  "mrcheck: step 0: FAIL memlock=8MiB (slurmd limit) on node2; pass on 1 node"
for n in 1 2; do
  on "$n" "grep 'mrcheck: admin: job $AC_JOB ' /var/log/slurm/slurmd.log | grep -v ': AdminComment: ' || true"
  expect_eq "node$n's collector: no error, nothing refused" "$out" ""
done
e2e_done
