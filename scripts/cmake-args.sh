# The cmake arguments of the README's two commands, sourced by scripts/main.sh, scripts/test.sh and the check
# that configures one build directory as both do, one after the other (scripts/configure-sequence.sh).
# shellcheck shell=bash disable=SC2034
# scripts/main.sh: the demo's build, with the distribution's defaults (no fortify level of its own).
main_sh_cmake_args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DMRCHECK_BUILD_TESTS=ON)
# scripts/test.sh: -O2 without debug information, as packaging/build-deb.sh builds (its package is stripped):
# -g was a third of every file's compile time, and no test reads it (the sanitizer build keeps line tables).
# With the level of _FORTIFY_SOURCE that Ubuntu 24.04's gcc defines by default (3; EL's 2 is the RPM test's,
# tests/package/rpm_test.sh): the container helper must stay free of __*_chk symbols under both.
test_sh_cmake_args=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS_RELEASE="-O2 -DNDEBUG"
  -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" -DMRCHECK_WERROR=ON -DCMAKE_C_FLAGS="-O2 -D_FORTIFY_SOURCE=3"
  -DCMAKE_CXX_FLAGS="-O2 -D_FORTIFY_SOURCE=3")
