#!/bin/bash
# The CLI's front ends stay front ends (issue 39): every function of cli/ (the cmd_* entry points and their
# helpers) is under 60 lines; a cmd_* function is its options (declared in its declare_* function), a call into
# the core and the printing. A longer one is doing the core's work. A function is counted from the line that
# starts its signature at column 0 to the `}` that closes it there (the layout .clang-format gives); methods inside
# a class are not counted.
# usage: cli_front_ends_test.sh SOURCE_DIR
set -euo pipefail
src=${1:?usage: cli_front_ends_test.sh SOURCE_DIR}
max=59
out=$(awk -v max="$max" '
  FNR == 1 { start = 0 }
  !start && /^[A-Za-z_][^ ]*( [^ (]+)* [A-Za-z_:~]+\(/ && !/^(namespace|struct|class|using|return|template|typedef|static_assert)/ && !/;$/ {
    name = $0; sub(/\(.*/, "", name); sub(/.* /, "", name); start = FNR; file = FILENAME
    if (/\}$/) { start = 0 }   # one line
    next
  }
  start && /^\}/ { n = FNR - start + 1; printf "%s %d %s:%d %s\n", (n > max ? "LONG" : "ok"), n, file, start, name; start = 0 }
' "$src"/cli/*.cpp | sort -k2,2nr)
[[ -n $out ]] || { echo "FAIL: no function found in $src/cli"; exit 1; }
sed "s|$src/||; 12q" <<<"$out"  # sed stops itself: `| head` would kill it with SIGPIPE past 4 KiB (exit 141)
grep -q ' cmd_' <<<"$out" || { echo "FAIL: no cmd_* function found"; exit 1; }
if grep -q '^LONG' <<<"$out"; then
  echo "FAIL: functions of cli/ of $((max + 1)) lines or more (split them: options -> core -> print):"
  grep '^LONG' <<<"$out" | sed "s|$src/||"
  exit 1
fi
echo "PASS: $(wc -l <<<"$out") functions of cli/ ($(grep -c ' cmd_' <<<"$out") cmd_*), each under $((max + 1)) lines"
