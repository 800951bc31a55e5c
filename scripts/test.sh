#!/bin/bash
# The whole test suite on a fresh Debian 12 machine, as root: installs what it needs, builds with -Werror
# (g++), runs every test (unit, fakes, end-to-end on a real local Slurm it starts and stops), then rebuilds
# the unit tests with clang under ASan+UBSan and runs them again.
#   MRCHECK_BUILD_DIR   main build tree (default: build)
#   MRCHECK_SKIP_ASAN=1 skip the sanitizer pass (for quick local runs)
#   MRCHECK_SKIP_GUEST=1 skip the guest leg (tests/guest/: QEMU guests with Soft-RoCE, scripts/guest.sh)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
src=$(pwd)
build=${MRCHECK_BUILD_DIR:-$src/build}
asan=${MRCHECK_ASAN_BUILD_DIR:-$src/build-asan}
jobs=$(nproc)

# Each leg's wall time, printed as a table when the run ends, passed or not (README.md, "CI legs").
leg_names=() leg_secs=()
leg_name='' leg_t0=0
leg() { # leg NAME: ends the running leg, starts NAME
  leg_end
  leg_name=$1
  leg_t0=$SECONDS
}
leg_end() {
  [[ -n $leg_name ]] || return 0
  leg_names+=("$leg_name")
  leg_secs+=($((SECONDS - leg_t0)))
  leg_name=''
}
leg_table() {
  leg_end
  local i
  echo "== wall time per leg (s)"
  for i in "${!leg_names[@]}"; do printf '  %6d  %s\n' "${leg_secs[$i]}" "${leg_names[$i]}"; done
  printf '  %6d  total (%d min)\n' "$SECONDS" $((SECONDS / 60))
}

# Background work (the release roots, the container images, the sanitizer and RPM builds) runs in process
# groups of its own, so that every way out of this script reaches all of it: an interrupted or killed run
# (INT, TERM, HUP) stops it; any other exit (a failed build under set -e included) stops the builds that only
# this run uses and waits for the ones that fill a shared cache (scripts/slurm-release.sh's roots,
# tests/container/make-images.sh's images: each holds a lock on its cache, so a second run waits for them, but
# an orphan would keep it busy for minutes). None is left running when this script has exited.
bg_pids=() bg_what=() bg_shared=() bg_logs=()
bg_start() { # bg_start WHAT SHARED(0|1) LOG CMD...: CMD in the background, its own process group; sets BG_PID
  local what=$1 shared=$2 log=$3
  shift 3
  set -m
  "$@" </dev/null >"$log" 2>&1 &
  BG_PID=$!
  set +m
  bg_pids+=("$BG_PID") bg_what+=("$what") bg_shared+=("$shared") bg_logs+=("$log")
}
bg_stop() { # bg_stop SIGNALLED(0|1)
  local i pid
  for i in "${!bg_pids[@]}"; do
    pid=${bg_pids[$i]}
    kill -0 -- "-$pid" 2>/dev/null || continue
    [[ $leg_name == "background work, on the way out" ]] || leg "background work, on the way out"
    if (($1 == 0)) && [[ ${bg_shared[$i]} == 1 ]]; then
      echo "test.sh: waiting for ${bg_what[$i]} to finish (a shared cache; ${bg_logs[$i]}); Ctrl-C stops it" >&2
    else
      echo "test.sh: stopping ${bg_what[$i]} (${bg_logs[$i]})" >&2
      kill -TERM -- "-$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
  done
}
cleanup() {
  bg_stop 0
  leg_table
  if [[ -x tests/slurm/slurm-down.sh ]]; then
    bash tests/slurm/slurm-down.sh >/dev/null 2>&1 || true
  fi
}
on_signal() { # on_signal NAME CODE
  trap - INT TERM HUP
  echo "test.sh: $1: stopping the background work" >&2
  bg_stop 1
  exit "$2"
}
trap cleanup EXIT
trap 'on_signal INT 130' INT
trap 'on_signal TERM 143' TERM
trap 'on_signal HUP 129' HUP

if [[ $(id -u) -ne 0 ]]; then
  echo "test.sh: run as root (it installs packages and starts a private Slurm with munge and MariaDB)" >&2
  exit 2
fi

leg "install-deps"
bash scripts/install-deps.sh

# One compiler cache for every build of this run: the .deb of the package tests (packaging/build-deb.sh) is
# configured with the main build's flags (MRCHECK_DEB_CMAKE_ARGS), so it compiles only what the install layout
# changes (CMake reads the launcher from the environment; rpmbuild's EL flags differ on purpose and miss).
if command -v ccache >/dev/null; then
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
  export CCACHE_DIR=${CCACHE_DIR:-${TMPDIR:-/tmp}/mrcheck-ccache} CCACHE_BASEDIR=$src CCACHE_NOHASHDIR=1
fi
# -O2 without debug information, with -D_FORTIFY_SOURCE=3 (scripts/cmake-args.sh says why).
# shellcheck source=cmake-args.sh
source scripts/cmake-args.sh
main_flags=("${test_sh_cmake_args[@]}")
export MRCHECK_DEB_CMAKE_ARGS="-DMRCHECK_WERROR=ON;-DCMAKE_C_FLAGS=-O2 -D_FORTIFY_SOURCE=3;-DCMAKE_CXX_FLAGS=-O2 -D_FORTIFY_SOURCE=3"

# The guest image (scripts/guest.sh build: debootstrap and apt, cached in /var/cache/mrcheck/guest) is made beside
# the main build too; the guest leg below boots it. MRCHECK_SKIP_GUEST=1 leaves that leg out of a quick local run.
guest_image_job=''
if [[ ${MRCHECK_SKIP_GUEST:-0} != 1 ]]; then
  bg_start "the guest image" 1 "${TMPDIR:-/tmp}/mrcheck-guest-image.log" nice -n 10 bash scripts/guest.sh build
  guest_image_job=$BG_PID
fi

# The other supported Slurm releases run in Debian roots of their suites (scripts/slurm-release.sh,
# docs/slurm-releases.md). Making a root is download and dpkg work: both start now, beside the main build.
# MRCHECK_RELEASES="" leaves them out of a quick local run.
releases=${MRCHECK_RELEASES-24.11 26.05}
declare -A root_job=()
for rel in $releases; do
  bg_start "the Slurm $rel root" 1 "${TMPDIR:-/tmp}/mrcheck-root-$rel.log" bash scripts/slurm-release.sh "$rel" root
  root_job[$rel]=$BG_PID
done
# The container test images (one debootstrap, cached) are made here, beside the build, rather than by the main
# leg's container test: the release legs bind the cache into their roots (which have no debootstrap), so their
# container tests (Apptainer in the 26.05 leg) run on them.
images_job=
if [[ -n $releases ]]; then
  bg_start "the container test images" 1 "${TMPDIR:-/tmp}/mrcheck-images.log" bash tests/container/make-images.sh
  images_job=$BG_PID
fi

status=0
# The README's two commands in one clone: a scratch build directory configured as scripts/main.sh does, then as
# this script does, and one object of each layer compiled (a minute; its objects are the main build's, from
# the compiler cache). The main build below starts from whatever build/ holds, so it would not catch it.
echo "== main.sh's configuration, then test.sh's, in one build directory (scripts/configure-sequence.sh)"
leg "configure sequence (main.sh's, then test.sh's, one build directory)"
bash scripts/configure-sequence.sh "$build-sequence" || status=1

# With the level of _FORTIFY_SOURCE that Ubuntu 24.04's gcc defines by default (3; EL's 2 is the RPM test's,
# tests/package/rpm_test.sh): the container helper must stay free of __*_chk symbols under both.
echo "== build (g++, -Werror, -O2 -D_FORTIFY_SOURCE=3)"
leg "main build (g++ -Werror -O2 -D_FORTIFY_SOURCE=3, whole tree)"
cmake -S . -B "$build" -G Ninja "${main_flags[@]}" >/dev/null
ninja -C "$build" -j "$jobs"

# Each release leg: build in its root with -Werror, every end-to-end test on that release's daemons, then its
# .deb built and checked there. A leg gets the plugin built for the release before it, to show that Slurm
# refuses a plugin of another release (tests/e2e/release_mismatch_test.sh); the main leg gets the last one.
foreign=$build/spank/spank_mrcheck.so
# 77: no route to the mirror and nothing cached; the container tests then skip, saying so.
leg "waiting for the container test images (made beside the build)"
[[ -n $images_job ]] && { wait "$images_job" || echo "test.sh: no container test images (${TMPDIR:-/tmp}/mrcheck-images.log)"; }
# The sanitizer build (clang): the core once, fuzz-instrumented, for the unit tests and the fuzz targets.
# fuzz_timed: 10 s per target here (25 targets, about 2 min on 2 cores); tests/fuzz/long.sh fuzzes for hours.
# Line tables only: what a sanitizer report's stack needs (file, line, function), at a fraction of -g's cost.
asan_build() {
  CC=clang CXX=clang++ cmake -S . -B "$asan" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DMRCHECK_WERROR=ON \
    -DCMAKE_C_FLAGS_DEBUG=-gline-tables-only -DCMAKE_CXX_FLAGS_DEBUG=-gline-tables-only \
    -DMRCHECK_SANITIZE=ON -DMRCHECK_BUILD_SPANK=OFF -DMRCHECK_BUILD_FUZZ=ON -DMRCHECK_FUZZ_CI_SECONDS=10 >/dev/null &&
    ninja -C "$asan" -j "$jobs"
}
# It and the RPM (below) are the two compiles nothing else shares. Both run niced beside the release legs and
# the 22.05 end-to-end tests, which mostly wait on their daemons (the machine was 65-80% idle there); the tests
# keep the CPU whenever they want it.
asan_job=''
if [[ ${MRCHECK_SKIP_ASAN:-0} != 1 && -n $releases ]]; then
  asan_niced() { renice -n 19 -p "$BASHPID" >/dev/null && asan_build; }
  bg_start "the ASan+UBSan build" 0 "$asan.out" asan_niced
  asan_job=$BG_PID
fi
# The RPM (tests/package/rpm_test.sh) is a whole compile with EL 9's flags (-g included), ~10 CPU-minutes that
# nothing else can share. It runs now, niced, beside the release legs, whose end-to-end tests mostly wait on
# their daemons; package_rpm then checks what it made (MRCHECK_RPM_BUILT) instead of compiling again.
rpm_job='' rpm_work=$build/tests/package/rpm
if [[ ${MRCHECK_SKIP_PACKAGE:-0} != 1 && -n $releases ]] && command -v rpmbuild >/dev/null; then
  mkdir -p "$rpm_work/build"
  bg_start "the RPM build" 0 "$rpm_work/build-rpm.out" nice -n 19 bash packaging/build-rpm.sh "$rpm_work/build"
  rpm_job=$BG_PID
fi
# The guest leg (tests/guest/, label guest): the .deb (the main build's compiler cache: only what the install
# layout changes compiles), then three guests with real kernels and Soft-RoCE and the tests on them, niced beside
# the release legs like the ASan build and the RPM: under TCG the guests are CPU work that the release legs' waiting
# end-to-end tests leave free. guest.sh build waits on the image the job above makes (the cache's lock).
guest_job='' guest_out=$build/guest.out
if [[ -n $guest_image_job ]]; then
  guest_leg() {
    renice -n 19 -p "$BASHPID" >/dev/null &&
      t0=$SECONDS &&
      bash scripts/guest.sh build &&
      deb=$(bash packaging/build-deb.sh "$build-deb" 2>"$build/guest-deb.log" | tail -n1) &&
      echo "guest leg: image and .deb after $((SECONDS - t0)) s" &&
      MRCHECK_GUEST_DEB=$deb ctest --test-dir "$build" --output-on-failure -L '^guest$' &&
      echo "guest leg: $((SECONDS - t0)) s"
  }
  bg_start "the guest leg" 0 "$guest_out" guest_leg
  guest_job=$BG_PID
fi
for rel in $releases; do
  echo "== Slurm $rel (scripts/slurm-release.sh $rel test, then deb)"
  leg "Slurm $rel leg: wait for its root, build in it, e2e, .deb"
  t0=$SECONDS
  if ! wait "${root_job[$rel]}"; then
    cat "${TMPDIR:-/tmp}/mrcheck-root-$rel.log"
    echo "test.sh: the Slurm $rel root could not be made (above)" >&2
    status=1
    continue
  fi
  MRCHECK_FOREIGN_PLUGIN=$foreign bash scripts/slurm-release.sh "$rel" test || status=1
  bash scripts/slurm-release.sh "$rel" deb || status=1
  foreign=$(bash scripts/slurm-release.sh "$rel" path)/mrcheck/build/spank/spank_mrcheck.so
  echo "== Slurm $rel: $((SECONDS - t0)) s"
done

# The plugin the last leg built needs its suite's newer C library, which Debian 12 lacks (dlopen fails
# before Slurm's version check). The main leg's foreign plugin is therefore built here, against that
# release's Slurm headers: only slurm/ is copied out of the root, so every other header stays Debian 12's.
last=${releases##* }
if [[ -n $last && -f $foreign && $foreign != "$build/"* ]]; then
  echo "== the Slurm $last plugin, built here for the main leg's release_mismatch_test"
  leg "the Slurm $last loader, built here (release_mismatch_test)"
  foreign_build=$build-foreign-$last
  mkdir -p "$foreign_build/include"
  rm -rf "$foreign_build/include/slurm"
  cp -a "$(bash scripts/slurm-release.sh "$last" path)/usr/include/slurm" "$foreign_build/include/"
  # The main build's flags, and a directory beside it: every core object not built from Slurm's headers is
  # the main build's, from the compiler cache (only the plugin's own files compile again).
  if cmake -S . -B "$foreign_build" -G Ninja "${main_flags[@]}" \
      -DSlurm_INCLUDE_DIR="$foreign_build/include" -DMRCHECK_BUILD_UNIT_TESTS=OFF >/dev/null &&
    ninja -C "$foreign_build" -j "$jobs" spank_mrcheck; then
    export MRCHECK_FOREIGN_PLUGIN=$foreign_build/spank/spank_mrcheck.so
  else
    echo "test.sh: the Slurm $last plugin could not be built on this host (above)" >&2
    status=1
  fi
fi

echo "== tests (unit, fakes, end-to-end on the local Slurm)"
export MRCHECK_BUILD_DIR=$build MRCHECK_SOURCE_DIR=$src
# The package tests (label `package`, tests/package/) build the .deb, install it into a fresh debootstrapped
# Debian 12 root, follow README.md's install steps on this host and build and lint the RPM (docs/rpm.md):
# 23-33 minutes on 2 cores, most of it the two package builds and debootstrap's download (the root test
# skips, saying why, without a route to the Debian mirror). MRCHECK_SKIP_PACKAGE=1 leaves them out of a quick local run.
leg "ctest: unit, fakes, man, e2e on Slurm 22.05"
ctest --test-dir "$build" --output-on-failure --timeout 900 -j "$jobs" -LE '^(package|guest)$' || status=1
# Before the package leg, which builds the .deb in the same directory.
if [[ -n $guest_job ]]; then
  leg "waiting for the guest leg (real kernels, Soft-RoCE; started beside the release legs)"
  wait "$guest_job" || { cat "$guest_out"; echo "test.sh: the guest leg failed (above)" >&2; status=1; }
  grep -E '^guest leg:|tests passed|tests failed' "$guest_out" || true
fi
if [[ -n $rpm_job ]]; then
  leg "waiting for the RPM build (started beside the release legs)"
  if wait "$rpm_job"; then
    export MRCHECK_RPM_BUILT
    MRCHECK_RPM_BUILT=$(tail -n1 "$rpm_work/build-rpm.out")
  else
    echo "test.sh: the background RPM build failed; package_rpm builds it again (${rpm_work}/build-rpm.out)"
  fi
fi
if [[ ${MRCHECK_SKIP_PACKAGE:-0} != 1 ]]; then
  leg "ctest: package (.deb from the main build's flags, its install, README install, RPM with EL 9's flags)"
  ctest --test-dir "$build" --output-on-failure --timeout 900 -j "$jobs" -L '^package$' || status=1
fi

if [[ ${MRCHECK_SKIP_ASAN:-0} != 1 ]]; then
  echo "== unit tests and fuzz corpora under ASan+UBSan (clang, -Werror)"
  if [[ -n $asan_job ]]; then
    leg "waiting for the ASan+UBSan build (started beside the release legs)"
    wait "$asan_job" || { tail -n 40 "$asan.out"; echo "test.sh: the ASan+UBSan build failed (above)" >&2; status=1; }
  else
    leg "ASan+UBSan build (clang; the core once, fuzz-instrumented, for unit tests and fuzz targets)"
    asan_build || status=1
  fi
  # The fuzz targets replay their seed corpora here (deterministic), then each fuzzes for 10 s (tests/fuzz/README.md; a
  # fixed seed, so a failure replays from its kept reproducer): any crash, leak or sanitizer report fails.
  leg "ASan: unit, fakes, fuzz corpus replays"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$asan" --output-on-failure -L 'unit|fakes|fuzz' -LE fuzz_timed -j "$jobs" || status=1
  leg "ASan: fuzz_timed (10 s per target)"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$asan" --output-on-failure -L fuzz_timed -j "$jobs" || status=1
fi

if ((status == 0)); then echo "test.sh: all tests passed"; else echo "test.sh: FAILED" >&2; fi
exit $status
