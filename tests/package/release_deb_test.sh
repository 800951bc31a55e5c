#!/bin/bash
# The .deb of one Slurm release, checked inside that release's Debian root (scripts/slurm-release.sh RELEASE
# deb runs it there, as root): its version names the release; it depends on this release's Slurm from
# Debian (slurm-wlm-basic-plugins, libslurmNN) or from SchedMD's packaging (slurm-smd), and on no other
# release; apt installs it here and what it installed runs; apt resolves it on a node whose Slurm is slurm-smd
# of this release and refuses it with slurm-smd of another (a copy of dpkg's database, no archive, --simulate).
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

# A node whose Slurm is SchedMD's slurm-smd: dpkg's database with every Debian Slurm package taken out and a
# slurm-smd of version V put in, and apt with no archive at all (empty lists, no sources), so that only what
# that database holds can satisfy the package: apt-get --simulate resolves it without changing anything.
smd_check() {
  local v=$1 admin
  admin=$(mktemp -d)
  mkdir -p "$admin/lists/partial"
  python3 - /var/lib/dpkg/status "$admin/status" "$v" <<'PY'
import re, sys
src, dst, version = sys.argv[1:4]
stanzas = open(src).read().split("\n\n")
slurm = re.compile(r"^Package: (slurm\S*|libslurm\S*|libpmi\S*|sview)$", re.M)
keep = [s for s in stanzas if s.strip() and not slurm.search(s)]
keep.append("Package: slurm-smd\nStatus: install ok installed\nPriority: optional\nSection: admin\n"
            "Maintainer: test\nArchitecture: amd64\nVersion: %s\nDescription: stand-in for SchedMD's slurm-smd" % version)
open(dst, "w").write("\n\n".join(keep) + "\n")
PY
  apt-get --simulate -o Dir::State::status="$admin/status" -o Dir::State::Lists="$admin/lists" \
    -o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts=/dev/null -o Dir::Cache="$admin" \
    install "$deb" >"$admin/log" 2>&1
  local rc=$?
  SMD_LOG=$(grep -E "^(Inst|E:| mrcheck :)" "$admin/log" | head -n 3)
  rm -rf "$admin"
  return $rc
}
if smd_check "$release.5-1"; then
  ok "apt resolves it beside slurm-smd $release.5 and no Debian Slurm package ($SMD_LOG)"
else
  fail "apt refuses it beside slurm-smd $release.5: $SMD_LOG"
fi
other=$(printf '%d.%02d.1-1' "$major" $((minor >= 6 ? minor - 6 : minor + 6)))
if smd_check "$other"; then
  fail "apt accepts it beside slurm-smd $other (another release): $SMD_LOG"
else
  ok "apt refuses it beside slurm-smd $other: $SMD_LOG"
fi
echo "release_deb_test $release: $passes passed, $fails failed"
((fails == 0))
