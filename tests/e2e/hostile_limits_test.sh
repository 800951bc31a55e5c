#!/bin/bash
# Hostile user (SECURITY.md): the job user forges what mrcheck reads about limits - SLURM_RLIMIT_MEMLOCK (plain,
# with Slurm's U prefix, "unlimited", out of range, negative), MRCHECK_SUBMIT (a record claiming 8 MiB, a
# garbage one, one with a newline) - and asks for more than the site's policy.
#
# The property, measured differentially: for each forgery the task's limits are taken once without the plugin
# (what Slurm alone gives this user) and once with enforce=yes. With the plugin the hard limit is unchanged
# (no CAP_SYS_RESOURCE here; elsewhere at most max(that, policy)) and the soft limit is at least the policy
# (within the hard limit) and at most max(without, policy, slurmd's own soft limit): a forgery never buys the
# user more than Slurm alone would give, plus the site's minimum. A policy above the hard limit (1 GiB) is a
# clear "cannot enforce" verdict, never a limit past the policy. The node is never drained.
source "$(dirname "$0")/lib.sh"
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
source "$(dirname "$0")/hardening_lib.sh"
plugin_setup
((PLUGIN_HARD_KIB >= 8192)) || e2e_skip "hard memlock here is ${PLUGIN_HARD_KIB} KiB, below the 8 MiB these cases need"
cd "$MRCHECK_SLURM_WORK"
# slurmd's soft limit below the policy, so "raised to the policy" and "raised to slurmd's soft" differ.
plugin_slurmd_restart --memlock-soft 512K --memlock-hard 8M
hard_snapshot
stepd_caps=$(awk '/^CapEff/ {print $2}' /proc/self/status)
has_sys_resource=$(((0x$stepd_caps >> 24) & 1))
policy_kib=1024
slurmd_soft_kib=512

limits='echo "$(ulimit -S -l) $(ulimit -H -l)"'
# task_limits SHELL_PREFIX SRUN_ARGS...: "soft hard" in KiB as the task sees them, in LIM; rc in RC.
task_limits() {
  local prefix=$1
  shift
  local cmd
  cmd=$(printf '%q ' srun "$@" bash -c "$limits")
  run_user bash -c "$prefix $cmd; exit \$?"
  LIM=$(tail -n1 <<<"$OUT")
}
kib() { [[ $1 == unlimited ]] && echo 18014398509481984 || echo "$1"; }
max() { local m=0 v; for v in "$@"; do v=$(kib "$v"); ((v > m)) && m=$v; done; echo "$m"; }

record8m="1|t=srun|h=$(hostname -s)|s=8388608|j=-|c=1:srun:8388608:8388608"
declare -a cases=(
  "ulimit -S -l 64;@@"
  "ulimit -S -l 64; export SLURM_RLIMIT_MEMLOCK=U8388608;@@"
  "ulimit -S -l 64;@@--export=ALL,SLURM_RLIMIT_MEMLOCK=U8388608"
  "ulimit -S -l 64;@@--export=ALL,SLURM_RLIMIT_MEMLOCK=8388608"
  "ulimit -S -l 64;@@--export=ALL,SLURM_RLIMIT_MEMLOCK=unlimited"
  "ulimit -S -l 64;@@--export=ALL,SLURM_RLIMIT_MEMLOCK=U184467440737095516160"
  "ulimit -S -l 64;@@--export=ALL,SLURM_RLIMIT_MEMLOCK=U-1"
  "ulimit -S -l 64;@@--export=ALL,SLURM_RLIMIT_MEMLOCK=1e9"
  "ulimit -S -l 64; export MRCHECK_SUBMIT='$record8m';@@"
  "ulimit -S -l 64;@@--export=ALL,MRCHECK_SUBMIT=$record8m"
  "ulimit -S -l 64; export MRCHECK_SUBMIT=\$(printf '%04000d' 0 | tr 0 '|');@@"
  "ulimit -S -l 64;@@--propagate=MEMLOCK"
  "ulimit -S -l 64;@@--propagate=NONE"
  "@@--propagate=MEMLOCK"
  "ulimit -S -l 8192;@@"
)
check_cases() {  # check_cases LABEL CASE...: the differential check for each case
local label=$1 c n=0
shift
for c in "$@"; do
  n=$((n + 1))
  prefix=${c%%@@*} args=${c#*@@}
  what="$label $n [${prefix}${args:+ srun $args}]"
  plugin_load none
  task_limits "$prefix" ${args:+"$args"}
  read -r s0 h0 <<<"$LIM"
  [[ $RC == 0 && -n $h0 ]] || { show_run "$what without the plugin"; e2e_fail "$what: the step without the plugin failed"; continue; }
  plugin_load optional memlock_min=${policy_kib}K enforce=yes default_checks=memlock
  task_limits "$prefix" --mr-check=verbose ${args:+"$args"}
  read -r s1 h1 <<<"$LIM"
  [[ -n $h1 ]] || { show_run "$what with the plugin"; e2e_fail "$what: no limits printed with the plugin"; continue; }
  e2e_log "$what: without $s0/$h0 KiB, with enforce=yes $s1/$h1 KiB"
  if ((has_sys_resource)); then
    (($(kib "$h1") <= $(max "$h0" "$policy_kib"))) && e2e_pass "$what: hard within max(Slurm's, policy)" || e2e_fail "$what: hard $h1 > max($h0, policy)"
  else
    expect_eq "$what: hard limit unchanged" "$h1" "$h0"
  fi
  floor=$policy_kib
  (($(kib "$h1") < floor)) && floor=$(kib "$h1")
  ceiling=$(max "$s0" "$policy_kib" "$slurmd_soft_kib")
  if (($(kib "$s1") >= floor && $(kib "$s1") <= ceiling)); then
    e2e_pass "$what: soft $s1 within [$floor, $ceiling]"
  else
    show_run "$what"
    e2e_fail "$what: soft $s1 outside [$floor, $ceiling] (without the plugin: $s0)"
  fi
  hard_clean_stderr "$what" "$ERR"
done
}
check_cases "default propagation" "${cases[@]}"
# PropagateResourceLimitsExcept=MEMLOCK: srun no longer sets SLURM_RLIMIT_MEMLOCK, so the user's own value
# reaches slurmstepd untouched - the strongest position a forgery can be in.
plugin_conf_set PropagateResourceLimitsExcept MEMLOCK
check_cases "except MEMLOCK" "${cases[1]}" "${cases[2]}" "${cases[4]}" "${cases[5]}" "${cases[6]}" "${cases[9]}" \
  "ulimit -S -l 64; export SLURM_RLIMIT_MEMLOCK=4194304;@@"
plugin_conf_set PropagateResourceLimitsExcept ''
if grep -q '^INJECTED' <<<"$ERR"; then e2e_fail "a forged MRCHECK_SUBMIT line reached stderr"; fi

# A forged record is not believed: the verbose chain names what the node measured, not the record's 8 MiB.
plugin_load optional memlock_min=${policy_kib}K default_checks=memlock
task_limits "ulimit -S -l 64; export MRCHECK_SUBMIT='$record8m';" "--mr-check=verbose"
expect_contains "forged record: the verdict names the real 64 KiB" "$ERR" "task will start with memlock soft 64 KiB < required 1 MiB"

# --- memlock_min=1G, enforce=yes, and a user asking for more than that ------------------------------------
plugin_slurmd_restart
for ask in "@@--propagate=MEMLOCK" "@@--export=ALL,SLURM_RLIMIT_MEMLOCK=U2147483648" "export SLURM_RLIMIT_MEMLOCK=unlimited;@@"; do
  prefix=${ask%%@@*} args=${ask#*@@}
  what="1G policy [${prefix}${args:+ srun $args}]"
  plugin_load required memlock_min=1G enforce=yes default_checks=memlock
  task_limits "$prefix" ${args:+"$args"}
  if ((has_sys_resource)); then
    expect_eq "$what: raised to the policy, not to the user's ask" "$LIM" "1048576 1048576"
  else
    [[ $RC != 0 ]] && e2e_pass "$what: the step fails (required, on_fail=fail)" || e2e_fail "$what: the step ran: $LIM"
    expect_eq "$what: the task never ran" "$OUT" ""
    expect_contains "$what: clear verdict" "$ERR" "mrcheck: memlock: FAIL: cannot enforce: slurmstepd lacks CAP_SYS_RESOURCE (hard limit 8 MiB); task will start with memlock soft 8 MiB < required 1 GiB"
  fi
  # on_fail=warn: the task runs, and shows what it really got - never more than the hard limit or the policy.
  plugin_load optional memlock_min=1G enforce=yes default_checks=memlock on_fail=warn
  task_limits "$prefix" ${args:+"$args"}
  read -r s h <<<"$LIM"
  if [[ -n $h ]] && (($(kib "$s") <= 1048576 && $(kib "$h") <= $(max "$PLUGIN_HARD_KIB" 1048576))); then
    e2e_pass "$what: on_fail=warn: the task runs with $s/$h KiB, not above the policy"
  else
    show_run "$what"
    e2e_fail "$what: on_fail=warn: task limits '$LIM'"
  fi
  expect_contains "$what: on_fail=warn: the verdict is shown" "$ERR" "mrcheck: memlock: WARN: "
done
hard_snapshot  # slurmd was restarted on purpose above
hard_invariants "after forged limits"
e2e_done
