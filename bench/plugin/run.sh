#!/bin/bash
# What the SPANK plugin costs a job step: `srun -n N true` without the plugin, with the plugin loaded but idle,
# and with the plugin and --mr-check=memlock, interleaved run by run (so drift hits all three alike), on the
# local Slurm of tests/slurm. Prints the median wall time of each and the ratios to "no plugin".
# usage: bench/plugin/run.sh [-n TASKS] [-r RUNS] [BUILD_DIR]     (root; the cluster is started if needed)
set -euo pipefail
tasks=2
runs=21
while getopts "n:r:" o; do
  case $o in
    n) tasks=$OPTARG ;;
    r) runs=$OPTARG ;;
    *) echo "usage: $0 [-n TASKS] [-r RUNS] [BUILD_DIR]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$src/build}
[[ -f $build/spank/spank_mrcheck.so ]] || { echo "mrcheck: bench: no $build/spank/spank_mrcheck.so" >&2; exit 1; }
bash "$src/tests/slurm/slurm-up.sh" >/dev/null
source "${MRCHECK_SLURM_DIR:-/tmp/mrcheck-slurm}/env.sh"
so=$MRCHECK_SLURM_DIR/install/lib/slurm/spank_mrcheck.so
mkdir -p "$(dirname "$so")"
install -m 0755 "$build/spank/spank_mrcheck.so" "$so"
dropin=$MRCHECK_SLURM_PLUGSTACK_D/mrcheck.conf
trap 'rm -f "$dropin"' EXIT
cd "$MRCHECK_SLURM_WORK"

# One timed srun as the job user; prints seconds.
one() {
  local s e
  s=$(date +%s%N)
  $MRCHECK_AS_USER srun -n "$tasks" "$@" true >/dev/null 2>&1 || { echo "mrcheck: bench: srun $* failed" >&2; exit 1; }
  e=$(date +%s%N)
  awk -v a="$s" -v b="$e" 'BEGIN{printf "%.4f\n", (b-a)/1e9}'
}
median() { sort -n | awk '{v[NR]=$1} END{m=(NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2; printf "%.4f", m}'; }

declare -a none idle check
$MRCHECK_AS_USER srun -n "$tasks" true >/dev/null 2>&1  # warm-up: first step after idle is slower
for ((i = 0; i < runs; i++)); do
  rm -f "$dropin"
  none+=("$(one)")
  echo "optional $so memlock_min=8M" >"$dropin"
  idle+=("$(one)")
  check+=("$(one --mr-check=memlock)")
done
printf "none: %s\n" "${none[*]}" >&2; printf "idle: %s\n" "${idle[*]}" >&2; printf "check: %s\n" "${check[*]}" >&2
m_none=$(printf '%s\n' "${none[@]}" | median)
m_idle=$(printf '%s\n' "${idle[@]}" | median)
m_check=$(printf '%s\n' "${check[@]}" | median)
printf 'mrcheck: bench: srun -n %d true, %d runs each, median wall time\n' "$tasks" "$runs"
printf '  no plugin                  %s s\n' "$m_none"
printf '  plugin loaded, idle        %s s   ratio %s\n' "$m_idle" "$(awk -v a="$m_idle" -v b="$m_none" 'BEGIN{printf "%.3f", a/b}')"
printf '  plugin, --mr-check=memlock %s s   ratio %s\n' "$m_check" "$(awk -v a="$m_check" -v b="$m_none" 'BEGIN{printf "%.3f", a/b}')"
