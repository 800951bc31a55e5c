#!/bin/sh
# check_exports.sh NM LIB EXPECTED - the library's dynamic exports (name@version) must equal EXPECTED.
nm=$1 lib=$2 expected=$3
"$nm" -D --defined-only "$lib" | awk '{print $3}' | LC_ALL=C sort >"${TMPDIR:-/tmp}/fake_ibverbs_exports.$$" || exit 1
grep -v '^#' "$expected" | LC_ALL=C sort | diff -u - "${TMPDIR:-/tmp}/fake_ibverbs_exports.$$"
rc=$?
rm -f "${TMPDIR:-/tmp}/fake_ibverbs_exports.$$"
[ $rc -eq 0 ] && echo "mrcheck: fake_ibverbs exports: $(grep -vc '^#' "$expected") symbols, identical to rdma-core 44's public table"
exit $rc
