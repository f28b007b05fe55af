#!/bin/sh
# The pipeline suites again on cpu-async devices (BRG_TEST_CPU=async, see
# pipeline_test.h): every action's work queued on stream threads, so the
# executor's use of events and copies is checked without a GPU. Once as
# they come and once with random delays before every stream operation
# (BRG_DEBUG_DELAYS=MAX_US:SEED), which turn a missing wait into wrong
# numbers instead of a lucky pass.
#
# Runs the test programs of this build's tests folder (make check builds
# them before the scripts).
set -u
tests="test_executor test_pipeline test_program test_train test_faults test_predict test_segmentation"
fails=0
for delays in "" 200:7; do
    for t in $tests; do
        if [ ! -x "./$t" ]; then
            echo "SKIP: ./$t is not built"
            exit 77
        fi
        log=$t.async${delays:+-delays}.log
        start=$(date +%s)
        BRG_TEST_CPU=async BRG_DEBUG_DELAYS=$delays "./$t" >"$log" 2>&1
        rc=$?
        what="$t on cpu-async${delays:+ with BRG_DEBUG_DELAYS=$delays}"
        if [ "$rc" -eq 0 ]; then
            echo "ok: $what ($(($(date +%s) - start)) s)"
            rm -f "$log"
        else
            echo "FAIL: $what exited $rc (log: tests/$log):"
            sed 's/^/  | /' "$log" | tail -40
            fails=$((fails + 1))
        fi
    done
done
[ "$fails" -eq 0 ]
