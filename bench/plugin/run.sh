#!/bin/bash
# What the SPANK plugin costs a job step: `srun -n N true` without the plugin, with the plugin loaded but idle,
# and with the plugin and --mr-check=memlock, on the local Slurm of tests/slurm. The three run round by round,
# in a rotating order (so drift and position effects hit all three alike). Prints, for each, the median wall
# time with its spread (quartiles, min-max), the ratio of medians to "no plugin", and the median of the
# per-round paired ratios (each run against the "no plugin" run of its own round), which cancels slow drift.
# usage: bench/plugin/run.sh [-n TASKS] [-r RUNS] [-t] [BUILD_DIR]     (root; the cluster is started if needed)
#   -t  with a TaskProlog in slurm.conf (a script that does nothing): the post-exec watcher's cost shows as the
#       difference of the memlock ratio with and without -t (the TaskProlog itself is in all three).
set -euo pipefail
tasks=2
runs=41
taskprolog=0
while getopts "n:r:t" o; do
  case $o in
    n) tasks=$OPTARG ;;
    r) runs=$OPTARG ;;
    t) taskprolog=1 ;;
    *) echo "usage: $0 [-n TASKS] [-r RUNS] [-t] [BUILD_DIR]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$src/build}
[[ -f $build/spank/spank_mrcheck.so ]] || { echo "mrcheck: bench: no $build/spank/spank_mrcheck.so" >&2; exit 1; }
bash "$src/tests/slurm/slurm-up.sh" >/dev/null
# shellcheck source=/dev/null
source "${MRCHECK_SLURM_DIR:-/tmp/mrcheck-slurm}/env.sh"
so=$MRCHECK_SLURM_DIR/install/lib/slurm/spank_mrcheck.so
mkdir -p "$(dirname "$so")"
install -m 0755 "$build/spank/spank_mrcheck.so" "$build/spank/mrcheck_spank_core.so" "$(dirname "$so")/"
dropin=$MRCHECK_SLURM_PLUGSTACK_D/mrcheck.conf
cleanup() {
  rm -f "$dropin"
  if ((taskprolog)); then bash "$src/tests/slurm/slurm-conf-set.sh" TaskProlog '' >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT
if ((taskprolog)); then
  tp=$MRCHECK_SLURM_DIR/install/etc/bench_taskprolog.sh
  mkdir -p "$(dirname "$tp")"
  printf '#!/bin/sh\nexit 0\n' >"$tp"
  chmod 755 "$tp"
  bash "$src/tests/slurm/slurm-conf-set.sh" TaskProlog "$tp" >/dev/null
fi
cd "$MRCHECK_SLURM_WORK"

# One timed srun as the job user; prints seconds.
one() {
  local s e
  s=$(date +%s%N)
  $MRCHECK_AS_USER srun -n "$tasks" "$@" true >/dev/null 2>&1 || { echo "mrcheck: bench: srun $* failed" >&2; exit 1; }
  e=$(date +%s%N)
  awk -v a="$s" -v b="$e" 'BEGIN{printf "%.4f\n", (b-a)/1e9}'
}
# quantiles: prints "median p25 p75 min max" of the numbers on stdin.
quantiles() {
  sort -g | awk '{v[NR]=$1}
    function q(p,  i, f) { i = 1 + (NR - 1) * p; f = int(i); return v[f] + (i - f) * (f < NR ? v[f + 1] - v[f] : 0) }
    END { printf "%.4f %.4f %.4f %.4f %.4f\n", q(0.5), q(0.25), q(0.75), v[1], v[NR] }'
}
run_config() {
  case $1 in
    none) rm -f "$dropin"; one ;;
    idle) echo "optional $so memlock_min=8M" >"$dropin"; one ;;
    check) echo "optional $so memlock_min=8M" >"$dropin"; one --mr-check=memlock ;;
  esac
}

declare -a none idle check
$MRCHECK_AS_USER srun -n "$tasks" true >/dev/null 2>&1  # warm-up: first step after idle is slower
orders=("none idle check" "idle check none" "check none idle")
for ((i = 0; i < runs; i++)); do
  for c in ${orders[$((i % 3))]}; do
    t=$(run_config "$c")
    [[ -n $t ]] || exit 1
    case $c in
      none) none+=("$t") ;;
      idle) idle+=("$t") ;;
      check) check+=("$t") ;;
    esac
  done
done
printf "none: %s\n" "${none[*]}" >&2; printf "idle: %s\n" "${idle[*]}" >&2; printf "check: %s\n" "${check[*]}" >&2
read -r m_none q1_none q3_none min_none max_none < <(printf '%s\n' "${none[@]}" | quantiles)
read -r m_idle q1_idle q3_idle min_idle max_idle < <(printf '%s\n' "${idle[@]}" | quantiles)
read -r m_check q1_check q3_check min_check max_check < <(printf '%s\n' "${check[@]}" | quantiles)
paired() {  # median (p25-p75) of a[i]/none[i]
  local -n a=$1
  for ((i = 0; i < runs; i++)); do awk -v x="${a[$i]}" -v y="${none[$i]}" 'BEGIN{printf "%.5f\n", x/y}'; done | quantiles |
    awk '{printf "%.3f (%.3f-%.3f)", $1, $2, $3}'
}
ratio() { awk -v a="$1" -v b="$m_none" 'BEGIN{printf "%.3f", a/b}'; }
printf 'mrcheck: bench: srun -n %d true, %d runs each, rotating order%s; seconds: median (p25-p75, min-max)\n' \
  "$tasks" "$runs" "$( ((taskprolog)) && echo ', TaskProlog set')"
printf '  no plugin                  %s (%s-%s, %s-%s)\n' "$m_none" "$q1_none" "$q3_none" "$min_none" "$max_none"
printf '  plugin loaded, idle        %s (%s-%s, %s-%s)  ratio of medians %s  paired ratio %s\n' "$m_idle" "$q1_idle" \
  "$q3_idle" "$min_idle" "$max_idle" "$(ratio "$m_idle")" "$(paired idle)"
printf '  plugin, --mr-check=memlock %s (%s-%s, %s-%s)  ratio of medians %s  paired ratio %s\n' "$m_check" \
  "$q1_check" "$q3_check" "$min_check" "$max_check" "$(ratio "$m_check")" "$(paired check)"
