#!/bin/bash
# mrcheck-prolog's Prometheus textfile: --textfile on a dry run (gauges per check, escaped format, a fresh
# timestamp), prometheus_textfile= in mrcheck.conf ignored by a dry run, a symlink refused without touching
# its target; then on the real local slurmctld a failing prolog run (max_map_count below the kernel default)
# both drains the node and shows the fail in the file, and a passing health check resumes it and clears it.
source "$(dirname "$0")/lib.sh"

prolog=$MRCHECK_BUILD_DIR/prolog/mrcheck-prolog
[[ -x $prolog ]] || e2e_skip "mrcheck-prolog not built ($prolog)"
[[ "$(id -u)" == 0 ]] || e2e_skip "needs root (slurm_update_node as SlurmUser/root)"
fixtures=$MRCHECK_SOURCE_DIR/tests/fixtures
rules=$MRCHECK_SOURCE_DIR/etc/mrcheck-rules.conf
work=$(mktemp -d /tmp/mrcheck-prolog-textfile.XXXXXX) # root-owned 0700: a trusted config and state_dir
mkdir -m 0700 "$work/state"
mkdir -m 0755 "$work/textfile"
prom=$work/textfile/mrcheck.prom
cleanup() { rm -rf "$work"; }
trap cleanup EXIT

run() { # run ARGS...: sets out, rc
  set +e
  out=$("$prolog" --rules "$rules" --state-dir "$work/state" "$@" 2>&1)
  rc=$?
  set -e
}
gauge() { sed -n "s/^mrcheck_check_status{check=\"$1\"} //p" "$prom"; }

# --- dry run with --textfile --------------------------------------------------------------------------------
before=$(date +%s)
run --dry-run --mode healthcheck --node n1 --root "$fixtures/matrix_hugepages_hog" --textfile "$prom"
expect_eq "dry run: exit 0" "$rc" "0"
expect_eq "dry run: file written" "$([[ -f $prom ]] && echo yes)" "yes"
expect_eq "dry run: hugepages gauge is fail (2)" "$(gauge hugepages)" "2"
expect_eq "dry run: rdma_stack gauge is pass (0)" "$(gauge rdma_stack)" "0"
expect_eq "dry run: overall status is fail" "$(sed -n 's/^mrcheck_status //p' "$prom")" "2"
expect_eq "dry run: one gauge per check (10 matrix + 2 memory)" "$(grep -c '^mrcheck_check_status{' "$prom")" "12"
ts=$(sed -n 's/^mrcheck_last_run_timestamp_seconds //p' "$prom")
if ((ts >= before && ts <= $(date +%s))); then e2e_pass "dry run: timestamp is now"; else e2e_fail "dry run: timestamp $ts not in [$before, now]"; fi
# Every line is a HELP/TYPE comment or `name{label="..."} value` / `name value` (exposition format 0.0.4).
lv='[A-Za-z_][A-Za-z0-9_]*="([^"\\]|\\.)*"'
bad=$(grep -Ev "^# (HELP|TYPE) mrcheck_[a-z_]+ |^mrcheck_[a-z_]+(\{$lv(,$lv)*\})? -?[0-9]+\$" "$prom" || true)
expect_eq "dry run: every line well-formed" "$bad" ""
# Every family has HELP and TYPE gauge (docs/prometheus.md lists them).
expect_eq "dry run: each metric has HELP and TYPE gauge" "$(grep -c '^# TYPE mrcheck_[a-z_]* gauge$' "$prom")" \
  "$(grep -c '^# HELP mrcheck_' "$prom")"
expect_eq "dry run: file mode 0644" "$(stat -c %a "$prom")" "644"
expect_eq "dry run: no temporary left" "$(find "$work/textfile" -name '*.tmp' | wc -l)" "0"

# --- prometheus_textfile= in the config: a dry run leaves the node's metrics alone ----------------------------
cfg=$work/mrcheck.conf
printf 'prometheus_textfile=%s\nstate_dir=%s\n' "$prom" "$work/state" >"$cfg"
chmod 0600 "$cfg"
cp "$prom" "$work/before.prom"
run --dry-run --config "$cfg" --mode healthcheck --node n1 --root "$fixtures/matrix_aligned"
expect_eq "config + dry run: exit 0" "$rc" "0"
expect_eq "config + dry run: file unchanged" "$(cmp -s "$prom" "$work/before.prom" && echo same)" "same"

# --- a symlink is refused and its target untouched -----------------------------------------------------------
echo precious >"$work/victim"
ln -s "$work/victim" "$work/textfile/link.prom"
run --dry-run --mode healthcheck --node n1 --root "$fixtures/matrix_aligned" --textfile "$work/textfile/link.prom"
expect_eq "symlink: exit code unchanged (0)" "$rc" "0"
expect_contains "symlink: refused with a line" "$out" "mrcheck: healthcheck: textfile $work/textfile/link.prom: is a symlink: refused"
expect_eq "symlink: target untouched" "$(cat "$work/victim")" "precious"
run --dry-run --mode healthcheck --node n1 --root "$fixtures/matrix_aligned" --textfile relative.prom
expect_eq "relative --textfile: usage error" "$rc" "2"

# --- on the real slurmctld: config key, failing prolog drains and shows it; passing health check resumes -------
e2e_slurm_up
node=${MRCHECK_SLURM_NODES%%,*}
node_reason() { scontrol show node "$node" | sed -n 's/^ *Reason=\(.*\) \[[^]]*\]$/\1/p'; }
resume_node() { scontrol update nodename="$node" state=resume >/dev/null 2>&1 || true; }
trap 'resume_node; cleanup' EXIT
resume_node
run --config "$cfg" --mode prolog --node "$node" --root "$fixtures/matrix_max_map_count_low"
expect_eq "max_map_count_low: prolog exits 1" "$rc" "1"
expect_contains "max_map_count_low: FAIL line" "$out" "mrcheck: max_map_count: FAIL: vm.max_map_count 16384 < 65530"
expect_eq "max_map_count_low: drain reason" "$(node_reason)" "mrcheck: max_map_count (node): vm.max_map_count 16384 < 65530"
expect_eq "max_map_count_low: gauge is fail (2)" "$(gauge max_map_count)" "2"
expect_eq "max_map_count_low: hugepages gauge is pass (0)" "$(gauge hugepages)" "0"
run --config "$cfg" --mode healthcheck --node "$node" --root "$fixtures/matrix_aligned"
expect_eq "aligned: health check exits 0" "$rc" "0"
expect_contains "aligned: resumed" "$out" "resumed node $node"
expect_eq "aligned: reason cleared" "$(node_reason)" ""
expect_eq "aligned: max_map_count gauge back to pass" "$(gauge max_map_count)" "0"
expect_eq "aligned: overall status pass" "$(sed -n 's/^mrcheck_status //p' "$prom")" "0"
e2e_done
