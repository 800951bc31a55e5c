#!/usr/bin/env bash
# `srun --mr-check=mr` on the real local Slurm: the plugin runs `mrcheck probe mr --json` from task_init as the
# job user with the task's final limits; the fake libibverbs (the site's verbs_library=: the probe never takes a
# library path from the job, SECURITY.md) pins with mlock, so the kernel applies the task's real RLIMIT_MEMLOCK.
source "$(dirname "$0")/lib.sh"

for f in cli/mrcheck spank/spank_mrcheck.so; do
  [[ -e $MRCHECK_BUILD_DIR/$f ]] || e2e_skip "no $MRCHECK_BUILD_DIR/$f (build targets mrcheck spank_mrcheck)"
done
fake=$(find "$MRCHECK_BUILD_DIR" -name 'libibverbs.so.1' -path '*fake*' 2>/dev/null | head -1 || true)
[[ -n $fake ]] || e2e_skip "no fake libibverbs.so.1 (build target fake_ibverbs)"
e2e_slurm_up

# A private copy the job user can execute, and a drop-in we remove on every exit path.
stage=$(mktemp -d /tmp/mrcheck-probe-slurm.XXXXXX)
mkdir -p "$stage/lib"
install -m 0755 "$MRCHECK_BUILD_DIR/cli/mrcheck" "$stage/mrcheck"
install -m 0755 "$MRCHECK_BUILD_DIR/spank/spank_mrcheck.so" "$MRCHECK_BUILD_DIR/spank/mrcheck_spank_core.so" "$stage/"
install -m 0755 "$fake" "$stage/lib/libibverbs.so.1"
chmod 0755 "$stage" "$stage/lib"
dropin=$MRCHECK_SLURM_PLUGSTACK_D/mrcheck.conf
# Remove the drop-in only while it is still ours (another test on the shared cluster may have replaced it).
cleanup() { grep -qs "$stage/" "$dropin" && rm -f "$dropin"; rm -rf "$stage"; }
trap cleanup EXIT
plugin() { echo "required $stage/spank_mrcheck.so helper=$stage/mrcheck verbs_library=$stage/lib/libibverbs.so.1 probe_timeout=5s $*" >"$dropin"; }
cd "$MRCHECK_SLURM_WORK"

small="NCCL_BUFFSIZE=65536,NCCL_LL_BUFFSIZE=65536,NCCL_LL128_BUFFSIZE=65536"  # 1.5 MiB estimate
# job USHELL_PREFIX EXPORTS: srun --mr-check=mr as mrtest; sets $out and $rc.
job() {
  set +e
  out=$(timeout 120 $MRCHECK_AS_USER bash -c "$1 srun --mr-check=${groups:-mr} --export=ALL,$2 echo task-ran" 2>&1)
  rc=$?
  set -e
}

plugin
# 1. A 64 KiB limit from srun's shell (propagated as SLURM_RLIMIT_MEMLOCK) -> ENOMEM -> memlock, numbers, fix.
job "ulimit -S -l 64;" "$small"
expect_contains "64 KiB: mr_host fails" "$out" "mrcheck: mr_host: FAIL: "
expect_contains "64 KiB: the errno" "$out" "ENOMEM"
expect_contains "64 KiB: the limit" "$out" "64 KiB"
expect_contains "64 KiB: the size" "$out" "1.5 MiB"
expect_contains "64 KiB: a fix" "$out" "(fix: "
expect_contains "64 KiB: the hop (srun's shell, propagated)" "$out" "SLURM_RLIMIT_MEMLOCK=65536"
expect_not_contains "64 KiB: the task did not run" "$out" "task-ran"
if ((rc != 0)); then e2e_pass "64 KiB: srun fails (rc $rc)"; else e2e_fail "64 KiB: srun rc 0: $out"; fi

# 2. The task's default limit (8 MiB here) is enough for the 1.5 MiB estimate: passes, the task runs.
job "" "$small"
expect_contains "8 MiB: the task ran" "$out" "task-ran"
expect_not_contains "8 MiB: no failure" "$out" "FAIL"
expect_eq "8 MiB: srun rc" "$rc" 0

# 3. enforce=yes raises the task back to the site minimum before the probe: the 64 KiB shell now passes.
plugin "enforce=yes memlock_min=8M"
groups=memlock,mr job "ulimit -S -l 64;" "$small"
expect_contains "enforce=yes: the task ran" "$out" "task-ran"
expect_not_contains "enforce=yes: no mr_host failure" "$out" "mr_host: FAIL"
plugin

# 4. Injected errnos reach the user with their cause's fix.
job "" "$small,MRCHECK_FAKE_IBV_INJECT=reg_mr_iova2=EPERM"
expect_contains "EPERM: reported" "$out" "EPERM"
expect_contains "EPERM: mr_host fails" "$out" "mrcheck: mr_host: FAIL: "
job "" "$small,MRCHECK_FAKE_IBV_INJECT=reg_mr_iova2=EINVAL"
expect_contains "EINVAL: reported" "$out" "EINVAL"

# 5. A registration that hangs is killed at probe_timeout; a crash is reported; slurmstepd and later steps live on.
start=$(date +%s)
job "" "$small,MRCHECK_FAKE_IBV_INJECT=reg_mr_iova2=hang"
elapsed=$(($(date +%s) - start))
expect_contains "hang: reported" "$out" "timed out"
if ((elapsed < 60)); then e2e_pass "hang: the step ended after ${elapsed}s"; else e2e_fail "hang: ${elapsed}s"; fi
job "" "$small,MRCHECK_FAKE_IBV_INJECT=reg_mr_iova2=crash"
expect_contains "crash: reported" "$out" "SIGSEGV"
job "" "$small"
expect_contains "after hang and crash: a later step runs" "$out" "task-ran"

e2e_done
