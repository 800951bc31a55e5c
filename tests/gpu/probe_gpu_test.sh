#!/usr/bin/env bash
# mr_gpu on a real GPU against the fake libibverbs.so.1: real cuMemAlloc memory registered through the
# peer-memory path (the fake answers EFAULT like ib_umem_get without a peer client, since the CPU cannot map
# it), and a real DMA-BUF fd from cuMemGetHandleForAddressRange registered through ibv_reg_dmabuf_mr (the fake
# checks that the fd really is a dma-buf). Skips (77) with the reason when there is no GPU - CI has none.
#
#   tests/gpu/probe_gpu_test.sh [MRCHECK_BINARY [FAKE_LIBIBVERBS]]
# defaults: $MRCHECK_BUILD_DIR/cli/mrcheck and the fake found under $MRCHECK_BUILD_DIR.
#
# The binary must be built WITH the CUDA headers (build_config.h: MRCHECK_HAVE_CUDA_HEADERS 1), else mr_gpu
# skips "built without CUDA headers" and so does this test. On the GPU machine CMake's FindCUDAToolkit needs
# nvcc on PATH, in a fresh build directory (a failed search is cached):
#   PATH=/usr/local/cuda/bin:$PATH cmake -S . -B /tmp/bc -G Ninja -DMRCHECK_BUILD_TESTS=OFF && ninja -C /tmp/bc mrcheck
#   cmake -S tests/fakes -B /tmp/f -G Ninja && ninja -C /tmp/f fake_ibverbs
#   bash tests/gpu/probe_gpu_test.sh /tmp/bc/cli/mrcheck /tmp/f/fakes/lib/libibverbs.so.1
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${MRCHECK_BUILD_DIR:=$here/../../build}"
mrcheck_bin=${1:-$MRCHECK_BUILD_DIR/cli/mrcheck}
fake=${2:-$(find "$MRCHECK_BUILD_DIR" -name 'libibverbs.so.1' -path '*fake*' 2>/dev/null | head -1 || true)}
fails=0
say() { printf 'probe_gpu_test: %s\n' "$*" >&2; }
ok() { say "ok: $*"; }
bad() { say "FAIL: $*"; fails=$((fails + 1)); }
[[ -x $mrcheck_bin ]] || { say "SKIP: no mrcheck binary at $mrcheck_bin"; exit 77; }
[[ -n $fake && -f $fake ]] || { say "SKIP: no fake libibverbs.so.1 (build target fake_ibverbs)"; exit 77; }
command -v python3 >/dev/null || { say "SKIP: python3 needed to read the JSON"; exit 77; }
if [[ ! -e /dev/nvidiactl ]]; then say "SKIP: no NVIDIA GPU on this machine (/dev/nvidiactl missing)"; exit 77; fi

get() { python3 -c "import json,sys; j=json.loads(sys.stdin.read()); print($2)" <<<"$1" 2>/dev/null || echo "<bad json>"; }

set +e
out=$("$mrcheck_bin" probe mr --gpu --json --size 4M --verbs-library "$fake" 2>/tmp/probe_gpu_err.$$)
rc=$?
set -e
say "mrcheck probe mr --gpu --json --size 4M (as $(id -un), exit $rc):"
printf '%s\n' "$out"
cat /tmp/probe_gpu_err.$$ >&2 || true
rm -f /tmp/probe_gpu_err.$$
# mnnvl_handle (docs/facts/mnnvl.md §5): the project's H100/H200 have no NVLink fabric (NVML: state N/A), so the check
# allocates nothing and says so; a GPU in a multi-node fabric (GB200/GB300) must make and export its buffer.
handle=$(get "$out" '[c["verdict"]+" | "+c["summary"] for c in j["checks"] if c["id"]=="mnnvl_handle"][0]')
if [[ $(get "$out" 'j["probe"]["fabric"]["node_fabric"]') == False ]]; then
  [[ $handle == "skip | no NVLink fabric on this node: fabric handles not tested ("* ]] && ok "mnnvl_handle without a fabric: $handle" \
    || bad "mnnvl_handle without a fabric: $handle"
  [[ $(get "$out" '"attempt" in j["probe"]["fabric"]') == False ]] && ok "no fabric-handle buffer allocated" || bad "fabric: $(get "$out" 'j["probe"]["fabric"]')"
else
  [[ $handle == "pass | "* ]] && ok "mnnvl_handle on a fabric: $handle" || bad "mnnvl_handle on a fabric: $handle"
fi
gpu_verdict=$(get "$out" '[c["verdict"] for c in j["checks"] if c["id"]=="mr_gpu"][0]')
if [[ $gpu_verdict == skip ]]; then
  say "SKIP: mr_gpu skipped: $(get "$out" '[c["summary"] for c in j["checks"] if c["id"]=="mr_gpu"][0]')"
  exit 77
fi
[[ $gpu_verdict == pass ]] && ok "mr_gpu pass" || bad "mr_gpu verdict $gpu_verdict"
[[ $(get "$out" 'j["probe"]["hcas"][0]["gpu"]["dmabuf"]["ok"]') == True ]] && ok "real DMA-BUF fd registered" \
  || bad "DMA-BUF registration: $(get "$out" 'j["probe"]["hcas"][0]["gpu"]')"
[[ $(get "$out" 'j["probe"]["hcas"][0]["gpu"]["peermem"].get("errno_name")') == EFAULT ]] && ok "cuMemAlloc pointer without a peer client: EFAULT" \
  || bad "peer-memory path: $(get "$out" 'j["probe"]["hcas"][0]["gpu"]["peermem"]')"
[[ $(get "$out" '[c["verdict"] for c in j["checks"] if c["id"]=="mr_host"][0]') == pass ]] && ok "mr_host pass" || bad "mr_host"
# The buffer NCCL >= 2.19 allocates by default: cuMemCreate with gpuDirectRDMACapable, mapped, its DMA-BUF fd
# registered through the same path (the fake checks the fd is a dma-buf).
if [[ $(get "$out" 'j["probe"]["hcas"][0]["gpu"]["vmm"]["supported"]') == True ]]; then
  [[ $(get "$out" 'j["probe"]["hcas"][0]["gpu"]["vmm"]["dmabuf"]["ok"]') == True ]] && ok "real cuMem (VMM) DMA-BUF fd registered" \
    || bad "cuMem DMA-BUF registration: $(get "$out" 'j["probe"]["hcas"][0]["gpu"]["vmm"]')"
  summary=$(get "$out" '[c["summary"] for c in j["checks"] if c["id"]=="mr_gpu"][0]')
  [[ $summary == *"cudaMalloc and cuMem buffers"* ]] && ok "summary names both buffers: $summary" || bad "summary: $summary"
else
  bad "this GPU reports no CUDA VMM: $(get "$out" 'j["probe"]["hcas"][0]["gpu"]')"
fi

# DMA-BUF registrations are not charged to RLIMIT_MEMLOCK (docs/facts/memlock.md §3): as an unprivileged user with a 64
# KiB limit the host registration fails with memlock while the GPU's DMA-BUF registration still works.
if id nobody >/dev/null 2>&1 && command -v runuser >/dev/null && command -v prlimit >/dev/null; then
  stage=$(mktemp -d /tmp/probe-gpu.XXXXXX)
  install -m 0755 "$mrcheck_bin" "$stage/mrcheck"
  install -m 0755 "$fake" "$stage/libibverbs.so.1"
  chmod 0755 "$stage"
  set +e
  out=$(runuser -u nobody -- prlimit --memlock=65536:65536 "$stage/mrcheck" probe mr --gpu --json --size 4M --verbs-library "$stage/libibverbs.so.1" 2>&1)
  rc=$?
  set -e
  rm -rf "$stage"
  say "as nobody with memlock 64 KiB (exit $rc):"
  printf '%s\n' "$out"
  [[ $(get "$out" 'j["probe"]["diagnosis"]["mr_host"]["cause"]') == memlock ]] && ok "nobody: mr_host cause memlock" || bad "nobody: mr_host"
  v=$(get "$out" '[c["verdict"] for c in j["checks"] if c["id"]=="mr_gpu"][0]')
  if [[ $v == skip ]]; then say "note: nobody cannot use the GPU here: $(get "$out" '[c["summary"] for c in j["checks"] if c["id"]=="mr_gpu"][0]')"
  else [[ $v == pass ]] && ok "nobody: DMA-BUF registration works under a 64 KiB limit" || bad "nobody: mr_gpu $v"; fi
fi
say "$fails failed"
((fails == 0))
