#!/usr/bin/env bash
# Runs on the GPU machine (device `run`, repo root): real NCCL and torch logs, healthy and failing, for explain's
# tests. Each case is one shell command; its log is stdout+stderr together, with the command as the first line.
# Everything lands in $OUT/gpu_logs.tar.gz (one .log per case, CASES lists the commands and exit statuses).
set -u
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/gpu-logs}"
w=/tmp/gpu-logs-work
mkdir -p "$out" "$w/logs"
g++ -O1 "$here/nccl_pair_capture.cpp" -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcudart -lnccl \
  -Wl,-rpath,/usr/local/cuda/lib64 -o "$w/pair" >"$w/gxx.log" 2>&1 || cat "$w/gxx.log"
{ nvidia-smi -L; cat /proc/driver/nvidia/version; uname -r; ls /sys/class/infiniband 2>&1;
  python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())';
  ls -l /usr/lib/x86_64-linux-gnu/libnccl.so* /usr/local/cuda/lib64/libnccl* 2>&1; } >"$w/logs/MACHINE" 2>&1
tr="timeout 120 python3 -m torch.distributed.run --standalone --nproc_per_node=2 $here/torch_allreduce.py"
case_() { # case_ NAME COMMAND...
  local name=$1; shift
  { echo "# command: $*"; (eval "$*"); echo "# exit status: $?"; } >"$w/logs/$name.log" 2>&1
  echo "$name	$(tail -1 "$w/logs/$name.log" | sed 's/# exit status: //')	$*" >>"$w/logs/CASES"
}
export NCCL_SOCKET_IFNAME=lo
case_ torch_hostid_info        "MODE=hostid NCCL_DEBUG=INFO $tr"
case_ torch_hostid_warn        "MODE=hostid NCCL_DEBUG=WARN $tr"
case_ torch_hostid_nodebug     "MODE=hostid $tr"
case_ torch_hostid_ibdisable   "MODE=hostid NCCL_DEBUG=INFO NCCL_IB_DISABLE=1 $tr"
case_ torch_hostid_memlock64   "ulimit -S -l 64; MODE=hostid NCCL_DEBUG=INFO $tr"
case_ torch_hostid_stack_unl   "ulimit -S -s unlimited; MODE=hostid NCCL_DEBUG=INFO $tr"
case_ torch_hostid_nofile64    "ulimit -S -n 64; MODE=hostid NCCL_DEBUG=WARN $tr"
case_ torch_same_gpu_info      "MODE=ok NCCL_DEBUG=INFO $tr"
case_ torch_same_gpu_warn      "MODE=ok NCCL_DEBUG=WARN $tr"
case_ torch_ifname_bad_warn    "MODE=hostid NCCL_DEBUG=WARN NCCL_SOCKET_IFNAME=nonexistent0 $tr"
case_ torch_ifname_bad_info    "MODE=hostid NCCL_DEBUG=INFO NCCL_SOCKET_IFNAME=nonexistent0 $tr"
case_ torch_ifname_bad_nodebug "MODE=hostid NCCL_SOCKET_IFNAME=nonexistent0 $tr"
case_ torch_net_ib_warn        "MODE=hostid NCCL_DEBUG=WARN NCCL_NET=IB $tr"
case_ torch_net_ib_info        "MODE=hostid NCCL_DEBUG=INFO NCCL_NET=IB $tr"
case_ torch_net_ib_hca_info    "MODE=hostid NCCL_DEBUG=INFO NCCL_NET=IB NCCL_IB_HCA=mlx5_0 $tr"
case_ torch_ib_hca_info        "MODE=hostid NCCL_DEBUG=INFO NCCL_IB_HCA=mlx5_0 $tr"
case_ torch_gpu_filled_info    "MODE=fill NCCL_DEBUG=INFO $tr"
case_ torch_gpu_filled_warn    "MODE=fill NCCL_DEBUG=WARN $tr"
case_ torch_oom_outside_info   "MODE=oom NCCL_DEBUG=INFO $tr"
case_ torch_oom_outside_nodebug "MODE=oom $tr"
case_ raw_hostid_info          "NCCL_COMM_ID=127.0.0.1:29701 NCCL_DEBUG=INFO timeout 60 $w/pair hostid"
case_ raw_hostid_warn          "NCCL_COMM_ID=127.0.0.1:29702 NCCL_DEBUG=WARN timeout 60 $w/pair hostid"
case_ raw_same_warn            "NCCL_COMM_ID=127.0.0.1:29703 NCCL_DEBUG=WARN timeout 60 $w/pair same"
case_ raw_hostid_p2pshm_info   "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=ALL NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_COMM_ID=127.0.0.1:29704 timeout 60 $w/pair hostid"
tar -C "$w" -czf "$out/gpu_logs.tar.gz" logs
cat "$w/logs/CASES"; cat "$w/logs/MACHINE"
