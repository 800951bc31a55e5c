#!/bin/bash
# mrcheck beside Princeton's jobstats (docs/jobstats.md). jobstats' EpilogSlurmctld sets the whole AdminComment to
# "JS1:<base64 of gzipped JSON>" with `sacctmgr -i update job where jobid=J set AdminComment=JS1:...`
# (slurm/slurmctldepilog.sh). EpilogSlurmctld here does exactly that, after mrcheck's
# etc/slurmctld-epilog.d/mrcheck-keep-records.sh. Checks: jobstats' value in sacct is its value and decodes
# (base64, gzip, JSON) and mrcheck's record is in sacct's SystemComment; a JS1: value set during the job is never
# changed by mrcheck's step record.
source "$(dirname "$0")/lib.sh"
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
plugin_setup
((PLUGIN_HARD_KIB >= 8192)) || e2e_skip "hard memlock here is ${PLUGIN_HARD_KIB} KiB, below the 8 MiB policy"
[[ -x $E2E_INSTALL/sbin/mrcheck-prolog ]] || e2e_skip "mrcheck-prolog not built"
command -v sacctmgr >/dev/null || e2e_skip "no sacctmgr"
T0=$(date +%s%N)

# Slurm 22.05's sacctmgr lower-cases AdminComment and SystemComment values (src/sacctmgr/job_functions.c,
# strip_quotes(..., 1)); 23.02 keeps them (upstream commit 933bf55510).
read -r _ VER < <(sinfo -V)
LOWERS=0
[[ $VER == 22.05.* ]] && LOWERS=1

STATS_JSON='{"gpus":0,"nodes":{"n1":{"cpus":1,"total_memory":1048576,"total_time":1.5,"used_memory":4096}},"total_time":3}'
STATS=$(printf '%s' "$STATS_JSON" | gzip -9n | base64 -w0)
EPI=$MRCHECK_SLURM_DIR/epilog-slurmctld.sh
ON=$MRCHECK_SLURM_DIR/jobstats-epilog-on
cat >"$EPI" <<EOS
#!/bin/bash
# Only while this test runs (a later test must not see jobstats' AdminComment).
[ -e $ON ] || exit 0
export SLURM_CONF=$SLURM_CONF PATH=$PATH
bash $MRCHECK_SOURCE_DIR/etc/slurmctld-epilog.d/mrcheck-keep-records.sh
# jobstats' slurmctldepilog.sh, its storing step as it is (the summary is fixed here, jobstats computes it).
if [ "x\$SLURM_ARRAY_JOB_ID" = "x\$SLURM_JOB_ID" ]; then
	INTERNAL_JOBID=\${SLURM_ARRAY_JOB_ID}_\${SLURM_ARRAY_TASK_ID}
else
	INTERNAL_JOBID=\$SLURM_JOB_ID
fi
sleep 1
sacctmgr -i update job where jobid=\$INTERNAL_JOBID set AdminComment=JS1:$STATS
EOS
chmod 0755 "$EPI"
touch "$ON"
# Slurm 22.05's slurmscriptd, which runs EpilogSlurmctld, keeps the path it started with: `scontrol reconfigure`
# does not reach it, so slurmctld is restarted, both here and when the test ends.
js_cleanup() {
  rm -f "$ON"
  bash "$MRCHECK_SOURCE_DIR/tests/slurm/slurm-conf-set.sh" --restart-ctld EpilogSlurmctld '' >&2 || true
  plugin_cleanup
}
trap js_cleanup EXIT
plugin_conf_set --restart-ctld EpilogSlurmctld "$EPI"
plugin_load required memlock_min=8M admin_comment=yes "admin_helper=$E2E_INSTALL/sbin/mrcheck-prolog" report_timeout=3s

# sacct_fields J: AC and SC, once jobstats' value and mrcheck's copy are both there (or 20 s passed).
sacct_fields() {
  local _i
  for _i in $(seq 1 100); do
    AC=$(sacct -X -n -P -j "$1" -o AdminComment%1000 2>/dev/null | head -1)
    SC=$(sacct -X -n -P -j "$1" -o SystemComment%1000 2>/dev/null | head -1)
    [[ ${AC,,} == js1:* && -n $SC ]] && return 0
    sleep 0.2
  done
}

run_user sbatch --parsable -J js-$$ -o /dev/null --wrap "srun --mr-check=memlock true"
J=${OUT%%;*}
[[ $RC == 0 && -n $J ]] || { show_run sbatch; e2e_fail "sbatch"; e2e_done; exit 1; }
sacct_fields "$J"
if ((LOWERS)); then
  e2e_log "Slurm $VER: sacctmgr stores comments lower-cased, so jobstats' own value is not decodable here"
  expect_eq "AdminComment is jobstats' value as this sacctmgr stores it" "$AC" "js1:${STATS,,}"
  expect_eq "SystemComment has mrcheck's record (lower-cased by this sacctmgr)" "$SC" "mrcheck: step 0: pass on 1 node"
else
  expect_eq "AdminComment is jobstats' value, byte for byte" "$AC" "JS1:$STATS"
  DEC=$(python3 -c 'import base64,gzip,json,sys; v=sys.argv[1]; assert v.startswith("JS1:"); print(json.dumps(json.loads(gzip.decompress(base64.b64decode(v[4:]))), sort_keys=True, separators=(",",":")))' "$AC" 2>&1)
  expect_eq "jobstats' value decodes as jobstats.py decodes it (base64, gzip, JSON)" "$DEC" "$STATS_JSON"
  expect_eq "SystemComment has mrcheck's record" "$SC" "mrcheck: step 0: pass on 1 node"
fi

# jobstats' value already there when a step ends (a requeued job): mrcheck leaves it as it is.
run_user sbatch --parsable -J js2-$$ -o "$MRCHECK_SLURM_WORK/js2-$$.out" --wrap \
  "sleep 2; srun --mr-check=memlock true; scontrol show job \$SLURM_JOB_ID | sed -n 's/^ *AdminComment=//p'"
J2=${OUT%%;*}
scontrol update job "$J2" "AdminComment=JS1:$STATS" >&2
for _ in $(seq 1 100); do
  [[ -s $MRCHECK_SLURM_WORK/js2-$$.out ]] && [[ $(squeue -h -j "$J2" 2>/dev/null) == "" ]] && break
  sleep 0.2
done
expect_eq "a JS1: value in AdminComment during the job is not changed by mrcheck's step record" \
  "$(sed 's/ $//' "$MRCHECK_SLURM_WORK/js2-$$.out" 2>/dev/null)" "JS1:$STATS"
rm -f "$MRCHECK_SLURM_WORK/js2-$$.out"

e2e_log "took $((($(date +%s%N) - T0) / 1000000)) ms"
e2e_done
