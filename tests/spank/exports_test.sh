#!/bin/bash
# usage: exports_test.sh PLUGIN.so exports.map [SLURM_VERSION]
# The plugin must export exactly the global: names of the version script - no core, fmt or json symbol that
# could interpose on slurmstepd, srun or another site plugin. slurm_spank_init_failure_mode exists only in a
# build for Slurm 25.05 or later (spank/shim.cpp), and must be there in such a build.
set -euo pipefail
so=$1
map=$2
slurm=${3:-}
want=$(sed -n '/global:/,/local:/p' "$map" | grep -oE '^[[:space:]]*[A-Za-z_][A-Za-z0-9_]*;' | tr -d ' ;' | sort)
if [[ $slurm =~ ^([0-9]+)\.([0-9]+) ]] && ((BASH_REMATCH[1] * 100 + 10#${BASH_REMATCH[2]} < 2505)); then
  want=$(grep -vx slurm_spank_init_failure_mode <<<"$want")
fi
have=$(nm -D --defined-only "$so" | awk '{print $3}' | sed 's/@.*//' | grep -v '^$' | sort)
if [[ "$want" != "$have" ]]; then
  echo "mrcheck: exports_test: FAIL: exported symbols differ from $map" >&2
  diff <(echo "$want") <(echo "$have") >&2 || true
  exit 1
fi
if [[ $(basename "$so") == spank_mrcheck.so ]]; then
  for sym in plugin_name plugin_type plugin_version slurm_spank_init slurm_spank_task_init; do
    grep -qx "$sym" <<<"$have" || { echo "mrcheck: exports_test: FAIL: $sym not exported" >&2; exit 1; }
  done
fi
# No second copy of libslurm: spank_* and slurm_* must come from the host process.
if ldd "$so" | grep -q 'libslurm'; then
  echo "mrcheck: exports_test: FAIL: $so links libslurm" >&2
  exit 1
fi
echo "mrcheck: exports_test: ok: $(wc -l <<<"$have") symbols, exactly the version script"
