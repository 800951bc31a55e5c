#!/bin/bash
# Hostile user (SECURITY.md): the unprivileged job user hands mrcheck hostile check lists, through --mr-check (srun,
# sbatch), MRCHECK_CHECKS, and Slurm's own option-passing variables (_SLURM_SPANK_OPTION_*, SLURM_SPANK_*)
# forged in the environment. Each case: refused before launch (the option) or ignored on the node with a
# warning and the site's checks run anyway (the environment); no shell ever sees the value (no file appears
# where it points); every line of ours is bounded and printable; --mr-check=off is refused when the site says
# allow_user_off=no, whichever way it is asked for; the node is never drained and slurmd keeps running.
source "$(dirname "$0")/lib.sh"
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
source "$(dirname "$0")/hardening_lib.sh"
plugin_setup
hard_snapshot
cd "$MRCHECK_SLURM_WORK"
w=$MRCHECK_SLURM_WORK/hostile_option.$$
mkdir -m 1777 "$w"
trap 'plugin_cleanup; rm -rf "$w"' EXIT
ran=$w/task-ran

# The site: memlock on every step, users may not switch it off.
plugin_load optional memlock_min=8M default_checks=memlock allow_user_off=no

# --- --mr-check values: refused by srun before anything is launched ------------------------------------------
declare -a values=(
  "memlock;touch $w/semicolon"
  "memlock\$(touch $w/dollar)"
  "memlock\`touch $w/backtick\`"
  "memlock|touch $w/pipe"
  "memlock && touch $w/and"
  "memlock"$'\n'"touch $w/newline"
  "memlock > $w/redirect"
  "../../../../$w/dotdot"
  "memlock,\${IFS}touch,$w/ifs"
  '\0'
  '%00'
  '\x00'
  'memlock\0mr'
  "memlock%00$w/percent"
  $'memlock\x01mr'
  $'memlock\x1b[2Jmr'
  $'memlock\xc0\x80'
  "$(head -c 10240 /dev/zero | tr '\0' 'm')"
  "$(head -c 10240 /dev/zero | tr '\0' ';')"
)
i=0
for v in "${values[@]}"; do
  i=$((i + 1))
  rm -f "$ran"
  run_user srun --mr-check="$v" touch "$ran"
  what="srun value $i (${#v} bytes)"
  [[ $RC != 0 ]] && e2e_pass "$what: srun refuses (rc $RC)" || { show_run "$what"; e2e_fail "$what: srun accepted it"; }
  expect_contains "$what: says which option and why" "$ERR" "mrcheck: --mr-check: "
  hard_absent "$what: nothing launched" "$ran"
  hard_clean_stderr "$what" "$ERR"
done
((${#values[-1]} == 10240)) && e2e_pass "the long value is 10 KiB" || e2e_fail "the long value is ${#values[-1]} bytes"
expect_contains "10 KiB: the length is the reason" "$ERR" "mrcheck: --mr-check: check list is longer than 128 bytes"
hard_absent "no shell ran any value" "$w/semicolon" "$w/dollar" "$w/backtick" "$w/pipe" "$w/and" "$w/newline" \
  "$w/redirect" "$w/ifs" "$w/touch" "$w/percent"

# sbatch refuses the same way: no job is submitted.
for v in "memlock;touch $w/sbatch" $'memlock\x1b]0;x\x07' "off"; do
  rm -f "$ran"
  run_user sbatch --mr-check="$v" -o /dev/null --wrap "touch $ran"
  what="sbatch value '${v:0:16}'"
  [[ $RC != 0 ]] && e2e_pass "$what: sbatch refuses" || e2e_fail "$what: sbatch accepted it: $OUT"
  expect_not_contains "$what: no job submitted" "$OUT" "Submitted batch job"
  hard_clean_stderr "$what" "$ERR"
done
expect_contains "sbatch --mr-check=off: refused, names the policy" "$ERR" \
  "mrcheck: --mr-check=off refused: this site runs 'memlock' on every step (allow_user_off=no)"
hard_absent "sbatch: nothing ran" "$w/sbatch" "$ran"
hard_invariants "after hostile --mr-check values"

# --- the environment: a forged request is ignored on the node, the site's checks run --------------------------
# The user's soft limit is 64 KiB: the site's memlock check must fail on every step below, whatever the
# environment says. With the plugin optional the task still runs (on_fail needs `required`).
forged() {  # forged "what" VAR=VALUE...: srun as the user with the variables set in its environment
  local what=$1
  shift
  rm -f "$ran"
  run_user env "$@" bash -c "ulimit -S -l 64; srun bash -c 'touch $ran; ulimit -l'; exit \$?"
  expect_contains "$what: the site's memlock check still ran and failed" "$ERR" "mrcheck: memlock: FAIL: task will start with memlock soft 64 KiB"
  hard_clean_stderr "$what" "$ERR"
}
forged "MRCHECK_CHECKS shell" "MRCHECK_CHECKS=memlock;touch $w/env-semicolon"
# (the quoted value is cut at 64 bytes)
expect_contains "MRCHECK_CHECKS shell: warned on the node" "$ERR" "mrcheck: WARN: MRCHECK_CHECKS: check list 'memlock;touch /"
expect_contains "MRCHECK_CHECKS shell: the reason" "$ERR" "' has a character other than a-z, ',' and '_'; running the site's checks"
forged "MRCHECK_CHECKS=off" "MRCHECK_CHECKS=off"
expect_contains "MRCHECK_CHECKS=off: refused on the node" "$ERR" "mrcheck: WARN: --mr-check=off refused: this site runs 'memlock' on every step (allow_user_off=no); running the site's checks"
forged "MRCHECK_CHECKS newline" "MRCHECK_CHECKS=memlock"$'\n'"INJECTED line"$'\r\x1b[1A'
if grep -q '^INJECTED' <<<"$ERR"; then e2e_fail "MRCHECK_CHECKS newline: a forged line reached stderr"; else e2e_pass "MRCHECK_CHECKS newline: no forged line"; fi
forged "MRCHECK_CHECKS 10 KiB" "MRCHECK_CHECKS=$(head -c 10240 /dev/zero | tr '\0' 'x')"
expect_contains "MRCHECK_CHECKS 10 KiB: bounded reason" "$ERR" "MRCHECK_CHECKS: check list is longer than 128 bytes; running the site's checks"
# Slurm passes a remote option to slurmstepd in _SLURM_SPANK_OPTION_<plugin>_<option>: forging it skips srun's
# option callback, so the node side must refuse `off` itself.
forged "forged _SLURM_SPANK_OPTION off" "_SLURM_SPANK_OPTION_mrcheck_mr_check=off"
expect_contains "forged _SLURM_SPANK_OPTION off: refused on the node" "$ERR" "mrcheck: WARN: --mr-check=off refused: this site runs 'memlock' on every step (allow_user_off=no); running the site's checks"
forged "forged _SLURM_SPANK_OPTION escape" "_SLURM_SPANK_OPTION_mrcheck_mr_check=memlock"$'\x1b[31m;touch '"$w/opt-env"
expect_contains "forged _SLURM_SPANK_OPTION escape: warned" "$ERR" "mrcheck: WARN: --mr-check: check list 'memlock"
# SLURM_SPANK_<option variable> is how srun reads an option from the environment: it goes through the option
# callback, which refuses before launch.
rm -f "$ran"
run_user env SLURM_SPANK__SLURM_SPANK_OPTION_mrcheck_mr_check=off srun touch "$ran"
[[ $RC != 0 ]] && e2e_pass "SLURM_SPANK_ off: srun refuses" || e2e_fail "SLURM_SPANK_ off: srun accepted it"
expect_contains "SLURM_SPANK_ off: names the policy" "$ERR" "mrcheck: --mr-check=off refused"
hard_absent "SLURM_SPANK_ off: nothing launched" "$ran"
# The site forbids off, and sbatch's MRCHECK_CHECKS=off reaches the job's sruns: the batch step and the srun
# inside still run the site's check.
out=$w/batch.out
run_user env MRCHECK_CHECKS=off bash -c "ulimit -S -l 64; sbatch --wait -o $out --wrap 'srun bash -c \"ulimit -l\"'"
batch=$(cat "$out" 2>/dev/null || true)
expect_contains "sbatch MRCHECK_CHECKS=off: the job's srun ran the site's check" "$batch" "mrcheck: memlock: FAIL: "
hard_absent "forged environment: no file where values pointed" "$w/env-semicolon" "$w/opt-env"

# --- the plugin required: a forged MRCHECK_CHECKS stops srun before launch -----------------------------------
plugin_load required memlock_min=8M default_checks=memlock allow_user_off=no
rm -f "$ran"
run_user env "MRCHECK_CHECKS=all;reboot" srun touch "$ran"
[[ $RC != 0 ]] && e2e_pass "required: forged MRCHECK_CHECKS stops srun" || e2e_fail "required: srun ran"
hard_absent "required: nothing launched" "$ran"
expect_contains "required: says why" "$ERR" "mrcheck: MRCHECK_CHECKS: check list 'all;reboot' has a character other than a-z"
hard_invariants "after forged environments"
e2e_done
