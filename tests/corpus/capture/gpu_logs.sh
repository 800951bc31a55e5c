#!/usr/bin/env bash
# Runs on the GPU machine (device `run`, repo root): real NCCL and torch logs, healthy and failing, for explain's
# tests. Each case is one shell command; its log is stdout+stderr together, with the command as the first line.
# Everything lands in $OUT/gpu_logs.tar.gz (one .log per case, CASES lists the commands and exit statuses).
# Usage: gpu_logs.sh [CASES.sh]: the cases to run, gpu_cases_2026-12-06.sh (tests/fixtures/nccl_logs/gpu_h100) by
# default, gpu_cases_2026-12-07.sh for the second, held-out set (tests/corpus/heldout-gpu-2026-12-07).
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cases="${1:-$here/gpu_cases_2026-12-06.sh}"
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
# shellcheck source=/dev/null
source "$cases"
tar -C "$w" -czf "$out/gpu_logs.tar.gz" logs
cat "$w/logs/CASES"; cat "$w/logs/MACHINE"
