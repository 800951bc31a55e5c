#!/bin/bash
# Fails when a C++ file of the tree is not as .clang-format lays it out (docs/DESIGN.md §6). The C of
# tests/fakes/ keeps its own style and is left out. Fix with:  scripts/check-format.sh --fix
# The layout depends on clang-format's version: this checks with Debian 12's clang-format 14, which
# scripts/install-deps.sh installs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cf=$(command -v clang-format-14 || command -v clang-format || true)
if [[ -z $cf ]]; then
  echo "check-format: SKIP: clang-format is not installed (scripts/install-deps.sh installs it)"
  exit 77
fi
mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.hpp' | grep -v '^tests/fakes/')
if [[ ${1:-} == --fix ]]; then
  "$cf" -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  "$cf" --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if ((${#bad[@]})); then
  echo "check-format: ${#bad[@]} of ${#files[@]} files differ from .clang-format ($("$cf" --version | head -n1)):"
  printf '  %s\n' "${bad[@]}"
  echo "check-format: run scripts/check-format.sh --fix"
  exit 1
fi
echo "check-format: ${#files[@]} files formatted"
