#!/bin/bash
# Real NCCL against the fake libibverbs, on a machine with one GPU (the device machine).
#   bash tests/fakes/run_nccl_smoke.sh [BUILD_DIR]     results in $OUT (or /tmp/nccl-smoke)
# Scenarios: the fake HCA as root (CAP_IPC_LOCK), as uid 65534 under a 64 KiB and an 8 MiB (kernel
# default) memlock limit, with an injected EFAULT, and with no fake device (NCCL falls back to sockets).
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=${OUT:-/tmp/nccl-smoke}
build=${1:-/tmp/mrcheck-fakes-build}
mkdir -p "$out" && chmod 0777 "$out"
cmake -S tests/fakes -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$out/cmake.log" 2>&1 &&
  cmake --build "$build" -j 8 >>"$out/cmake.log" 2>&1 || { tail -30 "$out/cmake.log"; exit 1; }
smoke=$build/nccl_fake_hca_smoke
[[ -x $smoke ]] || { echo "run_nccl_smoke: nccl_fake_hca_smoke not built (no NCCL/CUDA?)"; tail -20 "$out/cmake.log"; exit 1; }
chmod -R a+rX "$build"
fake_dir=$build/fakes/lib
base_env=(LD_LIBRARY_PATH="$fake_dir" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET NCCL_SOCKET_IFNAME=lo
  NCCL_IB_HCA=mlx5_0 NCCL_NET_GDR_LEVEL=LOC)

scenario() { # name, user (root|nobody), memlock KiB soft, extra env...
  local name=$1 user=$2 kib=$3; shift 3
  local log=$out/$name.log calls=/tmp/mrcheck-nccl-smoke-$name.calls
  rm -f "$calls"
  local t0=$SECONDS
  if [[ $user == nobody ]]; then
    env "${base_env[@]}" MRCHECK_FAKE_IBV_LOG="$calls" "$@" bash -c \
      "ulimit -S -l $kib && exec setpriv --reuid=65534 --regid=65534 --clear-groups -- '$smoke' 1048576 15" >"$log" 2>&1
  else
    env "${base_env[@]}" MRCHECK_FAKE_IBV_LOG="$calls" "$@" bash -c "ulimit -S -l $kib && exec '$smoke' 1048576 15" >"$log" 2>&1
  fi
  local rc=$?
  [[ -f $calls ]] && cp "$calls" "$out/$name.calls"
  echo "== $name: exit $rc ($((SECONDS - t0)) s)"
  grep -hE 'mrcheck: nccl_smoke|NET/IB|via NET|NCCL WARN|Using network|No device found|Failed to open libmlx5|Could not find real path' "$log" |
    sed -E 's/^[^ ]+ [^ ]+ [^ ]+ //' | sort | uniq -c | sort -rn | head -25
  if [[ -f $calls ]]; then
    echo "   fake calls: $(wc -l <"$calls") lines; by call/result:"
    sed -E 's/.* call=([^ ]+).* result=([^ ]+).*/\1 \2/' "$calls" | sort | uniq -c | sed 's/^/   /'
    grep -m3 'call=ibv_reg_mr_iova2' "$calls" | sed 's/^/   /'
  fi
}

nvidia-smi -L 2>/dev/null | head -2
ls -l /usr/lib/x86_64-linux-gnu/libibverbs.so* /usr/lib/x86_64-linux-gnu/libnccl.so* 2>/dev/null
echo "== fake_ibverbs_test (built against this machine's verbs.h)"
"$build/fake_ibverbs_test" "$fake_dir/libibverbs.so.1" 2>&1 | grep -vE ': PASS$' | tail -8
gpu_check=$build/fake_ibverbs_gpu_check
if [[ -x $gpu_check ]]; then
  echo "== fake_ibverbs_gpu_check as root"
  "$gpu_check" "$fake_dir/libibverbs.so.1" 2>&1 | tail -12
  echo "== fake_ibverbs_gpu_check as uid 65534, memlock 0 (dma-buf must not be charged)"
  bash -c "ulimit -S -l 0 && exec setpriv --reuid=65534 --regid=65534 --clear-groups -- '$gpu_check' '$fake_dir/libibverbs.so.1'" 2>&1 | tail -12
fi
scenario root_unlimited root unlimited
scenario nobody_memlock_64k nobody 64
scenario nobody_memlock_8m nobody 8192
scenario root_inject_efault root unlimited MRCHECK_FAKE_IBV_INJECT=reg_mr_iova2=EFAULT
scenario no_fake_device root unlimited MRCHECK_FAKE_IBV_DEVICES=
