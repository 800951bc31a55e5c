#!/bin/bash
# The job's NCCL (docs/job-nccl.md) on the GPU machine, one batch: which NCCLs are there and which one a torch
# process maps; what `mrcheck probe nccl` finds as the job's NCCL and runs with; local-pair speed against the raw
# two-process program (bench/nccl/minimal_pair.cpp), interleaved in the same invocation. Writes $OUT/job_nccl.txt.
# Usage (repo root): bash bench/nccl/job_nccl_run.sh [RUNS]
set -u
. "$(dirname "${BASH_SOURCE[0]}")/../device-cmake.sh"
RUNS=${1:-7}
OUT=${OUT:-/tmp/job-nccl-out}; mkdir -p "$OUT"; S=$OUT/job_nccl.txt
exec > >(tee -a "$S") 2>&1
now() { date +%s%N; }
ms() { echo $((($(now) - $1) / 1000000)); }
echo "== machine"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; uname -r
ls /sys/class/infiniband 2>&1 | head -2; lsmod | grep -E 'peermem' || echo "no nvidia_peermem module loaded"
echo "== torch and its NCCL"
python3 -c 'import torch; print("torch", torch.__version__, "torch.version.nccl", torch.version.nccl, torch.__file__)'
WHEEL=$(python3 -c 'import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0] + "/lib/libnccl.so.2")' 2>/dev/null)
echo "wheel NCCL: $WHEEL"; ls -la "$WHEEL" 2>&1; find / -xdev -name 'libnccl*.so*' 2>/dev/null | grep -v '^/proc' | head
cat > /tmp/maps.py <<'PY'
import torch, torch.cuda.nccl as n
print("  torch.cuda.nccl.version()", n.version(), "maps:", sorted({l.split()[-1] for l in open("/proc/self/maps") if "libnccl" in l}))
PY
python3 /tmp/maps.py
D=$(mktemp -d); ln -s "$(ldconfig -p | awk '/libnccl.so.2 /{print $NF; exit}')" "$D/libnccl.so.2"
echo "-- with LD_LIBRARY_PATH=$D (-> the system NCCL)"; LD_LIBRARY_PATH=$D python3 /tmp/maps.py
echo "== build"
t=$(now); cmake -S . -B /tmp/b -G Ninja -DMRCHECK_BUILD_TESTS=OFF "${device_cmake_args[@]}" -DMRCHECK_BUILD_SPANK=OFF >/tmp/cmake.log 2>&1 &&
  ninja -C /tmp/b mrcheck >/tmp/ninja.log 2>&1; echo "mrcheck build rc=$? $(ms $t) ms"; tail -3 /tmp/ninja.log
g++ -O2 -std=c++17 bench/nccl/minimal_pair.cpp -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcudart -lnccl \
  -Wl,-rpath,/usr/local/cuda/lib64 -o /tmp/minimal_pair; echo "minimal_pair build rc=$?"
M=/tmp/b/cli/mrcheck
echo "== mrcheck probe nccl (by hand: the job's NCCL from this shell: python3 on PATH)"
$M probe nccl --mode local-pair --verbose 2>/dev/null | grep -v '^mrcheck: nccl_pair: rank' | head -20
$M probe nccl --mode local-pair --json > /tmp/j.json 2>&1; python3 -c '
import json; j=json.load(open("/tmp/j.json")); print("verdict", j["verdict"], "nccl_version", j.get("nccl_version"))
print(json.dumps(j["job_nccl"], indent=1)); print([ (r["rank"], r.get("report",{}).get("nccl_library"), r.get("report",{}).get("nccl_version")) for r in j.get("ranks",[])])'
echo "-- same with LD_LIBRARY_PATH=$D"; LD_LIBRARY_PATH=$D $M probe nccl --mode local-pair | head -3
echo "== --nccl-library the wheel's"; $M probe nccl --mode local-pair --nccl-library "$WHEEL" | head -3
echo "== as the plugin runs it: the job user (nobody), the job's command and settings as MRCHECK_JOB_* only"
chmod 755 /tmp/b /tmp/b/cli; PY=$(command -v python3)
setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups env -i PATH=/usr/bin:/bin HOME=/tmp \
  MRCHECK_JOB_ARGV0=python3 MRCHECK_JOB_PATH="$(dirname "$PY"):/usr/bin:/bin" \
  $M probe nccl --mode local-pair --json > /tmp/nobody.json 2>&1; echo "rc=$?"
python3 -c '
import json; j=json.load(open("/tmp/nobody.json")); print(j["checks"][0]["verdict"], j["checks"][0]["summary"]); print("job_library", j["job_nccl"]["job_library"], "ranks", [r.get("report",{}).get("nccl_version") for r in j.get("ranks",[])])' 2>&1 | head -4
echo "== bench local-pair: warm-up, then $RUNS interleaved (wall ms)"
/tmp/minimal_pair >/dev/null 2>&1; $M probe nccl --mode local-pair >/dev/null 2>&1
for i in $(seq 1 "$RUNS"); do
  t=$(now); /tmp/minimal_pair >/dev/null 2>&1; rc1=$?; a=$(ms $t)
  t=$(now); $M probe nccl --mode local-pair --json >/tmp/mr_$i.json 2>&1; rc2=$?; b=$(ms $t)
  echo "run $i minimal $a ms rc=$rc1 | mrcheck $b ms rc=$rc2 $(grep -m1 '"verdict"' /tmp/mr_$i.json | tr -d ' ,')"
done
python3 -c '
import json; j=json.load(open("/tmp/mr_1.json"))
print("summary:", j["checks"][0]["summary"])
for r in j.get("ranks",[]): print("rank", r.get("rank"), r.get("outcome"), r.get("report",{}).get("phases"))'
echo "processes left: $(pgrep -fc -- 'probe nccl' || true)"
echo "== probe mr --gpu (today's)"; $M probe mr --gpu 2>&1 | head -12


echo "== DMA-BUF export of cudaMalloc-style and cuMem/VMM buffers (tests/gpu/cumem_dmabuf_try.cpp)"
g++ -O2 -std=c++17 tests/gpu/cumem_dmabuf_try.cpp -I/usr/local/cuda/include -L/usr/local/cuda/lib64/stubs -lcuda -o /tmp/cumem_try && /tmp/cumem_try; echo "rc=$?"
