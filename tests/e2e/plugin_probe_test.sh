#!/bin/bash
# --mr-check=mr runs `mrcheck probe mr --json` as the job user, with the job's environment and the task's
# limits, under a timeout; its checks join the report. A helper that breaks is a verdict (on_error), never a
# hung or crashed step.
source "$(dirname "$0")/lib.sh"
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
plugin_setup
plugin_load optional memlock_min=64K
run_user srun --mr-check=mr,verbose true
show_run "probe: real helper"
expect_eq "probe: rc" "$RC" "0"
expect_contains "probe: the probe's own checks are reported" "$ERR" "mrcheck: mr_host: "

# --mr-check=rdma: the data-plane probe as the job user, here on the fake libibverbs' loopback data path (its
# variables reach the probe in a test build only, src/step/plugin_engine.cpp); a port DOWN ends the task.
fake_verbs=$MRCHECK_SLURM_DIR/install/lib/fake/libibverbs.so.1  # staged by e2e_stage (tests/e2e/lib.sh)
if [[ -f $fake_verbs ]]; then
  plugin_load optional memlock_min=64K verbs_library=$fake_verbs
  run_user srun --mr-check=rdma,verbose --export=ALL,MRCHECK_FAKE_IBV_DATA=loopback true
  show_run "probe: rdma on the fake's loopback"
  expect_eq "probe: rdma: rc" "$RC" "0"
  expect_contains "probe: rdma: data_plane passes" "$ERR" "mrcheck: data_plane: pass: RC loopback on 1 port(s)"
  run_user srun --mr-check=rdma --export=ALL,MRCHECK_FAKE_IBV_DATA=loopback,MRCHECK_FAKE_IBV_PORT=down bash -c 'echo ran'
  show_run "probe: rdma, port down"
  expect_eq "probe: rdma, port down: the task did not run" "$OUT" ""
  expect_contains "probe: rdma, port down: named" "$ERR" "mrcheck: data_plane: FAIL: mlx5_0 port 1: port: mlx5_0 port 1 is DOWN"
  plugin_load optional memlock_min=64K
fi

# A helper that prints no report: an ERROR line (the checker broke; on_error=warn lets the task run).
bad=$MRCHECK_SLURM_DIR/install/bin/plugin_probe_bad.sh
printf '#!/bin/sh\necho "not json"\nexit 1\n' >"$bad"
chmod 755 "$bad"
echo "optional $MRCHECK_SLURM_DIR/install/lib/slurm/spank_mrcheck.so helper=$bad memlock_min=64K" >"$PLUGIN_DROPIN"
run_user srun --mr-check=mr bash -c 'echo ran'
show_run "probe: broken helper"
expect_eq "probe: the task still ran" "$OUT" "ran"
expect_contains "probe: an error verdict, reported" "$ERR" "mrcheck: mr_host: ERROR: probe mr (exit 1) printed no valid report"

# A helper that hangs: killed at probe_timeout. A registration that hangs would hang NCCL too, so it is a
# FAIL: on_fail=fail stops the task (also with an optional plugin), on_fail=warn lets it run.
printf '#!/bin/sh\nsleep 60\n' >"$bad"
echo "optional $MRCHECK_SLURM_DIR/install/lib/slurm/spank_mrcheck.so helper=$bad memlock_min=64K probe_timeout=1s" >"$PLUGIN_DROPIN"
start=$SECONDS
run_user srun --mr-check=mr bash -c 'echo ran'
show_run "probe: hanging helper"
expect_eq "probe: hang, on_fail=fail: the task did not run" "$OUT" ""
[[ $RC != 0 ]] && e2e_pass "probe: hang, on_fail=fail: srun fails" || e2e_fail "probe: hang, on_fail=fail: srun exited 0"
expect_contains "probe: timeout is a verdict" "$ERR" "mrcheck: mr_host: FAIL: probe mr ($bad) timed out after 1.0 s and was killed"
((SECONDS - start < 30)) && e2e_pass "probe: bounded" || e2e_fail "probe: took $((SECONDS - start)) s"
echo "optional $MRCHECK_SLURM_DIR/install/lib/slurm/spank_mrcheck.so helper=$bad memlock_min=64K probe_timeout=1s on_fail=warn" >"$PLUGIN_DROPIN"
run_user srun --mr-check=mr bash -c 'echo ran'
show_run "probe: hanging helper, on_fail=warn"
expect_eq "probe: hang, on_fail=warn: the task still ran" "$OUT" "ran"
expect_contains "probe: hang, on_fail=warn: the verdict is still printed" "$ERR" "timed out"
rm -f "$bad"
e2e_done
