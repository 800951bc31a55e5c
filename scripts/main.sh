#!/bin/bash
# mrcheck's main job on a fresh Debian 12 machine, as root: install dependencies, build, start a private
# one-node Slurm (munge, MariaDB, slurmdbd, slurmctld, slurmd; tests/slurm/), load the SPANK plugin into it,
# then show what mrcheck says about this node and about a job step:
#   1. `mrcheck report`            every fact behind an ibv_reg_mr failure, with a verdict per check
#   2. `srun --mr-check ...`       a healthy step (the plugin enforces the site minimum), as an ordinary user
#   3. `ulimit -S -l 64; srun ...` the classic failure: the login shell's limit propagated to the task,
#                                  caught before the task starts, with the hop and the fix in one line
# Leaves the local Slurm running (stop it with tests/slurm/slurm-down.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
src=$(pwd)
build=${MRCHECK_BUILD_DIR:-$src/build}

if [[ $(id -u) -ne 0 ]]; then
  echo "main.sh: run as root (it installs packages and starts a private Slurm)" >&2
  exit 2
fi
bash scripts/install-deps.sh >&2
# shellcheck source=cmake-args.sh
source scripts/cmake-args.sh
cmake -S . -B "$build" -G Ninja "${main_sh_cmake_args[@]}" >/dev/null
ninja -C "$build" >&2

export MRCHECK_BUILD_DIR=$build MRCHECK_SOURCE_DIR=$src
# shellcheck source=../tests/e2e/lib.sh
source tests/e2e/lib.sh
set +e
e2e_slurm_up
e2e_stage

echo
echo "== mrcheck report (this node)"
"$E2E_INSTALL/bin/mrcheck" report

if [[ -f $E2E_INSTALL/lib/slurm/spank_mrcheck.so ]]; then
  # Site policy for the demo: at least 8 MiB locked memory (the most this machine's hard limit allows),
  # enforced by raising the task's limit before it starts.
  policy=$MRCHECK_SLURM_DIR/mrcheck-demo.conf
  printf 'memlock_min=8M\nenforce=yes\non_fail=fail\n' >"$policy"
  # `required`: only a required plugin's task_init failure ends the task (Slurm ignores an optional one's).
  E2E_PLUGIN_KIND=required e2e_plugin "config=$policy"

  echo
  echo "== srun --mr-check bash -c 'ulimit -l'   (as $E2E_USER; the plugin enforces memlock_min=8M)"
  as_user bash -c "ulimit -S -l 64; srun -N1 -n1 --mr-check bash -c 'echo task memlock: \$(ulimit -l) KiB'"

  echo
  echo "== the same step without enforcement: the login shell's 64 KiB would reach the task; mrcheck stops it"
  printf 'memlock_min=8M\nenforce=no\non_fail=fail\n' >"$policy"
  as_user bash -c "ulimit -S -l 64; srun -N1 -n1 --mr-check bash -c 'echo task memlock: \$(ulimit -l) KiB'"
  echo "(srun exit status: $?)"
  e2e_plugin none
else
  echo "main.sh: the SPANK plugin was not built (no Slurm headers?)" >&2
  exit 1
fi
