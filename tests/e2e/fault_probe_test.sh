#!/bin/bash
# Faults in the probe (SECURITY.md): the verbs library missing, not an ELF file, an ELF file that is not libibverbs;
# the fake libibverbs hanging in ibv_open_device, crashing in ibv_alloc_pd; the probe child killed from outside
# while it registers. Each: the step's outcome follows the policy - on_error=warn runs the task with an ERROR
# line, on_error=fail (required plugin) stops it before exec; a hang or crash is a finding about the node
# (on_fail) - the verdict names the cause, the step ends in bounded time, and afterwards slurmd is the same
# process, no slurmstepd or probe process of the user is left, and a later step runs normally.
source "$(dirname "$0")/lib.sh"
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
source "$(dirname "$0")/hardening_lib.sh"
plugin_setup
fake=$E2E_INSTALL/lib/fake/libibverbs.so.1
[[ -f $fake ]] || e2e_skip "no fake libibverbs.so.1 (build target fake_ibverbs)"
hard_snapshot
cd "$MRCHECK_SLURM_WORK"
notelf=$E2E_INSTALL/lib/fault_probe_notelf.so
printf 'not an ELF file\n' >"$notelf"
chmod 0644 "$notelf"
trap 'plugin_cleanup; rm -f "$notelf"' EXIT
notverbs=$(find /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu -maxdepth 1 -name 'libz.so.1' 2>/dev/null | head -1)
small="NCCL_BUFFSIZE=65536,NCCL_LL_BUFFSIZE=65536,NCCL_LL128_BUFFSIZE=65536"  # a 1.5 MiB estimate
task="echo task-ran"

# --- the library missing or broken: an ERROR verdict (the checker cannot check), per on_error ------------------
declare -A broken=(
  [missing]="/nonexistent/libibverbs.so.1|cannot open shared object file"
  [not-elf]="$notelf|cannot load the verbs library: dlopen $notelf"
)
[[ -n $notverbs ]] && broken[not-verbs]="$notverbs|(not a libibverbs.so.1?)"
for k in "${!broken[@]}"; do
  lib=${broken[$k]%%|*} why=${broken[$k]#*|}
  plugin_load optional verbs_library="$lib" memlock_min=1M on_error=warn
  run_user srun --mr-check=mr bash -c "$task"
  expect_eq "$k, on_error=warn: the task runs" "$OUT" "task-ran"
  expect_contains "$k, on_error=warn: ERROR verdict" "$ERR" "mrcheck: mr_host: ERROR: cannot load the verbs library"
  expect_contains "$k, on_error=warn: names the cause" "$ERR" "$why"
  plugin_load required verbs_library="$lib" memlock_min=1M on_error=fail
  run_user srun --mr-check=mr bash -c "$task"
  [[ $RC != 0 ]] && e2e_pass "$k, on_error=fail: the step fails" || e2e_fail "$k, on_error=fail: rc 0"
  expect_eq "$k, on_error=fail: the task never ran" "$OUT" ""
  expect_contains "$k, on_error=fail: the line says why" "$ERR" "cannot load the verbs library"
done

# --- the library hangs or crashes: a FAIL (NCCL's init would hang or crash the same way), per on_fail ----------
plugin_load required verbs_library="$fake" memlock_min=1M probe_timeout=3s on_fail=fail
start=$SECONDS
run_user srun --mr-check=mr --export="ALL,$small,MRCHECK_FAKE_IBV_INJECT=open_device=hang" bash -c "$task"
# The probe isolates its calls in a child of its own, killed a tenth (at least 1 s) before probe_timeout: the
# verdict names the call it hung in.
expect_contains "open_device hang: killed before probe_timeout" "$ERR" "mrcheck: mr_host: FAIL: the registration probe timed out after 2.0 s and was killed while calling ibv_open_device"
[[ $RC != 0 && -z $OUT ]] && e2e_pass "open_device hang, on_fail=fail: the step stops" || e2e_fail "open_device hang: rc $RC, out '$OUT'"
((SECONDS - start < 30)) && e2e_pass "open_device hang: bounded ($((SECONDS - start)) s)" || e2e_fail "open_device hang took $((SECONDS - start)) s"
run_user srun --mr-check=mr --export="ALL,$small,MRCHECK_FAKE_IBV_INJECT=alloc_pd=crash" bash -c "$task"
expect_contains "alloc_pd crash: reported" "$ERR" "mrcheck: mr_host: FAIL: the registration probe killed by SIGSEGV while calling ibv_alloc_pd"
[[ $RC != 0 && -z $OUT ]] && e2e_pass "alloc_pd crash, on_fail=fail: the step stops" || e2e_fail "alloc_pd crash: rc $RC, out '$OUT'"
plugin_load optional verbs_library="$fake" memlock_min=1M probe_timeout=3s on_fail=warn
run_user srun --mr-check=mr --export="ALL,$small,MRCHECK_FAKE_IBV_INJECT=alloc_pd=crash" bash -c "$task"
expect_eq "alloc_pd crash, on_fail=warn: the task runs" "$OUT" "task-ran"
expect_contains "alloc_pd crash, on_fail=warn: WARN verdict" "$ERR" "mrcheck: mr_host: WARN: the registration probe killed by SIGSEGV"

# --- the probe child killed from outside while it registers -----------------------------------------------------
plugin_load optional verbs_library="$fake" memlock_min=1M probe_timeout=60s on_fail=warn
o=$(mktemp) e=$(mktemp)
start=$SECONDS
as_user srun --mr-check=mr --export="ALL,$small,MRCHECK_FAKE_IBV_INJECT=reg_mr_iova2=hang" bash -c "$task" >"$o" 2>"$e" &
srun_pid=$!
probe=""
for _ in $(seq 1 200); do
  # The probe run by the plugin, not its isolated child: killing it must take the child with it.
  for p in $(pgrep -u "$E2E_USER" -f "$E2E_INSTALL/bin/mrcheck probe mr" || true); do
    grep -q -- --isolated-child "/proc/$p/cmdline" 2>/dev/null && continue
    hard_ours "$p" && probe=$p
  done
  [[ -n $probe ]] && break
  sleep 0.1
done
if [[ -n $probe ]]; then
  sleep 0.5  # let it reach the hanging registration
  kill -KILL "$probe"
  e2e_pass "probe child pid $probe found and killed"
else
  e2e_fail "no probe child appeared"
fi
wait "$srun_pid" && RC=0 || RC=$?
OUT=$(cat "$o") ERR=$(cat "$e")
rm -f "$o" "$e"
expect_contains "killed probe: a verdict naming the signal" "$ERR" "mrcheck: mr_host: WARN: probe mr ($E2E_INSTALL/bin/mrcheck) killed by SIGKILL"
expect_eq "killed probe, on_fail=warn: the task runs" "$OUT" "task-ran"
((SECONDS - start < 30)) && e2e_pass "killed probe: the step ended in $((SECONDS - start)) s, not at the 60 s timeout" ||
  e2e_fail "killed probe: $((SECONDS - start)) s"

# --- afterwards: nothing left behind, a normal step runs -----------------------------------------------------
plugin_load optional verbs_library="$fake" memlock_min=1M
run_user srun --mr-check=mr,verbose --export="ALL,$small" bash -c "$task"
expect_eq "a later step runs" "$OUT" "task-ran"
expect_contains "a later step gets its verdict" "$ERR" "mrcheck: mr_host: pass: "
sleep 1
expect_eq "no process of the job user left" "$(hard_settled_procs "$E2E_USER" 0)" "0"
expect_eq "no slurmstepd left" "$(hard_settled_stepds 0)" "0"
hard_invariants "after probe faults"
e2e_done
