#!/bin/bash
# B9 (issue 37): root replays a user's dump. The job user makes a dump with `mrcheck dump --out` (as the dump's
# header tells them to hand it to an admin), then replaces files in it with links out of the tree: the kernel
# release (proc/sys/kernel/osrelease) an absolute link to a root-only file, the host name a `../` link to it,
# `etc` a link to the root-only directory. Root replays it with `mrcheck report --root`, `mrcheck fleet` and
# `mrcheck-prolog --root`, text and JSON: the root-only file's content must appear in none of them.
# Fails on the code before c2a5dc7: sysroot followed every link, and the file's content was printed as the
# kernel release (and the host name) by all three.
source "$(dirname "$0")/lib.sh"
mrcheck=$MRCHECK_BUILD_DIR/cli/mrcheck
prolog=$MRCHECK_BUILD_DIR/prolog/mrcheck-prolog
[[ -x $mrcheck ]] || e2e_skip "mrcheck not built ($mrcheck)"
[[ -x $prolog ]] || e2e_skip "mrcheck-prolog not built ($prolog)"
[[ "$(id -u)" == 0 ]] || e2e_skip "needs root"
id "$E2E_USER" >/dev/null 2>&1 || e2e_skip "no user $E2E_USER"
work=$(mktemp -d /tmp/mrcheck-dump-replay.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 0755 "$work"
mkdir -m 0700 "$work/private"
SECRET=mrcheck-root-only-$$-$RANDOM
echo "$SECRET" >"$work/private/secret"
chmod 0600 "$work/private/secret"
mkdir -m 0755 "$work/users"
chown "$E2E_USER:" "$work/users"
install -m 0755 "$mrcheck" "$work/mrcheck"
export MRCHECK_SLURM_WORK=$work

# The premise: the user cannot read the file, root can.
if as_user cat "$work/private/secret" >/dev/null 2>&1; then e2e_fail "premise: $E2E_USER reads the secret"; else
  e2e_pass "premise: $E2E_USER cannot read the secret"; fi

# The user's dump, with its links out.
D=$work/users/dump
as_user "$work/mrcheck" dump --out "$D" >/dev/null 2>&1 || e2e_fail "the user's dump failed"
[[ -f $D/proc/sys/kernel/osrelease ]] && e2e_pass "the dump has the kernel release" || e2e_fail "no $D/proc/sys/kernel/osrelease"
as_user bash -c "set -e
  ln -sfn $work/private/secret $D/proc/sys/kernel/osrelease
  ln -sfn ../../../../../private/secret $D/proc/sys/kernel/hostname
  rm -rf $D/etc; ln -sfn $work/private $D/etc" || e2e_fail "the user could not plant the links"
expect_eq "the planted osrelease leads to the secret (as root)" "$(cat "$D/proc/sys/kernel/osrelease")" "$SECRET"
expect_eq "the planted hostname leads to the secret (as root)" "$(cat "$D/proc/sys/kernel/hostname")" "$SECRET"

# replay WHAT CMD...: as root, from the work directory, with nothing of a cluster in the environment.
replay() {
  local what=$1 out rc
  shift
  set +e
  out=$(cd "$work" && env -u SLURM_CONF "$@" 2>&1)
  rc=$?
  set -e
  e2e_log "$what: exit $rc, $(wc -l <<<"$out") lines"
  ((rc < 64)) && e2e_pass "$what: ends with a verdict (exit $rc)" || e2e_fail "$what: exit $rc: ${out:0:600}"
  expect_not_contains "$what: no byte of the root-only file" "$out" "$SECRET"
}
replay "report --root" "$mrcheck" report --root "$D"
replay "report --json --root" "$mrcheck" report --json --root "$D"
replay "fleet" "$mrcheck" fleet "$D"
replay "fleet --json" "$mrcheck" fleet --json "$D"
replay "mrcheck-prolog --root" "$prolog" --root "$D" --mode healthcheck
e2e_done
