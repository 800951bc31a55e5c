#!/bin/bash
# A spank_mrcheck.so built for another Slurm release is refused by this one, with the lines README.md quotes
# (Slurm's own "Incompatible Slurm plugin ... version (X)" and "Incompatible plugin version"): an `optional`
# drop-in leaves srun running without --mr-check, a `required` one stops srun before anything is launched.
# Needs MRCHECK_FOREIGN_PLUGIN, a plugin built for another release (scripts/slurm-release.sh passes the one
# the previous leg built; docs/slurm-releases.md); skips without it.
source "$(dirname "$0")/lib.sh"
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
[[ -n ${MRCHECK_FOREIGN_PLUGIN:-} ]] || e2e_skip "MRCHECK_FOREIGN_PLUGIN is not set (a plugin built for another Slurm release)"
[[ -f $MRCHECK_FOREIGN_PLUGIN ]] || e2e_skip "MRCHECK_FOREIGN_PLUGIN=$MRCHECK_FOREIGN_PLUGIN does not exist"
plugin_setup

# What the foreign plugin was built for, as its plugin_version says (SLURM_VERSION_NUMBER: 0xMMmmuu).
built_for=$("$E2E_INSTALL/bin/mrcheck" --version | sed -n 's/.*built against Slurm \([0-9.]*\)).*/\1/p')
foreign_dir=$MRCHECK_SLURM_DIR/install/lib/foreign
mkdir -p "$foreign_dir"
install -m 0755 "$MRCHECK_FOREIGN_PLUGIN" "$foreign_dir/spank_mrcheck.so"
running=$(srun --version | awk '{print $2}')
e2e_log "this Slurm: $running; mrcheck here built for $built_for; foreign plugin: $MRCHECK_FOREIGN_PLUGIN"

for mode in optional required; do
  echo "$mode $foreign_dir/spank_mrcheck.so" >"$PLUGIN_DROPIN"
  run_user srun -n1 bash -c 'echo RAN'
  show_run "mismatch: $mode"
  expect_contains "mismatch: $mode: Slurm names the plugin as incompatible" "$ERR" \
    "Incompatible Slurm plugin $foreign_dir/spank_mrcheck.so version ("
  if [[ $mode == optional ]]; then
    expect_eq "mismatch: optional: the step still runs" "$OUT" "RAN"
    run_user srun -n1 --mr-check bash -c 'echo RAN'
    show_run "mismatch: optional, --mr-check"
    expect_contains "mismatch: optional: --mr-check is unknown to srun" "$ERR" "unrecognized option '--mr-check'"
    expect_not_contains "mismatch: optional: nothing launched with --mr-check" "$OUT" "RAN"
  else
    expect_not_contains "mismatch: required: nothing was launched" "$OUT" "RAN"
    [[ $RC != 0 ]] && e2e_pass "mismatch: required: srun fails" || e2e_fail "mismatch: required: srun fails (rc 0)"
  fi
done

# The plugin built here loads, and its load line in slurmd's log names this release.
rm -f "$PLUGIN_DROPIN"
plugin_load optional memlock_min=64K
log=$(ls "$MRCHECK_SLURM_DIR"/log/slurmd-*.log | head -n1)
before=$(wc -l <"$log")
plugin_slurmd_restart
expect_contains "own plugin: slurmd's load line names this release" "$(tail -n +"$before" "$log")" \
  "built against Slurm $built_for, loaded into Slurm $running"
run_user srun -n1 --mr-check=memlock true
show_run "this release's plugin"
expect_eq "own plugin: a checked step runs" "$RC" "0"
e2e_done
