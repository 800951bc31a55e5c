#!/bin/bash
# `mrcheck dump --out DIR` run by root must not write through a user's link. The user owns DIR (empty, so the
# dump took it) and, once the dump has started writing, plants DIR/MRCHECK_DUMP -> a root-only file: root used to
# follow it and overwrite that file with the dump's text. Asserted: a DIR that is not root's, or that others can
# write (a sticky /tmp-like directory included), is refused before anything is written and the file is intact; a
# DIR only root can write gets the whole dump, and a user dumping into their own directory still can.
source "$(dirname "$0")/lib.sh"
mrcheck=$MRCHECK_BUILD_DIR/cli/mrcheck
[[ -x $mrcheck ]] || e2e_skip "mrcheck not built ($mrcheck)"
[[ "$(id -u)" == 0 ]] || e2e_skip "needs root"
id "$E2E_USER" >/dev/null 2>&1 || e2e_skip "no user $E2E_USER"
fixture=$MRCHECK_SOURCE_DIR/tests/fixtures/matrix_aligned
work=$(mktemp -d /tmp/mrcheck-hostile-dump.XXXXXX)
chmod 0755 "$work"
mkdir -m 0700 "$work/private"
echo precious >"$work/private/victim"
chmod 0600 "$work/private/victim"
PLANTER=""
trap 'touch "$work/stop"; [[ -n $PLANTER ]] && wait "$PLANTER"; rm -rf "$work"' EXIT
export MRCHECK_SLURM_WORK=$work
cp "$mrcheck" "$work/mrcheck" && chmod 0755 "$work/mrcheck"
run() {
  set +e
  out=$("$@" 2>&1)
  rc=$?
  set -e
}

# 1. DIR is the user's: the user waits for the dump's first file, then plants the link (a busy loop, as mrtest).
mkdir -m 0755 "$work/users"
chown "$E2E_USER:" "$work/users"
as_user bash -c "shopt -s nullglob dotglob; end=\$((SECONDS + 20))
  while ((SECONDS < end)); do [[ -e $work/stop ]] && exit 0; f=($work/users/*); ((\${#f[@]})) && break; done
  ln -s $work/private/victim $work/users/MRCHECK_DUMP" &
PLANTER=$!
run "$mrcheck" dump --out "$work/users"  # the host: long enough between the first file and the last
touch "$work/stop"
wait "$PLANTER" 2>/dev/null || true
PLANTER=""
e2e_log "user's DIR: rc=$rc: $out"
expect_eq "user's DIR: refused (usage error)" "$rc" "2"
expect_contains "user's DIR: says whose it is" "$out" "must be owned by root and not writable by group or others (owner uid $(id -u "$E2E_USER")"
expect_eq "user's DIR: the root-only file is intact" "$(cat "$work/private/victim")" "precious"
expect_eq "user's DIR: nothing written into it" "$(find "$work/users" -mindepth 1 -user root | wc -l)" "0"

# 2. A root directory anyone can write (sticky, like /tmp): refused too.
mkdir -m 1777 "$work/sticky"
run "$mrcheck" dump --out "$work/sticky" --root "$fixture"
expect_eq "sticky DIR: refused" "$rc" "2"
expect_eq "sticky DIR: nothing written" "$(find "$work/sticky" -mindepth 1 | wc -l)" "0"

# 3. DIR is a link the user made (to a root directory): never followed.
mkdir -m 0755 "$work/rootdir"
as_user ln -s "$work/rootdir" "$work/users/link"
run "$mrcheck" dump --out "$work/users/link" --root "$fixture"
expect_eq "linked DIR: refused" "$rc" "2"
expect_eq "linked DIR: nothing written where it points" "$(find "$work/rootdir" -mindepth 1 | wc -l)" "0"

# 4. The control: a new DIR in a root directory gets the whole dump, and it replays.
run "$mrcheck" dump --out "$work/out" --root "$fixture"
expect_eq "root's DIR: written" "$rc" "0"
expect_contains "root's DIR: the stamp file" "$(cat "$work/out/MRCHECK_DUMP" 2>/dev/null)" "mrcheck dump of host"
expect_eq "root's DIR: no group/other-writable entry" "$(find "$work/out" -perm /022 ! -type l | wc -l)" "0"
run "$mrcheck" report --root "$work/out" --json
expect_contains "root's DIR: replays" "$out" '"checks"'

# 5. A user into their own directory: still theirs to use.
run as_user "$work/mrcheck" dump --out "$work/users/mine" --root "$fixture"
expect_eq "user's own DIR as the user: written" "$rc" "0"
e2e_done
