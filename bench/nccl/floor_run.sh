#!/bin/bash
# One batch on the GPU machine (device `run`, repo root): `mrcheck probe nccl --mode local-pair` against, in one
# invocation and interleaved, the raw two-process program with and without ncclCommDestroy (minimal_pair.cpp) and
# the floor (floor.cpp: one CUDA context, one single-rank communicator), two floors at once, and the pair with
# CUDA's default work queues. Then where the pair's time goes: each rank's timeline and phases from the probe's
# JSON, NCCL's own "Init timings" line per rank and the gaps in its timestamped log. Everything lands in
# $OUT/floor.txt. Usage: [MRCHECK_BIN=path/to/mrcheck] [MRCHECK_ALT_BIN=another/mrcheck] bash bench/nccl/floor_run.sh
# [RUNS]. MRCHECK_ALT_BIN: a build of a change being weighed (say, the tree with a patch applied on the GPU machine),
# run as `alt` in the same rounds, so the change is judged against the pair of the same lease.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/../device-cmake.sh"
RUNS=${1:-9}
OUT=${OUT:-/tmp/floor-out}
W=/tmp/floorrun
mkdir -p "$OUT" "$W"
S=$OUT/floor.txt
log() { echo "$*" | tee -a "$S"; }
now() { date +%s%N; }
ms_since() { echo $((($(now) - $1) / 1000000)); }
log "== machine: $(nvidia-smi -L 2>&1 | head -1); $(nvidia-smi -q 2>/dev/null | grep -m1 -i 'Persistence Mode' | tr -s ' ')"
# MRCHECK_BIN: a mrcheck this call already built (tests/gpu/device_run.sh's), so one lease builds it once.
M=${MRCHECK_BIN:-/tmp/b/cli/mrcheck}
if [[ -z ${MRCHECK_BIN:-} ]]; then
  cmake -S . -B /tmp/b -G Ninja -DMRCHECK_BUILD_TESTS=OFF "${device_cmake_args[@]}" >"$W/cmake.log" 2>&1 && ninja -C /tmp/b mrcheck >"$W/ninja.log" 2>&1
  log "mrcheck build rc=$?"
fi
cc="g++ -O2 -std=c++17 -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64"
$cc bench/nccl/minimal_pair.cpp -lcudart -lnccl -o "$W/minimal" && $cc bench/nccl/floor.cpp -lcudart -lnccl -o "$W/floor"
log "baselines build rc=$?; their NCCL: $(ldd "$W/floor" | grep -o '/[^ ]*libnccl[^ ]*' | xargs -r readlink -f)"
# floor2: two floors at once, each its own process, CUDA context and single-rank communicator on the one GPU: what
# any two processes pay on it, with nothing between them (no bootstrap, no connection, no transfer).
printf '#!/bin/bash\n"%s" & "%s"; r=$?; wait $! || r=1; exit $r\n' "$W/floor" "$W/floor" >"$W/floor2"
chmod +x "$W/floor2"
declare -A prog=([minimal]="$W/minimal" [nodestroy]="$W/minimal nodestroy" [floor]="$W/floor" [floor2]="$W/floor2"
  [pair]="$M probe nccl --mode local-pair --json"
  [pair8]="env CUDA_DEVICE_MAX_CONNECTIONS=8 $M probe nccl --mode local-pair --json"
  [nodestroy1]="env CUDA_DEVICE_MAX_CONNECTIONS=1 $W/minimal nodestroy")
# The pair gives its ranks one hardware work queue per CUDA context (src/nccl/pair.cpp) unless the job sets its
# own: pair8 is the pair with CUDA's default of 8, as before that cut; nodestroy1 the raw program given the same.
names=(minimal nodestroy nodestroy1 floor floor2 pair pair8)
if [[ -n ${MRCHECK_ALT_BIN:-} ]]; then
  prog[alt]="$MRCHECK_ALT_BIN probe nccl --mode local-pair --json"
  names+=(alt)
fi
for n in "${names[@]}"; do ${prog[$n]} >/dev/null 2>&1; done # warm-up
log "== $RUNS interleaved runs (wall ms)"
for i in $(seq 1 "$RUNS"); do
  line="run $i"
  for n in "${names[@]}"; do
    t=$(now); ${prog[$n]} >"$W/$n.$i" 2>&1; rc=$?; line+=" | $n $(ms_since "$t") rc=$rc"
  done
  log "$line"
done
python3 - "$S" <<'PY' | tee -a "$S"
import re, statistics, sys
rows = [l for l in open(sys.argv[1]) if l.startswith("run ")]
ms = {}
for l in rows:
    for name, v in re.findall(r"\| (\w+) (\d+) rc=", l):
        ms.setdefault(name, []).append(int(v))
med = {k: statistics.median(v) for k, v in ms.items()}
print("medians ms:", {k: int(v) for k, v in med.items()})
print("pair/nodestroy %.2fx  pair/minimal %.2fx  pair/floor %.2fx  pair/floor2 %.2fx  nodestroy/floor2 %.2fx" %
      (med["pair"] / med["nodestroy"], med["pair"] / med["minimal"], med["pair"] / med["floor"],
       med["pair"] / med["floor2"], med["nodestroy"] / med["floor2"]))
print("pair/pair8 %.2fx  pair/nodestroy1 %.2fx" % (med["pair"] / med["pair8"], med["pair"] / med["nodestroy1"]))
if "alt" in med:
    print("alt/pair %.2fx  alt/nodestroy %.2fx  alt/floor %.2fx  alt/floor2 %.2fx" %
          (med["alt"] / med["pair"], med["alt"] / med["nodestroy"], med["alt"] / med["floor"], med["alt"] / med["floor2"]))
PY
log "== where the pair's time goes: 3 runs (and 2 of alt), the orchestrator's timeline of each rank (ms since the"
log "   pair began), the ranks' phases, NCCL's Init timings per rank, and the gaps over 15 ms in each rank's NCCL log"
where=("pair $M" "pair $M" "pair $M")
[[ -n ${MRCHECK_ALT_BIN:-} ]] && where+=("alt $MRCHECK_ALT_BIN" "alt $MRCHECK_ALT_BIN")
for i in "${!where[@]}"; do
  read -r name bin <<<"${where[$i]}"
  t=$(now)
  NCCL_DEBUG_TIMESTAMP_LEVELS=INFO NCCL_DEBUG_TIMESTAMP_FORMAT='[%s.%3f] ' \
    "$bin" probe nccl --mode local-pair --json --verbose >"$W/where.$i.json" 2>&1
  log "-- run $((i + 1)) ($name): wall $(ms_since "$t") ms"
  python3 - "$W/where.$i.json" <<'PY' | tee -a "$S"
import json, re, sys
j = json.load(open(sys.argv[1]))
print("  verdict:", j["checks"][0]["verdict"], "| pair wall (orchestrator):", j["timings"]["wall_ms"], "ms |",
      j.get("nccl_version"), j.get("nccl_library"))
for t in j["timings"]["nccl_init"]:
    print("  NCCL Init timings rank %d: total %.2f s %s" % (t["rank"], t["total_s"], t["parts_s"]))
for r in j["ranks"]:
    print("  rank %d timeline:" % r["rank"], " ".join("%s %.0f" % (e["event"], e["ms"]) for e in r["timeline"]))
    print("  rank %d phases:" % r["rank"], " ".join("%s %.0f" % (p["phase"], p["ms"]) for p in r["report"]["phases"]))
    prev = None
    for line in r.get("stdout", "").splitlines():
        m = re.match(r"\[(\d+\.\d+)\] (.*)", line)
        if not m:
            continue
        ts = float(m.group(1))
        if prev and ts - prev[0] > 0.015:
            print("    +%4.0f ms after: %s" % ((ts - prev[0]) * 1000, prev[1][:150]))
        prev = (ts, m.group(2))
PY
done
log "== the floor's own NCCL Init timings"
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT "$W/floor" 2>&1 | grep -E 'Init timings' | head -3 | tee -a "$S"
