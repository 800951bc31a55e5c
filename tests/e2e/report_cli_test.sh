#!/usr/bin/env bash
# mrcheck report / chain / dump on this machine: JSON that parses, the chain marks a prlimit'ed shell as the hop
# that lowered RLIMIT_MEMLOCK, a bad --root is exit 2, and a dump replays to the same facts. With the local
# Slurm up, report finds its slurmd through SlurmdPidFile (with %n) and reads its limits.
source "$(dirname "$0")/lib.sh"

M=$MRCHECK_BUILD_DIR/cli/mrcheck
[[ -x $M ]] || e2e_skip "no $M (build the mrcheck target)"
command -v python3 >/dev/null || e2e_skip "python3 missing"
TMP=$(mktemp -d /tmp/mrcheck-report-e2e.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

# --- report --json parses and has the documented top level -------------------------------------------------
rc=0
"$M" report --json >"$TMP/report.json" 2>"$TMP/report.err" || rc=$?
if [[ $rc == 0 || $rc == 1 ]]; then e2e_pass "report --json exit $rc (pass/warn or fail)"; else e2e_fail "report --json exit $rc: $(cat "$TMP/report.err")"; fi
if python3 -m json.tool "$TMP/report.json" >/dev/null; then e2e_pass "report --json is JSON"; else e2e_fail "report --json does not parse"; fi
keys=$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(sorted(k for k in j if k != "stack_changes"), sorted(c["id"] for c in j["checks"]), j["facts"]["chain"][0]["comm"])' "$TMP/report.json")
expect_eq "report top-level keys, checks, chain start" "$keys" "['checks', 'facts', 'schema_version', 'stack', 'verdict'] ['bar1', 'cuda_driver', 'gpu_driver', 'gpudirect', 'hca_fw', 'hugepages', 'max_map_count', 'memlock', 'mnnvl', 'nccl', 'nofile', 'propagate_limits', 'rdma_stack', 'slurmd_memlock', 'stack'] mrcheck"
soft=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["facts"]["chain"][0]["memlock_soft"])' "$TMP/report.json")
want=$(ulimit -S -l); [[ $want == unlimited ]] || want=$((want * 1024))
expect_eq "report memlock_soft is this shell's ulimit -l" "$soft" "$want"
text=$("$M" report 2>&1 || true)
expect_contains "text report has the checks table" "$text" "overall"

# --- chain: the prlimit'ed bash is the hop that lowered the limit ---------------------------------------------
if [[ $(ulimit -S -l) == 64 ]]; then
  e2e_skip "this shell already has a 64 KiB soft limit; the drop cannot be seen"
fi
# "; exit" keeps bash from exec'ing mrcheck in its place, so mrcheck's parent is the lowered bash.
out=$(prlimit --memlock=65536:8388608 bash -c "\"$M\" chain --json; exit \$?")
first=$(python3 -c 'import json,sys; c=json.loads(sys.stdin.read())["chain"][0]; print(c["comm"], c["memlock_soft"], c["memlock_hard"], c["lowered"])' <<<"$out")
expect_eq "chain: first entry is the lowered bash" "$first" "bash 65536 8388608 True"
last=$(python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["chain"][-1]["pid"])' <<<"$out")
expect_eq "chain ends at pid 1" "$last" "1"
table=$(prlimit --memlock=65536:8388608 bash -c "\"$M\" chain; exit \$?")
expect_contains "chain table marks the hop" "$table" "<- lowered here"

# --- bad input -------------------------------------------------------------------------------------------------
for cmd in report chain; do
  rc=0; err=$("$M" $cmd --root /nonexistent 2>&1) || rc=$?
  expect_eq "$cmd --root /nonexistent exits 2" "$rc" "2"
  expect_contains "$cmd --root /nonexistent says why" "$err" "does not exist"
done
rc=0; "$M" report --bogus >/dev/null 2>&1 || rc=$?
expect_eq "report --bogus exits 2" "$rc" "2"
rc=0; "$M" chain --pid abc >/dev/null 2>&1 || rc=$?
expect_eq "chain --pid abc exits 2" "$rc" "2"
rc=0; "$M" report --config /nonexistent/mrcheck.conf >/dev/null 2>&1 || rc=$?
expect_eq "report --config missing exits 2" "$rc" "2"

# --- the site's rules file decides max_map_count and hugepages, as for mrcheck-prolog ---------------------------
fx=$MRCHECK_SOURCE_DIR/tests/fixtures/cpu_debian12
verdicts() {
  python3 -c 'import json,sys; j=json.load(sys.stdin); print(" ".join(c["id"] + "=" + c["verdict"] for c in j["checks"] if c["id"] in ("max_map_count", "hugepages")))'
}
printf 'max_map_count off\nhugepages off\n' >"$TMP/off.rules"
printf 'rules=%s\n' "$TMP/off.rules" >"$TMP/off.conf"
expect_eq "report without a rules file: the default rules" "$("$M" report --json --root "$fx" 2>/dev/null | verdicts)" \
  "max_map_count=warn hugepages=pass"
expect_eq "report with rules= turning both off" "$("$M" report --json --root "$fx" --config "$TMP/off.conf" 2>/dev/null | verdicts)" \
  "max_map_count=skip hugepages=skip"

# --- dump and replay -------------------------------------------------------------------------------------------
mkdir -p "$TMP/full" && touch "$TMP/full/x"
rc=0; "$M" dump --out "$TMP/full" 2>/dev/null || rc=$?
expect_eq "dump refuses a non-empty directory" "$rc" "2"
"$M" dump --out "$TMP/dump" 2>"$TMP/dump.err"
[[ -L $TMP/dump/proc/self ]] && e2e_pass "dump: /proc/self is a symlink" || e2e_fail "dump: /proc/self is not a symlink"
[[ -s $TMP/dump/MRCHECK_DUMP && -s $TMP/dump/.mrcheck/libraries.json ]] && e2e_pass "dump: MRCHECK_DUMP and libraries.json" ||
  e2e_fail "dump: MRCHECK_DUMP or libraries.json missing"
secret=$(find "$TMP/dump" \( -name environ -o -name cmdline -o -name 'slurm*.conf' -o -name shadow -o -name mem \) | head -3)
expect_eq "dump copies no environ/cmdline/config" "$secret" ""
"$M" report --json >"$TMP/live.json" 2>/dev/null || true
"$M" report --json --root "$TMP/dump" >"$TMP/replay.json" 2>/dev/null || true
diff=$(python3 - "$TMP/live.json" "$TMP/replay.json" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))["facts"]; b = json.load(open(sys.argv[2]))["facts"]
# The start pid (mrcheck itself) and MemAvailable move between two runs; job_nccl is the NCCL the calling shell's
# environment would load, read live only (cli/cmd_report.cpp); everything else must replay.
for k in sorted(set(a) | set(b)):
    if k in ("chain", "hugepages", "job_nccl"): continue
    if a.get(k) != b.get(k): print(k, json.dumps(a.get(k))[:200], "!=", json.dumps(b.get(k))[:200])
print(len(a["chain"]) == len(b["chain"]), a["chain"][1:] == b["chain"][1:])
PY
)
expect_eq "replay of a fresh dump equals the live facts" "$diff" "True True"
# The stack fingerprint of a replay names the node's boot (history.h): the dump keeps the boot id.
bid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("stack", {}).get("boot_id", "none"))' "$TMP/replay.json")
expect_eq "replay of a dump has the live boot id" "$bid" "$(cat /proc/sys/kernel/random/boot_id)"
ch=$("$M" chain --root "$TMP/dump" --json)
expect_contains "chain --root replays the dumped chain" "$ch" '"pid": 1'

# A dump of a fixture tree (--root) replays to the same facts: listed directories keep their entries.
"$M" dump --root "$MRCHECK_SOURCE_DIR/tests/fixtures/hca_ofed_peermem" --out "$TMP/redump" 2>/dev/null
"$M" report --json --root "$MRCHECK_SOURCE_DIR/tests/fixtures/hca_ofed_peermem" >"$TMP/fx.json" 2>/dev/null || true
"$M" report --json --root "$TMP/redump" >"$TMP/redump.json" 2>/dev/null || true
same=$(python3 -c 'import json,sys; a=json.load(open(sys.argv[1]))["facts"]; b=json.load(open(sys.argv[2]))["facts"]; print([k for k in a if a[k] != b[k]])' "$TMP/fx.json" "$TMP/redump.json")
expect_eq "dump --root of a fixture replays to the same facts" "$same" "[]"
# rdma-core's providers are regular files in a listed directory, and the matrix reads ofed_info and the
# libibverbs.so.1.* names of the library directory: a dump recreates those entries (sysroot::list_matching) and
# the replay gives the same facts and the same verdicts (a dump used to lose bnxt_re and efa here).
for fx in roce_bnxt_node matrix_inbox_under_ofed; do
  "$M" dump --root "$MRCHECK_SOURCE_DIR/tests/fixtures/$fx" --out "$TMP/redump-$fx" 2>/dev/null
  "$M" report --json --root "$MRCHECK_SOURCE_DIR/tests/fixtures/$fx" >"$TMP/fx-$fx.json" 2>/dev/null || true
  "$M" report --json --root "$TMP/redump-$fx" >"$TMP/redump-$fx.json" 2>/dev/null || true
  same=$(python3 -c '
import json, sys
a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))
out = [k for k in a["facts"] if a["facts"][k] != b["facts"].get(k)]
# propagate_limits reads slurm.conf, which a dump never copies (it may hold AccountingStoragePass).
out += [c["id"] + ":" + c["verdict"] for c, d in zip(a["checks"], b["checks"])
        if c["id"] != "propagate_limits" and (c["id"], c["verdict"], c["summary"]) != (d["id"], d["verdict"], d["summary"])]
print(out)' "$TMP/fx-$fx.json" "$TMP/redump-$fx.json")
  expect_eq "dump --root of $fx replays to the same facts and verdicts" "$same" "[]"
done
[[ -f $TMP/redump-roce_bnxt_node/usr/lib/x86_64-linux-gnu/libibverbs/libbnxt_re-rdmav34.so &&
  ! -s $TMP/redump-roce_bnxt_node/usr/lib/x86_64-linux-gnu/libibverbs/libbnxt_re-rdmav34.so ]] &&
  e2e_pass "dump: a provider is recreated by name, empty" || e2e_fail "dump: no empty libbnxt_re-rdmav34.so in the dump"

# --- slurmd through the local Slurm's SlurmdPidFile -------------------------------------------------------------
if [[ ${MRCHECK_E2E_NO_SLURM:-0} != 1 ]]; then
  e2e_slurm_up
  pidfile=$(sed -n 's/^SlurmdPidFile=//p' "$SLURM_CONF" | head -1)
  pidfile=${pidfile//%n/$(hostname -s)}
  pid=$(cat "$pidfile")
  "$M" report --json >"$TMP/slurm.json" 2>/dev/null || true
  got=$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["facts"]["slurmd"]; print(s.get("pid"), s.get("pid_file"), s.get("memlock_hard") is not None)' "$TMP/slurm.json")
  expect_eq "report finds slurmd via SlurmdPidFile" "$got" "$pid $pidfile True"
fi
e2e_done
