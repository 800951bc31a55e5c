#!/bin/bash
# Hostile user (SECURITY.md): the submit side skipped. A user can run srun with a slurm.conf of their own whose
# PlugStackConfig is empty, so mrcheck never runs in their srun: its option check, its `off` refusal and its
# MRCHECK_SUBMIT record are gone, and whatever the user puts in _SLURM_SPANK_OPTION_mrcheck_mr_check,
# MRCHECK_SUBMIT and MRCHECK_CHECKS reaches slurmstepd untouched. The node side alone must hold: `off` refused
# when allow_user_off=no and the site's check still run; hostile option values and records refused with a
# bounded, escaped line (no line of the user's making on stderr); a forged record changes no limit; the node
# is never drained.
source "$(dirname "$0")/lib.sh"
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
source "$(dirname "$0")/hardening_lib.sh"
plugin_setup
hard_snapshot
cd "$MRCHECK_SLURM_WORK"
w=$(mktemp -d "$MRCHECK_SLURM_WORK/hostile_bypass.XXXXXX")
chmod 0755 "$w"
trap 'plugin_cleanup; rm -rf "$w"' EXIT
# The user's slurm.conf: the cluster's, without the plugin stack, and claiming MEMLOCK is not propagated.
sed -e 's|^PlugStackConfig=.*|PlugStackConfig=/dev/null|' "$SLURM_CONF" >"$w/slurm.conf"
echo "PropagateResourceLimitsExcept=MEMLOCK" >>"$w/slurm.conf"
chmod 0644 "$w/slurm.conf"
grep -q '^PlugStackConfig=/dev/null' "$w/slurm.conf" || e2e_fail "could not write the user's slurm.conf"
byp() {  # byp VAR=VALUE...: srun under the user's slurm.conf, soft memlock 64 KiB, with those variables
  run_user env SLURM_CONF="$w/slurm.conf" "$@" bash -c "ulimit -S -l 64; srun --propagate=MEMLOCK bash -c 'echo ran \$(ulimit -S -l) \$(ulimit -H -l)'; exit \$?"
}
no_injection() {
  if grep -q '^INJ' <<<"$ERR"; then e2e_fail "$1: a line of the user's making reached stderr"; else e2e_pass "$1: no injected line"; fi
  hard_clean_stderr "$1" "$ERR"
}

plugin_load optional memlock_min=1M default_checks=memlock allow_user_off=no
byp
expect_contains "plain bypass: the site's check runs on the node anyway" "$ERR" "mrcheck: memlock: FAIL: task will start with memlock soft 64 KiB < required 1 MiB"

byp _SLURM_SPANK_OPTION_mrcheck_mr_check=off
expect_contains "bypass, off: refused on the node" "$ERR" "mrcheck: WARN: --mr-check=off refused: this site runs 'memlock' on every step (allow_user_off=no); running the site's checks"
expect_contains "bypass, off: the site's check still ran" "$ERR" "mrcheck: memlock: FAIL: "

byp MRCHECK_CHECKS=off
expect_contains "bypass, MRCHECK_CHECKS=off: refused on the node" "$ERR" "mrcheck: WARN: --mr-check=off refused"

byp "_SLURM_SPANK_OPTION_mrcheck_mr_check=memlock"$'\n'"INJECTED: fake verdict"$'\x1b[1A'
# (The newline shows escaped, as \x0a - today escaped twice, as \x5cx0a: reported, cosmetic.)
expect_contains "bypass, option with a newline: refused" "$ERR" "mrcheck: WARN: --mr-check: check list 'memlock\\x"
expect_contains "bypass, option with a newline: the reason" "$ERR" "has a character other than a-z, ',' and '_'; running the site's checks"
no_injection "bypass, option with a newline"

byp "_SLURM_SPANK_OPTION_mrcheck_mr_check=$(head -c 10240 /dev/zero | tr '\0' 'a')"
expect_contains "bypass, 10 KiB option: refused for its length" "$ERR" "mrcheck: WARN: --mr-check: check list is longer than 128 bytes; running the site's checks"
no_injection "bypass, 10 KiB option"

# Records: a newline in the host and in a hop's name; one that agrees with the propagated 64 KiB but claims
# an 8 MiB shell; one of 4 KiB of separators.
for rec in '1|t=srun|h=evil%0AINJECTED: host|s=65536|j=-|c=1:srun%0AINJ2:65536:8388608' \
  '1|t=srun|h=vm|s=65536|j=-|c=7:srun:65536:8388608;6:bash%1b%5b2J:8388608:8388608' \
  "$(printf '%04096d' 0 | tr 0 '|')"; do
  byp "_SLURM_SPANK_OPTION_mrcheck_mr_check=memlock,verbose" "MRCHECK_SUBMIT=$rec"
  what="bypass, record '${rec:0:24}...'"
  expect_contains "$what: the verdict is the node's" "$ERR" "mrcheck: memlock: FAIL: task will start with memlock soft 64 KiB < required 1 MiB"
  no_injection "$what"
done

# enforce=yes: a forged record or option never lifts the task past max(policy, what Slurm gives).
plugin_load optional memlock_min=1M enforce=yes default_checks=memlock allow_user_off=no
byp _SLURM_SPANK_OPTION_mrcheck_mr_check=off "MRCHECK_SUBMIT=1|t=srun|h=vm|s=8388608|j=-|c=1:srun:8388608:8388608"
read -r ran soft hard <<<"$OUT"
expect_eq "bypass, enforce=yes: the task ran" "$ran" "ran"
if [[ -n $hard ]] && ((soft >= 1024 && soft <= 8192 && hard == 8192)); then
  e2e_pass "bypass, enforce=yes: task limits $soft/$hard KiB, within policy and slurmd's"
else
  e2e_fail "bypass, enforce=yes: task limits '$OUT'"
fi

hard_invariants "after a skipped submit side"
e2e_done
