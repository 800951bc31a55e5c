#!/bin/bash
# The .deb installs into a fresh Debian 12 root with its dependencies, its files are where
# README.md's "Files" section says, and `mrcheck --version` runs there.
#
# usage: deb_install_test.sh SOURCE_DIR WORK_DIR
# Exit 0 pass, 1 fail, 77 skipped (not root, no debootstrap, or no route to the Debian mirror).
# Nothing is cached: WORK_DIR (a build tree and a Debian root) is removed at the end, and every mount
# under it is unmounted by the trap, always. Env:
#   MRCHECK_DEBIAN_MIRROR      default http://deb.debian.org/debian
#   MRCHECK_DEB=PATH           test this .deb instead of building one (CI that built it already)
#   MRCHECK_DEBOOTSTRAP_CACHE  an absolute directory outside the repo to keep downloaded .debs between runs
#   MRCHECK_KEEP_ROOT=1        keep the root for a look afterwards (mounts are still removed)
set -uo pipefail

src=${1:?usage: deb_install_test.sh SOURCE_DIR WORK_DIR}
work=${2:?usage: deb_install_test.sh SOURCE_DIR WORK_DIR}
mirror=${MRCHECK_DEBIAN_MIRROR:-http://deb.debian.org/debian}
root=$work/root
t0=$SECONDS

say() { echo "mrcheck: package test: $*"; }
skip() { say "SKIP: $*"; exit 77; }
fails=0
fail() { say "FAIL: $*"; fails=$((fails + 1)); }
phase() { say "$1 ($((SECONDS - t0)) s so far)"; }

((EUID == 0)) || skip "needs root (debootstrap and chroot)"
command -v debootstrap >/dev/null || skip "debootstrap is not installed (apt-get install debootstrap)"
command -v cpack >/dev/null || skip "cpack is not installed"
host=${mirror#*://}
host=${host%%/*}
port=80
[[ $mirror == https://* ]] && port=443
timeout 15 bash -c "exec 3<>/dev/tcp/$host/$port" 2>/dev/null ||
  skip "no route to the Debian mirror $host:$port (set MRCHECK_DEBIAN_MIRROR to a reachable one)"

# Every mount under WORK_DIR, deepest first: ours (/proc) and any debootstrap leaves behind (it leaves the
# root's /proc mounted after a successful run).
mounts_under() { awk -v w="$work/" 'index($2, w) == 1 {print $2}' /proc/mounts | sort -r; }
ds_pid=
cleanup() {
  local m
  if [[ -n $ds_pid ]] && kill -0 "$ds_pid" 2>/dev/null; then
    kill -- "-$ds_pid" 2>/dev/null || kill "$ds_pid" 2>/dev/null
    wait "$ds_pid" 2>/dev/null
  fi
  for m in $(mounts_under); do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || say "could not unmount $m"
  done
  # Only ever remove what this test created, and never through a mount that is still there.
  if [[ ${MRCHECK_KEEP_ROOT:-0} != 1 && -d $work && -z $(mounts_under) ]]; then
    rm -rf --one-file-system "$work"
  fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# A run killed by ctest's timeout (SIGKILL: no trap) leaves its mounts; they are this test's own.
for m in $(mounts_under); do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done
if [[ -n $(mounts_under) ]]; then
  say "FAIL: something is still mounted under $work from an earlier run and cannot be unmounted"
  trap - EXIT
  exit 1
fi
rm -rf --one-file-system "$work"
mkdir -p "$work" || exit 1

# debootstrap (network and disk bound) runs while the .deb builds (CPU bound): the test takes the longer
# of the two, not their sum.
phase "debootstrap --variant=minbase bookworm (in the background)"
cache=()
[[ -n ${MRCHECK_DEBOOTSTRAP_CACHE:-} ]] && mkdir -p "$MRCHECK_DEBOOTSTRAP_CACHE" && cache=(--cache-dir="$MRCHECK_DEBOOTSTRAP_CACHE")
# Its own process group, so that an early exit stops its wget and dpkg children too.
setsid debootstrap "${cache[@]}" --variant=minbase bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 &
ds_pid=$!

if [[ -n ${MRCHECK_DEB:-} ]]; then
  deb=$MRCHECK_DEB
  [[ -f $deb ]] || { say "FAIL: MRCHECK_DEB=$deb does not exist"; exit 1; }
  say "using the .deb given in MRCHECK_DEB: $deb"
else
  phase "building the .deb (packaging/build-deb.sh)"
  log=$work/build.log
  if ! deb=$("$src/packaging/build-deb.sh" "$work/build" 2>"$log" | tail -n1) || [[ ! -f $deb ]]; then
    tail -n 40 "$log"
    say "FAIL: the .deb did not build"
    exit 1
  fi
fi
say "built $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB)"
dpkg-deb --info "$deb" | sed 's/^/  /'
control=$(dpkg-deb --field "$deb" Depends Recommends Suggests)
# The Slurm the build machine's headers are (what the plugin is built against), spelled as Slurm does.
vnum=$(sed -n 's/^#define SLURM_VERSION_NUMBER \(0x[0-9a-fA-F]*\).*/\1/p' /usr/include/slurm/slurm_version.h)
[[ -n $vnum ]] || { say "FAIL: no SLURM_VERSION_NUMBER in /usr/include/slurm/slurm_version.h"; exit 1; }
slurm=$(printf '%d.%02d.%d' $((vnum >> 16 & 255)) $((vnum >> 8 & 255)) $((vnum & 255)))
mm=${slurm%.*}
grep -q "slurm-wlm-basic-plugins (>= $mm) | slurm-smd (>= $mm)" <<<"$control" ||
  fail "Depends does not pin slurm-wlm-basic-plugins or slurm-smd >= $mm"
[[ $(dpkg-deb --field "$deb" Version) == *-1+slurm$mm ]] || fail "the version does not name Slurm $mm: $(dpkg-deb --field "$deb" Version)"
grep -q "slurm-wlm-basic-plugins (<< " <<<"$control" || fail "Depends has no upper bound on slurm-wlm-basic-plugins"
grep -q "libslurm38 ([^)]*) | slurm-smd (>= $mm)" <<<"$control" || fail "Depends does not offer slurm-smd for libslurm38"
for lib in libhwloc15 libslurm38; do
  grep -q "Depends:.*$lib" <<<"$control" || fail "Depends lacks $lib (dpkg-shlibdeps)"
done
# fmt is header-only in every program (src/CMakeLists.txt): no libfmt at run time.
grep -q "Depends:.*libfmt" <<<"$control" && fail "Depends names libfmt, which no program links (header-only fmt)"
for lib in libibverbs1 libcuda1 libnccl2; do
  grep -q "^Depends:.*$lib" <<<"$control" && fail "$lib is dlopen'd, it must not be in Depends"
done
listing=$(dpkg-deb --contents "$deb")

phase "waiting for debootstrap"
if ! wait "$ds_pid"; then
  tail -n 20 "$work/debootstrap.log"
  # A mirror that answered the probe but fails mid-way is a failure, not a skip: say so plainly.
  say "FAIL: debootstrap failed (log above)"
  exit 1
fi
phase "debootstrap done"

if ! grep -q " $root/proc proc " /proc/mounts; then
  mount -t proc proc "$root/proc" || { say "FAIL: cannot mount /proc in the root"; exit 1; }
fi
# Daemons in the root must not start (slurm packages' postinst); resolv.conf for apt.
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod +x "$root/usr/sbin/policy-rc.d"
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null
cp "$deb" "$root/tmp/"
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LC_ALL=C "$@"; }

phase "apt-get install ./$(basename "$deb") in the root"
if ! in_root apt-get update -qq >"$work/apt.log" 2>&1 ||
  ! in_root apt-get install -y -q --no-install-recommends "/tmp/$(basename "$deb")" >>"$work/apt.log" 2>&1; then
  tail -n 30 "$work/apt.log"
  say "FAIL: the package did not install with its dependencies"
  exit 1
fi
grep -E '^(Setting up|Unpacking) ' "$work/apt.log" | sed 's/^/  /' | head -n 40

phase "checking the installed files"
# Every absolute path the README's Files section names in backticks must be in the package and in the root.
readme=$src/README.md
paths=$(sed -n '/^## Files/,/^## /p' "$readme" | grep -o '`/[^` ]*`' | tr -d '`' | sort -u)
[[ -n $paths ]] || fail "no paths found in the Files section of $readme"
for p in $paths; do
  case $p in
    /etc/*|/var/*) continue ;;  # made by the admin or at run time, not shipped
  esac
  if [[ $p == */ ]]; then
    [[ -d $root$p ]] && [[ -n $(ls -A "$root$p") ]] || fail "README names $p but it is not an installed, non-empty directory"
  else
    [[ -e $root$p ]] || fail "README names $p but the package did not install it"
  fi
done
# And the other way round: everything the package ships under bin/sbin/man/slurm-wlm is in the README.
while read -r f; do
  f=${f#.}
  case $f in
    */bin/*|*/sbin/*|*/slurm-wlm/*|*/man/man*/*) grep -qF "\`$f\`" "$readme" || fail "the package ships $f but the README's Files section does not say so" ;;
  esac
done < <(awk '{print $6}' <<<"$listing" | grep -v '/$')
# Every example file from etc/ is shipped under /usr/share/mrcheck/.
while read -r f; do
  [[ -e $root/usr/share/mrcheck/$f ]] || fail "etc/$f is not installed as /usr/share/mrcheck/$f"
done < <(cd "$src/etc" && find . -type f | sed 's|^\./||')
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
plugin=/usr/lib/$multiarch/slurm-wlm/spank_mrcheck.so
[[ -f $root$plugin ]] || fail "$plugin is missing"
[[ -f $root${plugin%/*}/mrcheck_spank_core.so ]] || fail "${plugin%/*}/mrcheck_spank_core.so (the checks the plugin loads) is missing"
[[ -f $root/usr/lib/$multiarch/slurm-wlm/libslurmfull.so ]] || fail "slurm-wlm-basic-plugins did not come in as a dependency"
for page in man1/mrcheck.1.gz man8/spank_mrcheck.8.gz; do
  [[ -f $root/usr/share/man/$page ]] || fail "/usr/share/man/$page is missing"
  gzip -t "$root/usr/share/man/$page" 2>/dev/null || fail "/usr/share/man/$page is not gzip"
done
if [[ -x $root/usr/sbin/mrcheck-prolog ]]; then
  [[ -f $root/usr/share/man/man8/mrcheck-prolog.8.gz ]] || fail "mrcheck-prolog(8) is missing"
  in_root /usr/sbin/mrcheck-prolog --help >/dev/null 2>&1 || fail "mrcheck-prolog --help fails in the root (missing library?)"
else
  fail "/usr/sbin/mrcheck-prolog is missing"
fi
# Nothing the package links may be missing in a root that has only its Depends.
for bin in /usr/bin/mrcheck /usr/sbin/mrcheck-prolog; do
  [[ -e $root$bin ]] || continue
  nf=$(in_root ldd "$bin" 2>&1 | grep 'not found')
  [[ -z $nf ]] || fail "$bin: $nf"
done
# No test double or test build's setting ships (tests/doubles/; MRCHECK_TEST_PROBE_ENV in CMakeLists.txt, off
# without the tests): the fake libibverbs's variables, the in-memory verbs, the NCCL stand-in's options.
for bin in /usr/bin/mrcheck /usr/sbin/mrcheck-prolog "$plugin" "${plugin%/*}/mrcheck_spank_core.so"; do
  [[ -e $root$bin ]] || continue
  for s in MRCHECK_FAKE_IBV_ memory_verbs --stand-in --spec0; do
    if grep -qaF -- "$s" "$root$bin"; then fail "$bin contains '$s': a test double or a test build's setting"; fi
  done
done

phase "mrcheck --version in the root"
ver=$(in_root /usr/bin/mrcheck --version 2>&1)
say "  $ver"
want_ver=$(sed -n 's/^project(mrcheck VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
# Compared as numbers: "22.5.8" and "22.05.8" are the same Slurm (Slurm itself prints the second).
if [[ $ver =~ ^mrcheck\ ([0-9.]+)\ \(built\ against\ Slurm\ ([0-9]+)\.([0-9]+)\.([0-9]+)\)$ ]]; then
  [[ ${BASH_REMATCH[1]} == "$want_ver" ]] || fail "mrcheck --version says version ${BASH_REMATCH[1]}, the project is $want_ver"
  got=$(((10#${BASH_REMATCH[2]} << 16) + (10#${BASH_REMATCH[3]} << 8) + 10#${BASH_REMATCH[4]}))
  ((got == vnum)) || fail "mrcheck --version names Slurm ${BASH_REMATCH[2]}.${BASH_REMATCH[3]}.${BASH_REMATCH[4]}, the headers are $slurm"
else
  fail "mrcheck --version says '$ver', want 'mrcheck $want_ver (built against Slurm $slurm)'"
fi
installed=$(in_root dpkg-query -W -f '${Version}' slurm-wlm-basic-plugins)
[[ $installed == "$mm".* ]] || fail "the root got slurm-wlm-basic-plugins $installed for a plugin built against $slurm"
in_root /usr/bin/mrcheck report --json >"$work/report.json" 2>"$work/report.err"
rc=$?
((rc <= 1)) || fail "mrcheck report in the root exited $rc: $(head -c 300 "$work/report.err")"

phase "done"
if ((fails)); then
  say "$fails failure(s)"
  exit 1
fi
say "PASS in $((SECONDS - t0)) s"
exit 0
