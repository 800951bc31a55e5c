#!/bin/bash
# gpu-pair (bench/nccl/README.md) on a two-GPU machine (device kind nvidia-h200-x2):
# `mrcheck probe nccl --mode gpu-pair` against the minimal two-process NCCL program doing the same all-reduce on
# the same two GPUs (rank r on GPU r, NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1), interleaved in one invocation.
# Writes $OUT/gpu_pair.tar.gz + summary.
# Usage (repo root): bash bench/nccl/gpu_pair_run.sh [RUNS]
set -u
. "$(dirname "${BASH_SOURCE[0]}")/../device-cmake.sh"
RUNS=${1:-5}
OUT=${OUT:-/tmp/gpu-pair-out}
W=/tmp/gpupair
mkdir -p "$OUT" "$W"
S=$OUT/gpu_pair_summary.txt
log() { echo "$*" | tee -a "$S"; }
now() { date +%s%N; }
ms_since() { echo $((($(now) - $1) / 1000000)); }
log "== machine"; nvidia-smi -L >>"$S" 2>&1; nvidia-smi topo -m >>"$S" 2>&1
PATH=/usr/local/cuda/bin:$PATH cmake -S . -B /tmp/b -G Ninja -DMRCHECK_BUILD_TESTS=OFF "${device_cmake_args[@]}" >"$W/cmake.log" 2>&1 &&
  ninja -C /tmp/b mrcheck >"$W/ninja.log" 2>&1
log "mrcheck build rc=$?"; tail -3 "$W/ninja.log" >>"$S"
# The baseline in its gpu-pair form: device = rank, no NCCL_HOSTID (one real host), P2P/SHM off via env.
sed -e 's/cudaSetDevice(0)/cudaSetDevice(rank)/' -e '/setenv("NCCL_HOSTID"/d' bench/nccl/minimal_pair.cpp >"$W/minimal_gpu_pair.cpp"
g++ -O2 -std=c++17 "$W/minimal_gpu_pair.cpp" -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcudart -lnccl \
  -Wl,-rpath,/usr/local/cuda/lib64 -o "$W/minimal_gpu_pair" >"$W/gxx.log" 2>&1
log "baseline build rc=$?"; cat "$W/gxx.log" >>"$S"
M=/tmp/b/cli/mrcheck
log "== default mode (2 GPUs visible: expect gpu-pair)"; $M probe nccl --json >"$W/default.json" 2>&1; log "rc=$?"
grep -E '"mode"|"summary"|"transport"' "$W/default.json" | head -5 >>"$S"
log "== verbose gpu-pair (INFO log)"; $M probe nccl --mode gpu-pair --json --verbose >"$W/verbose.json" 2>&1; log "rc=$?"
cp "$W/verbose.json" "$OUT/gpu_pair_verbose.json"
log "== bench: warm-up, then $RUNS interleaved pairs (wall ms)"
NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 "$W/minimal_gpu_pair" >/dev/null 2>&1; $M probe nccl --mode gpu-pair >/dev/null 2>&1
for i in $(seq 1 "$RUNS"); do
  t=$(now); NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 "$W/minimal_gpu_pair" >"$W/min_$i.txt" 2>&1; rc1=$?; a=$(ms_since "$t")
  t=$(now); $M probe nccl --mode gpu-pair --json >"$W/mr_$i.json" 2>&1; rc2=$?; b=$(ms_since "$t")
  log "run $i minimal ${a} ms rc=$rc1 | mrcheck ${b} ms rc=$rc2 $(grep -m1 '"verdict"' "$W/mr_$i.json" | tr -d ' ,')"
done
cp "$W/mr_1.json" "$OUT/gpu_pair.json"
log "== text output"; $M probe nccl --mode gpu-pair >>"$S" 2>&1; log "rc=$?"
log "processes left: $(pgrep -fc -- 'probe nccl' || true)"
tar czf "$OUT/gpu_pair.tar.gz" -C "$W" . 2>/dev/null
