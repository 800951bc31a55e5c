#!/bin/bash
# One batch on the GPU machine (device `run`): build mrcheck and the baseline, bench local-pair against the
# minimal program (interleaved, same invocation), the failure cases, the fake libibverbs cases, and NCCL INFO
# logs for tests/fixtures/nccl_logs/. Everything lands in $OUT/nccl.tar.gz (+ summary.txt).
# Usage (repo root): bash bench/nccl/device_run.sh [RUNS]
set -u
. "$(dirname "${BASH_SOURCE[0]}")/../device-cmake.sh"
RUNS=${1:-5}
OUT=${OUT:-/tmp/nccl-out}
W=/tmp/ncclrun
mkdir -p "$OUT" "$W"
S=$OUT/summary.txt
log() { echo "$*" | tee -a "$S"; }
now() { date +%s%N; }
ms_since() { echo $(( ($(now) - $1) / 1000000 )); }

log "== machine"
{ nvidia-smi -L; uname -r; ls -l /usr/lib/x86_64-linux-gnu/libnccl* /usr/lib/x86_64-linux-gnu/libcuda.so* /usr/local/cuda/lib64/libcudart.so* 2>&1;
  ls /sys/class/infiniband/ 2>&1; ls -l /etc/nccl.conf ~/.nccl.conf 2>&1; env | grep -E '^(NCCL|CUDA)_' ; } >>"$S" 2>&1

log "== build"
t=$(now)
cmake -S . -B /tmp/b -G Ninja -DMRCHECK_BUILD_TESTS=OFF "${device_cmake_args[@]}" >"$W/cmake.log" 2>&1 && ninja -C /tmp/b mrcheck >"$W/ninja.log" 2>&1
log "mrcheck build rc=$? $(ms_since $t) ms"; tail -5 "$W/ninja.log" >>"$S"
cmake -S tests/fakes -B /tmp/fk -G Ninja >"$W/fk.log" 2>&1 && ninja -C /tmp/fk fake_ibverbs >>"$W/fk.log" 2>&1
log "fake_ibverbs build rc=$?"; FAKEDIR=$(dirname "$(find /tmp/fk -name 'libibverbs.so.1' | head -1)"); log "fake dir $FAKEDIR"
g++ -O2 -std=c++17 bench/nccl/minimal_pair.cpp -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcudart -lnccl \
  -Wl,-rpath,/usr/local/cuda/lib64 -o "$W/minimal_pair" >"$W/gxx.log" 2>&1
log "minimal_pair build rc=$?"; cat "$W/gxx.log" >>"$S"
M=/tmp/b/cli/mrcheck

log "== bench (warm-up of each first, then $RUNS interleaved pairs; wall ms)"
"$W/minimal_pair" >/dev/null 2>&1; $M probe nccl --mode local-pair --json >"$W/warm.json" 2>&1
for i in $(seq 1 "$RUNS"); do
  t=$(now); "$W/minimal_pair" >"$W/min_$i.txt" 2>&1; rc1=$?; a=$(ms_since $t)
  t=$(now); $M probe nccl --mode local-pair --json >"$W/mr_$i.json" 2>&1; rc2=$?; b=$(ms_since $t)
  log "run $i minimal ${a} ms rc=$rc1 | mrcheck ${b} ms rc=$rc2 verdict=$(grep -m1 '"verdict"' "$W/mr_$i.json" | tr -d ' ,')"
done
cp "$W/mr_1.json" "$OUT/local_pair.json"

log "== verbose local-pair (INFO log kept)"
$M probe nccl --mode local-pair --json --verbose >"$W/local_pair_verbose.json" 2>&1; log "rc=$?"
log "== text output"; $M probe nccl --mode local-pair >>"$S" 2>&1; log "rc=$?"
log "== default mode"; $M probe nccl >>"$S" 2>&1; log "rc=$?"
log "== gpu-pair on a 1-GPU machine"; $M probe nccl --mode gpu-pair >>"$S" 2>&1; log "rc=$?"

log "== rank 1 killed mid-test (SIGKILL 0.6 s after start)"
t=$(now); $M probe nccl --mode local-pair --json --verbose >"$W/killed.json" 2>&1 & P=$!
sleep 0.6; R1=$(pgrep -f -- 'probe nccl --rank 1' | head -1); log "rank 1 pid=$R1 stage: $(cat /proc/$R1/cmdline 2>/dev/null | tr '\0' ' ' | cut -c1-80)"
[ -n "$R1" ] && kill -9 "$R1"; wait $P; log "rc=$? $(ms_since $t) ms"; grep -E '"summary"|"outcome"' "$W/killed.json" >>"$S"
sleep 0.2; log "processes left: $(pgrep -fc -- 'probe nccl' || true)"

log "== timeout 0.5 s"
t=$(now); $M probe nccl --mode local-pair --timeout 500ms --json >"$W/timeout.json" 2>&1; log "rc=$? $(ms_since $t) ms"
grep -E '"summary"|"outcome"|last_stage' "$W/timeout.json" >>"$S"; sleep 0.2; log "processes left: $(pgrep -fc -- 'probe nccl' || true)"

log "== NCCL_IB_HCA=mlx5_9 (no RDMA device on this machine)"
NCCL_IB_HCA=mlx5_9 $M probe nccl --mode local-pair --json --verbose >"$W/ib_hca_missing.json" 2>&1; log "rc=$?"
grep -E '"summary"|"transport"' "$W/ib_hca_missing.json" >>"$S"

if [ -n "$FAKEDIR" ]; then
  for c in plain hca9 enomem einval memlock; do
    case $c in
      plain) E=();;
      hca9) E=(NCCL_IB_HCA=mlx5_9);;
      enomem) E=(MRCHECK_FAKE_IBV_INJECT=reg_mr_iova2=ENOMEM);;
      einval) E=(MRCHECK_FAKE_IBV_INJECT=reg_mr_iova2=EINVAL);;
      memlock) E=();;
    esac
    log "== fake libibverbs: $c ${E[*]:-}"
    t=$(now)
    if [ $c = memlock ]; then
      # The real kernel rule: non-root, ulimit -l 64; the fake pins with mlock like ib_umem_get.
      chmod 755 /tmp/b /tmp/b/cli /tmp/fk "$FAKEDIR"; chmod 777 "$W"
      setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups env -i PATH=/usr/bin:/bin HOME=/tmp \
        LD_LIBRARY_PATH="$FAKEDIR" MRCHECK_FAKE_IBV_LOG="$W/fakeibv_$c.log" \
        bash -c "ulimit -l 64; exec $M probe nccl --mode local-pair --timeout 25s --json --verbose" >"$W/fake_$c.json" 2>&1
    else
      env LD_LIBRARY_PATH="$FAKEDIR" MRCHECK_FAKE_IBV_LOG="$W/fakeibv_$c.log" "${E[@]}" \
        $M probe nccl --mode local-pair --timeout 15s --json --verbose >"$W/fake_$c.json" 2>&1
    fi
    log "rc=$? $(ms_since $t) ms"; grep -E '"summary"|"transport"|"outcome"' "$W/fake_$c.json" >>"$S"
    sleep 0.2; log "processes left: $(pgrep -fc -- 'probe nccl' || true)"
  done
fi

log "== tests/gpu/nccl_pair_gpu_test.sh"
bash tests/gpu/nccl_pair_gpu_test.sh "$M" "$FAKEDIR/libibverbs.so.1" >"$W/gpu_test.log" 2>&1; log "rc=$?"; cat "$W/gpu_test.log" >>"$S"

cp "$S" "$W/"
tar -C /tmp --exclude=minimal_pair -czf "$OUT/nccl.tar.gz" ncclrun
ls -la "$OUT"
