#!/bin/bash
# What the descendants watcher (docs/containers.md, "Whatever starts them") costs a short step: the median wall
# time of `srun --mr-check=mr true` as the job user over REPS runs (default 15), on the private cluster of
# tests/slurm (MRCHECK_SLURM_DIR, MRCHECK_BUILD_DIR as for the e2e tests). Run it once with the build to measure
# and once with a build without the watcher; bench/probe/README.md has the figures.
#   bench/probe/watcher.sh [REPS]
source "$(dirname "$0")/../../tests/e2e/lib.sh"
source "$MRCHECK_SOURCE_DIR/tests/spank/e2e_helpers.sh"
reps=${1:-15}
[[ $reps =~ ^[1-9][0-9]*$ ]] || { echo "watcher.sh: REPS must be a positive number, not '$reps'" >&2; exit 2; }
plugin_setup
plugin_load optional
as_user srun --mr-check=mr true # warm: the first step of a fresh cluster starts slower
times=()
for ((i = 0; i < reps; i++)); do
  t0=$(date +%s%N)
  as_user srun --mr-check=mr true
  times+=($((($(date +%s%N) - t0) / 1000000)))
done
sorted=$(printf '%s\n' "${times[@]}" | sort -n)
median=$(sed -n "$(((reps + 1) / 2))p" <<<"$sorted")
echo "times (ms): ${times[*]}"
echo "srun --mr-check=mr true: median ${median} ms over $reps runs (min $(head -1 <<<"$sorted"), max $(tail -1 <<<"$sorted"))"
