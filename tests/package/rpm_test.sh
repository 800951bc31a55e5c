#!/bin/bash
# The RPM for EL sites, built and checked on this Debian machine (it is never installed here: there is no
# EL machine): packaging/build-rpm.sh builds packaging/mrcheck.spec against the Slurm headers in
# /usr/include/slurm, then
#   - rpmlint passes on the spec, the binary and the source RPM with zero errors and zero warnings, with the
#     settings EL's rpmlint has (packaging/rpmlint.toml) and the few filters in packaging/mrcheck.rpmlintrc,
#     each with its reason;
#   - the shipped programs and plugins are stripped, their debug information in mrcheck-debuginfo, as EL's
#     find-debuginfo leaves them; every program has its man page;
#   - the Release names the Slurm release (1.slurm22.05), and Requires bound Slurm to that major.minor
#     (slurm >= 22.05, slurm < 22.06) beside the libslurm.so.NN()(64bit) that mrcheck-prolog links;
#   - the files are where the spec and README.md say, and the shipped plugstack line names the plugin where
#     the package puts it;
#   - `rpmbuild -ta` finds the spec in the source tarball, and a spec with no Slurm release to read fails
#     with a line that says what to install.
#
# usage: tests/package/rpm_test.sh SOURCE_DIR WORK_DIR
# exit: 0 pass, 1 fail, 77 skipped (only where rpmbuild or rpmlint is not installed: scripts/install-deps.sh
#       installs them)
set -uo pipefail

src=${1:?usage: rpm_test.sh SOURCE_DIR WORK_DIR}
work=${2:?usage: rpm_test.sh SOURCE_DIR WORK_DIR}
fails=0
pass() { printf 'PASS %s\n' "$*"; }
fail() { printf 'FAIL %s\n' "$*"; fails=$((fails + 1)); }
check() { # check DESCRIPTION COMMAND...
  local what=$1
  shift
  if "$@"; then pass "$what"; else fail "$what"; fi
}

# Skipped only without rpm's builder or rpmlint; any other tool missing is a failure that names it (every one
# of them comes with scripts/install-deps.sh).
for tool in rpmbuild rpmlint; do
  command -v $tool >/dev/null || { echo "SKIP: $tool is not installed (scripts/install-deps.sh installs rpm and rpmlint)"; exit 77; }
done
for tool in rpm2cpio cpio file readelf objdump; do
  command -v $tool >/dev/null || { echo "FAIL: $tool is not installed (scripts/install-deps.sh)"; exit 1; }
done
mkdir -p "$work"

# What the package must say, from the sources: the project version and the Slurm release of the headers.
version=$(sed -n 's/^project(mrcheck VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
hex=$(sed -n 's/^#define[[:space:]]*SLURM_VERSION_NUMBER[[:space:]]*0x\([0-9a-fA-F]*\).*/\1/p' \
  "${MRCHECK_SLURM_INCLUDE_DIR:-/usr/include}/slurm/slurm_version.h")
[[ -n $version && -n $hex ]] || { echo "FAIL: no project version or no SLURM_VERSION_NUMBER"; exit 1; }
major=$((0x$hex >> 16 & 255))
minor=$(printf '%02d' $((0x$hex >> 8 & 255)))
next=$(printf '%02d' $((10#$minor + 1)))
slurm_version="$major.$minor.$((0x$hex & 255))"
echo "mrcheck $version for Slurm $slurm_version"

t0=$SECONDS
# MRCHECK_RPM_BUILT: the .rpm that packaging/build-rpm.sh already made in $work/build (scripts/test.sh builds it
# in the background while the release legs mostly wait on their daemons); checked here as if built now.
if [[ -n ${MRCHECK_RPM_BUILT:-} && -f $MRCHECK_RPM_BUILT && $MRCHECK_RPM_BUILT == "$work/build/"* ]]; then
  rpm=$MRCHECK_RPM_BUILT
  echo "build-rpm.sh: already run by scripts/test.sh ($rpm)"
else
  rpm=$(bash "$src/packaging/build-rpm.sh" "$work/build" | tail -n1)
  echo "build-rpm.sh: $((SECONDS - t0)) s"
fi
[[ -n $rpm && -f $rpm ]] || { echo "FAIL: packaging/build-rpm.sh made no .rpm"; exit 1; }
srpms=("$work/build/rpmbuild/SRPMS/mrcheck-$version-"*.src.rpm)
srpm=${srpms[0]}
check "a source RPM beside it: ${srpm##*/}" test -f "$srpm"

# --- rpmlint -------------------------------------------------------------------------------------------------
# rpmlint 2 prints "N packages and M specfiles checked; E errors, W warnings, ..." last.
lint_out=$work/rpmlint.out
# Filters marked "# only: where-reported" (packaging/mrcheck.rpmlintrc says why each is one) match messages only
# some rpmlint installations give; elsewhere rpmlint would call them unused. A first pass without them shows
# what this rpmlint reports; each is kept only if a message of that pass matches it.
lint_version=$(rpmlint --version 2>/dev/null | grep -Eo '[0-9]+\.[0-9]+(\.[0-9]+)?' | head -n1)
rpmlintrc=$work/mrcheck.rpmlintrc
grep -v '# only: where-reported$' "$src/packaging/mrcheck.rpmlintrc" >"$rpmlintrc"
rpmlint -c "$src/packaging/rpmlint.toml" -r "$rpmlintrc" "$src/packaging/mrcheck.spec" "$rpm" ${srpm:+"$srpm"} \
  >"$work/rpmlint.first" 2>&1
while IFS= read -r line; do
  regex=$(sed -n 's/^addFilter(r"\(.*\)")  *# only: where-reported$/\1/p' <<<"$line")
  [[ -n $regex ]] && grep -Eq -- "$regex" "$work/rpmlint.first" && printf '%s\n' "$line" >>"$rpmlintrc"
done < <(grep '# only: where-reported$' "$src/packaging/mrcheck.rpmlintrc")
echo "rpmlint $lint_version; filters kept: $(grep -c '^addFilter' "$rpmlintrc") of $(grep -c '^addFilter' "$src/packaging/mrcheck.rpmlintrc")"
rpmlint -c "$src/packaging/rpmlint.toml" -r "$rpmlintrc" "$src/packaging/mrcheck.spec" "$rpm" ${srpm:+"$srpm"} >"$lint_out" 2>&1
cat "$lint_out"
summary=$(grep -E '[0-9]+ errors?, [0-9]+ warnings?' "$lint_out" | tail -n1)
errors=$(sed -n 's/.* \([0-9][0-9]*\) errors\{0,1\},.*/\1/p' <<<"$summary")
warnings=$(sed -n 's/.* \([0-9][0-9]*\) warnings\{0,1\}.*/\1/p' <<<"$summary")
checked=$(sed -n 's/^ *\([0-9][0-9]*\) packages\{0,1\} and \([0-9][0-9]*\) specfiles\{0,1\} checked.*/\1+\2/p' <<<"$summary")
check "rpmlint checked the binary RPM, the source RPM and the spec (${checked:-?}: 2+1)" test "$checked" = 2+1
check "rpmlint: 0 errors (${errors:-no summary})" test "${errors:-x}" = 0
check "rpmlint: 0 warnings left after packaging/mrcheck.rpmlintrc (${warnings:-no summary})" test "${warnings:-x}" = 0

# --- what the package says --------------------------------------------------------------------------------
q() { rpm -qp --nosignature "$@" "$rpm" 2>/dev/null; }
release=$(q --qf '%{RELEASE}')
check "Version is the project's: $(q --qf '%{VERSION}')" test "$(q --qf '%{VERSION}')" = "$version"
check "Release names the Slurm release: $release" grep -qE "^1\.slurm$major\.$minor(\.|$)" <<<"$release"
check "the file name says it too: ${rpm##*/}" grep -qF "mrcheck-$version-1.slurm$major.$minor" <<<"${rpm##*/}"
check "License: GPL-2.0-or-later" test "$(q --qf '%{LICENSE}')" = GPL-2.0-or-later
check "arch x86_64-like, not noarch: $(q --qf '%{ARCH}')" test "$(q --qf '%{ARCH}')" != noarch

requires=$(q --requires)
echo "--- rpm -qp --requires"
echo "$requires"
check "Requires: slurm >= $major.$minor" grep -qxF "slurm >= $major.$minor" <<<"$requires"
check "Requires: slurm < $major.$next" grep -qxF "slurm < $major.$next" <<<"$requires"
# What mrcheck-prolog links, read from the packaged binary: rpm's own requirement for it must be there.
extract=$work/extract
rm -rf "$extract" && mkdir -p "$extract"
(cd "$extract" && rpm2cpio "$rpm" | cpio -idm --quiet)
libslurm=$(readelf -d "$extract/usr/sbin/mrcheck-prolog" 2>/dev/null | sed -n 's/.*NEEDED.*\[\(libslurm\.so\.[0-9]*\)\].*/\1/p')
check "mrcheck-prolog links ${libslurm:-no libslurm}" test -n "$libslurm"
check "Requires: $libslurm()(64bit) (rpm's own, from the prolog)" grep -qxF "$libslurm()(64bit)" <<<"$requires"
check "Recommends: libibverbs" grep -qxF libibverbs <<<"$(q --recommends)"

provides=$(q --provides)
echo "--- rpm -qp --provides"
echo "$provides"
check "Provides: mrcheck = $version-$release" grep -qxF "mrcheck = $version-$release" <<<"$provides"
check "Provides: nothing for the plugin .so files (they are dlopen'd, not linked)" \
  bash -c '! grep -q "\.so" <<<"$1"' _ "$provides"

# --- the files ------------------------------------------------------------------------------------------------
libdir=$(rpm --eval '%{_libdir}')
list=$(q --list)
echo "--- rpm -qp --list"
echo "$list"
expected=(
  /usr/bin/mrcheck
  /usr/sbin/mrcheck-prolog
  "$libdir/slurm/spank_mrcheck.so"
  "$libdir/slurm/mrcheck_spank_core.so"
  /usr/share/man/man1/mrcheck.1.gz
  /usr/share/man/man8/mrcheck-prolog.8.gz
  /usr/share/man/man8/spank_mrcheck.8.gz
  /usr/share/licenses/mrcheck/LICENSE
  /usr/share/doc/mrcheck/README.md
  /usr/share/mrcheck/mrcheck.conf
  /usr/share/mrcheck/mrcheck-rules.conf
  /usr/share/mrcheck/plugstack.conf.d/mrcheck.conf
  /usr/share/mrcheck/slurm.conf.snippet
  /usr/share/mrcheck/systemd/slurmd.service.d/mrcheck-memlock.conf
)
for f in "${expected[@]}"; do
  check "packaged: $f" grep -qxF "$f" <<<"$list"
done
check "nothing outside /usr (no /etc: the site copies the examples)" bash -c '! grep -v "^/usr/" <<<"$1"' _ "$list"
check "no Debian copyright file (LICENSE is the license file)" bash -c '! grep -qx /usr/share/doc/mrcheck/copyright <<<"$1"' _ "$list"
check "the plugstack example names the plugin where the package puts it" \
  grep -qE "^optional $libdir/slurm/spank_mrcheck\.so " "$extract/usr/share/mrcheck/plugstack.conf.d/mrcheck.conf"
# 0755 as on EL (CMake and rpm on Debian would make the plugins 0644: packaging/debian-rpm.macros).
check "the plugin and the prolog are executable, root-owned" \
  test "$(rpm -qp --nosignature --qf '[%{FILEMODES:perms} %{FILEUSERNAME} %{FILENAMES}\n]' "$rpm" |
    grep -cE '^-rwxr-xr-x root (/usr/sbin/mrcheck-prolog|/usr/bin/mrcheck|.*/slurm/(spank_mrcheck|mrcheck_spank_core)\.so)$')" = 4
# rpmlint 2.4.0 cannot check this itself (packaging/mrcheck.rpmlintrc): each program in /usr/bin and
# /usr/sbin has a page of its own name in the package.
for exe in $(grep -E '^/usr/s?bin/[^/]+$' <<<"$list"); do
  name=${exe##*/}
  check "a man page for $exe" grep -qE "^/usr/share/man/man[1-8]/$name\.[1-8]\.gz$" <<<"$list"
done

# --- stripped, with the debug information in mrcheck-debuginfo (find-debuginfo, as on EL) ----------------------
debugs=("$work/build/rpmbuild/RPMS/"*/"mrcheck-debuginfo-$version-"*.rpm)
debuginfo=${debugs[0]}
check "a debuginfo RPM beside it: ${debuginfo##*/}" test -f "$debuginfo"
debug_list=$(rpm -qpl --nosignature "$debuginfo" 2>/dev/null)
for f in /usr/bin/mrcheck /usr/sbin/mrcheck-prolog "$libdir/slurm/spank_mrcheck.so" "$libdir/slurm/mrcheck_spank_core.so"; do
  what=$(file -b "$extract$f")
  check "stripped: $f (${what##*, })" bash -c '[[ $1 == *", stripped"* ]]' _ "$what"
  check "its debug information in mrcheck-debuginfo: /usr/lib/debug$f-*.debug" \
    grep -qE "^/usr/lib/debug$f-$version-.*\.debug$" <<<"$debug_list"
done

# --- EL 9's compiler flags (packaging/debian-rpm.macros), and the container helper immune to them ---------------
# What %build exported for CMake to read (CFLAGS, CXXFLAGS), from rpmbuild's log: rpm 4.18 removes the build
# tree, CMakeCache.txt with it, once the package is written (its "rmbuild" step).
for lang in C CXX; do
  var=CFLAGS
  [[ $lang == CXX ]] && var=CXXFLAGS
  flags=$(sed -n "s/^+ $var=//p" "$work/build/rpmbuild.log" 2>/dev/null | head -n1)
  check "built with EL 9's %optflags ($lang: ${flags:0:60}...)" bash -c '
    for f in -Wp,-D_FORTIFY_SOURCE=2 -Wp,-D_GLIBCXX_ASSERTIONS -fstack-protector-strong -fcf-protection; do
      [[ " $1 " == *" $f "* ]] || { echo "missing $f"; exit 1; }
    done' _ "$flags"
done
# Fortified realpath/printf (__*_chk) and the stack protector need GLIBC_2.3.4/2.4: the helper must start in
# images with an older glibc (src/container/ctprobe.c).
helper=$extract/usr/libexec/mrcheck/mrcheck-ctprobe
newer=$(objdump -T "$helper" 2>/dev/null | grep -oE 'GLIBC_2[.]([4-9]|[1-9][0-9])[.0-9]* +[^ ]+$' | tr '\n' ' ')
check "mrcheck-ctprobe needs nothing newer than GLIBC_2.3.3 under these flags${newer:+ (needs: $newer)}" \
  bash -c '[[ -x $1 && -z $2 ]]' _ "$helper" "$newer"

built=$("$extract/usr/bin/mrcheck" --version 2>&1)
check "the packaged mrcheck says its Slurm: $built" grep -qF "Slurm $slurm_version" <<<"$built"
echo "--- rpm -qp --info"
q --info | sed -n '1,12p'

# --- rpmbuild -ta: the spec travels in the tarball --------------------------------------------------------
tarball=$work/build/rpmbuild/SOURCES/mrcheck-$version.tar.gz
ta=$work/ta
rm -rf "$ta"
out=$(rpmbuild -ts --define "_topdir $ta" "$tarball" 2>&1)
check "rpmbuild -ts finds the spec in the tarball and reads the Slurm release from the headers: ${out##*/}" \
  grep -qE "mrcheck-$version-1\.slurm$major\.$minor.*\.src\.rpm" <<<"$out"
# No slurm-devel: one line that says what to do, and no package.
out=$(rpmbuild -bs --define "_topdir $ta" --define "_includedir $work/no-such-dir" "$src/packaging/mrcheck.spec" 2>&1)
rc=$?
echo "without Slurm headers: rc=$rc: $(grep -m1 'no Slurm release' <<<"$out")"
check "without Slurm headers rpmbuild fails, naming slurm-devel" \
  bash -c '(( $1 != 0 )) && grep -q "no Slurm release: install slurm-devel" <<<"$2"' _ "$rc" "$out"

echo "rpm_test: $fails failed"
((fails == 0))
