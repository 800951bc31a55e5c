#!/bin/bash
# Builds the mrcheck .deb for Debian 12's Slurm (slurm-wlm 22.05): configure for Debian's layout, build
# the shipped targets only, `cpack -G DEB`. Prints the path of the .deb on the last line.
#
# usage: packaging/build-deb.sh [BUILD_DIR]     (default: build-deb next to the source)
# env:   JOBS (default 2), MRCHECK_SLURM_PLUGIN_DIR (default Debian's: /usr/lib/<multiarch>/slurm-wlm)
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-deb}
jobs=${JOBS:-2}
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
# Debian's slurm-wlm-basic-plugins installs every plugin here and libslurm's compiled-in PluginDir
# default is this directory (strings libslurmfull.so), so no PluginDir= is needed in slurm.conf.
plugin_dir=${MRCHECK_SLURM_PLUGIN_DIR:-/usr/lib/$multiarch/slurm-wlm}

gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S "$src" -B "$build" "${gen[@]}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_INSTALL_PREFIX=/usr \
  -DMRCHECK_SLURM_PLUGIN_DIR="$plugin_dir" \
  -DMRCHECK_BUILD_SPANK=ON \
  -DMRCHECK_BUILD_TESTS=OFF >&2
cmake --build "$build" -j "$jobs" >&2
(cd "$build" && cpack -G DEB >&2)
deb=$(ls -t "$build"/mrcheck_*.deb | head -n1)
echo "$deb"
