#!/bin/bash
# Hostile user (SECURITY.md): symlinks and look-alike directories planted where mrcheck-prolog (root) keeps its
# state_dir, for a site that put state_dir under a world-writable directory (the worst place for it). The
# user plants the path before the prolog runs: a symlink to a directory of their own, to a root directory, a
# dangling one, a directory of their own; the prolog refuses each (exit 2, one clear line), creates and writes
# nothing through the link, and the node is not drained. A root-owned state_dir whose pending file is a
# symlink (defence in depth: only root could plant it) is not followed either, and its target is unchanged.
# Each run uses the aligned fixture, so a state_dir that is accepted never drains the node.
source "$(dirname "$0")/lib.sh"
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
source "$(dirname "$0")/hardening_lib.sh"
prolog=$MRCHECK_BUILD_DIR/prolog/mrcheck-prolog
[[ -x $prolog ]] || e2e_skip "mrcheck-prolog not built ($prolog)"
[[ "$(id -u)" == 0 ]] || e2e_skip "needs root (the prolog's state_dir rules are about root)"
e2e_slurm_up
hard_snapshot
node=$(hard_node)
# Root's, world-writable and sticky, like /tmp itself. (Not under $MRCHECK_SLURM_WORK: that belongs to the job
# user, and a state_dir below a user's directory is refused for its parent before anything else - case 7.)
w=$(mktemp -d /tmp/hostile_symlink.XXXXXX)
chmod 1777 "$w"
trap 'rm -rf "$w"' EXIT
user() { setpriv --reuid="$E2E_USER" --regid="$E2E_USER" --init-groups -- "$@"; }
prolog_run() {  # prolog_run STATE_DIR: the aligned fixture, prolog mode; sets out, rc
  set +e
  out=$("$prolog" --root "$MRCHECK_SOURCE_DIR/tests/fixtures/matrix_aligned" --node "$node" --state-dir "$1" \
    --rules "$MRCHECK_SOURCE_DIR/etc/mrcheck-rules.conf" --mode prolog --timeout 5s 2>&1)
  rc=$?
  set -e
}

# 1. A symlink to a directory the user owns.
user mkdir "$w/mine"
user ln -s "$w/mine" "$w/state1"
prolog_run "$w/state1"
expect_eq "symlink to the user's dir: exit 2" "$rc" "2"
expect_contains "symlink to the user's dir: says why" "$out" "mrcheck: prolog: state_dir $w/state1 is a symlink: refused"
expect_eq "symlink to the user's dir: nothing written there" "$(ls -A "$w/mine")" ""

# 2. A symlink to a root directory (where a pending file would be a root write the user chose).
root_dir=$(mktemp -d /tmp/hostile-symlink-root.XXXXXX)
user ln -s "$root_dir" "$w/state2"
prolog_run "$w/state2"
expect_eq "symlink to a root dir: exit 2" "$rc" "2"
expect_contains "symlink to a root dir: says why" "$out" "is a symlink: refused"
expect_eq "symlink to a root dir: nothing written there" "$(ls -A "$root_dir")" ""
rm -rf "$root_dir"

# 3. A dangling symlink: the prolog must not create its target.
user ln -s "$w/not-yet" "$w/state3"
prolog_run "$w/state3"
expect_eq "dangling symlink: exit 2" "$rc" "2"
hard_absent "dangling symlink: target not created" "$w/not-yet"

# 4. A directory the user made at the path, empty or with a forged pending drain of another reason.
user mkdir "$w/state4"
user sh -c "printf 'action drain\nreason mrcheck: forged\n' >$w/state4/pending-$node"
prolog_run "$w/state4"
expect_eq "user's directory: exit 2" "$rc" "2"
expect_contains "user's directory: says whose" "$out" "state_dir $w/state4 is owned by uid $(id -u "$E2E_USER"), not 0: refused"

# 5. A root directory others may write to (a site's mistake the prolog does not paper over).
mkdir -m 0777 "$w/state5"
chmod 0777 "$w/state5"
prolog_run "$w/state5"
expect_eq "world-writable state_dir: exit 2" "$rc" "2"
expect_contains "world-writable state_dir: says why" "$out" "is writable by group or others (mode 777): refused"

# 6. A good state_dir (root, 0700) whose pending file is a symlink: not followed, target unchanged, and the
#    symlink itself is cleared, not the file it points to.
mkdir -m 0700 "$w/state6"
victim=$(mktemp /tmp/hostile-symlink-victim.XXXXXX)
echo "precious" >"$victim"
ln -s "$victim" "$w/state6/pending-$node"
prolog_run "$w/state6"
expect_eq "pending symlink: the run still judges the node (exit 0)" "$rc" "0"
expect_contains "pending symlink: not read" "$out" "pending state: open $w/state6/pending-$node"
expect_eq "pending symlink: the target is unchanged" "$(cat "$victim")" "precious"
[[ -e $victim && ! -L $w/state6/pending-$node ]] && e2e_pass "pending symlink: the link was cleared, the target kept" ||
  e2e_fail "pending symlink: link or target in the wrong state"
rm -f "$victim"

# 7. state_dir below a directory the user owns, or reached through a symlink the user owns: the user could
#    move or swap root's pending file between two runs, so the parent is refused and nothing is created.
user mkdir "$w/theirs"
prolog_run "$w/theirs/state"
expect_eq "parent owned by the user: exit 2" "$rc" "2"
expect_contains "parent owned by the user: says which" "$out" "its parent $w/theirs is owned by uid $(id -u "$E2E_USER"): refused"
hard_absent "parent owned by the user: nothing created" "$w/theirs/state"
mkdir -m 0755 "$w/rootdir"
user ln -s "$w/rootdir" "$w/p"
prolog_run "$w/p/state"
expect_eq "parent through the user's symlink: exit 2" "$rc" "2"
expect_contains "parent through the user's symlink: says which" "$out" "$w/p is a symlink owned by uid $(id -u "$E2E_USER"): refused"
hard_absent "parent through the user's symlink: nothing created" "$w/rootdir/state"

hard_absent "nothing written through a link" "$w/mine/pending-$node" "$w/not-yet"
hard_invariants "after planted symlinks"
e2e_done
