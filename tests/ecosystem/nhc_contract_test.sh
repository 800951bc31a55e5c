#!/bin/bash
# etc/nhc/mrcheck.nhc against NHC's contract for a check (LBNL NHC, `nhc` and scripts/common.nhc; README "Writing
# Checks"): NHC sources the file, calls check_mrcheck with the nhc.conf arguments, and on a failure the check calls
# `die 1 "<reason>"` and returns 1; NHC, not the check, marks the node offline. `die` and nhc_cmd_with_timeout are
# defined here as NHC defines them (die records the message; NHC's own die passes it to its offline helper between
# single quotes, so a reason must hold none). Needs mrcheck-prolog from MRCHECK_BUILD_DIR; about 0.3 s.
set -u
src=${MRCHECK_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${MRCHECK_BUILD_DIR:-$src/build}
prolog=$build/prolog/mrcheck-prolog
[[ -x $prolog ]] || { echo "SKIP: $prolog not built"; exit 77; }
fails=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# NHC's side of the contract.
TIMEOUT=30
DIED=()
function die() {
  CHECK_DIED=1
  DIED+=("$1|${*:2}")
}
function nhc_cmd_with_timeout() { # scripts/common.nhc, as it is
  local RET
  export NHC_TO="$1"
  shift
  $SHELL -c '( for ((s=NHC_TO; s>0; s--)); do sleep 1 ; kill -0 $$ || exit 0 ; done ; kill -s SIGTERM $$ && kill -0 $$ || exit 0 ; sleep 1 ; kill -s SIGKILL $$ ) >&/dev/null & exec "$@"' $1 "$@"
  RET=$?
  return $RET
}
SHELL=/bin/bash
# Anything that would change the node's state is a stub that records the call: the check must call none.
mkdir -p "$tmp/bin"
for c in scontrol sinfo pbsnodes; do printf '#!/bin/sh\necho "%s $*" >>%s/calls\n' "$c" "$tmp" >"$tmp/bin/$c"; done
chmod +x "$tmp/bin"/*
PATH=$tmp/bin:$PATH

MRCHECK_PROLOG=$prolog
# shellcheck source=../../etc/nhc/mrcheck.nhc
source "$src/etc/nhc/mrcheck.nhc"
declare -F check_mrcheck >/dev/null && ok "the file defines check_mrcheck" || bad "no check_mrcheck"
args=(--node n1 --state-dir "$tmp/state")

# run FIXTURE: check_mrcheck on a fixture tree; sets RET and DIED.
run() {
  DIED=()
  CHECK_DIED=0
  check_mrcheck --root "$src/tests/fixtures/$1" "${args[@]}"
  RET=$?
}

run matrix_aligned
[[ $RET == 0 && ${#DIED[@]} == 0 ]] && ok "aligned node: returns 0, no die" || bad "aligned: rc=$RET died=${DIED[*]}"

run matrix_hca_fw_old
if [[ $RET == 1 && ${#DIED[@]} == 1 ]]; then ok "old firmware: die once, return 1"; else bad "old firmware: rc=$RET died=${DIED[*]}"; fi
# The state dir keeps the node's stack history across the two runs, so mrcheck's reason names the firmware change
# (include/mrcheck/history.h) before the rule's text.
expected='^1[|]mrcheck: hca_fw mlx5_0 [(]node[)]: fw 28[.]39[.]1002 -> 28[.]33[.]0800 since [0-9T:-]+Z: mlx5_0 ConnectX-7 fw 28[.]33[.]0800 < 28[.]35[.]1012$'
[[ ${DIED[0]:-} =~ $expected ]] && ok "the reason is mrcheck's drain reason" || bad "reason [${DIED[0]:-}] !~ [$expected]"
[[ ${DIED[0]} =~ ^1\|mrcheck:\ [a-z0-9_]+(\ [^\ :\(][^\ ]*)?(\ \((job|node|site)\))?:\ .+$ ]] && ok "the reason follows docs/drain-reasons.md" ||
  bad "reason outside the grammar: ${DIED[0]}"

printf 'no_such_key = 1\n' >"$tmp/bad.rules"
DIED=()
check_mrcheck --root "$src/tests/fixtures/matrix_aligned" --rules "$tmp/bad.rules" "${args[@]}"
RET=$?
[[ $RET == 1 && ${DIED[0]:-} == "1|mrcheck: mrcheck-prolog exited 2: "* ]] && ok "a rules error dies with the exit code and its line" ||
  bad "rules error: rc=$RET died=${DIED[*]}"

# A reason with a single quote (NHC evals it between single quotes) comes out without one.
cat >"$tmp/bin/fake-prolog" <<'FAKE'
#!/bin/sh
echo "mrcheck: prolog: dry run: would drain n1 with reason 'mrcheck: nccl: it's old'" >&2
exit 1
FAKE
chmod +x "$tmp/bin/fake-prolog"
MRCHECK_PROLOG=$tmp/bin/fake-prolog
DIED=()
check_mrcheck
[[ ${DIED[0]:-} == '1|mrcheck: nccl: it`s old' ]] && ok "no single quote reaches NHC's eval" || bad "quote: ${DIED[0]:-}"

MRCHECK_PROLOG=$tmp/none
DIED=()
check_mrcheck
RET=$?
[[ $RET == 1 && ${DIED[0]:-} == "1|mrcheck: $tmp/none is not installed or not executable" ]] && ok "missing program: die" ||
  bad "missing program: ${DIED[*]}"

[[ ! -e $tmp/calls ]] && ok "the check changed no node state itself" || bad "it called: $(cat "$tmp/calls")"
echo "nhc_contract_test: $fails failed"
((fails == 0))
