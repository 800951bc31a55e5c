#!/bin/bash
# The stack history and `mrcheck fleet` without Slurm (a few seconds): mrcheck-prolog --dry-run --state-dir
# replays fixture trees in order and prints the change lines, names the change in the drain reason and the JSON,
# restarts a corrupt or future history with one line and the same verdict; `mrcheck fleet` over 64 generated
# reports with 3 outliers groups them in hostlist form, names rdma_stack and exits 1, and skips hostile files.
source "$(dirname "$0")/lib.sh"

M=$MRCHECK_BUILD_DIR/cli/mrcheck
P=$MRCHECK_BUILD_DIR/prolog/mrcheck-prolog
[[ -x $M && -x $P ]] || e2e_skip "mrcheck or mrcheck-prolog not built"
command -v python3 >/dev/null || e2e_skip "python3 missing"
fixtures=$MRCHECK_SOURCE_DIR/tests/fixtures
rules=$MRCHECK_SOURCE_DIR/etc/mrcheck-rules.conf
TMP=$(mktemp -d /tmp/mrcheck-history-e2e.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
state=$TMP/state
mkdir -m 0700 "$state"

# The write-up's case as two trees: before (aligned OFED node), after (kernel upgrade + reboot, inbox modules).
cp -a "$fixtures/matrix_aligned" "$TMP/before"
cp -a "$fixtures/matrix_aligned" "$TMP/after"
mkdir -p "$TMP/before/proc/sys/kernel/random" "$TMP/after/proc/sys/kernel/random"
echo a1a1a1a1-0000-4000-8000-000000000001 >"$TMP/before/proc/sys/kernel/random/boot_id"
echo b2b2b2b2-0000-4000-8000-000000000002 >"$TMP/after/proc/sys/kernel/random/boot_id"
echo 6.1.0-28-amd64 >"$TMP/after/proc/sys/kernel/osrelease"
echo '86400.00 1.00' >"$TMP/before/proc/uptime"
echo '600.00 1.00' >"$TMP/after/proc/uptime"
for m in mlx5_core ib_core mlx5_ib; do : >"$TMP/after/sys/module/$m/taint"; done
rm -f "$TMP/after/sys/module/mlx5_core/version"
rm -rf "$TMP/after/sys/kernel/mm/memory_peers"

replay() {  # replay TREE [args]: sets out, rc
  local tree=$1
  shift
  set +e
  out=$("$P" --dry-run --root "$tree" --state-dir "$state" --rules "$rules" --node node017 --mode prolog "$@" 2>&1)
  rc=$?
  set -e
}
replay "$TMP/before"
expect_eq "first run passes" "$rc" 0
expect_contains "first run: no history yet" "$out" "stack history: no history yet for node017"
[[ $(stat -c %a "$state/history-node017.json") == 600 ]] && e2e_pass "history file 0600" || e2e_fail "history file mode $(stat -c %a "$state/history-node017.json")"
replay "$TMP/before"
expect_not_contains "same tree: no change line" "$out" "changed:"
replay "$TMP/after"
expect_eq "after the change: fails" "$rc" 1
expect_contains "change line for mlx5_core" "$out" "mrcheck: changed: mlx5_core 24.10-1.1.4 (OFED) -> 6.1.0-28-amd64 (inbox) since boot at "
expect_contains "change line for the kernel" "$out" "mrcheck: changed: kernel 6.1.0-18-amd64 -> 6.1.0-28-amd64"
expect_contains "drain reason names the change" "$out" "would drain node017 with reason 'mrcheck: rdma_stack (node): mlx5_core 24.10-1.1.4 (OFED) -> 6.1.0-28-amd64 (inbox) since reboot"
replay "$TMP/after" --json
json=$(printf '%s\n' "$out" | sed -n '/^{/,$p')
expect_eq "JSON: history state and stack" "$(printf '%s' "$json" | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["history"]["state"], j["stack"]["items"]["mlx5_core"], len(j["history"]["last_change"]["lines"]) > 0)')" "unchanged 6.1.0-28-amd64 (inbox) True"
expect_contains "JSON: the drain reason still names the change" "$json" '"reason": "mrcheck: rdma_stack (node): mlx5_core 24.10-1.1.4 (OFED)'
# The textfile carries the change time and the stack's versions.
replay "$TMP/after" --textfile "$TMP/node.prom"
expect_contains "textfile: change timestamp" "$(cat "$TMP/node.prom")" "mrcheck_stack_changed_timestamp_seconds "
expect_contains "textfile: info metric" "$(cat "$TMP/node.prom")" 'mlx5_core="6.1.0-28-amd64 (inbox)"'

# Bad history files: one line, the history restarted, the verdict unchanged.
for bad in 'garbage{' '{"format":"mrcheck-stack-history","version":99,"node":"node017","current":{}}' '{"format":"mrcheck-stack-history","version":1,"node":"node018","current":{}}'; do
  printf '%s' "$bad" >"$state/history-node017.json"
  replay "$TMP/after"
  expect_eq "bad history (${bad:0:20}): same verdict" "$rc" 1
  expect_contains "bad history (${bad:0:20}): one line" "$out" "history restarted"
  expect_contains "bad history (${bad:0:20}): restarted" "$out" "stack history: restarted for node017"
done
# A symlink in place of the file is not followed.
rm -f "$state/history-node017.json"
ln -s /etc/passwd "$state/history-node017.json"
replay "$TMP/after"
expect_eq "symlinked history: same verdict" "$rc" 1
expect_contains "symlinked history: refused" "$out" "history restarted"
[[ -L $state/history-node017.json ]] && e2e_fail "symlink still there: the file was not replaced" || e2e_pass "symlink replaced by a file, /etc/passwd untouched"

# --- mrcheck fleet: 64 reports, 3 outliers --------------------------------------------------------------------
"$M" report --json --root "$fixtures/matrix_aligned" >"$TMP/good.json" || true
"$M" report --json --root "$fixtures/matrix_inbox_under_ofed" >"$TMP/bad.json" || true
python3 "$MRCHECK_SOURCE_DIR/bench/fleet/gen.py" "$TMP/good.json" "$TMP/bad.json" "$TMP/fleet" 64 17,33,34
set +e
fl=$("$M" fleet "$TMP/fleet" 2>&1)
frc=$?
set -e
expect_eq "fleet: exit 1 (an outlier fails rdma_stack)" "$frc" 1
expect_contains "fleet: header" "$fl" "mrcheck fleet: 64 nodes;"
expect_contains "fleet: outliers in hostlist form with the rule" "$fl" "  node[017,033-034]: mlx5_core 6.1.0-18-amd64 (inbox) while 61 nodes run 24.10-1.1.4 (OFED): rdma_stack fails: inbox mlx5_core"
fj=$("$M" fleet --json "$TMP/fleet" 2>/dev/null || true)
expect_eq "fleet --json" "$(printf '%s' "$fj" | python3 -c 'import json,sys; j=json.load(sys.stdin); f=[x for x in j["differ"] if x["key"]=="mlx5_core"][0]; print(j["nodes"], j["verdict"], f["majority_nodes"], f["outliers"][0]["nodes"], f["outliers"][0]["fails"][0]["check"])')" "64 fail 61 node[017,033-034] rdma_stack"
# Without outliers: exit 0.
python3 "$MRCHECK_SOURCE_DIR/bench/fleet/gen.py" "$TMP/good.json" "$TMP/bad.json" "$TMP/even" 8 ""
set +e
"$M" fleet "$TMP/even" >/dev/null 2>&1
expect_eq "fleet of equal nodes: exit 0" "$?" 0
set -e
# Hostile files: a symlink, a FIFO, garbage, a node name with control bytes: skipped or escaped, nothing run.
ln -s /etc/shadow "$TMP/fleet/zz-link.json"
mkfifo "$TMP/fleet/zz-fifo.json"
printf 'not json' >"$TMP/fleet/zz-garbage.json"
python3 - "$TMP/good.json" "$TMP/fleet/zz-evil.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
j["stack"]["host"] = "evil\x1b[31m$(touch /tmp/pwned)"
j["stack"]["items"]["kernel"] = "6.1\n\x1b]0;title\x07"
json.dump(j, open(sys.argv[2], "w"))
PY
set +e
fl=$(timeout 20 "$M" fleet "$TMP/fleet" 2>&1)
set -e
expect_contains "hostile: symlink skipped" "$fl" "zz-link.json: skipped: a symlink"
expect_contains "hostile: FIFO skipped" "$fl" "zz-fifo.json: skipped: not a regular file"
expect_contains "hostile: garbage skipped" "$fl" "zz-garbage.json: skipped:"
expect_not_contains "hostile: no raw escape byte in the output" "$fl" $'\x1b'
expect_contains "hostile: escaped node name" "$fl" 'evil\x1b[31m$(touch /tmp/pwned)'
# Dump trees are read as nodes too.
set +e
fl=$("$M" fleet "$fixtures/matrix_aligned" 2>&1)
expect_eq "a dump tree: exit 0" "$?" 0
set -e
expect_contains "a dump tree: one node" "$fl" "mrcheck fleet: 1 nodes;"
e2e_done
