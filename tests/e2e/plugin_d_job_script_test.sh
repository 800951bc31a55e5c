#!/bin/bash
# Plugin scenario d: a batch script runs `ulimit -S -l 64` then `srun --mr-check` -> fail naming the job
# script. Also: `sbatch --mr-check` carries the request to an srun inside the script that has no option.
source "$(dirname "$0")/lib.sh"
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
plugin_setup
((PLUGIN_HARD_KIB >= 8192)) || e2e_skip "hard memlock here is ${PLUGIN_HARD_KIB} KiB, below the 8 MiB policy"
plugin_load required memlock_min=8M
work=$MRCHECK_SLURM_WORK/plugin_d.$$
mkdir -p "$work"
chmod 777 "$work"

cat >"$work/job.sh" <<'SCRIPT'
#!/bin/bash
ulimit -S -l 64
srun --mr-check=memlock bash -c 'echo ran'
echo "srun rc=$?"
SCRIPT
chmod 755 "$work/job.sh"
run_user sbatch -W -o "$work/d.out" "$work/job.sh"
out=$(cat "$work/d.out")
printf 'd: job output\n%s\n' "$out" >&2
expect_contains "d: names the job script" "$out" "lowered at the job script: the job script (slurm_script pid "
expect_contains "d: says 64 KiB" "$out" "set soft 64 KiB before srun"
expect_contains "d: the inner step failed" "$out" "srun rc=1"
expect_not_contains "d: the inner task never ran" "$out" "ran"$'\n'

cat >"$work/job2.sh" <<'SCRIPT'
#!/bin/bash
ulimit -S -l 64
srun bash -c 'echo inner ran'
echo "srun rc=$?"
SCRIPT
chmod 755 "$work/job2.sh"
run_user sbatch -W --mr-check=memlock,verbose -o "$work/d2.out" "$work/job2.sh"
out=$(cat "$work/d2.out")
printf 'd: sbatch --mr-check output\n%s\n' "$out" >&2
expect_contains "d: sbatch --mr-check reaches the inner srun" "$out" "lowered at the job script"
expect_contains "d: the batch step itself is checked too" "$out" "mrcheck: memlock: chain on"
expect_contains "d: the batch step's own ulimit is seen after it started" "$out" "the job script lowered its own memlock after it started: soft 64 KiB"
rm -rf "$work"
e2e_done
