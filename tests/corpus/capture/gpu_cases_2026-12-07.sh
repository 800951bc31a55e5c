# The second set of real GPU logs (2026-12-07), made before any rule was changed for them and scored once as a
# held-out set (tests/corpus/heldout-gpu-2026-12-07/README.md). Sourced by gpu_logs.sh: `case_ NAME COMMAND`, $tr
# the two-rank torch run (torch_allreduce.py), $w the work directory (its `pair`: nccl_pair_capture.cpp).
# Healthy runs the first set has not: other debug subsystems, settings NCCL warns about and goes on, a missing
# net plugin, the cuMem path off.
case_ torch_subsys_init_net_info  "MODE=hostid NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET $tr"
case_ torch_net_plugin_missing    "MODE=hostid NCCL_DEBUG=INFO NCCL_NET_PLUGIN=nonexistent $tr"
case_ torch_cumem_off_info        "MODE=hostid NCCL_DEBUG=INFO NCCL_CUMEM_ENABLE=0 $tr"
case_ torch_nthreads_bad_warn     "MODE=hostid NCCL_DEBUG=WARN NCCL_NTHREADS=100 $tr"
case_ torch_algo_bogus_warn       "MODE=hostid NCCL_DEBUG=WARN NCCL_ALGO=bogus $tr"
case_ torch_net_socket_info       "MODE=hostid NCCL_DEBUG=INFO NCCL_NET=Socket $tr"
case_ raw_hostid_nodebug          "NCCL_COMM_ID=127.0.0.1:29711 timeout 60 $w/pair hostid"
# Failures the first set has not: a collective that times out, a peer gone, no GPU visible, the process's address
# space too small for CUDA, a bootstrap address this host does not have, a net plugin the job insists on.
case_ torch_timeout_warn          "MODE=timeout NCCL_DEBUG=WARN $tr"
case_ torch_timeout_nodebug       "MODE=timeout $tr"
case_ torch_peer_exit_info        "MODE=peer_exit NCCL_DEBUG=INFO $tr"
case_ torch_no_gpu                "CUDA_VISIBLE_DEVICES= MODE=ok NCCL_DEBUG=WARN $tr"
case_ torch_vmem_small_warn       "ulimit -S -v 8000000; MODE=hostid NCCL_DEBUG=WARN $tr"
case_ raw_comm_id_foreign_warn    "NCCL_COMM_ID=10.255.255.1:29712 NCCL_DEBUG=WARN timeout 60 $w/pair hostid"
case_ raw_comm_id_foreign_nodebug "NCCL_COMM_ID=10.255.255.1:29713 timeout 60 $w/pair hostid"
case_ torch_net_ib_nodebug        "MODE=hostid NCCL_NET=IB $tr"
case_ torch_socket_family6_info   "MODE=hostid NCCL_DEBUG=INFO NCCL_SOCKET_FAMILY=AF_INET6 $tr"
