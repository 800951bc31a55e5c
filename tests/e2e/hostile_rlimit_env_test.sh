#!/bin/bash
# A malformed SLURM_RLIMIT_MEMLOCK must not bypass enforcement. Where the site follows the
# README (PropagateResourceLimitsExcept=MEMLOCK) srun no longer writes the variable, so the user's own value
# reaches slurmstepd, and its `U` prefix makes set_user_limits() apply it whatever slurm.conf says. slurmstepd
# reads it with strtoul() (docs/slurm-rlimit-memlock.md): "" is 0, " 65536" and "+0" are accepted,
# "-18446744073709486080" is 64 KiB. mrcheck used to call these "not a number", predict that slurmstepd
# ignores them and write no override: with enforce=yes the task ran with 0 or 64 KiB, and with enforce=no
# the verdict said pass. Asserted here, for srun steps and the batch step:
#   enforce=yes: the task starts with at least the policy (the value is rewritten), the verdict is not FAIL;
#   enforce=no, on_fail=fail: the verdict is FAIL (judged at what slurmstepd applies) and the task never runs.
source "$(dirname "$0")/lib.sh"
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
source "$(dirname "$0")/hardening_lib.sh"
plugin_setup
((PLUGIN_HARD_KIB >= 2048)) || e2e_skip "hard memlock here is ${PLUGIN_HARD_KIB} KiB, below the 2 MiB these cases need"
cd "$MRCHECK_SLURM_WORK"
work=$(mktemp -d "$MRCHECK_SLURM_WORK/hostile_rlimit_env.XXXXXX")
chmod 0777 "$work"
trap 'plugin_cleanup; rm -rf "$work"' EXIT
plugin_conf_set PropagateResourceLimitsExcept MEMLOCK
hard_snapshot
policy_kib=1024
soft_of() { sed -n 's/^soft=//p' <<<"$1" | tail -n1; }

# Each: what slurmstepd makes of it, as mrcheck writes the size.
declare -A values=(
  ["U"]="0 B"
  ["U-18446744073709486080"]="64 KiB"
  ["U 65536"]="64 KiB"
  ["U+0"]="0 B"
  ["U-0"]="0 B"
)
for v in "${!values[@]}"; do
  what="SLURM_RLIMIT_MEMLOCK='$v' (slurmstepd: ${values[$v]})"
  plugin_load required memlock_min=1M enforce=yes on_fail=fail
  run_user srun --mr-check=memlock --export="ALL,SLURM_RLIMIT_MEMLOCK=$v" bash -c 'echo soft=$(ulimit -S -l)'
  soft=$(soft_of "$OUT")
  if [[ $soft == unlimited ]] || { [[ $soft =~ ^[0-9]+$ ]] && ((soft >= policy_kib)); }; then
    e2e_pass "$what, enforce=yes: the task starts with ${soft} KiB"
  else
    e2e_fail "$what, enforce=yes: the task starts with '${soft}' KiB, below the policy"
    show_run "$what"
  fi
  expect_not_contains "$what, enforce=yes: no FAIL verdict" "$ERR" "mrcheck: memlock: FAIL"

  plugin_load required memlock_min=1M on_fail=fail
  run_user srun --mr-check=memlock --export="ALL,SLURM_RLIMIT_MEMLOCK=$v" bash -c 'echo soft=$(ulimit -S -l)'
  [[ $RC != 0 && -z $OUT ]] && e2e_pass "$what, enforce=no: the step is stopped" ||
    { e2e_fail "$what, enforce=no: rc $RC, out '$OUT'"; show_run "$what"; }
  expect_contains "$what, enforce=no: the verdict is FAIL at what slurmstepd applies" "$ERR" "mrcheck: memlock: FAIL: task will start with memlock soft ${values[$v]} <"
done

# --- the batch step: the same rules ----------------------------------------------------------------------------
plugin_load required memlock_min=1M enforce=yes on_fail=fail default_checks=memlock
run_user sbatch -W -o "$work/batch.out" --export="ALL,SLURM_RLIMIT_MEMLOCK=U" --wrap 'echo soft=$(ulimit -S -l)'
out=$(cat "$work/batch.out" 2>/dev/null || true)
soft=$(soft_of "$out")
if [[ $soft == unlimited ]] || { [[ $soft =~ ^[0-9]+$ ]] && ((soft >= policy_kib)); }; then
  e2e_pass "batch, SLURM_RLIMIT_MEMLOCK=U, enforce=yes: the script starts with ${soft} KiB"
else
  e2e_fail "batch, SLURM_RLIMIT_MEMLOCK=U, enforce=yes: the script starts with '${soft}' KiB (output: $out)"
fi
plugin_load required memlock_min=1M on_fail=fail default_checks=memlock
run_user sbatch -W -o "$work/batch2.out" --export="ALL,SLURM_RLIMIT_MEMLOCK=U" --wrap 'echo soft=$(ulimit -S -l)'
out=$(cat "$work/batch2.out" 2>/dev/null || true)
expect_not_contains "batch, SLURM_RLIMIT_MEMLOCK=U, enforce=no: the script never ran" "$out" "soft="
expect_contains "batch, enforce=no: the FAIL line names 0 B" "$out" "mrcheck: memlock: FAIL: task will start with memlock soft 0 B <"
hard_invariants "after the malformed values"
e2e_done
