#!/usr/bin/env bash
# Probe wall time for the default (NCCL-estimate) size against a bare mmap+touch+mlock+munlock of the same
# bytes, in the same run, each as its own process (so both pay a process start). Goal: probe <= 1.3 x baseline
# + the start of the mrcheck binary (`mrcheck --version`). Uses the fake libibverbs, whose registration is an
# mlock, so the difference is mrcheck's own work: dlopen/dlvsym, device listing, the estimate, the checks, JSON.
#
#   bench/probe/run.sh [MRCHECK_BINARY [FAKE_LIBIBVERBS [REPS]]]
# Run as root (CAP_IPC_LOCK) or with a memlock limit above the estimate (73.5 MiB with NCCL's defaults).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${MRCHECK_BUILD_DIR:=$here/../../build}"
mrcheck_bin=${1:-$MRCHECK_BUILD_DIR/cli/mrcheck}
fake=${2:-$(find "$MRCHECK_BUILD_DIR" -name 'libibverbs.so.1' -path '*fake*' 2>/dev/null | head -1)}
reps=${3:-7}
work=$(mktemp -d /tmp/mrcheck-bench-probe.XXXXXX)
trap 'rm -rf "$work"' EXIT
cc -O2 -o "$work/mlock_baseline" "$here/mlock_baseline.c"

now_us() { echo $(($(date +%s%N) / 1000)); }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : int((a[NR/2]+a[NR/2+1])/2)}'; }

size=$("$mrcheck_bin" probe mr --json --verbs-library "$fake" | python3 -c 'import json,sys; print(json.load(sys.stdin)["probe"]["size"])')
: >"$work/probe" ; : >"$work/base" ; : >"$work/start" ; : >"$work/reg"
for ((i = 0; i < reps; i++)); do
  t0=$(now_us); "$mrcheck_bin" --version >/dev/null; t1=$(now_us); echo $((t1 - t0)) >>"$work/start"
  t0=$(now_us); out=$("$mrcheck_bin" probe mr --json --verbs-library "$fake"); t1=$(now_us)
  echo $((t1 - t0)) >>"$work/probe"
  python3 -c 'import json,sys; j=json.load(sys.stdin); assert j["verdict"]=="pass", j["verdict"]; print(j["probe"]["hcas"][0]["host"]["elapsed_us"])' <<<"$out" >>"$work/reg"
  t0=$(now_us); "$work/mlock_baseline" "$size" >/dev/null; t1=$(now_us); echo $((t1 - t0)) >>"$work/base"
done
p=$(median <"$work/probe"); b=$(median <"$work/base"); s=$(median <"$work/start"); r=$(median <"$work/reg")
ratio=$(awk -v p="$p" -v b="$b" 'BEGIN {printf "%.2f", p / b}')
ratio_start=$(awk -v p="$p" -v b="$b" -v s="$s" 'BEGIN {printf "%.2f", (p - s) / b}')
verdict=$(awk -v p="$p" -v b="$b" -v s="$s" 'BEGIN {print (p <= 1.3 * b + s) ? "met" : "MISSED"}')
cat <<OUT
mrcheck probe bench: $(uname -n), $(nproc) cpus, size $size bytes (NCCL estimate), $reps runs, medians
  probe process (default size)          ${p} us   (registration loop alone ${r} us)
  mlock baseline process (same bytes)   ${b} us
  mrcheck --version (process start)     ${s} us
  probe / baseline                      ${ratio}
  (probe - start) / baseline            ${ratio_start}
  goal probe <= 1.3 x baseline + start: ${verdict}
OUT
[[ $verdict == met ]]
