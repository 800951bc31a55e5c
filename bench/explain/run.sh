#!/usr/bin/env bash
# Streams a large generated NCCL log through `mrcheck explain` and, in the same invocation, through
# `grep -c WARN` as the baseline: wall time and peak RSS of both, and their ratio. See README.md.
#
# usage: bench/explain/run.sh [--size-mib N] [--mrcheck PATH] [--keep]
#   --size-mib  size of the generated log (default 1024 = 1 GiB)
#   --mrcheck   the binary to measure (default: build*/cli/mrcheck, newest)
#   --keep      keep the generated log (in $TMPDIR) for another run
set -euo pipefail

size_mib=1024
mrcheck=""
keep=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --size-mib) size_mib="$2"; shift 2 ;;
    --mrcheck) mrcheck="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    *) echo "mrcheck: bench: unknown argument $1" >&2; exit 2 ;;
  esac
done
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
if [[ -z "$mrcheck" ]]; then
  mrcheck="$(ls -t "$repo"/build*/cli/mrcheck 2>/dev/null | head -1 || true)"
fi
[[ -x "$mrcheck" ]] || { echo "mrcheck: bench: no mrcheck binary (build first or pass --mrcheck)" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "mrcheck: bench: needs /usr/bin/time (Debian package 'time')" >&2; exit 2; }

log="${TMPDIR:-/tmp}/mrcheck-bench-explain-${size_mib}m.log"
if [[ ! -s "$log" ]]; then
  python3 "$here/gen_log.py" --size-mib "$size_mib" --out "$log"
fi
bytes=$(stat -c %s "$log")

# Runs "$@" under /usr/bin/time; prints "<wall seconds> <peak RSS KiB> <exit status>".
measure() {
  local t
  t="$(mktemp)"
  # Output to a real file: GNU grep stops at the first match when stdout is /dev/null.
  /usr/bin/time -o "$t" -f '%e %M %x' "$@" >"$t.out" 2>&1 || true
  tail -1 "$t"
  rm -f "$t" "$t.out"
}
# Warm the page cache so both read from memory, not disk.
cat "$log" > /dev/null

read -r g_wall g_rss g_rc < <(measure grep -c WARN "$log")
read -r m_wall m_rss m_rc < <(measure "$mrcheck" explain --json "$log")
"$mrcheck" explain --json "$log" > "${log%.log}.json" || true
findings=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(len(d["findings"]), sum(f["count"] for f in d["findings"]))' "${log%.log}.json")

printf 'log:              %s (%d bytes)\n' "$log" "$bytes"
printf 'grep -c WARN:     %6.2f s  peak RSS %7d KiB  exit %s\n' "$g_wall" "$g_rss" "$g_rc"
printf 'mrcheck explain:  %6.2f s  peak RSS %7d KiB  exit %s  (findings, failure lines: %s)\n' "$m_wall" "$m_rss" "$m_rc" "$findings"
python3 - "$g_wall" "$g_rss" "$m_wall" "$m_rss" "$bytes" <<'PY'
import sys
gw, gr, mw, mr, b = map(float, sys.argv[1:])
print(f"ratio explain/grep: time {mw / max(gw, 0.01):.2f}x, peak RSS {mr / max(gr, 1):.2f}x; "
      f"explain throughput {b / max(mw, 0.01) / 2**20:.0f} MiB/s")
PY
[[ $keep -eq 1 ]] || rm -f "$log" "${log%.log}.json"
