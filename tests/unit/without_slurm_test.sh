#!/usr/bin/env bash
# The files that change when mrcheck is built without libslurm (no libslurm-dev: the Ubuntu GPU machine, a
# workstation) compile warning-free under the build's own flags with MRCHECK_HAVE_SLURM undefined. CI always has
# Slurm, so without this the #else branches are only compiled where nobody runs -Werror; an unused parameter there
# once stopped the whole build on Ubuntu 24.04 (prolog/admin_collect.cpp).
#   tests/unit/without_slurm_test.sh SOURCE_DIR BUILD_DIR     (skips, 77, for a build tree that is not Ninja's)
set -euo pipefail
src=$1 build=$2
[[ -f $build/build.ninja ]] || { echo "SKIP: $build is not a Ninja build tree"; exit 77; }
mapfile -t files < <(cd "$src" && grep -rl --include='*.cpp' --include='*.c' -E '^#(ifdef|if) +(defined\()?MRCHECK_HAVE_SLURM' prolog src cli spank 2>/dev/null | sort)
((${#files[@]})) || { echo "FAIL: no file tests MRCHECK_HAVE_SLURM: this test has lost its subject"; exit 1; }
commands=$(ninja -C "$build" -t commands 2>/dev/null || true)
if [[ $commands != *-DMRCHECK_HAVE_SLURM* ]]; then
  echo "SKIP: this build has no Slurm: its own compile already took the no-Slurm branches"
  exit 77
fi
fails=0
for f in "${files[@]}"; do
  cmd=$(grep -F -- "-c $src/$f" <<<"$commands" | head -1 || true)
  [[ -n $cmd ]] || { echo "FAIL: no compile command for $f in $build"; fails=$((fails + 1)); continue; }
  [[ $cmd == *-DMRCHECK_HAVE_SLURM* ]] || { echo "FAIL: $f is not compiled with MRCHECK_HAVE_SLURM here"; fails=$((fails + 1)); continue; }
  cmd=${cmd#cd * && }
  cmd=$(sed -E 's/ -DMRCHECK_HAVE_SLURM(=[^ ]*)?//g; s/ -o [^ ]+/ -o \/dev\/null/; s/ -MD( |$)/ /; s/ -M[TF] [^ ]+//g; s/^[^ ]*ccache //' <<<"$cmd")
  if (cd "$build" && eval "$cmd -fsyntax-only -Werror") 2>/tmp/without_slurm.$$; then
    echo "ok: $f"
  else
    echo "FAIL: $f without MRCHECK_HAVE_SLURM:"; cat /tmp/without_slurm.$$; fails=$((fails + 1))
  fi
done
rm -f /tmp/without_slurm.$$
((fails == 0))
