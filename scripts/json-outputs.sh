#!/bin/bash
# Writes every --json output mrcheck gives on the repository's fixtures into OUTDIR, one file each, so that two
# builds can be compared byte for byte (`diff -r`): a refactoring that means to change no result shows none.
#   scripts/json-outputs.sh BUILD_DIR OUTDIR
# BUILD_DIR holds cli/mrcheck and prolog/mrcheck-prolog. What it runs, on every tree under tests/fixtures/ that
# `mrcheck dump` wrote (it has proc/): `report --json`, `mrcheck-prolog --dry-run --json`; on every log under
# tests/corpus/ and tests/fixtures/nccl_logs/: `explain --json`, with the facts of tests/fixtures/gpu_h200; and
# `fleet --json` over all the trees. Fields that differ from run to run (times, durations) are dropped.
set -u
build=${1:?usage: json-outputs.sh BUILD_DIR OUTDIR}
out=${2:?usage: json-outputs.sh BUILD_DIR OUTDIR}
src=$(cd "$(dirname "$0")/.." && pwd)
mrcheck=$build/cli/mrcheck
prolog=$build/prolog/mrcheck-prolog
mkdir -p "$out"
# An empty site configuration (mrcheck refuses a file others may write, so not /dev/null).
conf=$(mktemp)
chmod 644 "$conf"
trap 'rm -f "$conf"' EXIT
# The volatile fields: a run's timings and wall-clock stamps. Output that is not JSON is kept as it came (jq
# would leave nothing, and two builds that both print garbage would compare equal).
strip() {
  local raw
  raw=$(cat)
  printf '%s\n' "$raw" | jq -S 'walk(if type == "object" then del(.elapsed_ms, .duration_ms, .timings, .time, .timestamp, .generated_at) else . end)' 2>/dev/null ||
    printf '%s\n' "$raw"
}
trees=()
for d in "$src"/tests/fixtures/*/; do
  [ -d "$d/proc" ] || continue
  n=$(basename "$d")
  trees+=("$d")
  "$mrcheck" report --json --root "$d" --config "$conf" 2>/dev/null | strip > "$out/report.$n.json"
  echo "exit ${PIPESTATUS[0]}" >> "$out/report.$n.json"
  "$prolog" --config "$conf" --root "$d" --dry-run --json --node fixture 2>/dev/null | strip > "$out/prolog.$n.json"
done
for f in "$src"/tests/corpus/*/*.log "$src"/tests/fixtures/nccl_logs/*; do
  [ -f "$f" ] || continue
  n=$(basename "$(dirname "$f")").$(basename "$f")
  "$mrcheck" explain "$f" --json --root "$src/tests/fixtures/gpu_h200" 2>/dev/null | strip > "$out/explain.$n.json"
done
"$mrcheck" fleet --json "${trees[@]}" 2>/dev/null | strip > "$out/fleet.json"
ls "$out" | wc -l
