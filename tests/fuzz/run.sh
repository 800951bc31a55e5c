#!/bin/bash
# Runs every libFuzzer target of a fuzz build for SECONDS each, starting from its seed corpus.
#
#   tests/fuzz/run.sh [SECONDS] [BUILD_DIR]        SECONDS default 30, BUILD_DIR default build-fuzz
#
# The build dir must be configured with
#   CC=clang CXX=clang++ cmake -S . -B BUILD_DIR -G Ninja -DMRCHECK_SANITIZE=ON -DMRCHECK_BUILD_FUZZ=ON \
#     -DMRCHECK_BUILD_SPANK=OFF
# and built (ninja -C BUILD_DIR mrcheck_fuzz). Each target fuzzes a temporary copy of its corpus (the repo's seeds
# are never written), with a 2 GiB RSS limit, a 10 s per-input timeout and a per-target -max_len. Any crash,
# leak, timeout or sanitizer report fails the target; its reproducer is kept in BUILD_DIR/tests/fuzz/findings/.
# One line per target (executions, exec/s, coverage), then "N passed, N failed"; exit 1 if any failed.
#
# Environment: MRCHECK_FUZZ_TARGETS="a b" runs only those (names without fuzz_); MRCHECK_FUZZ_KEEP=DIR keeps each
# grown corpus in DIR/<name> (to minimise into the repo with -merge=1, see README.md); MRCHECK_FUZZ_ARGS adds
# libFuzzer flags.
set -u

seconds=${1:-30}
here=$(cd "$(dirname "$0")" && pwd)
build=${2:-$here/../../build-fuzz}
build=$(cd "$build" 2>/dev/null && pwd) || { echo "mrcheck: fuzz: no build dir ${2:-build-fuzz}" >&2; exit 2; }
list=$build/tests/fuzz/targets.txt
if [[ ! -s $list ]]; then
  echo "mrcheck: fuzz: $list missing: configure with -DMRCHECK_BUILD_FUZZ=ON (clang)" >&2
  exit 2
fi
findings=$build/tests/fuzz/findings
mkdir -p "$findings"
work=$(mktemp -d "${TMPDIR:-/tmp}/mrcheck-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT

# shellcheck source=tests/fuzz/options.sh
source "$here/options.sh"

passed=0
failed=0
failed_names=()
while read -r target; do
  [[ -n $target ]] || continue
  name=${target#fuzz_}
  if [[ -n ${MRCHECK_FUZZ_TARGETS:-} && " $MRCHECK_FUZZ_TARGETS " != *" $name "* ]]; then continue; fi
  bin=$build/tests/fuzz/$target
  if [[ ! -x $bin ]]; then
    printf '%-20s FAIL  not built (%s)\n' "$name" "$bin"
    failed=$((failed + 1)); failed_names+=("$name")
    continue
  fi
  corpus=$work/corpus-$name
  mkdir -p "$corpus" "$findings/$name"
  if [[ -d $here/corpus/$name ]]; then cp -R "$here/corpus/$name/." "$corpus/"; fi
  dict=()
  [[ -f $here/dict/$name.dict ]] && dict=(-dict="$here/dict/$name.dict")
  log=$work/$name.log
  # shellcheck disable=SC2086
  "$bin" "$corpus" "${dict[@]}" -max_total_time="$seconds" "${mrcheck_fuzz_common_args[@]}" \
    -max_len="$(max_len_for "$name")" -artifact_prefix="$findings/$name/" \
    ${MRCHECK_FUZZ_ARGS:-} </dev/null >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -1)
  units=$(find "$corpus" -type f | wc -l)
  if [[ $rc -eq 0 ]] && ! grep -qE "$mrcheck_fuzz_failure_re" "$log"; then
    printf '%-20s ok    %12s execs %8s exec/s  %-22s corpus %s\n' "$name" "${execs:-?}" "${rate:-?}" "${cov:-}" "$units"
    passed=$((passed + 1))
  else
    printf '%-20s FAIL  rc %s, %s execs; reproducer in %s; log tail:\n' "$name" "$rc" "${execs:-?}" "$findings/$name/"
    grep -E 'ERROR|runtime error|SUMMARY|invariant broken|Test unit written' "$log" | head -8 | sed 's/^/    /'
    cp "$log" "$findings/$name/last.log"
    failed=$((failed + 1)); failed_names+=("$name")
  fi
  if [[ -n ${MRCHECK_FUZZ_KEEP:-} ]]; then
    mkdir -p "$MRCHECK_FUZZ_KEEP/$name" && cp -R "$corpus/." "$MRCHECK_FUZZ_KEEP/$name/"
  fi
done <"$list"

echo "$passed passed, $failed failed${failed_names[*]:+ (${failed_names[*]})}"
[[ $failed -eq 0 ]]
