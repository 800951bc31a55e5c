#!/usr/bin/env bash
# The guest network carries RoCE v2 between two kernels: ibv_rc_pingpong from node2 to node1 over rxe0 (small:
# TCG moves about 12 MB/s), the smoke test under every data-plane test on the guests.
source "$(dirname "$0")/lib.sh"
gid=${MRCHECK_GUEST_GID:-1}
bash "$guest_sh" run 1 "timeout 60 ibv_rc_pingpong -d rxe0 -g $gid -n 100 -s 4096" >"${TMPDIR:-/tmp}/pingpong-server.$$" 2>&1 &
server=$!
sleep 2
on 2 "timeout 60 ibv_rc_pingpong -d rxe0 -g $gid -n 100 -s 4096 node1"
expect_eq "client: exit 0" "$rc" 0
expect_contains "client: 100 iterations" "$out" "100 iters"
set +e
wait "$server"
src=$?
set -e
expect_eq "server: exit 0" "$src" 0
expect_contains "server: 100 iterations" "$(cat "${TMPDIR:-/tmp}/pingpong-server.$$")" "100 iters"
rm -f "${TMPDIR:-/tmp}/pingpong-server.$$"
e2e_done
