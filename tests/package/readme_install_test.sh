#!/bin/bash
# README.md's install steps, followed as written on this machine, give a working `srun --mr-check`.
#
# The .deb is installed on this host with `apt-get install ./mrcheck_*.deb`, the commands of the README's
# "Turn it on" section are taken out of README.md and run as they stand (they write /etc/slurm, as on a
# real node), and a private Slurm from tests/slurm/ is pointed at Debian's /etc/slurm/plugstack.conf. Then
# the README's own check commands run as the unprivileged job user.
#
# Where this machine cannot do what a node does, the test says so and does the nearest real thing:
#   - no systemd here: "systemctl restart slurmd" is tests/slurm/slurmd-restart.sh, and the slurmd drop-in
#     is checked for LimitMEMLOCK=infinity rather than installed;
#   - slurmd cannot get an unlimited memlock limit here (hard 8 MiB inherited, root without
#     CAP_SYS_RESOURCE), so the prolog's slurmd_memlock rule fails as written: the test first shows that
#     (the prolog would drain the node, with the reason), then lowers `slurmd_memlock.min` to this
#     machine's limit in /etc/slurm/mrcheck-rules.conf, the way a site adapts a rule.
#
# usage: readme_install_test.sh SOURCE_DIR WORK_DIR
# Exit 0 pass, 1 fail, 77 skipped (not root, no apt/dpkg, mrcheck already installed from elsewhere).
# Everything it changes outside WORK_DIR is put back by the trap: the package is purged, /etc/slurm's
# plugstack.conf, plugstack.conf.d/mrcheck.conf, mrcheck.conf and mrcheck-rules.conf are restored or removed.
# Env: MRCHECK_DEB=PATH (test this .deb instead of building one), MRCHECK_README_SLURM_PORT_BASE (17600).
set -uo pipefail

src=${1:?usage: readme_install_test.sh SOURCE_DIR WORK_DIR}
work=${2:?usage: readme_install_test.sh SOURCE_DIR WORK_DIR}
t0=$SECONDS
say() { echo "mrcheck: readme install test: $*"; }
skip() { say "SKIP: $*"; exit 77; }
fails=0
fail() { say "FAIL: $*"; fails=$((fails + 1)); }
ok() { say "ok: $*"; }

((EUID == 0)) || skip "needs root (it installs a package and writes /etc/slurm)"
command -v apt-get >/dev/null && command -v dpkg >/dev/null || skip "no apt-get/dpkg"
if dpkg-query -W -f '${Status}' mrcheck 2>/dev/null | grep -q 'install ok installed'; then
  skip "a mrcheck package is already installed on this machine; the test will not replace it"
fi
mkdir -p "$work"
work=$(cd "$work" && pwd)

export MRCHECK_SLURM_DIR=$work/slurm
export MRCHECK_SLURM_PORT_BASE=${MRCHECK_README_SLURM_PORT_BASE:-17600}
etc=/etc/slurm
managed=("$etc/plugstack.conf" "$etc/plugstack.conf.d/mrcheck.conf" "$etc/mrcheck.conf" "$etc/mrcheck-rules.conf")
backup=$work/etc-backup
had_dropin_dir=0
[[ -d $etc/plugstack.conf.d ]] && had_dropin_dir=1
had_state_dir=0
[[ -e /var/lib/mrcheck ]] && had_state_dir=1

cleanup() {
  bash "$src/tests/slurm/slurm-down.sh" >/dev/null 2>&1
  dpkg -P mrcheck >/dev/null 2>&1
  local f
  for f in "${managed[@]}"; do
    rm -f "$f"
    [[ -e $backup$f ]] && cp -a "$backup$f" "$f"
  done
  ((had_dropin_dir)) || rmdir "$etc/plugstack.conf.d" 2>/dev/null
  ((had_state_dir)) || rm -rf --one-file-system /var/lib/mrcheck
}
trap cleanup EXIT
trap 'exit 1' INT TERM
for f in "${managed[@]}"; do
  [[ -e $f ]] && { mkdir -p "$backup$(dirname "$f")"; cp -a "$f" "$backup$f"; }
done

# ---- the package ----------------------------------------------------------------------------------------
deb=${MRCHECK_DEB:-}
if [[ -z $deb ]]; then
  say "building the .deb with packaging/build-deb.sh (minutes)"
  deb=$(bash "$src/packaging/build-deb.sh" "$work/build" | tail -n1) || { fail "build-deb.sh failed"; exit 1; }
fi
[[ -f $deb ]] || { fail "no .deb at '$deb'"; exit 1; }
deb=$(cd "$(dirname "$deb")" && pwd)/$(basename "$deb")
say "installing $deb as the README says ($((SECONDS - t0)) s so far)"
if ! DEBIAN_FRONTEND=noninteractive apt-get install -y "$deb" >"$work/apt.log" 2>&1; then
  tail -n 20 "$work/apt.log"
  fail "apt-get install ./$(basename "$deb") failed"
  exit 1
fi
ok "package installed"

# ---- the README's "Turn it on" section, as written -------------------------------------------------------
# Its fenced blocks, in order: [1] copy the policy, [2] plugstack include + drop-in, [3] the plugstack
# line itself, [4] restart slurmd, [5] the check commands. A README that no longer has that shape fails
# here, so this test and the README cannot silently drift apart.
section=$(awk '/^### Turn it on/{on=1; next} on && /^##/{exit} on' "$src/README.md")
blocks_dir=$work/blocks
rm -rf "$blocks_dir"
mkdir -p "$blocks_dir"
awk -v d="$blocks_dir" '
  /^ *```/ { if (inb) { inb = 0 } else { inb = 1; n++ } next }
  inb { sub(/^   /, ""); print > (d "/" n) }
' <<<"$section"
nblocks=$(find "$blocks_dir" -type f | wc -l)
((nblocks == 5)) || { fail "README 'Turn it on' has $nblocks code blocks, this test follows 5: update it"; exit 1; }
grep -q "^cp /usr/share/mrcheck/mrcheck.conf $etc/mrcheck.conf" "$blocks_dir/1" ||
  { fail "README step 1 is not the policy copy this test expects: $(cat "$blocks_dir/1")"; exit 1; }
grep -q "plugstack.conf.d" "$blocks_dir/2" || { fail "README step 2 no longer installs the drop-in"; exit 1; }
grep -qx 'systemctl restart slurmd' "$blocks_dir/4" || { fail "README step 5 is not 'systemctl restart slurmd'"; exit 1; }

say "step 1 and 2: running the README's commands"
bash -euo pipefail "$blocks_dir/1" || fail "README step 1 failed"
bash -euo pipefail "$blocks_dir/2" || fail "README step 2 failed"
line=$(grep -v '^#' "$etc/plugstack.conf.d/mrcheck.conf" | grep .)
[[ $line == "$(cat "$blocks_dir/3")" ]] ||
  fail "the installed drop-in says '$line', the README says '$(cat "$blocks_dir/3")'"
plugin=$(awk '{print $2}' <<<"$line")
[[ -f $plugin ]] || fail "the plugstack line names $plugin, which the package did not install"
grep -q "^include $etc/plugstack.conf.d/\*.conf" "$etc/plugstack.conf" || fail "plugstack.conf has no include line"
bash -euo pipefail "$blocks_dir/2" || fail "README step 2 is not idempotent"
(($(grep -c "^include $etc/plugstack.conf.d" "$etc/plugstack.conf") == 1)) || fail "running step 2 twice added a second include"

# The README's step 1 names admin_comment=yes as the switch for the admins' record in sacct: turn it on, so the
# packaged collector (/usr/sbin/mrcheck-prolog, run as root by slurmstepd) is part of what is tested.
grep -q '^admin_comment=' "$etc/mrcheck.conf" || fail "the example mrcheck.conf has no admin_comment= line"
sed -i 's/^admin_comment=.*/admin_comment=yes/' "$etc/mrcheck.conf"

say "step 3: the slurmd drop-in (no systemd here: checked, not installed)"
grep -qx 'LimitMEMLOCK=infinity' /usr/share/mrcheck/systemd/slurmd.service.d/mrcheck-memlock.conf ||
  fail "the slurmd drop-in does not set LimitMEMLOCK=infinity"

say "step 4: slurm.conf from /usr/share/mrcheck/slurm.conf.snippet, Prolog=/usr/sbin/mrcheck-prolog"
bash "$src/tests/slurm/slurm-up.sh" >"$work/slurm-up.log" 2>&1 || { tail -n 30 "$work/slurm-up.log"; fail "slurm-up.sh failed"; exit 1; }
# shellcheck disable=SC1091
source "$MRCHECK_SLURM_DIR/env.sh"
set_args=()
while IFS='=' read -r key value; do set_args+=("$key" "$value"); done < <(grep -E '^[A-Za-z]+=' /usr/share/mrcheck/slurm.conf.snippet)
((${#set_args[@]} >= 2)) || fail "the snippet sets no slurm.conf key"
# Debian's Slurm reads /etc/slurm/plugstack.conf; the private cluster had its own, so name Debian's.
bash "$src/tests/slurm/slurm-conf-set.sh" "${set_args[@]}" Prolog /usr/sbin/mrcheck-prolog \
  PlugStackConfig "$etc/plugstack.conf" >"$work/conf-set.log" 2>&1 || { cat "$work/conf-set.log"; fail "slurm-conf-set.sh failed"; }

# As written, the prolog's rule wants slurmd unlimited. Here it cannot be: show the verdict it would
# drain the node with, then adapt the rule as a site would.
node=${MRCHECK_SLURM_NODES%%,*}
hard=$(awk '/^Max locked memory/{print $5}' "/proc/$(cat "$MRCHECK_SLURM_DIR/run/slurmd-$node.pid")/limits")
if [[ $hard != unlimited ]]; then
  out=$(/usr/sbin/mrcheck-prolog --mode prolog --dry-run 2>&1)
  rc=$?
  if ((rc == 1)) && grep -q 'mrcheck: slurmd_memlock: FAIL' <<<"$out"; then
    ok "as written, the prolog fails this node on slurmd's $hard-byte hard limit (exit 1)"
  else
    fail "the prolog did not fail slurmd's $hard-byte limit (exit $rc): $out"
  fi
  printf '# build machine: slurmd inherits a hard limit root cannot raise\nslurmd_memlock.min %s\n' "$hard" \
    >"$etc/mrcheck-rules.conf"
  out=$(/usr/sbin/mrcheck-prolog --mode prolog --dry-run 2>&1) || fail "the prolog still fails with slurmd_memlock.min $hard: $out"
fi

say "step 5: restart slurmd"
bash "$src/tests/slurm/slurmd-restart.sh" >"$work/restart.log" 2>&1 || { cat "$work/restart.log"; fail "slurmd restart failed"; }

say "step 6: the README's check commands, as the job user"
cd "$MRCHECK_SLURM_WORK" || exit 1
help=$($MRCHECK_AS_USER bash -c "$(sed -n 1p "$blocks_dir/5")" 2>&1)
grep -q -- '--mr-check' <<<"$help" && ok "srun --help lists --mr-check" || fail "srun --help has no --mr-check: $help"
check_cmd=$(sed -n 2p "$blocks_dir/5")
[[ $check_cmd == srun\ --mr-check* ]] || fail "README's second check is not an srun --mr-check: $check_cmd"
out=$(timeout 120 $MRCHECK_AS_USER bash -c "$check_cmd" 2>&1)
rc=$?
echo "$out" | sed 's/^/    /'
# The example policy wants memlock unlimited; this slurmd has 8 MiB, so the documented verdict here is a
# memlock FAIL that names slurmd and its fix, and on_fail=fail stops the task.
grep -q 'mrcheck: memlock: FAIL' <<<"$out" || fail "no memlock verdict from srun --mr-check"
grep -q 'mrcheck: memlock: FAIL: .*lowered at slurmd' <<<"$out" || fail "the verdict does not name slurmd's limit"
grep -q 'killed by SIG' <<<"$out" && fail "a probe crashed"
grep -q 'LimitMEMLOCK=infinity' <<<"$out" || fail "the verdict does not give slurmd's fix"
((rc != 0)) || fail "on_fail=fail, yet srun exited 0"
# The step's record in accounting, written by the packaged collector before the job ended.
comment=
for _ in $(seq 1 20); do
  comment=$(sacct -n -X -P -u "$MRCHECK_SLURM_USER" -o AdminComment --starttime now-1hour | tail -n1)
  [[ -n $comment ]] && break
  sleep 1
done
if [[ $comment == "mrcheck: step 0: FAIL memlock="*"(slurmd limit) on $node"* ]]; then
  ok "sacct AdminComment: $comment"
else
  fail "sacct AdminComment of the failing job is '$comment'"
fi
state=$(sinfo -h -n "$node" -o %T)
[[ $state == idle* || $state == mix* || $state == alloc* ]] || fail "node $node is '$state' after the job (the prolog drained it?)"

# A policy this machine can meet: the same install then passes and the task runs with the limit.
sed -i 's/^memlock_min=.*/memlock_min=8M/' "$etc/mrcheck.conf"
out=$(timeout 120 $MRCHECK_AS_USER srun --mr-check=memlock -N1 bash -c 'ulimit -l' 2>&1)
rc=$?
if ((rc == 0)) && [[ $(tail -n1 <<<"$out") == 8192 ]]; then
  ok "with memlock_min=8M: srun --mr-check=memlock passes, the task has 8192 KiB"
else
  fail "with memlock_min=8M: exit $rc, output: $out"
fi

say "$((SECONDS - t0)) s; $fails failure(s)"
((fails == 0))
