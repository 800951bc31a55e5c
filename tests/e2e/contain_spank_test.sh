#!/bin/bash
# docs/slurm-releases.md (24.05): `SlurmdParameters=contain_spank` runs SPANK's user_init, task_post_fork and
# task_exit inside the job's job_container/tmpfs namespace, each in a clone(CLONE_VM) child of slurmstepd with its
# own copy of slurmstepd's descriptors. The probes run from task_init; mrcheck's root collector starts in
# slurmstepd's main process (init_post_opt) and gets local task 0's record pipe over a control socket
# (include/mrcheck/admin_protocol.h). On a release with contain_spank (24.05 and later; the release legs' 24.11
# and 26.05), with job_container/tmpfs and PrologFlags=Contain: the task is in its private /tmp, the probes
# report on the host (a private mount namespace on the host's root is not a container), the step's record lands
# in AdminComment and report_dir, and a step cancelled while it probes gets a record that says so. Skips on
# releases before 24.05 (22.05's slurmd refuses the unknown SlurmdParameters value). On the code that made the
# record pipe in user_init, the plugin kept no record there ("the step's record is not collected").
source "$(dirname "$0")/lib.sh"
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
plugin_setup
read -r _ VER < <(sinfo -V)
IFS=. read -r MAJ MIN _ <<<"$VER"
((MAJ > 24 || (MAJ == 24 && MIN >= 5))) || e2e_skip "Slurm $VER has no SlurmdParameters=contain_spank (24.05 and later)"
((PLUGIN_HARD_KIB >= 8192)) || e2e_skip "hard memlock here is ${PLUGIN_HARD_KIB} KiB, below the 8 MiB policy"
[[ -x $E2E_INSTALL/sbin/mrcheck-prolog ]] || e2e_skip "mrcheck-prolog not built"
# job_container/tmpfs gives the job its own /tmp and /dev/shm (job_container.conf(5), Dirs): a private Slurm
# whose directory is under them (the main leg's /tmp/mrcheck-slurm) cannot run a job there, as Slurm makes the
# BasePath (in that directory) unreachable while it sets the namespace up, and the task would not find the
# plugin's helpers nor munge's socket. The release legs keep it in /var/tmp (scripts/slurm-release.sh).
case $MRCHECK_SLURM_DIR/ in
  /tmp/* | /dev/shm/*)
    e2e_skip "the private Slurm is in $MRCHECK_SLURM_DIR, which job_container/tmpfs hides from the job (set MRCHECK_SLURM_DIR outside /tmp and /dev/shm)" ;;
esac
JC=$MRCHECK_SLURM_DIR/job_container.conf
cleanup() {
  rm -f "$PLUGIN_DROPIN"
  bash "$MRCHECK_SOURCE_DIR/tests/slurm/slurm-conf-set.sh" --restart-ctld --reset >&2 || true
  rm -f "$JC"
  PLUGIN_CONF_CHANGED=0
  plugin_cleanup
}
trap cleanup EXIT
# job_container/tmpfs reads job_container.conf beside slurm.conf; each job's /tmp and /dev/shm are made under
# BasePath (job_container.conf(5)).
mkdir -p "$MRCHECK_SLURM_DIR/jc"
printf 'AutoBasePath=true\nBasePath=%s\n' "$MRCHECK_SLURM_DIR/jc" >"$JC"
plugin_conf_set --restart-ctld JobContainerType job_container/tmpfs PrologFlags Contain SlurmdParameters contain_spank
SPOOL=$MRCHECK_SLURM_DIR/cs-spool
rm -rf "$SPOOL" && mkdir -m 0755 "$SPOOL"
ADMIN="admin_comment=yes admin_helper=$E2E_INSTALL/sbin/mrcheck-prolog report_timeout=2s report_dir=$SPOOL"
plugin_load required memlock_min=8M $ADMIN
MARK=contain-$$
rm -f "/tmp/$MARK"
# A kernel (or a container around this machine) may refuse the mounts job_container/tmpfs makes for the job's
# namespace: its bind of BasePath onto itself, its bind of the namespace holder, or making / private in it
# (_create_ns in 24.11's job_container_tmpfs.c and 26.05's namespace_tmpfs.c). Nothing of mrcheck's runs then,
# the job does not start. Seen on this VM on 24.11 for one job in a few, any job ("ns base mount failed: Invalid
# argument", docs/slurm-releases.md): each job of this test gets three tries, then a skip with slurmd's line (the
# lines this test's jobs logged, not an earlier cluster's). Any other _create_ns error (a chown, a mkdir) is a
# set-up error of this test and fails below.
# A refusal is known by its line, whatever the order things come in: the line may reach the log before srun
# returns or seconds after (the job's extern step writes it, and srun may have given up on the node first), in
# slurmd's log or in the stderr file of the slurmd that started that step, and srun may say nothing of it
# ("Something is wrong with the boot of the nodes" on 24.11; other words, or none, elsewhere). log_mark notes
# where each of those files ends; ns_refused waits up to REFUSAL_WAIT seconds for a refusal line written since
# and prints it (else srun's line for the extern step's failure, else nothing: a failure of another kind).
REFUSAL_WAIT=${MRCHECK_CONTAIN_REFUSAL_WAIT:-10}
REFUSAL='_create_ns: \(Initial base mount\|ns base mount\|Failed to make root\)'
declare -A LOG_AT=()
slurmd_logs() { compgen -G "$MRCHECK_SLURM_DIR/log/slurmd*.log" || true; compgen -G "$MRCHECK_SLURM_DIR/log/slurmd*.stderr" || true; }
log_mark() {
  local f
  LOG_AT=()
  while read -r f; do LOG_AT[$f]=$(stat -c %s "$f"); done < <(slurmd_logs)
}
new_log_lines() { # what each of those files got since log_mark (all of a file that is new or was made anew)
  local f at
  while read -r f; do
    at=${LOG_AT[$f]:-0}
    (($(stat -c %s "$f") >= at)) || at=0
    tail -c +$((at + 1)) "$f"
  done < <(slurmd_logs)
}
ns_refused() {
  local line="" i
  for ((i = 0; i <= REFUSAL_WAIT * 10; i++)); do
    line=$(new_log_lines | grep -a "$REFUSAL" | tail -1 || true)
    [[ -n $line ]] && break
    sleep 0.1
  done
  [[ -z $line && ${ERR:-} == *"wrong with the boot of the nodes"* ]] && line="the job's extern step failed"
  echo "$line"
}
# A refused job's node, back in service for the next try (slurmctld may drain a node whose extern step failed).
undrain() {
  local n
  for n in $(sinfo -h -N -t drain,draining,drained,down -o %N 2>/dev/null | sort -u); do
    e2e_log "node $n is $(sinfo -h -n "$n" -o %T 2>/dev/null | head -1) after the refusal: resumed"
    scontrol update nodename="$n" state=resume >/dev/null 2>&1 || true
  done
}
for try in 1 2 3; do
  NAME=cs-$$-$try
  log_mark
  run_user srun -J "$NAME" --mr-check=memlock,mr,verbose sh -c "touch /tmp/$MARK && echo private-tmp"
  show_run "contain_spank, job_container/tmpfs (try $try)"
  ((RC == 0)) && break
  ns_err=$(ns_refused)
  [[ -n $ns_err ]] || break
  ((try == 3)) && e2e_skip "job_container/tmpfs refused its mounts to this test's job 3 times in a row: ${ns_err#*error: }"
  e2e_log "job_container/tmpfs refused the job's namespace (${ns_err#*error: }): once more"
  undrain
done
if ((RC != 0)); then
  e2e_log "slurmd: $(new_log_lines | grep -a "_create_ns\|stepd_create(" | tail -3)"
fi
expect_eq "the step ran" "$RC" "0"
expect_eq "the task ran" "$OUT" "private-tmp"
[[ ! -e /tmp/$MARK ]] && e2e_pass "the task's /tmp is the job's own (job_container/tmpfs is active)" ||
  e2e_fail "the task's file is in the host's /tmp: job_container/tmpfs did not contain the job"
expect_contains "memlock judged" "$ERR" "mrcheck: memlock: pass"
expect_contains "the mr probe ran" "$ERR" "mrcheck: mr_host: "
# The job's namespace keeps the host's root: not a container (src/container/enter.cpp, locate_task).
[[ $ERR != *"mrcheck: container"* ]] && e2e_pass "the task is not taken for one in a container" ||
  e2e_fail "the task in job_container/tmpfs's namespace was taken for one in a container: $ERR"
# The step's record: Slurm runs user_init, task_post_fork and task_exit in clones of slurmstepd that share its
# memory but not its file descriptors; the collector and its control socket come from slurmstepd's main process,
# the record pipe from the task itself (src/admin/collector.cpp, docs/slurm-releases.md).
e2e_admin_comment "$NAME"
e2e_log "contain_spank: AdminComment [$AC]"
NODE=$(sacct -X -n -P --name="$NAME" -S now-1hour -o NodeList | tail -1)
J=$(sacct -X -n -P --name="$NAME" -S now-1hour -o JobID | tail -1)
expect_eq "the step's record in AdminComment" "$AC" "mrcheck: step 0: pass on 1 node"
F=$SPOOL/job${J}.step_0.${NODE}.json
if [[ -f $F ]]; then
  expect_eq "report_dir: the node's report" \
    "$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["verdict"], j["slurm"]["job_id"], j["slurm"]["node"])' "$F")" \
    "pass $J $NODE"
else
  e2e_fail "report_dir: no $F (spool: $(ls "$SPOOL"))"
fi
# The record is the admins' business: nothing of it on the user's terminal (a "tasks ended" sent to a collector
# that had already ended once printed an error there).
[[ $ERR != *"mrcheck: admin"* ]] && e2e_pass "no admin line on the user's terminal" ||
  e2e_fail "an admin line reached the user's srun: $ERR"
[[ $(grep -h "mrcheck: admin: " "$MRCHECK_SLURM_DIR"/log/slurmd*.log 2>/dev/null) != *"is not collected"* ]] &&
  e2e_pass "slurmd's log does not say the record is not collected" ||
  e2e_fail "slurmd's log says the step's record is not collected"

# A step cancelled while its probe waits (a helper held at a gate, as tests/e2e/admin_netns_test.sh): the task
# ended after its begin marker and before its record, and the record says so.
GATE=$MRCHECK_SLURM_WORK/cs-gate.$$
rm -f "$GATE"
e2e_gated_helper "$E2E_INSTALL/bin/cs-gated-mrcheck" "$GATE" 3000
echo "required $E2E_INSTALL/lib/slurm/spank_mrcheck.so helper=$E2E_INSTALL/bin/cs-gated-mrcheck memlock_min=8M $ADMIN" \
  >"$PLUGIN_DROPIN"
for try in 1 2 3; do
  rm -f "$GATE"
  log_mark
  as_user srun -J cs-cancel-$$-$try --mr-check=memlock,mr true >/dev/null 2>&1 &
  SRUN=$!
  J=""
  gated=0
  for _ in $(seq 1 300); do
    J=$(squeue -h -n cs-cancel-$$-$try -o %i 2>/dev/null | head -1)
    [[ -n $J ]] && pgrep -f "cs-gated-mrcheck" >/dev/null && gated=1 && break
    kill -0 "$SRUN" 2>/dev/null || break
    sleep 0.1
  done
  ((gated)) && break
  # The job ended before its task ran the probe: job_container/tmpfs refused its namespace (above), as slurmd's
  # log says, or its line has not come (slurmctld: "Could not launch job"): once more; a skip after three.
  wait "$SRUN" 2>/dev/null || true
  ERR=""
  ns_err=$(ns_refused)
  ((try == 3)) && e2e_skip "the cancelled step's job never reached its task in 3 tries (${ns_err:-no _create_ns line in the slurmd log})"
  e2e_log "the cancelled step's job ended before its task (${ns_err:-no _create_ns line in the slurmd log}): once more"
  undrain
done
sleep 0.5
N=$(squeue -h -j "$J" -o %N 2>/dev/null)
scancel "$J.0" 2>/dev/null || true
wait "$SRUN" 2>/dev/null || true
touch "$GATE"
e2e_admin_comment cs-cancel-$$-$try
e2e_log "contain_spank, cancelled: AdminComment [$AC]"
expect_eq "a cancelled step's record says so" "$AC" "mrcheck: step 0: cancelled; no report from $N"
rm -f "$GATE" "$E2E_INSTALL/bin/cs-gated-mrcheck"
e2e_done
