#!/bin/bash
# The job user must not write what the admin reads. The probe used to run with the
# job's whole environment, so a job user's LD_PRELOAD (or an LD_LIBRARY_PATH holding their own
# "libibverbs.so.1" where the site names the library, as by default) ran their code in it, and its report was
# taken as it came: a check id with a newline put arbitrary lines into slurmd's log, 1200 made-up checks added
# over 200 kB to it and as many lines to the user's terminal, the AdminComment and report_dir carried ids that
# are not check names. tests/fakes/hostile_probe.c (MRCHECK_HOSTILE=forge) prints such a report.
# Asserted: no line of the user's making in slurmd's log, on stderr or in the record; slurmd's log and the
# terminal get a bounded number of lines per step; report_dir holds only known check ids; the node is healthy.
source "$(dirname "$0")/lib.sh"
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
source "$(dirname "$0")/hardening_lib.sh"
plugin_setup
hard_hostile_setup
[[ -x $E2E_INSTALL/sbin/mrcheck-prolog ]] || e2e_skip "mrcheck-prolog not built"
hard_snapshot
cd "$MRCHECK_SLURM_WORK"
NODE=$(hard_node)
LOG=$MRCHECK_SLURM_DIR/log/slurmd-$NODE.log
SPOOL=$MRCHECK_SLURM_DIR/hostile-report-spool
rm -rf "$SPOOL" && mkdir -m 0755 "$SPOOL"
userlib=$(mktemp -d "$MRCHECK_SLURM_WORK/hostile_report.XXXXXX")
cp "$hostile" "$userlib/libibverbs.so.1"
chmod -R a+rX "$userlib"
trap 'plugin_cleanup; rm -rf "$userlib" "$SPOOL"' EXIT
ADMIN="admin_comment=yes admin_helper=$E2E_INSTALL/sbin/mrcheck-prolog report_dir=$SPOOL report_timeout=3s"
small="NCCL_BUFFSIZE=65536,NCCL_LL_BUFFSIZE=65536,NCCL_LL128_BUFFSIZE=65536"

# forged_case WHAT VERBS_LIBRARY EXPORTS: one step with the forging library in reach of the probe.
forged_case() {
  local what=$1 lib=$2 exports=$3 name=hostile-report-$RANDOM before lines bytes injected n ids
  plugin_load optional verbs_library="$lib" memlock_min=1M on_error=warn on_fail=warn $ADMIN
  before=$(wc -c <"$LOG")
  run_user srun -J "$name" --mr-check=mr,verbose --export="ALL,$small,MRCHECK_HOSTILE=forge,$exports" bash -c 'echo task-ran'
  sleep 1
  lines=$(tail -c +"$((before + 1))" "$LOG" | wc -l)
  bytes=$(($(wc -c <"$LOG") - before))
  injected=$(tail -c +"$((before + 1))" "$LOG" | grep -c '^INJECTED' || true)
  expect_eq "$what: no line of the user's making in slurmd's log" "$injected" "0"
  ((lines <= 60 && bytes <= 32768)) && e2e_pass "$what: slurmd's log grew by $lines lines, $bytes bytes" ||
    e2e_fail "$what: slurmd's log grew by $lines lines, $bytes bytes in one step"
  expect_not_contains "$what: no injected line on stderr" "$(grep '^INJECTED' <<<"$ERR" || true)" "INJECTED"
  n=$(grep -c 'mrcheck: ' <<<"$ERR" || true)
  ((n <= 45)) && e2e_pass "$what: $n mrcheck lines on stderr" || e2e_fail "$what: $n mrcheck lines on stderr"
  hard_clean_stderr "$what" "$ERR"
  expect_eq "$what: the task runs" "$OUT" "task-ran"
  hard_admin_comment "$name"
  expect_not_contains "$what: the record holds nothing of the forged report" "$AC" "INJECTED"
  expect_not_contains "$what: the record says nothing it was told to" "$AC" "drain this node"
  ids=$(cat "$SPOOL"/*.json 2>/dev/null | python3 -c '
import json, sys
bad = set()
for line in sys.stdin.read().split("\n"):
    line = line.strip()
    if not line: continue
    try: j = json.loads(line)
    except Exception: continue
    for c in j.get("checks", []):
        if c.get("id") not in ("memlock", "mr_host", "mr_gpu", "dmabuf", "nccl_pair"): bad.add(c.get("id")[:40])
print(len(bad))')
  expect_eq "$what: report_dir holds only check ids" "$ids" "0"
  rm -f "$SPOOL"/*.json
}

# 1. LD_PRELOAD in the job's environment.
forged_case "LD_PRELOAD" "$fake" "LD_PRELOAD=$hostile"
# 2. The site names the library (libibverbs.so.1, the default), the user's LD_LIBRARY_PATH holds their own.
forged_case "LD_LIBRARY_PATH" "libibverbs.so.1" "LD_LIBRARY_PATH=$userlib"
hard_invariants "after forged reports"
e2e_done
