#!/bin/bash
# Installs every Debian 12 package mrcheck needs to build, test and run its local Slurm.
# Idempotent; run as root. The single source of truth for dependencies: CI and the README call it.
set -euo pipefail

packages=(
  # build
  build-essential cmake ninja-build pkg-config clang libclang-rt-14-dev clang-format git ccache
  libfmt-dev libhwloc-dev nlohmann-json3-dev libcli11-dev libslurm-dev libibverbs-dev ibverbs-providers libmunge-dev
  libgtest-dev googletest
  # the real local Slurm the end-to-end tests run on
  slurmd slurmctld slurmdbd slurm-client munge mariadb-server
  # tools the tests and scripts use
  procps iproute2 util-linux psmisc passwd python3 curl
  # man pages (rendered by the man test), the .deb test (debootstrap), the prolog's bench baseline tools
  man-db groff-base dpkg-dev debootstrap ibverbs-utils infiniband-diags kmod time
  # the RPM for EL sites: built with rpmbuild and linted here (tests/package/rpm_test.sh); find-debuginfo
  # (debugedit) and eu-strip (elfutils) strip it and split its debug information as on EL
  rpm rpmlint debugedit elfutils file cpio
  # the tools mrcheck meets (tests/ecosystem): node_exporter scrapes its textfile, promtool lints it and the alert
  # rules, jsonschema validates every --json output against docs/schema/
  prometheus-node-exporter prometheus python3-jsonschema
  # the guests with real kernels and Soft-RoCE (scripts/guest.sh, tests/guest): QEMU (TCG: no /dev/kvm needed) and
  # the userspace switch that joins the guests' NICs and nothing else
  qemu-system-x86 vde2
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# Debian's daemon packages try to start services; there is no init here to start them and the
# tests start their own private instances, so keep postinst from starting anything.
policy=/usr/sbin/policy-rc.d
created_policy=0
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy"
  chmod +x "$policy"
  created_policy=1
fi
apt-get install -y -qq --no-install-recommends "${missing[@]}"
((created_policy)) && rm -f "$policy"
echo "install-deps: done"
