#!/bin/bash
# Long runs toward the goal in tests/fuzz/README.md (>= 10 million executions per target): every target at once,
# in parallel, each with as many libFuzzer workers as MRCHECK_FUZZ_WORKERS gives it, for SECONDS.
#
#   tests/fuzz/long.sh SECONDS BIN_DIR OUT_DIR
#
# BIN_DIR holds the fuzz_<name> executables of a fuzz build (BUILD_DIR/tests/fuzz, or a copy of them on another
# machine: the seeds and dictionaries are read from beside this script). Each target fuzzes a copy of its
# corpus in OUT_DIR/<name>/corpus; each worker's log is OUT_DIR/<name>/fuzz-<i>.log and any reproducer lands in
# OUT_DIR/<name>/. Prints one line per target (executions summed over its workers, exec/s, result) to
# OUT_DIR/summary.txt and stdout; exit 1 on any crash, leak, timeout or sanitizer report.
#
# Environment: MRCHECK_FUZZ_WORKERS="name=N ..." (default 1 each), MRCHECK_FUZZ_TARGETS="a b" (subset),
# MRCHECK_FUZZ_ARGS (more libFuzzer flags), MRCHECK_FUZZ_GOAL=N (each of a target's n workers stops after
# ceil(N / n) executions, so the target does at least N and then leaves its cores to the targets still running;
# SECONDS stays the limit). Workers of a target share its corpus (libFuzzer -jobs/-workers). The seconds column
# is the longest worker's own time ("Done ... in S second(s)"), so exec/s holds for targets that stopped early.
set -u
seconds=${1:?seconds}
bins=$(cd "${2:?bin dir}" && pwd) || exit 2
out=${3:?out dir}
mkdir -p "$out" && out=$(cd "$out" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/fuzz/options.sh
source "$here/options.sh"

workers_for() {
  local w
  for w in ${MRCHECK_FUZZ_WORKERS:-}; do
    [[ ${w%%=*} == "$1" ]] && { echo "${w#*=}"; return; }
  done
  echo 1
}

names=()
for bin in "$bins"/fuzz_*; do
  [[ -x $bin && -f $bin ]] || continue
  name=${bin##*/fuzz_}
  if [[ -n ${MRCHECK_FUZZ_TARGETS:-} && " $MRCHECK_FUZZ_TARGETS " != *" $name "* ]]; then continue; fi
  names+=("$name")
  dir=$out/$name
  mkdir -p "$dir/corpus"
  [[ -d $here/corpus/$name ]] && cp -R "$here/corpus/$name/." "$dir/corpus/"
  dict=()
  [[ -f $here/dict/$name.dict ]] && dict=(-dict="$here/dict/$name.dict")
  n=$(workers_for "$name")
  runs=()
  [[ -n ${MRCHECK_FUZZ_GOAL:-} ]] && runs=(-runs=$(((MRCHECK_FUZZ_GOAL + n - 1) / n)))
  # shellcheck disable=SC2086
  (cd "$dir" && exec "$bin" corpus "${dict[@]}" -max_total_time="$seconds" "${mrcheck_fuzz_common_args[@]}" \
     -max_len="$(max_len_for "$name")" -artifact_prefix="$dir/" -jobs="$n" -workers="$n" "${runs[@]}" \
     ${MRCHECK_FUZZ_ARGS:-} </dev/null >"$dir/parent.log" 2>&1) &
done
wait

failed=0
: >"$out/summary.txt"
for name in "${names[@]}"; do
  dir=$out/$name
  logs=("$dir"/fuzz-*.log)
  [[ -e ${logs[0]} ]] || logs=("$dir/parent.log")
  execs=$(cat "${logs[@]}" | sed -n 's/^stat::number_of_executed_units: *//p' | awk '{s += $1} END {print s + 0}')
  cov=$(cat "${logs[@]}" | grep -o 'cov: [0-9]* ft: [0-9]*' | sort -t' ' -k2,2n | tail -1)
  took=$(cat "${logs[@]}" | sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' | sort -n | tail -1)
  [[ -n $took ]] || took=$seconds
  [[ $took -gt 0 ]] || took=1
  crashes=$(find "$dir" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
  if [[ $crashes -eq 0 ]] && ! cat "${logs[@]}" | grep -qE "$mrcheck_fuzz_failure_re"; then
    result=ok
  else
    result="FAIL ($crashes reproducers)"
    failed=$((failed + 1))
  fi
  printf '%-18s %3s workers %14s execs %5s s %10s exec/s  %-22s corpus %5s  %s\n' "$name" "$(workers_for "$name")" \
    "$execs" "$took" "$((execs / took))" "${cov:-}" "$(find "$dir/corpus" -type f | wc -l)" "$result" | tee -a "$out/summary.txt"
done
echo "$((${#names[@]} - failed)) passed, $failed failed" | tee -a "$out/summary.txt"
[[ $failed -eq 0 ]]
