#!/bin/bash
# Builds the mrcheck RPM from packaging/mrcheck.spec on this Debian machine, for the Slurm whose headers are in
# /usr/include/slurm (22.05 here; 24.11 or 26.05 inside scripts/slurm-release.sh's roots). An EL site builds
# the same spec with rpmbuild against its slurm-devel instead (README.md, "Install"); this script is what
# lets the spec be built and linted where no EL machine and no slurm-devel RPM exist:
#   - the source tarball mrcheck-VERSION.tar.gz is made from the working tree's files (what git tracks plus
#     untracked files it does not ignore; without a usable git, the tree less .git and .gitignore's patterns);
#   - rpmbuild runs with --nodeps (Debian's rpm database is empty: no BuildRequires can be satisfied there),
#     with the Slurm release defined from slurm_version.h, and with packaging/debian-rpm.macros for what EL's
#     rpm configuration has and Debian's lacks or sets otherwise (the cmake macros, the debuginfo split that
#     strips the binaries, 0755 plugins, unversioned doc directories);
#   - only the product is compiled (the spec builds with MRCHECK_BUILD_TESTS=OFF), -j$(nproc).
# Prints the path of the binary .rpm on the last line; mrcheck-debuginfo is beside it, the source .rpm under
# BUILD_DIR/rpmbuild/SRPMS.
#
# usage: packaging/build-rpm.sh [BUILD_DIR]     (default: build-rpm next to the source)
# env:   MRCHECK_SLURM_INCLUDE_DIR (default /usr/include): where slurm/slurm_version.h is
#        MRCHECK_RPM_PACKAGER (default "mrcheck maintainers <root@localhost>"): the Packager header, which an EL
#        build host sets with %packager in ~/.rpmmacros, not the spec
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-rpm}
mkdir -p "$build"
build=$(cd "$build" && pwd)
say() { printf 'mrcheck: build-rpm: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

command -v rpmbuild >/dev/null || die "rpmbuild is not installed (Debian: apt-get install rpm; scripts/install-deps.sh)"
# The debuginfo split EL does (packaging/debian-rpm.macros): find-debuginfo, eu-strip, and file for brp-strip.
for tool in find-debuginfo eu-strip file; do
  command -v $tool >/dev/null ||
    die "$tool is not installed (Debian: apt-get install debugedit elfutils file; scripts/install-deps.sh)"
done
spec=$src/packaging/mrcheck.spec

# The spec's Version is the project's: a tarball named for one and holding the other would mislead.
project_version=$(sed -n 's/^project(mrcheck VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
spec_version=$(sed -n 's/^Version:[[:space:]]*\([^[:space:]]*\).*/\1/p' "$spec")
[[ -n $project_version && $spec_version == "$project_version" ]] ||
  die "packaging/mrcheck.spec says Version: $spec_version but CMakeLists.txt says $project_version: make them agree"

# The Slurm release, read as cmake/FindSlurm.cmake reads it: SLURM_VERSION_NUMBER is 0xMMmmuu.
version_h=${MRCHECK_SLURM_INCLUDE_DIR:-/usr/include}/slurm/slurm_version.h
hex=$(sed -n 's/^#define[[:space:]]*SLURM_VERSION_NUMBER[[:space:]]*0x\([0-9a-fA-F]*\).*/\1/p' "$version_h" 2>/dev/null)
[[ -n $hex ]] || die "no SLURM_VERSION_NUMBER in $version_h: install the Slurm headers (Debian: libslurm-dev)"
slurm_version=$(printf '%d.%02d.%d' $((0x$hex >> 16 & 255)) $((0x$hex >> 8 & 255)) $((0x$hex & 255)))

topdir=$build/rpmbuild
rm -rf "$topdir"
mkdir -p "$topdir"/{SOURCES,SPECS,BUILD,RPMS,SRPMS}
name=mrcheck-$project_version
tarball=$topdir/SOURCES/$name.tar.gz
# The working tree's files: tracked (as they are now, edits included) and untracked-not-ignored. A build
# directory inside the tree (build*/) is ignored either way. Reproducible: sorted names, root-owned, the
# mtime of the newest commit when git knows it.
mtime=$(git -C "$src" log -1 --format=%ct 2>/dev/null || echo 0)
tar_opts=(--sort=name --owner=0 --group=0 --numeric-owner --mtime="@$mtime" -czf "$tarball")
if [[ $(git -C "$src" rev-parse --show-toplevel 2>/dev/null) == "$src" ]]; then
  git -C "$src" ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [[ -e $src/$f || -L $src/$f ]] && printf '%s\0' "$f"; done >"$topdir/files"
  tar -C "$src" --null -T "$topdir/files" --transform="s,^,$name/,SH" "${tar_opts[@]}"
  how="git's file list"
else
  # No usable git: a release root has no git, and a worktree's .git file points outside the root. tar reads
  # .gitignore's file patterns but not its directory-only ones (build*/), so the build directories are named.
  tar -C "$src" --exclude-vcs --exclude-vcs-ignores --anchored --exclude='./build*' \
    --transform="s,^\.,$name,SH" "${tar_opts[@]}" .
  how="the tree less .git and .gitignore's patterns (no usable git)"
fi
say "source: $tarball ($(tar -tzf "$tarball" | grep -vc '/$') files from $how)"
cp "$spec" "$topdir/SPECS/"

macros=(--load "$src/packaging/debian-rpm.macros")
# rpm 4.20 adds the debuginfo package itself and refuses the older %install redefinition (debian-rpm.macros).
rpm_version=$(rpm --version | awk '{print $3}')
if [[ $(printf '%s\n' 4.20 "$rpm_version" | sort -V | head -n1) != 4.20 ]]; then
  macros+=(--load "$src/packaging/debian-rpm-pre420.macros")
fi

t0=$SECONDS
say "rpmbuild -ba mrcheck.spec for Slurm $slurm_version ($(nproc) jobs; log $build/rpmbuild.log)"
if ! rpmbuild -ba --nodeps \
    "${macros[@]}" \
    --define "_topdir $topdir" \
    --define "slurm_version $slurm_version" \
    --define "packager ${MRCHECK_RPM_PACKAGER:-mrcheck maintainers <root@localhost>}" \
    --define "_smp_mflags -j$(nproc)" \
    "$topdir/SPECS/mrcheck.spec" >"$build/rpmbuild.log" 2>&1; then
  tail -n 40 "$build/rpmbuild.log" >&2
  die "rpmbuild failed (log above, $build/rpmbuild.log)"
fi
rpms=("$topdir"/RPMS/*/"mrcheck-$project_version-"*.rpm)  # not mrcheck-debuginfo-..., beside it
[[ -f ${rpms[0]} ]] || die "rpmbuild made no mrcheck-$project_version RPM (log: $build/rpmbuild.log)"
rpm=${rpms[0]}
say "built in $((SECONDS - t0)) s: $(basename "$rpm")"
echo "$rpm"
