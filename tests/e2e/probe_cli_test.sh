#!/usr/bin/env bash
# `mrcheck probe mr` end to end against the fake libibverbs.so.1 (tests/fakes), which pins with mlock so the
# real kernel decides ENOMEM/EPERM by the real RLIMIT_MEMLOCK. No Slurm needed: the job user is `mrtest`, the
# task's limit is set with prlimit, as slurmstepd would leave it.
source "$(dirname "$0")/lib.sh"

mrcheck_bin=$MRCHECK_BUILD_DIR/cli/mrcheck
fake=$(find "$MRCHECK_BUILD_DIR" -name 'libibverbs.so.1' -path '*fake*' 2>/dev/null | head -1 || true)
[[ -x $mrcheck_bin ]] || e2e_skip "no $mrcheck_bin (build target mrcheck)"
[[ -n $fake ]] || e2e_skip "no fake libibverbs.so.1 under $MRCHECK_BUILD_DIR (build target fake_ibverbs)"
id "$E2E_USER" >/dev/null 2>&1 || e2e_skip "no user $E2E_USER (tests/slurm/slurm-up.sh creates it)"
command -v python3 >/dev/null || e2e_skip "python3 is needed to read the JSON"

# The build tree may be root-only; stage where the job user can execute.
stage=$(mktemp -d /tmp/mrcheck-probe-e2e.XXXXXX)
trap 'rm -rf "$stage"' EXIT
install -m 0755 "$mrcheck_bin" "$stage/mrcheck"
install -m 0755 "$fake" "$stage/libibverbs.so.1"
chmod 0755 "$stage"
lib=$stage/libibverbs.so.1

# probe_as USER MEMLOCK_BYTES [ENV=VALUE ...] -- ARGS...: prints stdout, sets $rc.
probe_as() {
  local user=$1 limit=$2
  shift 2
  local envs=()
  while (($#)) && [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  set +e
  if [[ $user == root ]]; then
    out=$(env -i PATH=/usr/bin:/bin HOME=/root "${envs[@]}" prlimit --memlock="$limit:$limit" "$stage/mrcheck" probe mr --verbs-library "$lib" "$@" 2>"$stage/err")
  else
    out=$(runuser -u "$user" -- env -i PATH=/usr/bin:/bin HOME="/home/$user" "${envs[@]}" prlimit --memlock="$limit:$limit" "$stage/mrcheck" probe mr --verbs-library "$lib" "$@" 2>"$stage/err")
  fi
  rc=$?
  set -e
}

# jq-like access without jq: json_get EXPR (python expression on `j`).
json_get() { python3 -c "import json,sys; j=json.loads(sys.stdin.read()); print($1)" <<<"$out" 2>/dev/null || echo "<bad json>"; }

# 1. The basic case: 64 KiB soft limit, 4 MiB registration, as the job user -> ENOMEM -> memlock, both numbers.
probe_as "$E2E_USER" 65536 -- --size 4M --json
expect_eq "64 KiB limit: exit 1" "$rc" 1
expect_eq "64 KiB limit: verdict fail" "$(json_get 'j["verdict"]')" fail
expect_eq "64 KiB limit: cause memlock" "$(json_get 'j["probe"]["diagnosis"]["mr_host"]["cause"]')" memlock
expect_eq "64 KiB limit: errno ENOMEM" "$(json_get 'j["probe"]["diagnosis"]["mr_host"]["errno_name"]')" ENOMEM
summary=$(json_get '[c for c in j["checks"] if c["id"]=="mr_host"][0]["summary"]')
expect_contains "64 KiB limit: size in summary" "$summary" "4 MiB"
expect_contains "64 KiB limit: limit in summary" "$summary" "64 KiB"
expect_contains "64 KiB limit: call named" "$summary" "ibv_reg_mr_iova2"
expect_contains "64 KiB limit: a fix" "$(json_get '[c for c in j["checks"] if c["id"]=="mr_host"][0]["hint"]')" "LimitMEMLOCK"

# Text mode: one line per check, the failing one as the CLI contract says.
probe_as "$E2E_USER" 65536 -- --size 4M
expect_contains "text mode: FAIL line" "$out" "mrcheck: mr_host: FAIL: "
expect_eq "text mode: exit 1" "$rc" 1

# 2. The limit raised to 8 MiB: the same registration passes, as the job user.
probe_as "$E2E_USER" 8388608 -- --size 4M --json
expect_eq "8 MiB limit: exit 0" "$rc" 0
expect_eq "8 MiB limit: mr_host pass" "$(json_get '[c["verdict"] for c in j["checks"] if c["id"]=="mr_host"][0]')" pass
expect_eq "8 MiB limit: dmabuf pass (fd -1 -> EBADF)" "$(json_get '[c["verdict"] for c in j["checks"] if c["id"]=="dmabuf"][0]')" pass

# The default size is NCCL's estimate (73.5 MiB with defaults), shown with its inputs; over 8 MiB it fails.
probe_as "$E2E_USER" 8388608 -- --json
expect_eq "estimate: flagged as estimate" "$(json_get 'j["probe"]["estimate"]["is_estimate"]')" True
expect_eq "estimate: default size" "$(json_get 'j["probe"]["size"]')" 77070336
expect_eq "estimate over 8 MiB: cause memlock" "$(json_get 'j["probe"]["diagnosis"]["mr_host"]["cause"]')" memlock
probe_as "$E2E_USER" 8388608 NCCL_BUFFSIZE=65536 NCCL_LL128_BUFFSIZE=65536 NCCL_LL_BUFFSIZE=65536 NCCL_MAX_NCHANNELS=2 -- --json
expect_eq "estimate follows NCCL_* env: size" "$(json_get 'j["probe"]["size"]')" $((2 * 2 * 3 * 65536))
expect_eq "estimate follows NCCL_* env: pass" "$rc" 0

# 3. As root: passes (CAP_IPC_LOCK) and says that proves nothing about memlock.
probe_as root 65536 -- --size 4M
expect_eq "root: exit 0" "$rc" 0
expect_contains "root: memlock not tested" "$out" "NOT tested"

# 4. Each injected errno -> its cause.
check_cause() {  # what inject expected_cause [check]
  local what=$1 inject=$2 want=$3 check=${4:-mr_host}
  probe_as "$E2E_USER" 8388608 MRCHECK_FAKE_IBV_INJECT="$inject" -- --size 1M --json
  local got
  got=$(json_get "j['probe']['diagnosis'].get('$check',{}).get('cause','none')")
  if [[ " $want " == *" $got "* ]]; then e2e_pass "$what: cause $got"; else e2e_fail "$what: cause $got, want one of [$want]: $out"; fi
}
check_cause "injected EPERM" reg_mr_iova2=EPERM capability
check_cause "injected ENOMEM under an adequate limit" reg_mr_iova2=ENOMEM "pinning_resources memlock"
# EINVAL: a stack mismatch when the node shows one, else unknown pointing at the stack check - never memlock.
check_cause "injected EINVAL" reg_mr_iova2=EINVAL "rdma_stack_mismatch unknown"
check_cause "injected EFAULT on host memory" reg_mr_iova2=EFAULT "unknown gpu_peer_memory"
check_cause "injected EOPNOTSUPP on the DMA-BUF probe" reg_dmabuf_mr=EOPNOTSUPP dmabuf_unsupported dmabuf
check_cause "injected EPROTONOSUPPORT on the DMA-BUF probe" reg_dmabuf_mr=EPROTONOSUPPORT dmabuf_unsupported dmabuf

# Relaxed ordering off -> plain ibv_reg_mr, as NCCL does; the fake's call log shows flags and iova.
mkdir -m 1777 "$stage/logs"  # the job user writes the fake's call log
log=$stage/logs/calls.log
probe_as "$E2E_USER" 8388608 MRCHECK_FAKE_IBV_LOG="$log" -- --size 1M
expect_contains "call log: iova2 with RO flags (0x10000f)" "$(grep 'call=ibv_reg_mr_iova2' "$log" || true)" "access=0x10000f"
line=$(grep 'call=ibv_reg_mr_iova2' "$log" | head -1 || true)
addr=$(sed -n 's/.* addr=\(0x[0-9a-f]*\) .*/\1/p' <<<"$line")
expect_contains "call log: iova = addr" "$line" "iova=$addr "
expect_contains "call log: DMA-BUF probe with fd -1" "$(grep 'call=ibv_reg_dmabuf_mr' "$log" || true)" "fd=-1"
expect_eq "call log: every MR deregistered" "$(grep -c 'call=ibv_dereg_mr' "$log")" "$(grep -c 'call=ibv_reg_mr_iova2.*result=ok' "$log")"
rm -f "$log"
probe_as "$E2E_USER" 8388608 MRCHECK_FAKE_IBV_LOG="$log" NCCL_IB_PCI_RELAXED_ORDERING=0 -- --size 1M
expect_contains "RO off: ibv_reg_mr without RO (0xf)" "$(grep 'call=ibv_reg_mr ' "$log" || true)" "access=0xf "

# 5. HCA choice: NCCL_IB_HCA honoured; no usable device -> skip with the cause.
probe_as "$E2E_USER" 8388608 MRCHECK_FAKE_IBV_DEVICES=mlx5_0,mlx5_1 NCCL_IB_HCA==mlx5_1 -- --size 1M --json
expect_eq "NCCL_IB_HCA==mlx5_1: only mlx5_1 probed" "$(json_get '",".join(h["device"] for h in j["probe"]["hcas"])')" mlx5_1
probe_as "$E2E_USER" 8388608 MRCHECK_FAKE_IBV_DEVICES= -- --json
expect_eq "no device: exit 3, nothing was tested" "$rc" 3
expect_eq "no device: skip" "$(json_get '[c["verdict"] for c in j["checks"] if c["id"]=="mr_host"][0]')" skip
expect_eq "no device: the report's verdict is skip, not pass" "$(json_get 'j["verdict"]')" skip
expect_eq "no device: cause" "$(json_get 'j["probe"]["diagnosis"]["mr_host"]["cause"]')" no_rdma_device
# --gpu with no device: CUDA is not set up at all (bench/nccl/README.md: ~280 ms for nothing), and it says so.
probe_as "$E2E_USER" 8388608 MRCHECK_FAKE_IBV_DEVICES= -- --gpu --json
expect_eq "no device, --gpu: exit 3" "$rc" 3
expect_eq "no device, --gpu: mr_gpu skipped before CUDA" \
  "$(json_get '[c["summary"] for c in j["checks"] if c["id"]=="mr_gpu"][0]')" \
  "no RDMA device: GPU memory was not set up (nothing to register it with)"

# 6. A registration that hangs is killed at --timeout; a crash is reported - both as verdicts, with the call.
start=$(date +%s)
probe_as "$E2E_USER" 8388608 MRCHECK_FAKE_IBV_INJECT=reg_mr_iova2=hang -- --size 1M --timeout 3s --json
elapsed=$(($(date +%s) - start))
expect_eq "hang: exit 1" "$rc" 1
expect_contains "hang: timed out" "$(json_get 'j["checks"][0]["summary"]')" "timed out"
expect_contains "hang: names the call" "$(json_get 'j["checks"][0]["summary"]')" "ibv_reg_mr_iova2"
if ((elapsed <= 10)); then e2e_pass "hang: killed in ${elapsed}s"; else e2e_fail "hang: took ${elapsed}s"; fi
probe_as "$E2E_USER" 8388608 MRCHECK_FAKE_IBV_INJECT=reg_mr_iova2=crash -- --size 1M --timeout 20s
expect_eq "crash: exit 1" "$rc" 1
expect_contains "crash: reported" "$out" "mrcheck: mr_host: FAIL: the registration probe killed by SIG"

# Without --timeout the probe is still isolated: a crash is a verdict (not exit 139), and a hang ends at
# the config's probe_timeout less a tenth (at least 1 s): 3s -> 2 s.
probe_as "$E2E_USER" 8388608 MRCHECK_FAKE_IBV_INJECT=alloc_pd=crash -- --size 1M --json
expect_eq "crash without --timeout: exit 1" "$rc" 1
expect_contains "crash without --timeout: a verdict" "$(json_get 'j["checks"][0]["summary"]')" "killed by SIG"
expect_eq "crash without --timeout: isolated" "$(json_get 'j["probe"]["isolated"]')" True
printf 'probe_timeout=3s\n' >"$stage/short.conf"
chmod 0644 "$stage/short.conf"
start=$(date +%s)
probe_as "$E2E_USER" 8388608 MRCHECK_FAKE_IBV_INJECT=reg_mr_iova2=hang -- --size 1M --config "$stage/short.conf" --json
elapsed=$(($(date +%s) - start))
expect_eq "hang without --timeout: exit 1" "$rc" 1
expect_contains "hang without --timeout: probe_timeout" "$(json_get 'j["checks"][0]["summary"]')" "timed out after 2"
if ((elapsed <= 10)); then e2e_pass "hang without --timeout: killed in ${elapsed}s"; else e2e_fail "hang without --timeout: took ${elapsed}s"; fi

# 7. Usage errors are exit 2.
probe_as "$E2E_USER" 8388608 -- --size banana
expect_eq "bad --size: exit 2" "$rc" 2

e2e_done
