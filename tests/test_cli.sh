#!/bin/sh
# The brigade command: help, exit codes, info and selfcheck.
# $BRIGADE is set by the test harness (tests/Makefile.am).
: "${BRIGADE:=../cli/brigade}"
fails=0
checks=0
out=${TMPDIR:-/tmp}/brigade-cli-$$
trap 'rm -f "$out"' EXIT

# expect CODE PATTERN ARGS...: exit code CODE and output (stdout+stderr) matching PATTERN
expect() {
    want=$1; pattern=$2; shift 2
    checks=$((checks + 1))
    "$BRIGADE" "$@" >"$out" 2>&1
    got=$?
    if [ "$got" -ne "$want" ]; then
        echo "FAIL: brigade $* exited $got, expected $want"; sed 's/^/  | /' "$out"; fails=$((fails + 1)); return
    fi
    if ! grep -q -- "$pattern" "$out"; then
        echo "FAIL: brigade $* output lacks '$pattern'"; sed 's/^/  | /' "$out"; fails=$((fails + 1)); return
    fi
    echo "ok: brigade $* (exit $got)"
}

expect 0 "usage: brigade" --help
expect 2 "usage: brigade"
expect 2 "unknown command 'frobnicate'" frobnicate
expect 0 "brigade [0-9]" --version
expect 0 "Backends" info
expect 0 "NUMA node\|hardware threads" info
expect 0 "OpenBLAS" info
expect 0 "hwloc" info
expect 0 "usage: brigade info" info --help
expect 2 "" info --bogus
expect 2 "unexpected argument" info extra
expect 0 "usage: brigade selfcheck" selfcheck --help
expect 2 "" selfcheck --bogus
expect 0 "cases passed" selfcheck

echo "$checks checks, $fails failed"
[ "$fails" -eq 0 ]
