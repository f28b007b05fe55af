#!/bin/sh
# Fuzz every reader of outside input with libFuzzer, AddressSanitizer and
# UndefinedBehaviorSanitizer (docs/fuzzing.md): the JSON model reader, the
# profile reader, the IDX readers, the safetensors reader, the image decoders, the device-list
# and size parsers, the Keras importer, and the ONNX importer (where it is built).
# Each target starts from its committed corpus (tests/fuzz/corpus/, copied:
# runs never write into the source tree) and runs FUZZ_SECONDS (default 5)
# seconds; a crash, a leak, undefined behaviour, a timeout or a target's
# own trap (a failure without a message) fails the test, and the input that
# did it is kept in the build tree as tests/fuzz-crashes/. `make fuzz`
# runs the same for as long as asked (FUZZ_SECONDS=600 make fuzz);
# FUZZ_TARGETS="device_spec image" runs only those.
#
# Exits 77 where clang with libFuzzer is missing. Environment as for
# test_sanitizers.sh (tests/Makefile.am sets it): BRG_SAN_SRCDIR,
# BRG_SAN_BUILDDIR, BRG_SAN_CPPFLAGS, BRG_SAN_LIBS; FUZZ_CC (default clang).
set -u
cc=${FUZZ_CC:-clang}
seconds=${FUZZ_SECONDS:-5}
src=${BRG_SAN_SRCDIR:-$(cd "${srcdir:-.}/.." && pwd)}
build=${BRG_SAN_BUILDDIR:-$(cd .. && pwd)}
cppflags=${BRG_SAN_CPPFLAGS:-}
libs=${BRG_SAN_LIBS:--lopenblas -ljansson -lz -lhwloc -pthread -lm}
tmp=$(pwd)/tmp-fuzz-$$
. "${srcdir:-.}/lib_build.sh"
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM
mkdir -p "$tmp" || exit 1

flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -O1 -g -fno-omit-frame-pointer -pthread"
cat >"$tmp/probe.c" <<'PROBE'
#include <stddef.h>
#include <stdint.h>
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return size > 0 && data[0] == 1 ? 0 : 0; }
PROBE
# shellcheck disable=SC2086
if ! command -v "$cc" >/dev/null 2>&1 ||
    ! $cc $flags -fsanitize=fuzzer "$tmp/probe.c" -o "$tmp/probe" >"$tmp/probe.log" 2>&1 ||
    ! "$tmp/probe" -runs=10 >>"$tmp/probe.log" 2>&1; then
    echo "SKIP: no $cc with libFuzzer here (Debian: clang and libclang-rt-dev or libfuzzer-dev):"
    sed 's/^/  | /' "$tmp/probe.log" 2>/dev/null | tail -5
    exit 77
fi

lib_config
start=$(date +%s)
if ! lib_compile "$tmp/lib" "$cc" "$flags -fsanitize=fuzzer-no-link" >"$tmp/build.log" 2>&1; then
    echo "FAIL: building the library with $cc $flags:"
    sed 's/^/  | /' "$tmp/build.log" | tail -40
    exit 1
fi
echo "built the library for fuzzing in $(($(date +%s) - start)) s"

ASAN_OPTIONS="detect_leaks=1 halt_on_error=1 abort_on_error=0"
UBSAN_OPTIONS="halt_on_error=1 print_stacktrace=1"
export ASAN_OPTIONS UBSAN_OPTIONS
fails=0
targets="model_json profile idx device_spec safetensors image keras"
lib_onnx && targets="$targets onnx"
targets=${FUZZ_TARGETS:-$targets} # e.g. FUZZ_TARGETS=device_spec for one reader
for target in $targets; do
    exe=$tmp/fuzz_$target
    # shellcheck disable=SC2086
    if ! $cc $flags -fsanitize=fuzzer $(lib_includes) "$src/tests/fuzz/fuzz_$target.c" "$tmp/lib"/*.o -o "$exe" \
        $libs >"$tmp/$target.build.log" 2>&1; then
        echo "FAIL: building fuzz_$target:"
        sed 's/^/  | /' "$tmp/$target.build.log" | tail -20
        fails=$((fails + 1))
        continue
    fi
    corpus=$tmp/corpus-$target
    mkdir -p "$corpus" "$tmp/crashes" && cp "$src/tests/fuzz/corpus/$target"/* "$corpus"/
    "$exe" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -max_len=65536 \
        -artifact_prefix="$tmp/crashes/$target-" "$corpus" >"$tmp/$target.log" 2>&1
    rc=$?
    runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$tmp/$target.log" | tail -n 1)
    if [ $rc -ne 0 ]; then
        echo "FAIL: fuzz_$target exited $rc after ${runs:-?} runs:"
        grep -E "ERROR|SUMMARY|runtime error|Test unit written" "$tmp/$target.log" | head -10 | sed 's/^/  | /'
        mkdir -p fuzz-crashes && cp "$tmp/crashes"/* fuzz-crashes/ 2>/dev/null
        fails=$((fails + 1))
    else
        echo "ok: fuzz_$target, ${runs:-?} runs in ${seconds} s from $(ls "$src/tests/fuzz/corpus/$target" | wc -l) seeds"
    fi
done
[ "$fails" -eq 0 ]
