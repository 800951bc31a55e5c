#!/bin/bash
# The .deb of one Slurm release, checked inside that release's Debian root (scripts/slurm-release.sh RELEASE
# deb runs it there, as root): its version names the release; it depends on this release's Slurm from
# Debian (slurm-wlm-basic-plugins, libslurmNN) or from SchedMD's packaging (slurm-smd), and on no other
# release; apt installs it here and what it installed runs; dpkg accepts it on a node whose Slurm is
# slurm-smd of this release and refuses it with slurm-smd of another (a copy of dpkg's database, --simulate).
# usage: release_deb_test.sh DEB RELEASE        exit 0 pass, 1 fail
set -uo pipefail
deb=${1:?usage: release_deb_test.sh DEB RELEASE}
release=${2:?usage: release_deb_test.sh DEB RELEASE}
fails=0
passes=0
ok() { echo "mrcheck: release deb test $release: ok: $*"; passes=$((passes + 1)); }
fail() { echo "mrcheck: release deb test $release: FAIL: $*"; fails=$((fails + 1)); }
check() { if eval "$2"; then ok "$1"; else fail "$1"; fi; }

major=${release%%.*}
minor=$((10#${release#*.}))
next=$(printf '%d.%02d' "$major" $((minor + 1)))
version=$(dpkg-deb --field "$deb" Version)
depends=$(dpkg-deb --field "$deb" Depends)
echo "Version: $version"
echo "Depends: $depends"
check "the version names the release (…+slurm$release)" '[[ $version == *-1+slurm$release ]]'
check "depends on this release's Slurm from Debian or slurm-smd (lower bound)" \
  '[[ $depends == *"slurm-wlm-basic-plugins (>= $release) | slurm-smd (>= $release)"* ]]'
check "… and below the next release ($next)" \
  '[[ $depends == *"slurm-wlm-basic-plugins (<< $next) | slurm-smd (<< $next)"* ]]'
libpkg=$(dpkg -S "$(readlink -f /usr/lib/x86_64-linux-gnu/libslurm.so)" 2>/dev/null | cut -d: -f1)
check "depends on this root's libslurm package ($libpkg) or slurm-smd" \
  '[[ -n $libpkg && $depends == *"$libpkg ("*") | slurm-smd (>= $release)"* ]]'

export DEBIAN_FRONTEND=noninteractive
if apt-get install -y -qq --no-install-recommends "$deb" >/tmp/release-deb-apt.log 2>&1; then
  ok "apt installs it against Slurm $release's packages"
  v=$(/usr/bin/mrcheck --version 2>&1)
  check "the installed mrcheck is for Slurm $release ($v)" '[[ $v == *"built against Slurm $release."* ]]'
  check "the plugin is in Debian's Slurm plugin directory" '[[ -f /usr/lib/x86_64-linux-gnu/slurm-wlm/spank_mrcheck.so ]]'
  check "mrcheck-prolog starts (it links this release's libslurm)" '/usr/sbin/mrcheck-prolog --help >/dev/null 2>&1'
  dpkg --purge mrcheck >/dev/null 2>&1 || fail "dpkg --purge mrcheck"
else
  tail -n 20 /tmp/release-deb-apt.log
  fail "apt-get install $deb"
fi

# A node whose Slurm is SchedMD's slurm-smd: dpkg's database with Debian's Slurm packages taken out and a
# slurm-smd of version V put in; dpkg --simulate checks the dependencies without changing anything.
smd_status() {
  local admin=$1 v=$2
  rm -rf "$admin"
  cp -a /var/lib/dpkg "$admin"
  python3 - "$admin/status" "$v" <<'PY'
import sys, re
path, version = sys.argv[1], sys.argv[2]
stanzas = open(path).read().split("\n\n")
drop = re.compile(r"^Package: (slurm-wlm-basic-plugins|libslurm[0-9a-z]+|slurm-client|slurmd|slurmctld|slurmdbd|libslurm-dev|libpmi0|libpmi2-0)$", re.M)
keep = [s for s in stanzas if s.strip() and not drop.search(s)]
keep.append("Package: slurm-smd\nStatus: install ok installed\nPriority: optional\nSection: admin\n"
            "Maintainer: test\nArchitecture: amd64\nVersion: %s\nDescription: stand-in for SchedMD's slurm-smd" % version)
open(path, "w").write("\n\n".join(keep) + "\n")
PY
}
admin=$(mktemp -d)/dpkg
smd_status "$admin" "$release.5-1"
if dpkg --admindir="$admin" --simulate -i "$deb" >/tmp/release-deb-smd.log 2>&1; then
  ok "dpkg accepts it beside slurm-smd $release (no Debian Slurm packages)"
else
  cat /tmp/release-deb-smd.log
  fail "dpkg refuses it beside slurm-smd $release"
fi
other=$(printf '%d.%02d.1-1' "$major" $((minor >= 6 ? minor - 6 : minor + 6)))
smd_status "$admin" "$other"
if dpkg --admindir="$admin" --simulate -i "$deb" >/tmp/release-deb-smd.log 2>&1; then
  fail "dpkg accepts it beside slurm-smd $other (another release)"
else
  ok "dpkg refuses it beside slurm-smd $other: $(grep -m1 -o 'depends on [^;]*' /tmp/release-deb-smd.log)"
fi
rm -rf "$(dirname "$admin")"
echo "release_deb_test $release: $passes passed, $fails failed"
((fails == 0))
