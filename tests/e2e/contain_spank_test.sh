#!/bin/bash
# docs/slurm-releases.md (24.05): `SlurmdParameters=contain_spank` runs SPANK's user_init, task_post_fork and
# task_exit inside the job's job_container/tmpfs namespace. mrcheck's root collector starts in task_post_fork and
# needs /run (its lock) and slurmctld (the record); the probes run from task_init. On a release with
# contain_spank (24.05 and later; the release legs' 24.11 and 26.05), with job_container/tmpfs and
# PrologFlags=Contain: the task is in its private /tmp, the probes report, and the step's record reaches
# AdminComment. Skips on releases before 24.05 (22.05's slurmd refuses the unknown SlurmdParameters value).
source "$(dirname "$0")/lib.sh"
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
plugin_setup
read -r _ VER < <(sinfo -V)
IFS=. read -r MAJ MIN _ <<<"$VER"
((MAJ > 24 || (MAJ == 24 && MIN >= 5))) || e2e_skip "Slurm $VER has no SlurmdParameters=contain_spank (24.05 and later)"
((PLUGIN_HARD_KIB >= 8192)) || e2e_skip "hard memlock here is ${PLUGIN_HARD_KIB} KiB, below the 8 MiB policy"
[[ -x $E2E_INSTALL/sbin/mrcheck-prolog ]] || e2e_skip "mrcheck-prolog not built"
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
plugin_load required memlock_min=8M admin_comment=yes admin_helper="$E2E_INSTALL/sbin/mrcheck-prolog" \
  report_timeout=2s
MARK=contain-$$
rm -f "/tmp/$MARK"
run_user srun -J cs-$$ --mr-check=memlock,mr,verbose sh -c "touch /tmp/$MARK && echo private-tmp"
show_run "contain_spank, job_container/tmpfs"
# The release legs' roots (entered with pivot_root, tests/slurm in a mount namespace of its own) may not let
# job_container/tmpfs bind its namespace holder ("_create_ns: ns base mount failed: Invalid argument" in slurmd's
# log): nothing of mrcheck's runs then, the job does not start.
if ((RC != 0)) && ns_err=$(grep -h "_create_ns: \|stepd_create(" "$MRCHECK_SLURM_DIR"/log/slurmd*.log 2>/dev/null | tail -1) &&
  [[ -n $ns_err ]]; then
  e2e_skip "job_container/tmpfs cannot make the job's namespace here: ${ns_err#*error: }"
fi
expect_eq "the step ran" "$RC" "0"
expect_eq "the task ran" "$OUT" "private-tmp"
[[ ! -e /tmp/$MARK ]] && e2e_pass "the task's /tmp is the job's own (job_container/tmpfs is active)" ||
  e2e_fail "the task's file is in the host's /tmp: job_container/tmpfs did not contain the job"
expect_contains "memlock judged" "$ERR" "mrcheck: memlock: pass"
expect_contains "the mr probe ran" "$ERR" "mrcheck: mr_host: "
e2e_admin_comment cs-$$
e2e_log "contain_spank: AdminComment [$AC]"
expect_contains "the collector wrote the step's record" "$AC" "mrcheck: step 0: pass on 1 node"
e2e_done
