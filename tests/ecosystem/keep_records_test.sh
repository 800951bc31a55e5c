#!/bin/bash
# etc/slurmctld-epilog.d/mrcheck-keep-records.sh without Slurm (docs/jobstats.md): scontrol and sacctmgr are stubs
# that print a job as `scontrol show job` does (22.05's form, a space after each value) and record the update.
# Checks which segments are copied (as they are, backslashes included), that a SystemComment already there
# stays first, array tasks are named as jobstats names them, and that nothing is updated without a record.
# About 1.5 s (one retry after a failing sacctmgr sleeps 1 s).
set -u
src=${MRCHECK_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
script=$src/etc/slurmctld-epilog.d/mrcheck-keep-records.sh
fails=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/bin"
cat >"$tmp/bin/scontrol" <<'EOF2'
#!/bin/bash
printf 'JobId=%s JobName=wrap\n   UserId=mrtest(1001) GroupId=mrtest(1001) MCS_label=N/A\n' "$3"
[[ -n ${FAKE_AC:-} ]] && printf '   AdminComment=%s \n' "$FAKE_AC"
[[ -n ${FAKE_SC:-} ]] && printf '   SystemComment=%s \n' "$FAKE_SC"
printf '   Command=(null)\n'
EOF2
cat >"$tmp/bin/sacctmgr" <<EOF2
#!/bin/bash
if [[ -e $tmp/fail-once ]]; then rm -f $tmp/fail-once; echo "Problem talking to the database" >&2; exit 1; fi
printf '%s\n' "\$@" >$tmp/sacctmgr.args
EOF2
printf '#!/bin/sh\n' >"$tmp/bin/logger"
chmod +x "$tmp/bin"/*
export PATH=$tmp/bin:$PATH

# run: the script as EpilogSlurmctld runs it; ARGS = what sacctmgr got (one per line), "" when not called.
run() {
  rm -f "$tmp/sacctmgr.args"
  env "$@" bash "$script"
  RC=$?
  ARGS=$(cat "$tmp/sacctmgr.args" 2>/dev/null)
}
r0='mrcheck: step 0: pass on 2 nodes'
r1='mrcheck: step 1: FAIL mr_host (ibv_reg_mr \x7c ENOMEM) on n1 per the job'"'"'s probe'

run SLURM_JOB_ID=41 "FAKE_AC=ops: keep | $r0 | other | $r1"
[[ $RC == 0 ]] && ok "exit 0" || bad "exit $RC"
want="-i
update
job
where
jobid=41
set
SystemComment=$r0 | $r1"
[[ $ARGS == "$want" ]] && ok "only mrcheck's segments, as they are" || bad "args: [$ARGS]"

run SLURM_JOB_ID=42 "FAKE_AC=$r0" "FAKE_SC=burst_buffer: stage-in failed"
[[ ${ARGS##*$'\n'} == "SystemComment=burst_buffer: stage-in failed | $r0" ]] && ok "an existing SystemComment stays first" ||
  bad "args: [$ARGS]"

run SLURM_JOB_ID=43 "FAKE_AC=$r0" "FAKE_SC=$r0"
[[ -z $ARGS ]] && ok "already copied: no update" || bad "updated again: [$ARGS]"

run SLURM_JOB_ID=44 "FAKE_AC=JS1:H4sIAAAAAAAAA6tWKs9ILEpVslIqSS0u"
[[ -z $ARGS ]] && ok "no record of mrcheck (a JS1: value): no update" || bad "args: [$ARGS]"

run SLURM_JOB_ID=45
[[ -z $ARGS ]] && ok "no AdminComment: no update" || bad "args: [$ARGS]"

run SLURM_JOB_ID=46 SLURM_ARRAY_JOB_ID=46 SLURM_ARRAY_TASK_ID=7 "FAKE_AC=$r0"
grep -qx 'jobid=46_7' <<<"$ARGS" && ok "array task named <job>_<task> as jobstats names it" || bad "args: [$ARGS]"

touch "$tmp/fail-once"
run SLURM_JOB_ID=47 "FAKE_AC=$r0"
[[ $RC == 0 && ${ARGS##*$'\n'} == "SystemComment=$r0" ]] && ok "sacctmgr failing once: retried" || bad "retry: rc=$RC [$ARGS]"

run
[[ $RC == 0 && -z $ARGS ]] && ok "no SLURM_JOB_ID: nothing, exit 0" || bad "no job: rc=$RC"
echo "keep_records_test: $fails failed"
((fails == 0))
