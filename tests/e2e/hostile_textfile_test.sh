#!/bin/bash
# A job user must not be able to stop the node's Prometheus metrics. mrcheck-prolog (root)
# accepted a textfile in a root-owned sticky world-writable directory (like /tmp), where any user can create the
# file's name first: a symlink, a directory or a file of theirs there, and the metrics are never written again,
# run after run, with only a "refused" line about the name. Asserted: such a directory is refused as a directory
# (the configuration is wrong, whatever is planted in it), the planted name is never followed or removed, and a
# directory only root can write works.
source "$(dirname "$0")/lib.sh"
prolog=$MRCHECK_BUILD_DIR/prolog/mrcheck-prolog
[[ -x $prolog ]] || e2e_skip "mrcheck-prolog not built ($prolog)"
[[ "$(id -u)" == 0 ]] || e2e_skip "needs root"
id "$E2E_USER" >/dev/null 2>&1 || e2e_skip "no user $E2E_USER"
fixtures=$MRCHECK_SOURCE_DIR/tests/fixtures
rules=$MRCHECK_SOURCE_DIR/etc/mrcheck-rules.conf
work=$(mktemp -d /tmp/mrcheck-hostile-textfile.XXXXXX)
chmod 0755 "$work"
mkdir -m 0700 "$work/state"
mkdir -m 1777 "$work/sticky"
mkdir -m 0755 "$work/safe"
trap 'rm -rf "$work"' EXIT
run() {
  set +e
  out=$("$prolog" --rules "$rules" --state-dir "$work/state" --dry-run --mode healthcheck --node n1 \
    --root "$fixtures/matrix_aligned" --textfile "$1" 2>&1)
  rc=$?
  set -e
}

# The user plants each kind of name before root's first run.
echo precious >"$work/victim"
setpriv --reuid="$E2E_USER" --regid="$E2E_USER" --init-groups -- ln -s "$work/victim" "$work/sticky/link.prom"
setpriv --reuid="$E2E_USER" --regid="$E2E_USER" --init-groups -- mkdir "$work/sticky/dir.prom"
setpriv --reuid="$E2E_USER" --regid="$E2E_USER" --init-groups -- touch "$work/sticky/file.prom"
for name in link dir file fresh; do
  run "$work/sticky/$name.prom"
  expect_eq "sticky directory, $name: the run goes on (exit 0)" "$rc" "0"
  expect_contains "sticky directory, $name: the directory is refused" "$out" "its directory is writable by group or others (mode 1777), so a user could create the file's name first: refused"
done
expect_eq "the symlink's target is untouched" "$(cat "$work/victim")" "precious"
expect_eq "the user's file is untouched" "$(stat -c %U:%s "$work/sticky/file.prom")" "$E2E_USER:0"
expect_eq "nothing written into the sticky directory" "$(find "$work/sticky" -name '*.tmp' -o -name 'fresh.prom' | wc -l)" "0"

run "$work/safe/mrcheck.prom"
expect_eq "a root-only directory: exit 0" "$rc" "0"
expect_eq "a root-only directory: the file is written" "$([[ -f $work/safe/mrcheck.prom ]] && echo yes)" "yes"
e2e_done
