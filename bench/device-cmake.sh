# shellcheck shell=bash disable=SC2034
# Sourced by the scripts that build mrcheck on the GPU machine (device `run`: Ubuntu 24.04, CUDA, no libmunge-dev).
# Without munge.h the build asks for MRCHECK_WITH_MUNGE=OFF (CMakeLists.txt): the checks between nodes then refuse
# to run, saying why; everything these scripts measure runs on one node.
device_cmake_args=()
[[ -e /usr/include/munge.h ]] || device_cmake_args+=(-DMRCHECK_WITH_MUNGE=OFF)
# Nor libcli11-dev, and no network to fetch it: the header-only CLI11 of the build machine's package
# (/usr/include/CLI), copied to .device-carry/include and carried with the run (never committed).
if [[ ! -e /usr/include/CLI/CLI.hpp && -e .device-carry/include/CLI/CLI.hpp ]]; then
  device_cmake_args+=(-DMRCHECK_CLI11_INCLUDE="$PWD/.device-carry/include")
fi
