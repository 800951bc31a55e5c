#!/usr/bin/env bash
# Runs on the GPU machine (run tool): builds nccl_pair_capture.cpp and writes two real NCCL logs to $OUT.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-/tmp/capture}"
mkdir -p "$out"
g++ -O1 "$here/nccl_pair_capture.cpp" -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcudart -lnccl \
  -o /tmp/nccl_pair_capture || exit 1
nvidia-smi -L > "$out/gpu.txt" 2>&1
cat /proc/driver/nvidia/version >> "$out/gpu.txt" 2>&1
export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET NCCL_SOCKET_IFNAME=lo
NCCL_COMM_ID=127.0.0.1:29511 timeout 60 /tmp/nccl_pair_capture same > "$out/same.log" 2>&1
echo "exit $?" >> "$out/same.log"
NCCL_COMM_ID=127.0.0.1:29512 timeout 60 /tmp/nccl_pair_capture hostid > "$out/hostid.log" 2>&1
echo "exit $?" >> "$out/hostid.log"
wc -l "$out"/*.log
