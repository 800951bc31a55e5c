#!/bin/bash
# The README's two commands in one clone, as a newcomer runs them, cheaply: one scratch build directory
# configured as scripts/main.sh configures build/, then as scripts/test.sh reconfigures it, and one object of
# every layer library of the core (src/CMakeLists.txt), of the man page generator and of a C target compiled
# there; then configured as main.sh again and one object compiled (the other order). A configure-time answer
# that depends on the flags but was cached with the first ones fails here, in a minute, instead of 10 minutes
# into a newcomer's test.sh (cmake/KeyedCheck.cmake). scripts/test.sh runs it first.
#   scripts/configure-sequence.sh [SCRATCH_DIR]   (default: BUILD-sequence beside MRCHECK_BUILD_DIR or build/)
# The directory is made anew and removed when the check passes. Exit status: 0 passed, 1 failed.
set -euo pipefail
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=cmake-args.sh
source "$src/scripts/cmake-args.sh"
dir=${1:-${MRCHECK_BUILD_DIR:-$src/build}-sequence}
log=$dir/configure-sequence.log
t0=$SECONDS
rm -rf "$dir"
mkdir -p "$dir"
: >"$log"

fail() {
  tail -n 25 "$log" >&2
  echo "configure-sequence: FAILED: $* (log: $log, build directory kept: $dir)" >&2
  exit 1
}
configure() { # configure WHO ARGS...
  local who=$1
  shift
  echo "== configured as $who does: cmake ${*@Q}" >>"$log"
  cmake -S "$src" -B "$dir" -G Ninja "$@" >>"$log" 2>&1 || fail "cmake as $who configures"
}
compile() { # compile WHAT TARGET...
  local what=$1
  shift
  echo "== compiled ($what): $*" >>"$log"
  nice -n 5 ninja -C "$dir" -j "$(nproc)" "$@" >>"$log" 2>&1 || fail "compiling $what"
}

# One object per target: its smallest source (the check is about the command line, not the code).
object_of() { # object_of TARGET: prints the ninja path of TARGET's smallest object
  ninja -C "$dir" -t targets all | sed -n "s|^\(\([^:]*/\)\{0,1\}CMakeFiles/$1\.dir/[^:]*\.o\): .*|\1|p" |
    while read -r o; do
      s=${o#*CMakeFiles/"$1".dir/}
      s=${s%.o}
      f=$(find "$src" -path "$src/build*" -prune -o -path "*/${s}" -print -quit)
      printf '%s %s\n' "$(stat -c %s "${f:-/dev/null}")" "$o"
    done | sort -n | awk 'NR == 1 {print $2}'
}

configure scripts/main.sh "${main_sh_cmake_args[@]}"
configure scripts/test.sh "${test_sh_cmake_args[@]}"
mapfile -t layers < <(sed -n 's/^mrcheck_layer(\([a-z_]*\) .*/\1/p' "$src/src/CMakeLists.txt")
((${#layers[@]} >= 2)) || fail "no layer found in src/CMakeLists.txt (mrcheck_layer(NAME ...)): this check lost its subject"
objects=()
for t in "${layers[@]}" mrcheck_mangen; do
  o=$(object_of "$t")
  [[ -n $o ]] || fail "no object of $t in $dir's build.ninja"
  objects+=("$o")
done
# A C object with the project's options (built where libibverbs-dev is, as scripts/install-deps.sh installs).
o=$(object_of fake_ibverbs)
[[ -n $o ]] && objects+=("$o")
compile "one object per layer, test.sh's flags after main.sh's" "${objects[@]}"
configure "scripts/main.sh, again" "${main_sh_cmake_args[@]}"
compile "main.sh's flags after test.sh's" "$(object_of mrcheck_mangen)"
rm -rf "$dir"
echo "configure-sequence: main.sh's then test.sh's configuration in one build directory, then main.sh's again:" \
  "${#objects[@]} objects (${#layers[@]} layers, mangen, fake libibverbs) compiled ($((SECONDS - t0)) s)"
