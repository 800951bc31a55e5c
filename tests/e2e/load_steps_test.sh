#!/bin/bash
# Load (SECURITY.md): in one job on the one 2-CPU node, 64 concurrent steps (`srun --overlap`, so each is its own
# slurmstepd) with --mr-check=memlock,mr (a probe child each, through the fake libibverbs), then 200 steps
# back to back with --mr-check=memlock. Asserted: every step's srun exits 0, its task ran, and it got its
# verdict on the user's stderr; slurmd's log has every step's admin line; accounting shows every step
# COMPLETED with exit 0 (a slurmstepd that crashed would leave it FAILED or NODE_FAIL); afterwards slurmd is
# the same process with as many descriptors as before, and no process of the job user and no slurmstepd of
# this cluster is left; a task started with the checks has the same descriptors as one without. Timings go
# to stderr (LOAD_CONCURRENT, LOAD_SERIAL change the counts).
source "$(dirname "$0")/lib.sh"
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
source "$(dirname "$0")/hardening_lib.sh"
plugin_setup
fake=$E2E_INSTALL/lib/fake/libibverbs.so.1
[[ -f $fake ]] || e2e_skip "no fake libibverbs.so.1 (build target fake_ibverbs)"
concurrent=${LOAD_CONCURRENT:-64}
serial=${LOAD_SERIAL:-200}
cd "$MRCHECK_SLURM_WORK"
w=$(mktemp -d "$MRCHECK_SLURM_WORK/load_steps.XXXXXX")
chmod 1777 "$w"
trap 'plugin_cleanup; rm -rf "$w"' EXIT
hard_snapshot
procs_before=$(hard_user_procs "$E2E_USER")
slurmd_fds() { find "/proc/$(hard_slurmd_pid)/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }
fds_before=$(slurmd_fds)
stepds_before=$(hard_stepd_pids | wc -l)
plugin_load optional verbs_library="$fake" memlock_min=1M probe_timeout=120s

# The job script: phase 1 starts all concurrent steps and waits for them, phase 2 runs the serial ones. Each
# step writes its stdout, stderr and rc to files named by its number.
cat >"$w/job.sh" <<EOF
#!/bin/bash
export NCCL_BUFFSIZE=65536 NCCL_LL_BUFFSIZE=65536 NCCL_LL128_BUFFSIZE=65536
# The descriptors a task starts with, without and with the plugin's checks: the plugin must not leak any.
# One command, so bash execs ls and \$\$ is ls itself (in a pipeline, ls would list bash's descriptors while
# bash may still hold the pipe's ends: 3 and 4 or not, by chance).
srun --overlap -n1 bash -c 'ls /proc/\$\$/fd' 2>&1 | sort -n | tr "\n" " " >$w/fds-idle
srun --overlap -n1 --mr-check=memlock,mr bash -c 'ls /proc/\$\$/fd' 2>&1 | sort -n | tr "\n" " " >$w/fds-checked
start=\$(date +%s.%N)
for i in \$(seq 1 $concurrent); do
  (srun --overlap -n1 --mr-check=memlock,mr,verbose bash $w/barrier.sh >$w/c\$i.out 2>$w/c\$i.err; echo \$? >$w/c\$i.rc) &
done
wait
mid=\$(date +%s.%N)
for i in \$(seq 1 $serial); do
  srun --overlap -n1 --mr-check=memlock,verbose bash -c 'echo task-ran' >$w/s\$i.out 2>$w/s\$i.err
  echo \$? >$w/s\$i.rc
done
end=\$(date +%s.%N)
echo "\$start \$mid \$end" >$w/times
EOF
chmod 0755 "$w/job.sh"
# The concurrent steps' task: a barrier. It prints task-ran only once every concurrent step has started (at most
# 120 s): no task can end before the last one starts, so task-ran from all of them means all their slurmstepds
# existed at once, whatever the machine's speed.
cat >"$w/barrier.sh" <<EOF
touch $w/up.\$SLURM_STEP_ID
for _ in \$(seq 1 1200); do
  if [ "\$(ls $w | grep -c '^up\\.')" -ge $concurrent ]; then echo task-ran; exit 0; fi
  sleep 0.1
done
echo "barrier: only \$(ls $w | grep -c '^up\\.') of $concurrent steps started"
EOF
t0=$SECONDS
run_user sbatch --wait -n1 -o "$w/job.out" "$w/job.sh"
expect_eq "the job ends with rc 0" "$RC" "0"
fds_idle=$(cat "$w/fds-idle") fds_checked=$(cat "$w/fds-checked")
[[ $fds_idle == "0 1 2 "* ]] && e2e_pass "a task's descriptors: $fds_idle" || e2e_fail "a task's descriptors without the plugin: '$fds_idle'"
expect_eq "the checks leave the task no extra descriptor" "$fds_checked" "$fds_idle"
read -r start mid end <"$w/times" || e2e_fail "the job wrote no timings: $(cat "$w/job.out")"
e2e_log "timing: $concurrent concurrent steps $(awk "BEGIN {printf \"%.1f\", $mid - $start}") s, $serial serial steps $(awk "BEGIN {printf \"%.1f\", $end - $mid}") s, whole job $((SECONDS - t0)) s"
job=$(sed -n 's/.*chain on [^ ]* (job \([0-9]*\) step.*/\1/p' "$w/c1.err" | head -1)
[[ -n $job ]] && e2e_pass "job $job" || e2e_fail "no job id in $(head -c 500 "$w/c1.err")"

# Every step: rc 0, the task ran, its verdict on stderr.
check_steps() {  # check_steps PREFIX COUNT WHAT NEEDLE...
  local prefix=$1 count=$2 what=$3 i bad=0 first="" needle
  shift 3
  # Builtins only ($(<f), [[ ]]): a few forks per step cost seconds on a loaded 2-CPU machine.
  local rc out err
  for i in $(seq 1 "$count"); do
    local ok=1
    rc=$(<"$w/$prefix$i.rc") out=$(<"$w/$prefix$i.out") err=$(<"$w/$prefix$i.err")
    [[ $rc == 0 && $out == task-ran ]] || ok=0
    for needle in "$@"; do [[ $err == *"$needle"* ]] || ok=0; done
    if ((!ok)); then
      bad=$((bad + 1))
      [[ -n $first ]] || first="step $prefix$i: rc $rc, out '$out', err ${err:0:600}"
    fi
  done
  if ((bad == 0)); then e2e_pass "$what: all $count steps ran and got their verdict"; else e2e_fail "$what: $bad of $count steps bad; first: $first"; fi
}
check_steps c "$concurrent" "concurrent" "mrcheck: memlock: pass: " "mrcheck: mr_host: pass: "
check_steps s "$serial" "serial" "mrcheck: memlock: pass: "

# slurmd's log: one memlock admin line per step (step ids are distinct), the batch step's too.
log=$MRCHECK_SLURM_DIR/log/slurmd-$(hard_node).log
lines=$(grep -c "mrcheck: memlock: pass: job $job step [0-9]* task 0" "$log" || true)
steps=$(grep -o "mrcheck: memlock: pass: job $job step [0-9]* task 0" "$log" | sort -u | wc -l)
((steps >= concurrent + serial)) && e2e_pass "slurmd's log: $steps distinct steps with an admin line" ||
  e2e_fail "slurmd's log: $steps distinct steps ($lines lines), want $((concurrent + serial))"

# Accounting: every step COMPLETED 0:0 (a crashed slurmstepd shows otherwise).
acct_ok() { [[ $(sacct -n -P -j "$job" -o JobID,State,ExitCode 2>/dev/null | grep -cE "^$job\.[0-9]+\|COMPLETED\|0:0$") -ge $((concurrent + serial)) ]]; }
for _ in $(seq 1 100); do acct_ok && break; sleep 0.3; done
got=$(sacct -n -P -j "$job" -o JobID,State,ExitCode 2>/dev/null | grep -cE "^$job\.[0-9]+\|COMPLETED\|0:0$" || true)
other=$(sacct -n -P -j "$job" -o JobID,State,ExitCode 2>/dev/null | grep -E "^$job\.[0-9]+\|" | grep -vE "\|COMPLETED\|0:0$" | head -3 || true)
((got >= concurrent + serial)) && e2e_pass "accounting: $got steps COMPLETED 0:0" || e2e_fail "accounting: $got steps COMPLETED 0:0; others: $other"

# Nothing left behind.
sleep 1
expect_eq "no slurmstepd left" "$(hard_settled_stepds "$stepds_before")" "$stepds_before"
expect_eq "no process of $E2E_USER left" "$(hard_settled_procs "$E2E_USER" "$procs_before")" "$procs_before"
for _ in $(seq 1 50); do (($(slurmd_fds) <= fds_before)) && break; sleep 0.2; done  # connections closing
expect_eq "slurmd's descriptors unchanged" "$(slurmd_fds)" "$fds_before"
hard_invariants "after the load"
e2e_done
