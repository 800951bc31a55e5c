#!/bin/bash
# Builds the container images the `container` tests run in, once, and caches them:
#   $MRCHECK_IMAGE_CACHE/bookworm   debootstrap --variant=minbase bookworm + libibverbs1/ibverbs-providers 44
#                                   (the host's rdma-core: the "matching" image)
#   $MRCHECK_IMAGE_CACHE/old        a copy with bullseye's libibverbs1/ibverbs-providers 33.2 (dpkg -x)
#   $MRCHECK_IMAGE_CACHE/none       a copy without libibverbs and its providers
#   $MRCHECK_IMAGE_CACHE/noloader   a copy without the dynamic loader (/lib64/ld-linux-x86-64.so.2)
# One debootstrap (a few minutes, network); every variant is a copy plus a few files. Default cache:
# /var/cache/mrcheck/images (outside the repository, kept between CI runs). Prints the cache path.
# Exit 77 when the mirror cannot be reached and nothing is cached.
set -euo pipefail
cache=${MRCHECK_IMAGE_CACHE:-/var/cache/mrcheck/images}
mirror=${MRCHECK_DEBIAN_MIRROR:-http://deb.debian.org/debian}
old_version=33.2-1   # bullseye's rdma-core
mkdir -p "$cache"
# One maker at a time (scripts/cache-lock.sh): a second run waits, then finds the images made.
# shellcheck source=../../scripts/cache-lock.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/cache-lock.sh"
cache_lock "$cache/.lock" make-images

if [[ ! -f $cache/bookworm/.complete ]]; then
  command -v debootstrap >/dev/null || { echo "make-images: debootstrap is not installed" >&2; exit 77; }
  # The same probe as tests/package/deb_install_test.sh: a route to the mirror, or a skip that says so.
  host=${mirror#*://}
  host=${host%%/*}
  port=80
  [[ $mirror == https://* ]] && port=443
  if ! timeout 15 bash -c "exec 3<>/dev/tcp/$host/$port" 2>/dev/null; then
    echo "make-images: SKIP: no route to the Debian mirror $host:$port and no image cached in $cache" >&2
    exit 77
  fi
  rm -rf "$cache/bookworm" "$cache/bookworm.tmp"
  debootstrap --variant=minbase --include=libibverbs1,ibverbs-providers bookworm "$cache/bookworm.tmp" "$mirror" \
    >"$cache/debootstrap.log" 2>&1 || { tail -20 "$cache/debootstrap.log" >&2; exit 1; }
  rm -rf "$cache/bookworm.tmp/var/cache/apt/archives/"*.deb "$cache/bookworm.tmp/var/lib/apt/lists/"*
  touch "$cache/bookworm.tmp/.complete"
  mv "$cache/bookworm.tmp" "$cache/bookworm"
  rm -rf "$cache/old" "$cache/none" "$cache/noloader"
fi

variant() {  # variant NAME: a fresh copy of the base image in $cache/NAME.tmp
  rm -rf "${cache:?}/${1:?}" "$cache/$1.tmp"
  cp -a --reflink=auto "$cache/bookworm" "$cache/$1.tmp"
  rm -f "$cache/$1.tmp/.complete"
}
libdir=usr/lib/x86_64-linux-gnu

if [[ ! -f $cache/old/.complete ]]; then
  debs=$cache/debs
  mkdir -p "$debs"
  for p in libibverbs1 ibverbs-providers; do
    f=$debs/${p}_${old_version}_amd64.deb
    [[ -s $f ]] || curl -fsS -m 120 -o "$f.tmp" "$mirror/pool/main/r/rdma-core/${p}_${old_version}_amd64.deb" ||
      { echo "make-images: SKIP: cannot download $p $old_version from $mirror" >&2; rm -f "$f.tmp"; exit 77; }
    [[ -s $f ]] || mv "$f.tmp" "$f"
  done
  variant old
  rm -f "$cache/old.tmp/$libdir"/libibverbs.so.1* "$cache/old.tmp/$libdir"/libibverbs/*
  for p in libibverbs1 ibverbs-providers; do dpkg -x "$debs/${p}_${old_version}_amd64.deb" "$cache/old.tmp"; done
  # What the image's package database says, as in an image really built from bullseye's packages.
  sed -i "/^Package: libibverbs1\$/,/^\$/ s/^Version: .*/Version: $old_version/" "$cache/old.tmp/var/lib/dpkg/status"
  touch "$cache/old.tmp/.complete"
  mv "$cache/old.tmp" "$cache/old"
fi

if [[ ! -f $cache/none/.complete ]]; then
  variant none
  chroot "$cache/none.tmp" dpkg --purge --force-depends ibverbs-providers libibverbs1 >/dev/null
  touch "$cache/none.tmp/.complete"
  mv "$cache/none.tmp" "$cache/none"
fi

if [[ ! -f $cache/noloader/.complete ]]; then
  variant noloader
  rm -f "$cache/noloader.tmp"/lib64/ld-linux-x86-64.so.2 "$cache/noloader.tmp/$libdir"/ld-linux-x86-64.so.2
  touch "$cache/noloader.tmp/.complete"
  mv "$cache/noloader.tmp" "$cache/noloader"
fi
echo "$cache"
