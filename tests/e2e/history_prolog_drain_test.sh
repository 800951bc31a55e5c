#!/bin/bash
# The stack history against the real local slurmctld (about 10 s): two prolog runs across a changed tree print
# the change line; the changed stack is re-validated once (a fake `helper` stands in for `mrcheck probe`, run as
# nobody); a failing re-validation drains the node with the change named, the next runs try again and keep it
# drained, and only a passing one resumes it; after the pass it is not repeated. The write-up's case (OFED
# modules replaced by inbox ones after a kernel upgrade) drains with rdma_stack and the change in the reason.
source "$(dirname "$0")/lib.sh"

prolog=$MRCHECK_BUILD_DIR/prolog/mrcheck-prolog
[[ -x $prolog ]] || e2e_skip "mrcheck-prolog not built ($prolog)"
[[ "$(id -u)" == 0 ]] || e2e_skip "needs root (slurm_update_node, the probes as nobody)"
id nobody >/dev/null 2>&1 || e2e_skip "no user nobody"
e2e_slurm_up
node=${MRCHECK_SLURM_NODES%%,*}
fixtures=$MRCHECK_SOURCE_DIR/tests/fixtures
rules=$MRCHECK_SOURCE_DIR/etc/mrcheck-rules.conf
TMP=$(mktemp -d /tmp/mrcheck-history-slurm.XXXXXX)
chmod 0755 "$TMP"
state=$TMP/state
mkdir -m 0700 "$state"

node_reason() { scontrol show node "$node" | sed -n 's/^ *Reason=\(.*\) \[[^]]*\]$/\1/p'; }
node_usable() { case "$(sinfo -h -N -n "$node" -o '%T' | head -n1)" in idle | mixed | allocated | completing) echo usable ;; *) echo drained ;; esac; }
resume_node() {
  scontrol update nodename="$node" state=resume >/dev/null 2>&1 || true
  local _
  for _ in $(seq 1 50); do
    [[ "$(node_usable)" == usable ]] && return 0
    sleep 0.2
  done
}
trap 'resume_node; rm -rf "$TMP"' EXIT

# The fake probe helper: prints the verdict in $TMP/verdict as `mrcheck probe --json` would, counts its runs.
cat >"$TMP/helper" <<SH
#!/bin/sh
echo "\$(id -un) \$2 \$4" >>"$TMP/calls"
if [ "\$(cat "$TMP/verdict")" = fail ] && [ "\$2" = mr ]; then
  echo '{"verdict":"fail","checks":[{"id":"mr_host","verdict":"fail","summary":"ibv_reg_mr 8 MiB: ENOMEM","detail":"","hint":""}]}'
  exit 1
fi
echo '{"verdict":"pass","checks":[{"id":"mr_host","verdict":"pass","summary":"ok","detail":"","hint":""}]}'
SH
chmod 0755 "$TMP/helper"
: >"$TMP/calls"
chmod 0666 "$TMP/calls"
echo fail >"$TMP/verdict"
chmod 0644 "$TMP/verdict"
printf 'helper=%s\nrevalidate=on_change\nstate_dir=%s\n' "$TMP/helper" "$state" >"$TMP/mrcheck.conf"

cp -a "$fixtures/matrix_aligned" "$TMP/before"
cp -a "$fixtures/matrix_aligned" "$TMP/after"
echo 28.43.1014 >"$TMP/after/sys/class/infiniband/mlx5_0/fw_ver"

run() {  # run TREE MODE: sets out, rc
  set +e
  out=$("$prolog" --config "$TMP/mrcheck.conf" --root "$1" --node "$node" --rules "$rules" --mode "$2" --timeout 5s 2>&1)
  rc=$?
  set -e
}
calls() { wc -l <"$TMP/calls" | tr -d ' '; }

resume_node
run "$TMP/before" healthcheck
expect_contains "first run: no history yet" "$out" "no history yet for $node"
expect_eq "first run: nothing re-validated" "$(calls)" 0
run "$TMP/after" prolog
expect_contains "second run: the change line" "$out" "mrcheck: changed: mlx5_0 fw 28.39.1002 -> 28.43.1014 first seen at "
expect_eq "re-validation ran the three probes once" "$(calls)" 3
expect_contains "probes ran as nobody" "$(cat "$TMP/calls")" "nobody mr"
expect_contains "one GPU: the NCCL pair is local-pair" "$(cat "$TMP/calls")" "nobody nccl local-pair"
expect_contains "the data-plane probe ran as nobody" "$(cat "$TMP/calls")" "nobody rdma"
expect_eq "failing re-validation: prolog exits 1" "$rc" 1
reason=$(node_reason)
expect_contains "drain reason names the change" "$reason" "mrcheck: revalidate (node): mlx5_0 fw 28.39.1002 -> 28.43.1014 since "
expect_contains "drain reason names the probe" "$reason" "mr_host: ibv_reg_mr 8 MiB: ENOMEM"
run "$TMP/after" healthcheck
expect_eq "still failing: tried again" "$(calls)" 6
expect_eq "still failing: still drained" "$(node_usable)" drained
echo pass >"$TMP/verdict"
run "$TMP/after" healthcheck
expect_eq "passing re-validation ran" "$(calls)" 9
expect_contains "passing re-validation resumes" "$out" "resumed node $node"
# slurmctld applies the resume asynchronously: sinfo may show the drain for a moment after the prolog returned.
for _ in $(seq 1 50); do [[ "$(node_usable)" == usable ]] && break; sleep 0.2; done
expect_eq "node usable again" "$(node_usable)" usable
run "$TMP/after" prolog
expect_eq "after the pass: not repeated" "$(calls)" 9
expect_eq "after the pass: prolog exits 0" "$rc" 0

# The write-up's case: a kernel upgrade; OFED modules replaced by inbox ones under the OFED user space.
cp -a "$TMP/after" "$TMP/inbox"
echo 6.1.0-28-amd64 >"$TMP/inbox/proc/sys/kernel/osrelease"
for m in mlx5_core ib_core mlx5_ib; do : >"$TMP/inbox/sys/module/$m/taint"; done
rm -f "$TMP/inbox/sys/module/mlx5_core/version"
run "$TMP/inbox" prolog
expect_eq "inbox under OFED: exits 1" "$rc" 1
expect_contains "inbox under OFED: change line" "$out" "mrcheck: changed: mlx5_core 24.10-1.1.4 (OFED) -> 6.1.0-28-amd64 (inbox)"
expect_contains "inbox under OFED: drain reason" "$(node_reason)" "mrcheck: rdma_stack (node): mlx5_core 24.10-1.1.4 (OFED) -> 6.1.0-28-amd64 (inbox) since "
e2e_done
