#!/bin/bash
# mrcheck on one supported Slurm release, on this Debian 12 machine, as root: the release's own daemons and
# client commands (munge, MariaDB, slurmdbd, slurmctld, slurmd, srun, sbatch, sacct) from a Debian root of the
# suite that ships it, mrcheck built inside that root against the release's headers and libslurm, and the
# project's private Slurm (tests/slurm/) started there. docs/slurm-releases.md says what differs per release.
#
# usage: scripts/slurm-release.sh RELEASE COMMAND [ARGS]
#   RELEASE   22.05   Debian 12 bookworm: this machine's own Slurm (no root is made)
#             24.11   Debian 13 trixie
#             26.05   Debian sid/forky
#   COMMAND   root              make (or reuse) the release's Debian root in the cache
#             build             root, then build mrcheck in it (the programs the end-to-end tests use)
#             up                build, then start the private Slurm in the root and leave it running
#             test [CTEST...]   build, run the end-to-end tests (default: ctest -L e2e -LE load) on a fresh
#                               private Slurm, stop it; exit status is ctest's
#             deb               after build: the .deb for this release, built and checked inside its root
#             run CMD...        run CMD in the root, in the source tree, with the cluster's env.sh if up
#             down              stop the private Slurm and unmount what this script mounted
#             path              print the root's directory
# Environment:
#   MRCHECK_RELEASE_CACHE   where the roots are kept between runs (default /var/cache/mrcheck/releases)
#   MRCHECK_DEBIAN_MIRROR   default http://deb.debian.org/debian
#   MRCHECK_SLURM_PORT_BASE default per release (22.05: 16800, 24.11: 18800, 26.05: 19800), so that the three
#                           private clusters can run at once
#   MRCHECK_FOREIGN_PLUGIN  a spank_mrcheck.so built for ANOTHER release: copied into the root for the test
#                           that Slurm refuses it (tests/e2e/release_mismatch_test.sh)
#   MRCHECK_BUILD_DIR       build tree for 22.05, on this machine (default: build, as scripts/test.sh)
#   MRCHECK_SLURM_DIR       the private Slurm's directory for 22.05 (default /tmp/mrcheck-slurm-22.05); the roots
#                           use their own
#   MRCHECK_IMAGE_CACHE     the container test images (default /var/cache/mrcheck/images), bound into the root
#   MRCHECK_E2E_ONLY=1      build in the root only what the end-to-end tests run (`test -R NAME`, quicker)
#   MRCHECK_LOCK_WAIT       seconds to wait for another run that holds the release's root (default 3600)
# One run at a time per release root: every command but `down` and `path` holds an exclusive flock on
# $MRCHECK_RELEASE_CACHE/RELEASE/root.lock (made, checked or used, the root is shared), so a second run waits
# for the first instead of running a second apt-get or a second private Slurm in the same root.
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
prog=slurm-release
say() { printf 'mrcheck: %s %s: %s\n' "$prog" "${release:-}" "$*" >&2; }
die() { say "error: $*"; exit 1; }

usage() {
  sed -n '/^# usage:/,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}
(($# >= 2)) || usage
release=$1
cmd=$2
shift 2

case $release in
  22.05) suite=bookworm default_port=16800 ;;
  24.11) suite=trixie default_port=18800 ;;
  26.05) suite=sid default_port=19800 ;;
  *) die "unsupported Slurm release '$release': mrcheck supports 22.05, 24.11 and 26.05 (docs/slurm-releases.md)" ;;
esac
((EUID == 0)) || die "run as root (debootstrap, mount namespaces and a private Slurm need it)"

cache=${MRCHECK_RELEASE_CACHE:-/var/cache/mrcheck/releases}
mirror=${MRCHECK_DEBIAN_MIRROR:-http://deb.debian.org/debian}
port_base=${MRCHECK_SLURM_PORT_BASE:-$default_port}
host=0
[[ $release == 22.05 ]] && host=1
if ((host)); then
  root=/
  in_src=$src
  in_build=${MRCHECK_BUILD_DIR:-$src/build}
else
  root=$cache/$release/root
  in_src=/mrcheck/src
  in_build=/mrcheck/build
fi
# The private Slurm's directory (its programs, munge socket, spool, job_container BasePath): in the roots not
# under /tmp, which job_container/tmpfs (Dirs=/tmp,/dev/shm) replaces by the job's own in the job's namespace.
# Under /tmp, Slurm's _create_ns makes the job's /tmp and then chowns its BasePath through the old path, which
# the new /tmp hides ("_create_ns: chown failed for .../jc/NODE/JOB/.JOB: No such file or directory": 24.11's
# job_container_tmpfs.c, 26.05's namespace_tmpfs.c; docs/slurm-releases.md), and a task in that namespace
# would not find the plugin's helpers nor the munge socket (tests/e2e/contain_spank_test.sh).
# On this machine (22.05, no root and no lock) MRCHECK_SLURM_DIR is honoured, so that two private clusters with
# their own MRCHECK_SLURM_PORT_BASE can run side by side; a root has one cluster at a time (its lock).
slurm_dir=${MRCHECK_SLURM_DIR:-/tmp/mrcheck-slurm-$release}
((host)) || slurm_dir=/var/tmp/mrcheck-slurm-$release
image_cache=${MRCHECK_IMAGE_CACHE:-/var/cache/mrcheck/images}

# --- the root ----------------------------------------------------------------------------------------------
# What the root needs to build mrcheck and run the private Slurm: scripts/install-deps.sh's list, less what
# only the main leg uses (clang and its sanitizer runtime, man, debootstrap). Same names in every suite.
root_packages=(
  build-essential cmake ninja-build pkg-config libfmt-dev libhwloc-dev nlohmann-json3-dev libcli11-dev libslurm-dev
  libibverbs-dev ibverbs-providers libgtest-dev libmunge-dev
  slurmd slurmctld slurmdbd slurm-client munge mariadb-server
  procps iproute2 util-linux psmisc passwd python3 dpkg-dev debhelper fakeroot kmod file
)
# Apptainer, for the end-to-end test with a real container runtime (tests/container/apptainer_test.sh): only
# sid packages it (1.4.5; 30 MB, about 15 s to install), and it runs here only in a root entered with pivot_root.
[[ $suite == sid ]] && root_packages+=(apptainer)
apt_opts=(-o Acquire::Retries=3)
# sid's Release file on the mirror may be past its Valid-Until date (it is renewed when the suite moves).
[[ $suite == sid ]] && apt_opts+=(-o Acquire::Check-Valid-Until=false)

# --- the lock ----------------------------------------------------------------------------------------------
# scripts/cache-lock.sh: held until this script exits. in_root closes it for what it starts, or the daemons
# `up` leaves running would hold the root for ever.
# shellcheck source=cache-lock.sh
source "$src/scripts/cache-lock.sh"
lock_fd=
lock_root() {
  ((host)) && return 0
  [[ -z $lock_fd ]] || return 0
  cache_lock "$cache/$release/root.lock" "mrcheck: $prog $release" || die "the root is busy"
  lock_fd=$CACHE_LOCK_FD
}

mounts_under() { awk -v r="$root/" 'index($2, r) == 1 {print $2}' /proc/mounts | sort -r; }

unmount_all() {
  ((host)) && return 0
  local m
  for m in $(mounts_under); do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || say "could not unmount $m"
  done
}

mount_all() {
  ((host)) && return 0
  mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
  # slurmd (24.11 and later) reads cgroup files under /sys even with CgroupPlugin=disabled; the whole tree.
  if ! mountpoint -q "$root/sys"; then
    mount --rbind /sys "$root/sys"
    mount --make-rslave "$root/sys"
  fi
  if ! mountpoint -q "$root/dev"; then
    mount --rbind /dev "$root/dev"
    mount --make-rslave "$root/dev"
  fi
  mkdir -p "$root$in_src"
  # A source tree another checkout left mounted there (a run from another worktree that was not taken down) would
  # be built instead of this one: the same directory (device and inode, bash's -ef) or a fresh bind.
  if mountpoint -q "$root$in_src" && ! [[ $root$in_src -ef $src ]]; then umount "$root$in_src"; fi
  mountpoint -q "$root$in_src" || mount --bind "$src" "$root$in_src"
  # The container test images (tests/container/make-images.sh) this machine made or cached, at the same path:
  # the root has no debootstrap, and the images are the same for every release.
  mkdir -p "$image_cache" "$root/var/cache/mrcheck/images"
  mountpoint -q "$root/var/cache/mrcheck/images" || mount --bind "$image_cache" "$root/var/cache/mrcheck/images"
  cp -L /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
}

# in_root CMD...: CMD inside the root (or on this machine for 22.05), clean environment, from the source tree.
in_root() {
  if [[ -n $lock_fd ]]; then
    in_root_ "$@" {lock_fd}>&-
  else
    in_root_ "$@"
  fi
}
in_root_() {
  local envs=(PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive
    MRCHECK_SOURCE_DIR="$in_src" MRCHECK_BUILD_DIR="$in_build" MRCHECK_SLURM_DIR="$slurm_dir"
    MRCHECK_SLURM_PORT_BASE="$port_base" MRCHECK_SLURM_RELEASE="$release")
  local v
  for v in CI MRCHECK_SKIP_PACKAGE; do
    [[ -n ${!v:-} ]] && envs+=("$v=${!v}")
  done
  if ((host)); then
    (cd "$in_src" && env -i "${envs[@]}" "$@")
  else
    # Entered with pivot_root, not chroot: the kernel refuses a user namespace to a chrooted process (`man 2
    # unshare`, EPERM), and the tests that need one (Apptainer, the container test plugin) would skip. A private
    # mount namespace per call, the root (with what mount_all put under it) bound onto itself and made its
    # root; daemons started by one call keep theirs, and the next call reaches them through the same files
    # (munge socket, state, logs) and ports.
    unshare --mount --propagation private /bin/bash -c '
      set -e
      root=$1
      shift
      mount --rbind "$root" "$root"
      cd "$root"
      pivot_root . .
      umount -l .
      cd /
      exec /usr/bin/env -i "$@"' bash "$root" "${envs[@]}" /bin/bash -c 'cd "$MRCHECK_SOURCE_DIR" && exec "$@"' bash "$@"
  fi
}

stamp_text() { printf '%s\n' "suite=$suite" "${root_packages[@]}"; }

make_root() {
  if ((host)); then
    bash "$src/scripts/install-deps.sh" >&2
    return 0
  fi
  command -v debootstrap >/dev/null || die "debootstrap is not installed (scripts/install-deps.sh installs it)"
  lock_root
  local stamp=$cache/$release/stamp
  if [[ -f $stamp && $(cat "$stamp") == "$(stamp_text)" && -x $root/usr/sbin/slurmd ]]; then
    return 0
  fi
  local t0=$SECONDS
  mkdir -p "$cache/$release"
  if [[ ! -x $root/usr/bin/apt-get ]]; then
    unmount_all
    [[ -z $(mounts_under) ]] || die "something is still mounted under $root: cannot make it anew"
    rm -rf --one-file-system "$root"
    say "debootstrap --variant=minbase $suite $root ($mirror)"
    if ! debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$cache/$release/debootstrap.log" 2>&1; then
      tail -n 20 "$cache/$release/debootstrap.log" >&2
      unmount_all
      die "debootstrap of $suite failed (log above, $cache/$release/debootstrap.log): is $mirror reachable? \
set MRCHECK_DEBIAN_MIRROR to a Debian mirror that serves $suite"
    fi
  fi
  mount_all
  # Packages must not start their daemons in the root (munge, mariadb, slurm postinst).
  printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
  chmod 755 "$root/usr/sbin/policy-rc.d"
  say "installing ${#root_packages[@]} packages into the root"
  # dpkg --configure -a first: a run killed in the middle of apt-get (its lock dropped with it) leaves dpkg
  # "interrupted", and apt-get refuses to install until that is finished.
  if ! in_root bash -c 'dpkg --configure -a && apt-get "$@" update -qq && apt-get "$@" install -y -qq --no-install-recommends '"${root_packages[*]}" \
    bash "${apt_opts[@]}" >"$cache/$release/apt.log" 2>&1; then
    tail -n 20 "$cache/$release/apt.log" >&2
    die "apt-get in the $suite root failed (log above, $cache/$release/apt.log)"
  fi
  local v
  v=$(in_root slurmd -V 2>/dev/null | awk '{print $2}')
  [[ $v == "$release".* ]] || die "the $suite root has Slurm '$v', not $release: the suite moved on; see docs/slurm-releases.md"
  stamp_text >"$stamp"
  say "root ready: Slurm $v in $root ($((SECONDS - t0)) s)"
}

# --- build -------------------------------------------------------------------------------------------------
# The programs the end-to-end tests run: the CLI, the prolog, the plugin (loader and core), the fake
# libibverbs, the stand-in NCCL rank (tests/e2e/admin_netns_test.sh). The unit tests run in the main leg
# (scripts/test.sh); they do not depend on Slurm.
build_targets=(mrcheck mrcheck-prolog spank_mrcheck mrcheck_spank_core fake_ibverbs mrcheck_fake_nccl_rank
  mrcheck_probe_nccl_stand_in)

build() {
  make_root
  mount_all
  local t0=$SECONDS
  local layout=()
  # In a release root: configured as packaging/build-deb.sh configures, so `deb` reuses this build.
  ((host)) || layout=(-DCMAKE_INSTALL_PREFIX=/usr -DMRCHECK_SLURM_PLUGIN_DIR=/usr/lib/x86_64-linux-gnu/slurm-wlm
    -DMRCHECK_BUILD_TESTS=ON -DMRCHECK_BUILD_UNIT_TESTS=OFF)
  in_root cmake -S "$in_src" -B "$in_build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMRCHECK_WERROR=ON \
    -DCMAKE_C_FLAGS_RELEASE="-O2 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
    -DMRCHECK_BUILD_SPANK=ON "${layout[@]}" >"${TMPDIR:-/tmp}/mrcheck-release-$release-cmake.log" 2>&1 ||
    { tail -n 30 "${TMPDIR:-/tmp}/mrcheck-release-$release-cmake.log" >&2; die "cmake failed against Slurm $release"; }
  local targets=("${build_targets[@]}")
  # In a root, all of it (the programs, the fakes, the man pages the package ships) unless MRCHECK_E2E_ONLY=1.
  ((host)) || [[ ${MRCHECK_E2E_ONLY:-0} == 1 ]] || targets=()
  in_root ninja -C "$in_build" -j "$(nproc)" "${targets[@]}" >&2 || die "the build against Slurm $release failed"
  local built
  built=$(in_root "$in_build/cli/mrcheck" --version)
  [[ $built == *"Slurm $release."* ]] || die "mrcheck --version says '$built', not Slurm $release"
  say "built in $((SECONDS - t0)) s: $built"
}

slurm_up() {
  mount_all
  in_root bash tests/slurm/slurm-up.sh "$slurm_dir" >&2
}

slurm_down() {
  if [[ -e $root$slurm_dir ]]; then
    mount_all
    in_root bash tests/slurm/slurm-down.sh "$slurm_dir" >&2 || true
  fi
  unmount_all
}

stage_foreign_plugin() {
  [[ -n ${MRCHECK_FOREIGN_PLUGIN:-} ]] || return 0
  [[ -f $MRCHECK_FOREIGN_PLUGIN ]] || die "MRCHECK_FOREIGN_PLUGIN=$MRCHECK_FOREIGN_PLUGIN does not exist"
  mkdir -p "$root/mrcheck/foreign"
  install -m 0755 "$MRCHECK_FOREIGN_PLUGIN" "$root/mrcheck/foreign/spank_mrcheck.so"
}

case $cmd in
  root | build | up | test | deb | run) lock_root ;;
esac
case $cmd in
  root) make_root ;;
  build) build ;;
  up)
    build
    slurm_up
    say "up: $(in_root sinfo -V 2>/dev/null) in $slurm_dir (root $root); stop it with: $0 $release down"
    ;;
  test)
    build
    stage_foreign_plugin
    trap slurm_down EXIT
    # A fresh cluster: what an earlier run left (a drained node, a changed slurm.conf) is not this run's.
    in_root bash tests/slurm/slurm-down.sh "$slurm_dir" >/dev/null 2>&1 || true
    in_root rm -rf "$slurm_dir"
    slurm_up
    (($#)) || set -- -L e2e -LE load
    t0=$SECONDS
    rc=0
    foreign=()
    [[ -n ${MRCHECK_FOREIGN_PLUGIN:-} ]] && foreign=(env MRCHECK_FOREIGN_PLUGIN=/mrcheck/foreign/spank_mrcheck.so)
    ((host)) && [[ -n ${MRCHECK_FOREIGN_PLUGIN:-} ]] && foreign=(env MRCHECK_FOREIGN_PLUGIN="$MRCHECK_FOREIGN_PLUGIN")
    in_root "${foreign[@]}" ctest --test-dir "$in_build" --output-on-failure --timeout 900 "$@" || rc=$?
    say "ctest $* on Slurm $release: exit $rc after $((SECONDS - t0)) s"
    exit $rc
    ;;
  deb)
    # The package, from the build tree `build` made (same configuration, no tests), then checked inside the
    # root against this release's packages (tests/package/release_deb_test.sh). The .deb is left in the
    # cache: $cache/$release/.
    make_root
    mount_all
    trap unmount_all EXIT
    ((host)) && die "for 22.05 use packaging/build-deb.sh (its own tests: ctest -L package)"
    deb=$(in_root bash packaging/build-deb.sh "$in_build" | tail -n1)
    [[ -n $deb && -f $root$deb ]] || die "packaging/build-deb.sh made no .deb"
    cp "$root$deb" "$cache/$release/"
    say "built $cache/$release/$(basename "$deb")"
    in_root bash tests/package/release_deb_test.sh "$deb" "$release"
    ;;
  run)
    (($#)) || usage
    make_root
    mount_all
    in_root bash -c '[[ -f $MRCHECK_SLURM_DIR/env.sh ]] && source "$MRCHECK_SLURM_DIR/env.sh"; exec "$@"' bash "$@"
    ;;
  down) slurm_down ;;
  path) echo "$root" ;;
  *) usage ;;
esac
