#!/bin/sh
# The executor and pipeline tests under ThreadSanitizer and under
# AddressSanitizer with UndefinedBehaviorSanitizer (leaks included): any
# report fails the test. Under ThreadSanitizer they run a second time on
# cpu-async devices (BRG_TEST_CPU=async), whose stream threads it watches,
# with test_device_async, whose protocol tests a missing wait would make race,
# and a third time with oneDNN's convolutions on one thread (see below);
# test_distributed runs under it on two ranks of cpu-async devices where
# the build has MPI. Under both, the brigade command trains on cpu-async
# devices (loader thread, checkpoints).
#
# The library is compiled here from its sources (lib_build.sh) with the test
# programs into one executable per sanitizer, everything in a temporary
# folder of the build tree.
#
# Needs (tests/Makefile.am sets them): BRG_SAN_CC, BRG_SAN_SRCDIR,
# BRG_SAN_BUILDDIR (for config.h), BRG_SAN_CPPFLAGS, BRG_SAN_LIBS.
# Exit 77 when the compiler cannot build and run a trivial program with
# either sanitizer.
set -u
cc=${BRG_SAN_CC:-cc}
src=${BRG_SAN_SRCDIR:-$(cd "${srcdir:-.}/.." && pwd)}
build=${BRG_SAN_BUILDDIR:-$(cd .. && pwd)}
cppflags=${BRG_SAN_CPPFLAGS:-}
libs=${BRG_SAN_LIBS:--lopenblas -ljansson -lz -lhwloc -pthread -lm}
tmp=$(pwd)/tmp-sanitizers-$$
. "${srcdir:-.}/lib_build.sh"
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM
mkdir -p "$tmp" || exit 1

tsan="-fsanitize=thread"
asan="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
common="-O1 -g -fno-omit-frame-pointer -pthread"

# Can this compiler build and run a sanitized program at all?
cat >"$tmp/probe.c" <<'EOF'
#include <pthread.h>
#include <stdlib.h>
static void *work(void *arg) { return arg; }
int main(void)
{
    pthread_t t;
    char *p = malloc(8);
    if (!p || pthread_create(&t, NULL, work, p) != 0) return 1;
    pthread_join(t, NULL);
    free(p);
    return 0;
}
EOF
for flags in "$tsan" "$asan"; do
    # shellcheck disable=SC2086
    if ! $cc $flags $common "$tmp/probe.c" -o "$tmp/probe" >"$tmp/probe.log" 2>&1 || ! "$tmp/probe" >>"$tmp/probe.log" 2>&1
    then
        echo "SKIP: $cc cannot build or run a program with $flags here:"
        sed 's/^/  | /' "$tmp/probe.log"
        exit 77
    fi
done

lib_config
tests="test_executor test_pipeline test_faults test_device_async test_safetensors test_checkpoint test_images test_segdata"
inc=$(lib_includes)
test_defs="-DBRG_TEST_SRCDIR=\"$src/tests\" -DBRG_TEST_BUILDDIR=\"$build/tests\""

# test_distributed runs under ThreadSanitizer too, across two ranks of
# cpu-async devices (the replicas' gradient reducer threads, the
# communicators' twin, the warm-up), where this build has MPI and mpirun.
rank_tests=""
if grep -q '^#define BRG_HAVE_MPI 1' "$build/config.h" && [ -n "${MPIRUN:-}" ] && command -v "$MPIRUN" >/dev/null 2>&1
then
    rank_tests=test_distributed
fi
# build NAME FLAGS [MORE_TESTS]: the library's objects in $tmp/NAME, then
# one executable per test program, and the brigade command
build() {
    lib_compile "$tmp/$1" "$cc" "$2 $common" || return 1
    for t in $tests ${3:-}; do
        # shellcheck disable=SC2086
        $cc $2 $common $inc -I"$src/tests" $test_defs "$src/tests/$t.c" "$tmp/$1"/*.o -o "$tmp/$1/$t" $libs ||
            return 1
    done
    # shellcheck disable=SC2086
    $cc $2 $common $inc "$src"/cli/*.c "$tmp/$1"/*.o -o "$tmp/$1/brigade" $libs
}

# verdict WHAT PASSED: one line for the run that wrote $log since $start
# and left $rc, with the log's tail when it failed (PASSED 0)
fails=0
verdict() {
    if [ "$2" -eq 1 ]; then
        echo "ok: $1 (exit $rc, $(($(date +%s) - start)) s)"
    else
        echo "FAIL: $1 exited $rc:"
        sed 's/^/  | /' "$log" | tail -80
        fails=$((fails + 1))
    fi
}
# run NAME TESTS ["VAR=VALUE ..."]: the test programs TESTS of build NAME,
# with the variables set when given; any sanitizer report fails
run() {
    for t in $2; do
        log="$tmp/$1/$t$(echo "${3:+.$3}" | tr ' ' '.').log"
        start=$(date +%s)
        # shellcheck disable=SC2086
        env ${3:+$3} "$tmp/$1/$t" >"$log" 2>&1
        rc=$?
        passed=0
        if [ "$rc" -eq 0 ] || { [ "$rc" -eq 77 ] && ! grep -q Sanitizer "$log"; }; then passed=1; fi
        verdict "$t under $1${3:+ with $3}" "$passed"
    done
}
# run_train NAME: the README's training job, shortened (synthetic data, one
# epoch), through the brigade command of build NAME on cpu-async devices,
# with its loader thread and checkpoints every few steps
run_train() {
    log="$tmp/$1/brigade-train.log"
    start=$(date +%s)
    env BRG_CPU_CALIBRATION=off BRG_CPU_CONV=im2col "$tmp/$1/brigade" train fmnist-cnn --data synthetic --limit 512 \
        --devices cpu-async:4x8MiB --batch 64 --microbatches 16 --epochs 1 --optimizer adam --seed 1 \
        --checkpoint "$tmp/$1/checkpoints" --checkpoint-every 3 >"$log" 2>&1
    rc=$?
    passed=0
    if [ "$rc" -eq 0 ] && grep -q 'measured = planned on every device' "$log"; then passed=1; fi
    verdict "brigade train on cpu-async devices under $1" "$passed"
}
# run_ranks NAME RANKS "VAR=VALUE ...": test_distributed of build NAME on
# RANKS ranks under mpirun, with Open MPI's own reports suppressed
# (tsan-openmpi.supp: its libraries are not instrumented)
run_ranks() {
    log="$tmp/$1/test_distributed.$2-ranks.log"
    start=$(date +%s)
    # shellcheck disable=SC2086
    env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 BRG_CPU_CALIBRATION=off \
        TSAN_OPTIONS="$TSAN_OPTIONS suppressions=$src/tests/tsan-openmpi.supp" $3 \
        timeout 600 "$MPIRUN" --oversubscribe -np "$2" "$tmp/$1/test_distributed" >"$log" 2>&1
    rc=$?
    passed=0
    if [ "$rc" -eq 0 ]; then passed=1; fi
    verdict "test_distributed on $2 ranks under $1 with $3" "$passed"
}

# Reports are failures: exitcode 66 makes a reported run fail even when the
# test's own checks passed. OpenBLAS keeps its own threads (uninstrumented,
# so TSan sees none of their accesses); with them the CPU convolution's
# thread team runs too (it is as large as OpenBLAS's pool), so they are not
# limited to one: no false reports were seen with two.
TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1"
ASAN_OPTIONS="detect_leaks=1 halt_on_error=1 exitcode=66 abort_on_error=0 strict_string_checks=1 detect_stack_use_after_return=1"
UBSAN_OPTIONS="halt_on_error=1 print_stacktrace=1"
export TSAN_OPTIONS ASAN_OPTIONS UBSAN_OPTIONS

for name in tsan asan; do
    if [ "$name" = tsan ]; then flags=$tsan; else flags=$asan; fi
    start=$(date +%s)
    more=""
    [ "$name" = tsan ] && more=$rank_tests
    if ! build "$name" "$flags" "$more" >"$tmp/$name.build.log" 2>&1; then
        echo "FAIL: building the tests with $flags:"
        sed 's/^/  | /' "$tmp/$name.build.log" | tail -40
        exit 1
    fi
    echo "built the executor tests and brigade with $flags in $(($(date +%s) - start)) s"
    if [ "$name" = asan ]; then
        run "$name" "$tests"
        run_train "$name"
        continue
    fi
    # oneDNN's OpenMP workers meet the caller at libgomp's barriers, which
    # ThreadSanitizer cannot see (libgomp is not instrumented), so a buffer
    # a worker writes and the next op reads is reported as a race. The
    # threaded runs convolve with im2col (as before oneDNN); oneDNN runs
    # with one thread per call (OpenMP's count follows OpenBLAS's), in the
    # executor's threads, where every access is seen.
    run "$name" "$tests" BRG_CPU_CONV=im2col
    # On cpu-async devices evaluations go at once, as on GPUs
    # (BRG_EVAL_AT_ONCE=1): every device forwards on its worker while the
    # calling thread waits.
    run "$name" "test_executor test_pipeline test_faults" "BRG_TEST_CPU=async BRG_CPU_CONV=im2col BRG_EVAL_AT_ONCE=1"
    run "$name" "test_executor test_pipeline" "BRG_TEST_CPU=async OPENBLAS_NUM_THREADS=1"
    run_train "$name"
    [ -n "$rank_tests" ] && run_ranks "$name" 2 "BRG_TEST_CPU=async BRG_CPU_CONV=im2col BRG_DEBUG_LOADS=1 BRG_DEBUG_CONNECT=1"
done
[ "$fails" -eq 0 ]
