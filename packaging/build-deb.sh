#!/bin/bash
# Builds the mrcheck .deb for the Slurm whose headers this machine (or release root) has: configure for
# Debian's layout, build the shipped targets only, `cpack -G DEB`, then let libslurm come from SchedMD's
# slurm-smd as well. Prints the path of the .deb on the last line. The version names the Slurm release
# (0.2.0-1+slurm24.11); scripts/slurm-release.sh RELEASE deb runs this inside that release's Debian root.
#
# usage: packaging/build-deb.sh [BUILD_DIR]     (default: build-deb next to the source)
# env:   JOBS (default 2), MRCHECK_SLURM_PLUGIN_DIR (default Debian's: /usr/lib/<multiarch>/slurm-wlm),
#        MRCHECK_DEB_CMAKE_ARGS (';'-separated extra cmake arguments: scripts/test.sh passes its main build's
#        flags, so with its compiler cache only what the install layout changes is compiled again)
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
extra=()
[[ -n ${MRCHECK_DEB_CMAKE_ARGS:-} ]] && IFS=';' read -ra extra <<<"$MRCHECK_DEB_CMAKE_ARGS"
# The package ships its programs stripped (CPACK_STRIP_FILES, cmake/Packaging.cmake): -O2, as Debian builds,
# and no debug information to be stripped again (a third of the compile time). scripts/slurm-release.sh
# configures its release builds the same way, so `deb` reuses them.
cmake -S "$src" -B "$build" "${gen[@]}" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS_RELEASE="-O2 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
  -DCMAKE_INSTALL_PREFIX=/usr \
  -DMRCHECK_SLURM_PLUGIN_DIR="$plugin_dir" \
  -DMRCHECK_BUILD_SPANK=ON \
  -DMRCHECK_BUILD_TESTS=OFF "${extra[@]}" >&2
cmake --build "$build" -j "$jobs" >&2
rm -f "$build"/mrcheck_*.deb
(cd "$build" && cpack -G DEB >&2)
deb=$(ls -t "$build"/mrcheck_*.deb | head -n1)

# dpkg-shlibdeps names Debian's libslurm package (libslurm38, libslurm42t64, ...) for mrcheck-prolog. SchedMD's
# own packaging ships the same library inside slurm-smd, with no Provides: offer it as the alternative, with
# the same major.minor bounds as the plugin's dependency (cmake/Packaging.cmake).
depends=$(dpkg-deb --field "$deb" Depends)
mm=$(sed -n 's/.*slurm-smd (>= \([0-9.]*\)).*/\1/p' <<<"$depends")
if [[ -n $mm ]] && grep -qE '(^|, )libslurm[0-9a-z]+( \([^)]*\))?(,|$)' <<<"$depends"; then
  fixed=$(sed -E "s/(^|, )(libslurm[0-9a-z]+( \([^)]*\))?)(,|$)/\1\2 | slurm-smd (>= $mm)\4/" <<<"$depends")
  tmp=$(mktemp -d)
  dpkg-deb -R "$deb" "$tmp/pkg"
  sed -i "s/^Depends: .*/Depends: ${fixed//\//\\/}/" "$tmp/pkg/DEBIAN/control"
  dpkg-deb --root-owner-group -Zxz -b "$tmp/pkg" "$deb" >&2
  rm -rf "$tmp"
fi
echo "$deb"
