#!/bin/bash
# What happens after exec reaches the admins' record, and no program name hides it.
# The AdminComment record used to be sent before exec, so a task that lowered its own memlock limit after exec
# got a FAIL line on its stderr while the record said pass; and the post-exec watcher took a change of the comm
# name from "slurmstepd" for exec, so a program named slurmstepd was never watched.
# Asserted: the record of such a step names the post-exec finding (memlock_exec); a program called slurmstepd
# that lowers its limit gets the same FAIL line as any other.
source "$(dirname "$0")/lib.sh"
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
source "$(dirname "$0")/hardening_lib.sh"
plugin_setup
((PLUGIN_HARD_KIB >= 2048)) || e2e_skip "hard memlock here is ${PLUGIN_HARD_KIB} KiB, below the 2 MiB these cases need"
[[ -x $E2E_INSTALL/sbin/mrcheck-prolog ]] || e2e_skip "mrcheck-prolog not built"
hard_snapshot
cd "$MRCHECK_SLURM_WORK"
NODE=$(hard_node)
SPOOL=$MRCHECK_SLURM_DIR/hostile-postexec-spool
rm -rf "$SPOOL" && mkdir -m 0755 "$SPOOL"
work=$(mktemp -d "$MRCHECK_SLURM_WORK/hostile_postexec.XXXXXX")
cp /bin/bash "$work/slurmstepd"
chmod -R a+rX "$work"
trap 'plugin_cleanup; rm -rf "$work" "$SPOOL"' EXIT
ADMIN="admin_comment=yes admin_helper=$E2E_INSTALL/sbin/mrcheck-prolog report_dir=$SPOOL report_timeout=3s"

plugin_load required memlock_min=1M enforce=yes $ADMIN
# 1. The task's own program lowers the limit after exec: its stderr and the record both say so.
run_user srun -J postexec-a-$$ --mr-check=memlock bash -c 'ulimit -S -l 64; sleep 1; echo ran'
# (enforce=yes makes the prediction a pass: any memlock FAIL is the watcher's, worded by when it first saw the
# task: "lowered memlock after exec" or "memlock changed after the plugin".)
expect_contains "lowered after exec: the FAIL line on stderr" "$ERR" "mrcheck: memlock: FAIL: "
hard_admin_comment postexec-a-$$
expect_contains "lowered after exec: the record names it" "$AC" "FAIL memlock_exec"
expect_not_contains "lowered after exec: the record does not say pass only" "$AC" "step 0: pass on 1 node"

# 2. A program named slurmstepd does the same: it is watched like any other.
run_user srun -J postexec-b-$$ --mr-check=memlock "$work/slurmstepd" -c 'ulimit -S -l 64; sleep 1; echo ran'
expect_contains "a program named slurmstepd: the FAIL line on stderr" "$ERR" "mrcheck: memlock: FAIL: "
hard_admin_comment postexec-b-$$
expect_contains "a program named slurmstepd: the record names it" "$AC" "FAIL memlock_exec"

# 3. A task that keeps its limit: the record is a plain pass, sent by the watcher all the same.
run_user srun -J postexec-c-$$ --mr-check=memlock bash -c 'sleep 0.2; echo ran'
expect_eq "unchanged: the task runs" "$OUT" "ran"
hard_admin_comment postexec-c-$$
expect_eq "unchanged: the record" "$AC" "mrcheck: step 0: pass on 1 node"
hard_invariants "after the post-exec cases"
e2e_done
