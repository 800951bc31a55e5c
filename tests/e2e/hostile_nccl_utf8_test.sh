#!/bin/bash
# Issue 37's UTF-8 crash: a job whose LD_LIBRARY_PATH names a directory with bytes that are not UTF-8 (0xff 0xfe),
# holding a libnccl.so.2, runs `srun mrcheck probe nccl --json` on the real Slurm. The probe must print JSON and
# a verdict, never an internal error.
# Fails on the code before 8921fbe: "mrcheck: internal error: [json.exception.type_error.316] invalid UTF-8 byte",
# exit 2, nothing on stdout.
source "$(dirname "$0")/lib.sh"
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
[[ -x $MRCHECK_BUILD_DIR/cli/mrcheck ]] || e2e_skip "mrcheck not built"
command -v python3 >/dev/null || e2e_skip "no python3 (reads the JSON)"
e2e_slurm_up
e2e_stage
rm -f "$MRCHECK_SLURM_PLUGSTACK_D/mrcheck.conf" # the probe alone, not the plugin
bad=$MRCHECK_SLURM_WORK/nccl-$$-$'\xff\xfe'
trap 'rm -rf "$bad"' EXIT
mkdir -p "$bad"
: >"$bad/libnccl.so.2"
chmod -R a+rX "$bad"
run_user srun -J utf8-$$ -N1 -n1 --export=ALL,LD_LIBRARY_PATH="$bad" "$E2E_INSTALL/bin/mrcheck" probe nccl --mode local-pair --json --timeout 5
e2e_log "exit $RC; stderr: ${ERR:0:300}"
expect_not_contains "no internal error" "$ERR" "internal error"
VERDICT=$(python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["checks"][0]["verdict"])' <<<"$OUT" 2>/dev/null || echo "no JSON")
e2e_log "verdict: $VERDICT"
[[ $VERDICT =~ ^(pass|warn|fail|error|skip)$ ]] && e2e_pass "JSON with a verdict ($VERDICT)" || e2e_fail "no JSON verdict: ${OUT:0:300}"
expect_contains "the directory is listed, its bytes replaced" "$OUT" "nccl-$$-"
e2e_done
