#!/bin/sh
# The brigade command: help, exit codes, info and selfcheck.
# $BRIGADE is set by the test harness (tests/Makefile.am).
. "${srcdir:-.}/cli_lib.sh"

expect 0 "usage: brigade" --help
expect 2 "usage: brigade"
expect 2 "unknown command 'frobnicate'" frobnicate
expect 0 "brigade [0-9]" --version
expect 0 "Backends" info
expect 0 "NUMA node\|hardware threads" info
expect 0 "OpenBLAS" info
expect 0 "hwloc" info
# the image decoders of --data DIR (they were not listed)
expect 0 "^  libspng  *[0-9]" info
expect 0 "^  libjpeg-turbo [0-9]" info
expect 0 "memory this process can use: [0-9.]* [KMGT]iB (.* total, .* available" info
BRG_CPU_CONV=im2col
export BRG_CPU_CONV
expect 0 "cpu    yes (convolutions: im2col + OpenBLAS.*between layers: plain" info
BRG_CPU_CONV=winograd
expect 2 "BRG_CPU_CONV=winograd: CPU convolution 'winograd': choose onednn or im2col" info
unset BRG_CPU_CONV
BRG_CPU_LAYOUT=nhwc
export BRG_CPU_LAYOUT
expect 2 "BRG_CPU_LAYOUT=nhwc: CPU layout 'nhwc': choose blocked or plain" info
BRG_CPU_LAYOUT=plain
expect 0 "between layers: plain" info
unset BRG_CPU_LAYOUT
BRG_CUDA_CONV_WORKSPACE=lots
export BRG_CUDA_CONV_WORKSPACE
expect 2 "BRG_CUDA_CONV_WORKSPACE=lots: expected a positive size" plan resnet50 --devices cuda:0:2x12GiB --batch 64
expect 2 "BRG_CUDA_CONV_WORKSPACE=lots: expected a positive size" info
unset BRG_CUDA_CONV_WORKSPACE
# the CUDA settings devices made now take from the environment, where cuDNN is built in
if "$BRIGADE" info 2>/dev/null | grep -q "cuDNN yes"; then
    expect 0 "devices made now: TF32 off.*heuristics.*legacy API.*at most 64.00 MiB of workspace.*not widened.*1x1 gradients by cuDNN" info
    BRG_CUDA_CONV_API=graph BRG_CUDA_CONV_WORKSPACE=1GiB BRG_CUDA_CONV_WORKSPACE_GROW=1 BRG_CUDA_CONV_1X1=gemm
    export BRG_CUDA_CONV_API BRG_CUDA_CONV_WORKSPACE BRG_CUDA_CONV_WORKSPACE_GROW BRG_CUDA_CONV_1X1
    expect 0 "on its graph API.*at most 1.00 GiB of workspace.*, widened (.*1x1 gradients by cuBLAS GEMM" info
    unset BRG_CUDA_CONV_API BRG_CUDA_CONV_WORKSPACE BRG_CUDA_CONV_WORKSPACE_GROW BRG_CUDA_CONV_1X1
fi
expect 0 "usage: brigade info" info --help
expect 2 "^brigade info: unknown option '--bogus'" info --bogus
expect 2 "unexpected argument" info extra
expect 0 "usage: brigade selfcheck" selfcheck --help
expect 2 "^brigade selfcheck: unknown option '--bogus'" selfcheck --bogus
checks=$((checks + 1))
[ "$(wc -l <"$out")" -eq 2 ] || { fail "selfcheck --bogus says more than the option and --help"; cat "$out"; }
expect 0 "cases passed" selfcheck
# a device too small for the cases is said as such, exit 2, not as 100
# failed kernels (exit 1)
expect 2 "^selfcheck: 0 of [0-9]* cases passed, [0-9]* did not fit the device" selfcheck --device 1KiB
grep -q "NO ROOM$" "$out" && ! grep -q "FAIL$" "$out" || fail "selfcheck --device 1KiB: rows not NO ROOM"
# ...whose error columns are "-": nothing ran (they showed 0.00e+00, a perfect pass to the eye)
grep "NO ROOM$" "$out" | grep -q "[0-9]\.[0-9][0-9]e" && fail "selfcheck --device 1KiB: errors shown"
grep -q "^brigade selfcheck: .* did not fit in the 1.00 KiB device.*give a larger --device" "$out" ||
    fail "selfcheck --device 1KiB: no advice"

# every option eval and bench accept is in their --help (eval's planner
# options and --micro-batch, and bench's --schedule, were missing)
"$BRIGADE" eval --help >"$out" 2>&1
for o in --weights --data --data-dir --devices --batch --micro-batch --microbatches --seed --limit --watchdog \
    --watchdog-setup \
    --val-split --resize --mean --std --no-flip --data-threads --bad-images --ignore-label --input --classes \
    --width-mult --cuts --schedule --chunks --recompute --split --headroom --device-speed --link-speed --profile \
    --replicas --sync-bn; do
    checks=$((checks + 1))
    grep -q -- "$o\>" "$out" || fail "eval --help does not mention $o"
done
"$BRIGADE" bench --help >"$out" 2>&1
for o in --devices --batch --schedules --schedule --microbatches --chunks --steps --watchdog --watchdog-setup \
    --warmup --simulate \
    --stages --profile --device-speed --link-speed --recompute --lr --seed --trace --json --input --classes \
    --width-mult --cuts; do
    checks=$((checks + 1))
    grep -q -- "$o\>" "$out" || fail "bench --help does not mention $o"
done

finish
