#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Real failure logs from real libraries, made on the guests of scripts/guest.sh (two up) under real limits:
# each case runs its server on node1 (when it has one) and its client on node2, both as the unprivileged user
# mrtest under the given RLIMIT_MEMLOCK, and keeps the client's output (stdout and stderr, as a user would paste
# it) in OUT_DIR/NAME.log, the server's in OUT_DIR/NAME.server.log, and every command in OUT_DIR/COMMANDS.
# tests/fixtures/guest_logs/ holds what this made, as fixtures for explain (its README.md lists the cases).
#   usage: tests/guest/make_logs.sh OUT_DIR [CASE...]
set -uo pipefail
guest_sh=$(cd "$(dirname "$0")/../.." && pwd)/scripts/guest.sh
out=${1:?usage: make_logs.sh OUT_DIR [CASE...]}
shift
mkdir -p "$out"
# COMMANDS: what made each log, and with what. A full run starts it again; a run of some cases replaces only
# their blocks (each starts with "NAME:" at the start of a line).
if (($#)); then
  [[ -f $out/COMMANDS ]] && awk -v names=" $* " '
    /^[^ ]/ { keep = (index(names, " " substr($1, 1, length($1) - 1) " ") == 0) }
    keep' "$out/COMMANDS" >"$out/COMMANDS.new" && mv "$out/COMMANDS.new" "$out/COMMANDS"
else
  {
    echo "# Made by tests/guest/make_logs.sh on two guests of scripts/guest.sh (QEMU, Soft-RoCE rxe0 on each),"
    echo "# node2 the client, node1 the server; each log is the program's stdout and stderr together."
    echo "# kernel: $(bash "$guest_sh" run 1 'uname -r')"
    bash "$guest_sh" run 1 "dpkg-query -W -f '# \${Package} \${Version}\n' rdma-core ibverbs-providers perftest ibverbs-utils libucx0 ucx-utils libfabric1 libfabric-bin openmpi-bin"
  } >"$out/COMMANDS"
fi
user() { echo "prlimit --memlock=$1:$1 setpriv --reuid=1000 --regid=1000 --clear-groups env -i PATH=/usr/bin:/bin HOME=/home/mrtest ${*:2}"; }
low=65536 high=unlimited max_lines=200
# UCX over rxe0: rc_verbs alone has no auxiliary transport for its wireup (one log shows that); with ud_verbs as the
# auxiliary, the wireup timed out between these TCG guests (the Open MPI log shows UCX's UD timeout), so UCX has no
# passing log here.
ucx="UCX_NET_DEVICES=rxe0:1 UCX_TLS=rc_verbs,self"
# libfabric's verbs;ofi_rxm sizes its verbs CQ for a universe of 256 peers by default, more than rxe's max_cqe
# (32767): fi_enable fails with EINVAL (one log shows that); FI_UNIVERSE_SIZE=16 fits.
fi_small="FI_UNIVERSE_SIZE=16"
# Open MPI over UCX: two ranks on node2 (no launcher between the guests), through rxe0's loopback;
# tests/guest/mpi_pingpong.c is the program, staged on node2 below.
mpi="mpirun --oversubscribe -np 2 --mca pml ucx --mca btl ^vader,tcp,openib,uct -x UCX_NET_DEVICES=rxe0:1"

# NAME|MEMLOCK|SERVER (node1, empty: none)|CLIENT (node2)
cases=(
  "ib_write_bw_ok|$high|ib_write_bw -d rxe0 -x 1 -s 65536 -n 200 -F|ib_write_bw -d rxe0 -x 1 -s 65536 -n 200 -F node1"
  "ib_write_bw_memlock|$low|ib_write_bw -d rxe0 -x 1 -s 1048576 -n 20 -F|ib_write_bw -d rxe0 -x 1 -s 1048576 -n 20 -F node1"
  "ib_send_bw_memlock|$low|ib_send_bw -d rxe0 -x 1 -s 1048576 -n 20 -F|ib_send_bw -d rxe0 -x 1 -s 1048576 -n 20 -F node1"
  "ib_write_bw_bad_gid|$high|ib_write_bw -d rxe0 -x 1 -s 65536 -n 20 -F|ib_write_bw -d rxe0 -x 7 -s 65536 -n 20 -F node1"
  "ib_write_bw_unreachable|$high||ib_write_bw -d rxe0 -x 1 -s 65536 -n 20 -F 10.77.0.9"
  "ibv_rc_pingpong_ok|$high|ibv_rc_pingpong -d rxe0 -g 1 -n 100 -s 65536|ibv_rc_pingpong -d rxe0 -g 1 -n 100 -s 65536 node1"
  "ibv_rc_pingpong_memlock|$low||ibv_rc_pingpong -d rxe0 -g 1 -n 100 -s 1048576 node1"
  "ibv_rc_pingpong_bad_gid|$high|ibv_rc_pingpong -d rxe0 -g 1 -n 10|ibv_rc_pingpong -d rxe0 -g 7 -n 10 node1"
  "ibv_rc_pingpong_unreachable|$high||ibv_rc_pingpong -d rxe0 -g 1 -n 10 10.77.0.9"
  "ucx_perftest_no_aux_transport|$high|env $ucx ucx_perftest -t tag_bw -s 65536 -n 100|env $ucx ucx_perftest -t tag_bw -s 65536 -n 100 node1"
  "ucx_perftest_memlock|$low|env $ucx ucx_perftest -t tag_bw -s 1048576 -n 20|env $ucx ucx_perftest -t tag_bw -s 1048576 -n 20 node1"
  "fi_pingpong_ok|$high|env $fi_small fi_pingpong -p 'verbs;ofi_rxm' -e rdm -S 65536 -I 100|env $fi_small fi_pingpong -p 'verbs;ofi_rxm' -e rdm -S 65536 -I 100 node1"
  "fi_pingpong_memlock|$low|env $fi_small fi_pingpong -p 'verbs;ofi_rxm' -e rdm -S 1048576 -I 20|env $fi_small fi_pingpong -p 'verbs;ofi_rxm' -e rdm -S 1048576 -I 20 node1"
  "fi_pingpong_cq_size|$high|fi_pingpong -p 'verbs;ofi_rxm' -e rdm -S 65536 -I 10|fi_pingpong -p 'verbs;ofi_rxm' -e rdm -S 65536 -I 10 node1"
  "openmpi_ucx_memlock|$low||$mpi -x UCX_TLS=rc_verbs,ud_verbs,self /usr/local/bin/mpi_pingpong 1048576 20"
  "openmpi_ucx_ud_timeout|$high||$mpi -x UCX_TLS=rc_verbs,ud_verbs,self /usr/local/bin/mpi_pingpong 65536 20"
)
# The MPI program, built here (it needs no MPI headers) and staged on node2 through the command channel.
mpi_bin=$(mktemp -d)
trap 'rm -rf "$mpi_bin"' EXIT
cc -O2 -o "$mpi_bin/mpi_pingpong" "$(dirname "$0")/mpi_pingpong.c" -ldl || exit 1
bash "$guest_sh" run 2 "base64 -d >/usr/local/bin/mpi_pingpong <<'B64'
$(base64 -w76 "$mpi_bin/mpi_pingpong")
B64
chmod 755 /usr/local/bin/mpi_pingpong" || exit 1
for c in "${cases[@]}"; do
  IFS='|' read -r name limit server client <<<"$c"
  if (($#)) && [[ " $* " != *" $name "* ]]; then continue; fi
  echo "== $name" >&2
  {
    echo "$name: memlock $limit (soft and hard), as mrtest (uid 1000)"
    [[ -z $server ]] || echo "  node1 (server): timeout 60 $server"
    echo "  node2 (client): timeout 60 $client"
  } >>"$out/COMMANDS"
  spid=
  if [[ -n $server ]]; then
    bash "$guest_sh" run 1 "timeout 60 $(user "$limit" "$server") 2>&1" >"$out/$name.server.log" 2>&1 &
    spid=$!
    sleep 4
  fi
  bash "$guest_sh" run 2 "timeout 60 $(user "$limit" "$client") 2>&1" >"$out/$name.log" 2>&1
  echo "  client exit $?" >>"$out/COMMANDS"
  [[ -z $spid ]] || { wait "$spid"; echo "  server exit $?" >>"$out/COMMANDS"; }
  # A library that retries a failing registration in a loop (UCX's memory pools) prints thousands of lines:
  # the log keeps the first $max_lines, and COMMANDS says so.
  for f in "$out/$name.log" "$out/$name.server.log"; do
    [[ -f $f ]] || continue
    lines=$(wc -l <"$f")
    if ((lines > max_lines)); then
      head -n "$max_lines" "$f" >"$f.cut" && mv "$f.cut" "$f"
      echo "  $(basename "$f"): the first $max_lines of its $lines lines" >>"$out/COMMANDS"
    fi
  done
done
