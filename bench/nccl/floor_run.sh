#!/bin/bash
# One batch on the GPU machine (device `run`, repo root): `mrcheck probe nccl --mode local-pair` against, in one
# invocation and interleaved, the raw two-process program with and without ncclCommDestroy (minimal_pair.cpp) and
# the floor (floor.cpp: one CUDA context, one single-rank communicator). Then where the pair's time goes: the
# ranks' phases from the probe's JSON and NCCL's own "Init timings" line, and the pair under NCCL settings that
# might cut work a smoke test does not need. Everything lands in $OUT/floor.txt.
# Usage: bash bench/nccl/floor_run.sh [RUNS]
set -u
. "$(dirname "${BASH_SOURCE[0]}")/../device-cmake.sh"
RUNS=${1:-9}
OUT=${OUT:-/tmp/floor-out}
W=/tmp/floorrun
mkdir -p "$OUT" "$W"
S=$OUT/floor.txt
log() { echo "$*" | tee -a "$S"; }
now() { date +%s%N; }
ms_since() { echo $((($(now) - $1) / 1000000)); }
log "== machine: $(nvidia-smi -L 2>&1 | head -1)"
cmake -S . -B /tmp/b -G Ninja -DMRCHECK_BUILD_TESTS=OFF "${device_cmake_args[@]}" >"$W/cmake.log" 2>&1 && ninja -C /tmp/b mrcheck >"$W/ninja.log" 2>&1
log "mrcheck build rc=$?"
cc="g++ -O2 -std=c++17 -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64"
$cc bench/nccl/minimal_pair.cpp -lcudart -lnccl -o "$W/minimal" && $cc bench/nccl/floor.cpp -lcudart -lnccl -o "$W/floor"
log "baselines build rc=$?"
M=/tmp/b/cli/mrcheck
declare -A prog=([minimal]="$W/minimal" [nodestroy]="$W/minimal nodestroy" [floor]="$W/floor"
  [pair]="$M probe nccl --mode local-pair --json")
names=(minimal nodestroy floor pair)
for n in "${names[@]}"; do ${prog[$n]} >/dev/null 2>&1; done # warm-up
log "== $RUNS interleaved runs (wall ms)"
for i in $(seq 1 "$RUNS"); do
  line="run $i"
  for n in "${names[@]}"; do
    t=$(now); ${prog[$n]} >"$W/$n.$i" 2>&1; rc=$?; line+=" | $n $(ms_since "$t") rc=$rc"
  done
  log "$line"
done
python3 - "$S" <<'PY' | tee -a "$S"
import re, statistics, sys
rows = [l for l in open(sys.argv[1]) if l.startswith("run ")]
ms = {}
for l in rows:
    for name, v in re.findall(r"\| (\w+) (\d+) rc=", l):
        ms.setdefault(name, []).append(int(v))
med = {k: statistics.median(v) for k, v in ms.items()}
print("medians ms:", {k: int(v) for k, v in med.items()})
print("pair/nodestroy %.2fx  pair/minimal %.2fx  pair/floor %.2fx" %
      (med["pair"] / med["nodestroy"], med["pair"] / med["minimal"], med["pair"] / med["floor"]))
PY
log "== phases of one pair run (JSON) and NCCL's Init timings"
$M probe nccl --mode local-pair --json --verbose >"$W/verbose.json" 2>&1
python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(json.dumps(j.get("probe",j).get("ranks",j.get("phases","")),indent=None)[:3000])' "$W/verbose.json" >>"$S" 2>&1
grep -o '"phases"[^]]*]' "$W/verbose.json" | head -4 >>"$S"
grep -o 'Init timings[^"]*' "$W/verbose.json" | head -4 >>"$S"
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT "$W/floor" 2>&1 | grep -E 'Init timings|init.cc' | head -3 >>"$S"
log "== the pair under other NCCL settings (median of 5 after one warm-up, wall ms)"
for e in "" NCCL_RUNTIME_CONNECT=1 NCCL_RUNTIME_CONNECT=0 NCCL_CUMEM_ENABLE=0 NCCL_NVLS_ENABLE=0 \
  "NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1" NCCL_PROTO=Simple NCCL_ALGO=Ring CUDA_MODULE_LOADING=LAZY \
  NCCL_MAX_NCHANNELS=1 "NCCL_MIN_NCHANNELS=1 NCCL_MAX_NCHANNELS=1 NCCL_PROTO=Simple NCCL_ALGO=Ring"; do
  env $e $M probe nccl --mode local-pair --json >/dev/null 2>&1
  v=()
  for i in 1 2 3 4 5; do t=$(now); env $e $M probe nccl --mode local-pair --json >"$W/e.json" 2>&1; v+=($(ms_since "$t")); done
  log "[${e:-default}] $(printf '%s\n' "${v[@]}" | sort -n | sed -n 3p) ms (${v[*]}) verdict=$(grep -m1 -o '"verdict": *"[a-z]*"' "$W/e.json")"
done
