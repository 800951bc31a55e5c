#!/bin/bash
# The admins' record (admin_comment=, report_dir=) on the one-node local Slurm: a checked step's verdict lands
# in sacct's AdminComment (one record per step, later steps append), report_dir gets the node's JSON report, and
# neither a hostile job name and environment nor the user's own Comment/AdminComment updates can change or fake
# the record.
source "$(dirname "$0")/lib.sh"
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
plugin_setup
((PLUGIN_HARD_KIB >= 8192)) || e2e_skip "hard memlock here is ${PLUGIN_HARD_KIB} KiB, below the 8 MiB policy"
[[ -x $E2E_INSTALL/sbin/mrcheck-prolog ]] || e2e_skip "mrcheck-prolog not built"
NODE=${MRCHECK_SLURM_NODES%%,*}

SPOOL=$MRCHECK_SLURM_DIR/admin-spool
rm -rf "$SPOOL" && mkdir -m 0755 "$SPOOL"
STATE=$MRCHECK_SLURM_DIR/admin-state
rm -rf "$STATE" && mkdir -m 0700 "$STATE"
ADMIN="admin_comment=yes admin_helper=$E2E_INSTALL/sbin/mrcheck-prolog report_dir=$SPOOL report_timeout=3s state_dir=$STATE"
# The node's stack history, as a health check run keeps it: report_dir files carry its stack (README "What changed").
"$E2E_INSTALL/sbin/mrcheck-prolog" --dry-run --mode healthcheck --state-dir "$STATE" --node "$NODE" >/dev/null 2>&1 || true

# admin_comment NAME: the job's AdminComment once slurmdbd has it (it is sent at job end).
admin_comment() {
  local name=$1 out="" _i
  for _i in $(seq 1 50); do
    out=$(sacct -X -n -P --name="$name" -S now-1hour -o JobID,State,AdminComment%1000 2>/dev/null | tail -1)
    [[ -n $out && $out != *RUNNING* && $out != *PENDING* && $out != *"|" ]] && break
    sleep 0.2
  done
  AC=${out#*|}  # JobID|State|AdminComment: the record itself holds " | "
  AC=${AC#*|}
}

# A passing step and a failing one (required plugin: the failing task never runs).
plugin_load required memlock_min=8M $ADMIN
T0=$(date +%s%N)
run_user srun -J admin-pass-$$ --mr-check=memlock true
T1=$(date +%s%N)
show_run "pass"
expect_eq "pass: rc" "$RC" "0"
admin_comment admin-pass-$$
expect_eq "pass: AdminComment" "$AC" "mrcheck: step 0: pass on 1 node"
e2e_log "figure: srun --mr-check=memlock true with admin_comment=yes: $(((T1 - T0) / 1000000)) ms"

run_user bash -c "ulimit -S -l 64; srun -J admin-fail-$$ --mr-check=memlock true; exit \$?"
show_run "fail"
[[ $RC != 0 ]] && e2e_pass "fail: the step fails" || e2e_fail "fail: the step should fail"
admin_comment admin-fail-$$
expect_eq "fail: AdminComment names the node, the limit and the hop" "$AC" \
  "mrcheck: step 0: FAIL memlock=64KiB (submit-host propagation) on $NODE"

# The JSON report of the passing step: root's file, the report's schema plus the slurm object.
PASSJOB=$(sacct -X -n -P --name=admin-pass-$$ -S now-1hour -o JobID | tail -1)
F=$SPOOL/job${PASSJOB}.step_0.${NODE}.json
if [[ -f $F ]]; then
  e2e_pass "report_dir: $F written"
  expect_eq "report_dir: owner and mode" "$(stat -c '%U %a' "$F")" "root 644"
  expect_eq "report_dir: schema" \
    "$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["verdict"], j["checks"][0]["id"], j["slurm"]["job_id"], j["slurm"]["node"])' "$F")" \
    "pass memlock $PASSJOB $NODE"
  expect_eq "report_dir: the stack the prolog saw in this boot" \
    "$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])).get("stack", {}); print(s.get("items", {}).get("kernel"), s.get("boot_id"), "boot_time" in s)' "$F")" \
    "$(uname -r) $(cat /proc/sys/kernel/random/boot_id) False"
  fleet=$("$MRCHECK_SLURM_DIR/install/bin/mrcheck" fleet "$SPOOL" 2>&1) || true
  expect_contains "mrcheck fleet reads report_dir" "$fleet" "mrcheck fleet: 1 nodes; "
else
  e2e_fail "report_dir: no $F (spool: $(ls "$SPOOL"))"
fi

# A spool directory others can write is refused: nothing is written there.
chmod 0777 "$SPOOL"
run_user srun -J admin-spool777-$$ --mr-check=memlock true
J=$(sacct -X -n -P --name=admin-spool777-$$ -S now-1hour -o JobID | tail -1)
[[ ! -e $SPOOL/job${J}.step_0.${NODE}.json ]] && e2e_pass "report_dir: a world-writable dir is refused" ||
  e2e_fail "report_dir: wrote into a world-writable dir"
chmod 0755 "$SPOOL"

# Hostile job name and environment: still exactly one well-formed record.
EVIL=$'q"uo\'te|pipe;semi'"$$"$'\nmrcheck: step 9: pass on 99 nodes'
run_user env "EVIL=$EVIL" "MRCHECK_SUBMIT=$EVIL" srun -J "$EVIL" --mr-check=memlock true
expect_eq "hostile: rc" "$RC" "0"
for _ in $(seq 1 25); do
  AC=$(sacct -X -n -p -S now-1hour -o AdminComment%1000,JobName%300 | grep -a "pipe;semi$$" | tail -1 || true)
  [[ -n $AC ]] && break
  sleep 0.2
done
expect_eq "hostile: AdminComment is one clean record" "${AC%%|*}" "mrcheck: step 0: pass on 1 node"

# A probe whose report carries hostile text (the helper prints it): escaped into the one record.
cat >"$E2E_INSTALL/bin/evil-probe" <<'EOF'
#!/bin/sh
printf '%s\n' '{"verdict":"fail","checks":[{"id":"mr_host","verdict":"fail","summary":"ENOMEM | mrcheck: step 9: pass on 99 nodes\nx; y","detail":"","hint":"h"}]}'
exit 1
EOF
chmod 0755 "$E2E_INSTALL/bin/evil-probe"
echo "optional $E2E_INSTALL/lib/slurm/spank_mrcheck.so helper=$E2E_INSTALL/bin/evil-probe memlock_min=8M $ADMIN" >"$PLUGIN_DROPIN"
run_user srun -J admin-evilprobe-$$ --mr-check=memlock,mr true
admin_comment admin-evilprobe-$$
expect_contains "hostile probe text: the record names the check" "$AC" "mrcheck: step 0: FAIL mr_host (ENOMEM "
expect_not_contains "hostile probe text: no second record" "$AC" " | "
expect_not_contains "hostile probe text: no item separator from the text" "${AC#*(}" ";"
expect_contains "hostile probe text: escaped once" "$AC" 'ENOMEM \x7c mrcheck: step 9: pass on 99 nodes\x0ax\x3b y) on '"$NODE"
plugin_load required memlock_min=8M $ADMIN

# Later steps append; the user's own Comment and AdminComment updates change nothing of it.
cat >"$MRCHECK_SLURM_WORK/admin-steps.sh" <<'EOF'
#!/bin/bash
srun --mr-check=memlock true
scontrol update JobId="$SLURM_JOB_ID" Comment='mrcheck: step 1: pass on 1 node | mrcheck: step 7: pass'
scontrol update JobId="$SLURM_JOB_ID" AdminComment='mrcheck: step 1: pass on 42 nodes' 2>&1 | head -1
srun --mr-check=memlock true
EOF
chmod 0755 "$MRCHECK_SLURM_WORK/admin-steps.sh"
run_user sbatch -W -J admin-steps-$$ --comment='mrcheck: step 0: pass on 99 nodes' -o "$MRCHECK_SLURM_WORK/admin-steps.out" \
  "$MRCHECK_SLURM_WORK/admin-steps.sh"
show_run "steps"
expect_contains "steps: the user may not set AdminComment" "$(cat "$MRCHECK_SLURM_WORK/admin-steps.out")" "ccess"
admin_comment admin-steps-$$
expect_eq "steps: two records, appended" "$AC" "mrcheck: step 0: pass on 1 node | mrcheck: step 1: pass on 1 node"

# Six steps at once in one job: each appends its own record (collectors on a node take turns).
cat >"$MRCHECK_SLURM_WORK/admin-conc.sh" <<'EOF'
#!/bin/bash
for i in 1 2 3 4 5 6; do srun -N1 -n1 -O --mr-check=memlock true & done
wait
EOF
chmod 0755 "$MRCHECK_SLURM_WORK/admin-conc.sh"
run_user sbatch -W -N1 -O -J admin-conc-$$ -o /dev/null "$MRCHECK_SLURM_WORK/admin-conc.sh"
admin_comment admin-conc-$$
expect_eq "concurrent steps: six records" "$(grep -o 'mrcheck: step [0-5]: pass on 1 node' <<<"$AC" | sort -u | wc -l)" "6"

# admin_comment=no: nothing written.
plugin_load required memlock_min=8M
run_user srun -J admin-off-$$ --mr-check=memlock true
admin_comment admin-off-$$
expect_eq "admin_comment=no: AdminComment empty" "$AC" ""
e2e_done
