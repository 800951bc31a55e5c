#!/bin/bash
# mrcheck fleet over N generated node reports (gen.py: copies of `mrcheck report --json` of tests/fixtures/
# matrix_aligned, 3 outliers from matrix_inbox_under_ofed) against `cat` of the same files, in one run, for
# N = 1000 and 10000 (linearity). --baseline times a second build (e.g. the parent commit's) in the same loop.
# usage: run.sh [--mrcheck build/cli/mrcheck] [--baseline OTHER/cli/mrcheck] [--runs 3]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
m=$src/build/cli/mrcheck
runs=3
base=""
while (($#)); do
  case "$1" in
    --mrcheck) m=$2; shift ;;
    --runs) runs=$2; shift ;;
    --baseline) base=$2; shift ;;
    *) echo "usage: run.sh [--mrcheck PATH] [--baseline PATH] [--runs N]" >&2; exit 2 ;;
  esac
  shift
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$m" report --json --root "$src/tests/fixtures/matrix_aligned" >"$tmp/good.json" || true
"$m" report --json --root "$src/tests/fixtures/matrix_inbox_under_ofed" >"$tmp/bad.json" || true
ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", (b - a) / 1e6 }'; }
echo "host: $(hostname -s), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
for n in 1000 10000; do
  python3 "$here/gen.py" "$tmp/good.json" "$tmp/bad.json" "$tmp/f$n" "$n" 17,33,500
  for _ in $(seq "$runs"); do
    a=$(date +%s%N); cat "$tmp/f$n"/* >/dev/null; b=$(date +%s%N)
    "$m" fleet "$tmp/f$n" >/dev/null || true
    c=$(date +%s%N)
    extra=""
    if [[ -n $base ]]; then
      "$base" fleet "$tmp/f$n" >/dev/null || true
      d=$(date +%s%N)
      extra=", baseline fleet $(ms "$c" "$d") ms"
    fi
    echo "n=$n ($(du -sm "$tmp/f$n" | cut -f1) MB): cat $(ms "$a" "$b") ms, fleet $(ms "$b" "$c") ms$extra"
  done
done
