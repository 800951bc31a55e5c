#!/usr/bin/env bash
# `mrcheck probe nccl` on a real GPU: local-pair passes with the right sum through NCCL's NET
# transport; a rank killed mid-test and a timeout give a clear fail verdict and leave no process behind; with
# the fake libibverbs first in the library path, NCCL takes NET/IB and an ENOMEM from ibv_reg_mr_iova2 (real
# mlock under `ulimit -l 64`, as a non-root user) is explained as the memlock limit. Skips (77) with the
# reason when there is no GPU - CI has none.
#
#   tests/gpu/nccl_pair_gpu_test.sh [MRCHECK_BINARY [FAKE_LIBIBVERBS]]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${MRCHECK_BUILD_DIR:=$here/../../build}"
m=${1:-$MRCHECK_BUILD_DIR/cli/mrcheck}
fake=${2:-$(find "$MRCHECK_BUILD_DIR" -name 'libibverbs.so.1' -path '*fake*' 2>/dev/null | head -1 || true)}
fails=0
say() { printf 'nccl_pair_gpu_test: %s\n' "$*" >&2; }
ok() { say "ok: $*"; }
bad() { say "FAIL: $*"; fails=$((fails + 1)); }
[[ -x $m ]] || { say "SKIP: no mrcheck binary at $m"; exit 77; }
[[ -e /dev/nvidiactl ]] || { say "SKIP: no NVIDIA GPU on this machine (/dev/nvidiactl missing)"; exit 77; }
command -v python3 >/dev/null || { say "SKIP: python3 needed to read the JSON"; exit 77; }
get() { python3 -c "import json,sys; j=json.loads(sys.stdin.read()); print($2)" <<<"$1" 2>/dev/null || echo "<bad json>"; }
left() { pgrep -fc -- 'probe nccl --rank' || true; }

# 1. local-pair passes, the sum is checked on every element, NET carried it.
t0=$(date +%s%N)
out=$("$m" probe nccl --mode local-pair --json); rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
say "local-pair: exit $rc in $ms ms: $(get "$out" 'j["checks"][0]["summary"]')"
if [[ $(get "$out" 'j["checks"][0]["verdict"]') == skip ]]; then
  say "SKIP: $(get "$out" 'j["checks"][0]["summary"]')"; exit 77
fi
[[ $rc == 0 && $(get "$out" 'j["verdict"]') == pass ]] && ok "pass" || bad "verdict $(get "$out" 'j["verdict"]') exit $rc"
[[ $(get "$out" 'all(r["report"]["mismatches"]==0 and r["report"]["count"]==1048576 and r["report"]["expected"]==3 for r in j["ranks"])') == True ]] \
  && ok "1 Mi floats, 1+2=3 on every element, both ranks" || bad "rank reports: $(get "$out" 'j["ranks"]')"
[[ $(get "$out" 'any(t.startswith("NET/") for t in j["transport"])') == True ]] && ok "transport $(get "$out" 'j["transport"]')" \
  || bad "no NET transport: $(get "$out" 'j["transport"]')"
[[ $(get "$out" 'len(j["timings"]["nccl_init"])') == 2 ]] && ok "NCCL init timings of both ranks" || bad "init timings missing"
[[ $(left) == 0 ]] && ok "no rank left" || bad "$(left) rank processes left"

# 2. a rank killed mid-test: rank 1 gets SIGKILL once it is in NCCL; rank 0 is stopped, the verdict says so.
"$m" probe nccl --mode local-pair --json >/tmp/nccl_kill.$$ 2>&1 & p=$!
r1=""
for _ in $(seq 1 100); do r1=$(pgrep -f -- 'probe nccl --rank 1' | head -1); [[ -n $r1 ]] && break; sleep 0.02; done
sleep 0.5; [[ -n $r1 ]] && kill -9 "$r1"
wait $p; rc=$?; out=$(cat /tmp/nccl_kill.$$); rm -f /tmp/nccl_kill.$$
say "rank 1 killed: exit $rc: $(get "$out" 'j["checks"][0]["summary"]')"
[[ $rc == 1 ]] && ok "exit 1" || bad "exit $rc"
[[ $(get "$out" 'j["checks"][0]["summary"]') == *"rank 1 killed by SIGKILL"* ]] && ok "verdict names the killed rank" || bad "summary"
sleep 0.2; [[ $(left) == 0 ]] && ok "no rank left" || bad "$(left) rank processes left"

# 3. timeout: 400 ms is inside CUDA/NCCL init; both ranks are killed and named with their stage.
out=$("$m" probe nccl --mode local-pair --timeout 400ms --json); rc=$?
say "timeout: exit $rc: $(get "$out" 'j["checks"][0]["summary"]')"
[[ $rc == 1 && $(get "$out" 'j["timed_out"]') == True ]] && ok "timed out, fail" || bad "exit $rc timed_out $(get "$out" 'j["timed_out"]')"
sleep 0.2; [[ $(left) == 0 ]] && ok "no rank left" || bad "$(left) rank processes left"

# 4. the fake HCA, ENOMEM from the real kernel rule: non-root, ulimit -l 64.
if [[ -n $fake && -f $fake ]] && command -v setpriv >/dev/null && id nobody >/dev/null 2>&1; then
  dir=$(dirname "$fake")
  out=$(setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups env -i PATH=/usr/bin:/bin HOME=/tmp \
        LD_LIBRARY_PATH="$dir" bash -c "ulimit -l 64; exec '$m' probe nccl --mode local-pair --timeout 30s --json"); rc=$?
  say "fake HCA, memlock 64 KiB, uid nobody: exit $rc: $(get "$out" 'j["checks"][0]["summary"]')"
  s=$(get "$out" 'j["checks"][0]["summary"]')
  [[ $rc == 1 && $s == *"failed with error Cannot allocate memory"* ]] && ok "NCCL's ENOMEM captured" || bad "summary: $s"
  [[ $s == *memlock* || $s == *MEMLOCK* ]] && ok "explained as the memlock limit" || bad "not explained as memlock: $s"
  [[ $(get "$out" 'j["transport"]') == *NET/IB* ]] && ok "NCCL used NET/IB on the fake HCA" || bad "transport $(get "$out" 'j["transport"]')"
else
  say "note: fake libibverbs, setpriv or user nobody missing: the ENOMEM case was not run"
fi

[[ $fails == 0 ]] && { say "all passed"; exit 0; }
say "$fails check(s) failed"; exit 1
