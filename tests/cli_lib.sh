# Shared by the CLI test scripts, which source it as "${srcdir:-.}/cli_lib.sh"
# (the test harness sets srcdir): the scratch files, the check counters and
# fail, expect and finish.
# $BRIGADE is set by the test harness (tests/Makefile.am).
: "${BRIGADE:=../cli/brigade}"
fails=0
checks=0
# Plans on CPU devices time their layers with this machine's calibration
# unless told otherwise: the scripts check cuts and byte counts that must
# not depend on the machine (test_cli_profile.sh checks the calibration).
BRG_CPU_CALIBRATION=off
export BRG_CPU_CALIBRATION

# Scratch files: a script names its own $tmp.NAME files and $tmp-NAME
# folders, all removed on exit; expect writes a command's output to $out,
# and checks that split the streams send stderr to $err.
tmp=${TMPDIR:-/tmp}/brigade-$(basename "$0" .sh)-$$
out=$tmp.out
err=$tmp.err
trap 'rm -rf "$tmp".* "$tmp"-*' EXIT
trap 'exit 1' HUP INT TERM

# fail MESSAGE...: report a failed check and count it
fail() {
    echo "FAIL: $*"; fails=$((fails + 1))
}

# expect CODES PATTERN ARGS...: run brigade ARGS; it must exit with one of
# CODES ("2" or "1|2") and its output (stdout+stderr) must match the grep
# pattern PATTERN
expect() {
    want=$1; pattern=$2; shift 2
    checks=$((checks + 1))
    $soon "$BRIGADE" "$@" >"$out" 2>&1
    got=$?
    case "|$want|" in
    *"|$got|"*) ;;
    *) fail "brigade $* exited $got, expected $want"; sed 's/^/  | /' "$out"; return ;;
    esac
    if ! grep -q -- "$pattern" "$out"; then
        fail "brigade $* output lacks '$pattern'"; sed 's/^/  | /' "$out"; return
    fi
    echo "ok: brigade $* (exit $got)"
}

# expect_soon CODES PATTERN ARGS...: expect, the command killed after 60 s
# (exit 137), for input that could make it wait for ever (a FIFO)
soon=""
expect_soon() {
    soon="timeout -s KILL 60"
    expect "$@"
    soon=""
}

# finish: print the tally; succeeds only if no check failed, so a script
# that ends with it exits 0 exactly then
finish() {
    echo "$checks checks, $fails failed"
    [ "$fails" -eq 0 ]
}
