#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The GPU tests in one call on the GPU machine (device `run`, repository root): builds mrcheck with the CUDA
# headers and the fake libibverbs, runs every tests/gpu/*_test.sh, then times `mrcheck probe mr --gpu` on this
# node without an HCA against `mrcheck probe mr` (no --gpu) in the same invocation (issue 40's point 3: the GPU
# probe decides from the node that nothing can be registered before it sets CUDA up, cli/cmd_probe_mr.cpp), and last
# the unit tests built there with the CUDA headers (src/rdma/cuda_gpu.cpp compiles only with them) and run beside
# the real driver. Writes $OUT/gpu-tests.txt. Usage: bash tests/gpu/device_run.sh [RUNS]
set -u
RUNS=${1:-7}
OUT=${OUT:-/tmp/gpu-tests-out}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/../../bench/device-cmake.sh"
mkdir -p "$OUT"
S=$OUT/gpu-tests.txt
log() { echo "$*" | tee -a "$S"; }
now() { date +%s%N; }
log "== machine: $(nvidia-smi -L 2>&1 | head -1); $(ls /sys/class/infiniband 2>/dev/null | wc -l) RDMA devices"
PATH=/usr/local/cuda/bin:$PATH cmake -S . -B /tmp/bc -G Ninja -DMRCHECK_BUILD_TESTS=OFF "${device_cmake_args[@]}" \
  >"$OUT/cmake.log" 2>&1 && ninja -C /tmp/bc mrcheck >"$OUT/ninja.log" 2>&1
log "mrcheck build rc=$? ($(grep -o 'CUDA headers: [A-Z]*.*' "$OUT/cmake.log"))"
cmake -S tests/fakes -B /tmp/f -G Ninja >"$OUT/fake.log" 2>&1 && ninja -C /tmp/f fake_ibverbs >>"$OUT/fake.log" 2>&1
log "fake_ibverbs build rc=$?"
M=/tmp/bc/cli/mrcheck
F=$(find /tmp/f -name libibverbs.so.1 | head -1)
for t in "$here"/*_test.sh; do
  bash "$t" "$M" "$F" >"$OUT/$(basename "$t" .sh).log" 2>&1
  log "$(basename "$t"): rc=$? (0 pass, 77 skip); $(grep -c 'ok:' "$OUT/$(basename "$t" .sh).log") ok, $(grep -c '^[a-z_]*: FAIL:' "$OUT/$(basename "$t" .sh).log") FAIL"
done
log "== probe mr --gpu on a node without an HCA vs probe mr, $RUNS interleaved runs after one warm-up (wall ms)"
$M probe mr --gpu >/dev/null 2>&1; $M probe mr >/dev/null 2>&1
for i in $(seq 1 "$RUNS"); do
  t=$(now); $M probe mr --gpu --json >"$OUT/gpu_$i.json" 2>&1; a=$((($(now) - t) / 1000000))
  t=$(now); $M probe mr --json >/dev/null 2>&1; b=$((($(now) - t) / 1000000))
  log "run $i: --gpu ${a} ms, without ${b} ms"
done
grep -o '"summary": *"[^"]*"' "$OUT/gpu_1.json" | head -3 | tee -a "$S"
log "== the unit tests, built here with the CUDA headers (ctest -L unit)"
PATH=/usr/local/cuda/bin:$PATH cmake -S . -B /tmp/bu -G Ninja "${device_cmake_args[@]}" >"$OUT/cmake-unit.log" 2>&1 &&
  ninja -C /tmp/bu >"$OUT/ninja-unit.log" 2>&1
rc=$?
if ((rc == 0)); then
  ctest --test-dir /tmp/bu -L unit -j"$(nproc)" >"$OUT/ctest-unit.log" 2>&1
  log "unit: rc=$?; $(grep -o '[0-9]*% tests passed.*' "$OUT/ctest-unit.log"); $(grep -c '(Skipped)' "$OUT/ctest-unit.log") skipped"
  grep -E '\(Failed\)|\(Timeout\)|\(SEGFAULT\)' "$OUT/ctest-unit.log" | head -20 | tee -a "$S"
else
  log "unit: not built, rc=$rc (cmake-unit.log, ninja-unit.log)"
fi
