#!/bin/bash
# The data-plane probe's wall time against ibv_rc_pingpong with the same message sizes, in the same run, on a node
# with a real verbs device (a guest with Soft-RoCE: README "The data-plane probe"). See bench/probe/README.md.
# usage: data_plane.sh MRCHECK DEVICE [REPS] [SIZES] [ITERS]
#   MRCHECK  the mrcheck binary; DEVICE  the RDMA device (rxe0); REPS  runs of each (default 5)
#   SIZES    comma list of message sizes in bytes (default 4096,1048576); ITERS  messages per size (default 16)
# Prints one line per run and the medians; exits 1 when the probe does not pass or ibv_rc_pingpong fails.
set -uo pipefail
mrcheck=${1:?usage: data_plane.sh MRCHECK DEVICE [REPS] [SIZES] [ITERS]}
dev=${2:?usage: data_plane.sh MRCHECK DEVICE [REPS] [SIZES] [ITERS]}
reps=${3:-5}
sizes=${4:-4096,1048576}
iters=${5:-16}

ms() { echo $(( $(date +%s%N) / 1000000 )); }
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

# The GID index the probe chose (RoCE v2, IPv4-mapped first): ibv_rc_pingpong gets the same one.
json=$("$mrcheck" probe rdma --json --device "$dev" --sizes "$sizes" --iters "$iters")
rc=$?
if [[ $rc -ne 0 ]]; then
  echo "FAIL: mrcheck probe rdma exit $rc: $json" >&2
  exit 1
fi
gid=$(grep -o '"gid_index":-\?[0-9]*' <<<"$json" | head -1 | cut -d: -f2)
gidopt=()
[[ -n $gid && $gid != -1 ]] && gidopt=(-g "$gid")

pingpong() {  # one size: server and client on this node, loopback through the device
  local size=$1 port=$((18515 + RANDOM % 1000))
  ibv_rc_pingpong -d "$dev" "${gidopt[@]}" -p "$port" -s "$size" -n "$iters" >/dev/null 2>&1 &
  local server=$! hex
  hex=$(printf '%04X' "$port")
  # The client may connect once the server listens (/proc/net/tcp: local port, state 0A = LISTEN).
  for _ in $(seq 500); do
    grep -q ":$hex 00000000:0000 0A" /proc/net/tcp /proc/net/tcp6 2>/dev/null && break
    sleep 0.01
  done
  ibv_rc_pingpong -d "$dev" "${gidopt[@]}" -p "$port" -s "$size" -n "$iters" 127.0.0.1 >/dev/null 2>&1
  local rc=$?
  wait "$server" || rc=1
  return $rc
}

probe_t=() pp_t=()
for ((r = 1; r <= reps; r++)); do
  t0=$(ms)
  "$mrcheck" probe rdma --json --device "$dev" --sizes "$sizes" --iters "$iters" >/dev/null || { echo "FAIL: probe run $r" >&2; exit 1; }
  t1=$(ms)
  for s in ${sizes//,/ }; do pingpong "$s" || { echo "FAIL: ibv_rc_pingpong -s $s run $r" >&2; exit 1; }; done
  t2=$(ms)
  probe_t+=($((t1 - t0)))
  pp_t+=($((t2 - t1)))
  echo "run $r: probe $((t1 - t0)) ms, ibv_rc_pingpong $((t2 - t1)) ms"
done
p=$(printf '%s\n' "${probe_t[@]}" | median)
q=$(printf '%s\n' "${pp_t[@]}" | median)
echo "median: probe ${p} ms (send/recv and RDMA write, sizes $sizes x $iters, bytes verified), ibv_rc_pingpong ${q} ms (send/recv, same sizes x $iters); probe / pingpong = $(awk -v a="$p" -v b="$q" 'BEGIN {printf "%.2f", a / b}')"
