#!/bin/bash
# Wall time of the full matrix check (mrcheck-prolog --dry-run: every fact, every rule, no Slurm RPC) against
# the manual checklist (manual-checklist.sh) on the same machine, in one run. Prints the median and min of
# N runs of each and the ratio; the goal is mrcheck <= 1/20 of the checklist. With --baseline, a second
# mrcheck-prolog (e.g. the previous commit's) is timed in the same loop, so both see the same machine state.
# The runs are interleaved (checklist, prolog, baseline, checklist, ...): a machine that gets slower or
# faster during the run shifts all of them alike.
# With --history the baseline is the same binary without --state-dir: the prolog is timed keeping its stack
# history in a state dir (a dry run with an explicit --state-dir keeps it as a real run does) against the same
# run without history, so the difference is the history's cost alone.
# usage: run.sh [--runs N] [--prolog PATH] [--baseline PATH] [--rules FILE] [--history]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
runs=20
prolog=""
baseline=""
rules=$src/etc/mrcheck-rules.conf
history=0
while (($#)); do
  case "$1" in
    --runs) runs=$2; shift ;;
    --prolog) prolog=$2; shift ;;
    --baseline) baseline=$2; shift ;;
    --rules) rules=$2; shift ;;
    --history) history=1 ;;
    *) echo "usage: run.sh [--runs N] [--prolog PATH] [--baseline PATH] [--rules FILE] [--history]" >&2; exit 2 ;;
  esac
  shift
done
if [[ -z $prolog ]]; then
  prolog=$(ls -t "$src"/build*/prolog/mrcheck-prolog 2>/dev/null | head -n1 || true)
fi
[[ -x $prolog ]] || { echo "mrcheck: bench: mrcheck-prolog not found (--prolog PATH)" >&2; exit 2; }
[[ -z $baseline || -x $baseline ]] || { echo "mrcheck: bench: --baseline $baseline is not executable" >&2; exit 2; }

# time_ms CMD...: wall milliseconds of one run (fractional).
time_ms() {
  local a b
  a=$(date +%s%N)
  "$@" >/dev/null 2>&1 || true
  b=$(date +%s%N)
  awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f\n", (b - a) / 1e6 }'
}
stats() { sort -n | awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.2f %.2f\n", m, v[1] }'; }
prolog_args=(--dry-run --mode healthcheck --node bench --rules "$rules")
base_args=("${prolog_args[@]}")
if ((history)); then
  baseline=$prolog
  hist_dir=$(mktemp -d)
  prolog_args+=(--state-dir "$hist_dir")
fi

# One warm-up each (page cache, dynamic loader), not counted.
bash "$here/manual-checklist.sh"
"$prolog" "${prolog_args[@]}" >/dev/null 2>&1 || true
[[ -z $baseline ]] || "$baseline" "${base_args[@]}" >/dev/null 2>&1 || true

tmp=$(mktemp -d)
trap 'rm -rf "$tmp" ${hist_dir:+"$hist_dir"}' EXIT
for _ in $(seq "$runs"); do
  time_ms bash "$here/manual-checklist.sh" >>"$tmp/manual"
  time_ms "$prolog" "${prolog_args[@]}" >>"$tmp/mr"
  [[ -z $baseline ]] || time_ms "$baseline" "${base_args[@]}" >>"$tmp/base"
done
read -r manual_med manual_min < <(stats <"$tmp/manual")
read -r mr_med mr_min < <(stats <"$tmp/mr")
tools=""
for t in nvidia-smi ibstat ibv_devinfo modinfo ofed_info lsmod; do command -v "$t" >/dev/null 2>&1 && tools+="$t "; done
echo "host: $(hostname -s), $(nproc) CPUs, kernel $(uname -r); runs: $runs (interleaved)"
echo "checklist tools present: ${tools:-none}"
printf '%-34s %10s %10s\n' "" "median ms" "min ms"
printf '%-34s %10s %10s\n' "manual checklist (shell)" "$manual_med" "$manual_min"
printf '%-34s %10s %10s\n' "mrcheck-prolog --dry-run" "$mr_med" "$mr_min"
if [[ -n $baseline ]]; then
  read -r base_med base_min < <(stats <"$tmp/base")
  printf '%-34s %10s %10s\n' "baseline --dry-run$( ((history)) && echo ' (no history)')" "$base_med" "$base_min"
  awk -v p="$mr_med" -v b="$base_med" -v pm="$mr_min" -v bm="$base_min" 'BEGIN { printf "difference: median %+.2f ms, min %+.2f ms\n", p - b, pm - bm }'
  awk -v m="$manual_med" -v p="$base_med" 'BEGIN { printf "baseline ratio (median): %.1fx\n", m / p }'
fi
awk -v m="$manual_med" -v p="$mr_med" 'BEGIN { r = m / p; printf "ratio (median): %.1fx faster; goal >= 20x: %s\n", r, (r >= 20 ? "met" : "NOT met") }'
# Where the checklist's time goes: each command alone, median of 5.
echo "checklist items (median of 5, ms):"
for cmd in "nvidia-smi -q" "ibstat" "ibv_devinfo -v" "modinfo mlx5_core" "modinfo nvidia" "ofed_info -s" "lsmod"; do
  command -v "${cmd%% *}" >/dev/null 2>&1 || continue
  # shellcheck disable=SC2086
  t=$(for _ in 1 2 3 4 5; do time_ms $cmd; done | stats)
  printf '  %-22s %8s\n' "$cmd" "${t%% *}"
done
