#!/bin/bash
# No function over 80 lines (issue 39): every tracked .cpp and .c of src/, prolog/, spank/ and cli/. A function is
# counted as tests/unit/cli_front_ends_test.sh counts it (whose stricter 60-line rule for cli/ stays): from the line
# that starts its signature at column 0 to the `}` that closes it there (the layout .clang-format gives, and the
# kernel-style layout of the C helpers, whose `{` has a line of its own); methods inside a class are not counted.
# usage: function_length_test.sh SOURCE_DIR
set -euo pipefail
src=${1:?usage: function_length_test.sh SOURCE_DIR}
max=80
mapfile -t files < <(git -C "$src" ls-files -- 'src/*.cpp' 'src/*.c' 'prolog/*.cpp' 'prolog/*.c' 'spank/*.cpp' \
  'spank/*.c' 'cli/*.cpp' 'cli/*.c')
[[ ${#files[@]} -gt 0 ]] || { echo "FAIL: no tracked source file found under $src"; exit 1; }
out=$(cd "$src" && awk -v max="$max" '
  FNR == 1 { start = 0 }
  !start && /^[A-Za-z_][^ ]*( [^ (]+)* [A-Za-z_:~*]+\(/ && !/^(namespace|struct|class|using|return|template|typedef|static_assert)/ && !/;$/ {
    name = $0; sub(/\(.*/, "", name); sub(/.* /, "", name); sub(/^\*+/, "", name); start = FNR; file = FILENAME
    if (/\}$/) { start = 0 }   # one line
    next
  }
  start && /^\}/ { n = FNR - start + 1; printf "%s %d %s:%d %s\n", (n > max ? "LONG" : "ok"), n, file, start, name; start = 0 }
' "${files[@]}" | sort -k2,2nr)
[[ -n $out ]] || { echo "FAIL: no function found"; exit 1; }
head -n 12 <<<"$out"
# The counter must see the C helpers too (their layout differs): a count with none of them counts nothing there.
grep -q '\.c:' <<<"$out" || { echo "FAIL: no function of a .c file found"; exit 1; }
if grep -q '^LONG' <<<"$out"; then
  echo "FAIL: functions over $max lines (split them into pieces that each do one thing):"
  grep '^LONG' <<<"$out"
  exit 1
fi
echo "PASS: $(wc -l <<<"$out") functions in ${#files[@]} files, each of $max lines or fewer"
