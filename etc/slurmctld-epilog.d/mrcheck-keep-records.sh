# Run it with bash: `bash /usr/share/mrcheck/slurmctld-epilog.d/mrcheck-keep-records.sh` (installed 0644, no shebang).
# mrcheck's step records, kept where a whole-field writer of AdminComment (jobstats) cannot erase them.
#
# Run from EpilogSlurmctld, before or after jobstats' slurmctldepilog.sh (the order does not matter): it copies
# the segments of the job's AdminComment that start with "mrcheck: " (as slurmctld still holds them) into the
# job's SystemComment in the accounting database, with the same `sacctmgr -i update job` that jobstats uses for
# AdminComment. jobstats then sets AdminComment to its own JS1: value; sacct shows both:
#   sacct -j J -X -o AdminComment%60,SystemComment%200
# A SystemComment already there is kept, ours follows it after " | ". Always exits 0 (an epilog failure must not
# hold the job); what it did goes to syslog (logger), as jobstats' epilog does. docs/jobstats.md says why.
set -u
job=${SLURM_JOB_ID:-}
[[ -n $job ]] || exit 0
# Array tasks are named as jobstats names them, so both scripts update the same row.
if [[ ${SLURM_ARRAY_JOB_ID:-x} == "$job" ]]; then
  id=${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}
else
  id=$job
fi
log() { logger -t "mrcheck-keep-records[$id]" -- "$*" 2>/dev/null || true; }

# `scontrol show job` prints AdminComment and SystemComment each on a line of its own (after the newline of the
# line before); 22.05 ends the value with one space.
show=$(scontrol show job "$job" 2>/dev/null) || {
  log "scontrol show job failed: nothing copied"
  exit 0
}
field() { sed -n "s/^ *$1=//p" <<<"$show" | head -1 | sed 's/ $//'; }
admin=$(field AdminComment)
system=$(field SystemComment)

ours=""
rest=$admin
while [[ -n $rest ]]; do
  seg=${rest%% | *}
  [[ $seg == "$rest" ]] && rest="" || rest=${rest#* | }
  [[ $seg == "mrcheck: "* ]] && ours+=${ours:+ | }$seg
done
[[ -n $ours ]] || exit 0
[[ $system == *"$ours"* ]] && exit 0

# As it is: slurmdbd keeps backslashes (mrcheck's \xNN escapes) as given, and sacctmgr turns quotes into
# backquotes (measured on 22.05; docs/jobstats.md).
value=${system:+$system | }$ours
for attempt in 1 2 3; do
  if out=$(sacctmgr -i update job where jobid="$id" set SystemComment="$value" 2>&1); then
    log "copied mrcheck's records to SystemComment"
    exit 0
  fi
  sleep "$attempt"
done
log "sacctmgr failed: ${out:0:200}"
exit 0
