#!/bin/bash
# The prolog bench on the GPU machine in one call (the team's device time is scarce): builds mrcheck-prolog
# from two source trees (this change and its baseline, e.g. `git archive` of the previous commit), unpacks
# the checklist's tools from Debian packages when the machine lacks them, checks that both binaries give the
# same verdicts, then runs run.sh with --baseline and a profile of where the time goes.
# usage: device.sh NEW_SRC BASE_SRC [DEBS_DIR]   (run from the repository root; writes to $OUT when set)
set -euo pipefail
# shellcheck disable=SC2034  # both read through ${!src_var} below
new_src=$(cd "$1" && pwd)
base_src=$(cd "$2" && pwd)
debs=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
out=/tmp/mrcheck-bench-out # scratch; the verdict files are copied to $OUT (when set) at the end
mkdir -p "$out"
rm -f "$out"/root-*.us
jobs=$(nproc)
. "$(dirname "${BASH_SOURCE[0]}")/../device-cmake.sh"

for v in new base; do
  src_var=${v}_src
  b=/tmp/mrcheck-bench-$v
  { cmake -S "${!src_var}" -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMRCHECK_BUILD_TESTS=OFF \
      -DMRCHECK_BUILD_SPANK=OFF "${device_cmake_args[@]}" && ninja -C "$b" -j"$jobs" mrcheck-prolog; } >"$out/build-$v.log" 2>&1 ||
    { tail -40 "$out/build-$v.log"; exit 1; }
done
new=/tmp/mrcheck-bench-new/prolog/mrcheck-prolog
base=/tmp/mrcheck-bench-base/prolog/mrcheck-prolog
# From here on a missing tool or an empty grep must not end the run: the bench is what the call is for.
set +e +o pipefail

# Checklist tools missing here: unpack the Debian packages and call kmod through our own links (the
# package's modinfo/lsmod links are absolute).
if [[ -n $debs ]] && ! command -v ibstat >/dev/null 2>&1; then
  t=/tmp/mrcheck-bench-tools
  mkdir -p "$t/links"
  for d in "$debs"/*.deb; do dpkg-deb -x "$d" "$t"; done
  for l in modinfo lsmod; do ln -sf "$t/bin/kmod" "$t/links/$l"; done
  export PATH="$t/links:$t/usr/sbin:$t/usr/bin:$PATH"
  export LD_LIBRARY_PATH="$t/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

# The baseline's rules file: a newer file may hold keys the baseline refuses (exit 2 before any work), and
# the new binary reads an older file with its defaults for the rest.
rules=$base_src/etc/mrcheck-rules.conf
args=(--dry-run --mode healthcheck --node bench --rules "$rules" --json)
echo "== same verdicts (host): new vs baseline"
"$new" "${args[@]}" >"$out/new.json" 2>"$out/new.err" || true
"$base" "${args[@]}" >"$out/base.json" 2>"$out/base.err" || true
if diff "$out/base.json" "$out/new.json"; then echo "identical JSON"; fi
grep -h '"summary"' "$out/new.json" | head -12
echo "== linked DSOs"
for b in "$new" "$base"; do echo "$b: $(ldd "$b" | awk '{print $1}' | tr '\n' ' ')"; done
echo "== dynamic loader (LD_DEBUG=statistics), new then baseline"
for b in "$new" "$base"; do
  LD_DEBUG=statistics "$b" "${args[@]}" 2>&1 >/dev/null | grep -E "total startup time|relocation:|load objects" | head -3
done
echo "== phases of the new binary (--timings), host then --root gpu_h200"
for _ in 1 2 3 4 5; do "$new" "${args[@]}" --timings 2>&1 >/dev/null | grep timings; done
for _ in 1 2 3; do "$new" "${args[@]}" --timings --root tests/fixtures/gpu_h200 2>&1 >/dev/null | grep timings; done
echo "== bench"
bash "$here/run.sh" --runs "${RUNS:-30}" --prolog "$new" --baseline "$base" --rules "$rules"
echo "== --root tests/fixtures/gpu_h200 (no dlopen), median of 30 interleaved"
for _ in $(seq 30); do
  for v in new base; do
    b=/tmp/mrcheck-bench-$v/prolog/mrcheck-prolog
    a=$(date +%s%N); "$b" "${args[@]}" --root tests/fixtures/gpu_h200 >/dev/null 2>&1 || true; z=$(date +%s%N)
    echo "$(((z - a) / 1000))" >>"$out/root-$v.us"
  done
done
for v in new base; do
  sort -n "$out/root-$v.us" | awk -v v="$v" '{ a[NR] = $1 } END { printf "%s: median %.2f ms, min %.2f ms\n", v, a[int((NR + 1) / 2)] / 1000, a[1] / 1000 }'
done
[[ -z ${OUT:-} ]] || cp "$out/new.json" "$out/base.json" "$out/build-new.log" "$OUT/"
