#!/bin/sh
# brigade train: help, option checks and their exit codes, tiny synthetic
# runs on one and several devices (every schedule, --split, deferred
# BatchNorm), the same peaks as 'brigade plan', plans that do not fit, a
# missing data set, and the Fashion-MNIST CNN across four devices that one
# of them cannot hold (the slow part: about 3 minutes on 2 cores).
# $BRIGADE is set by the test harness (tests/Makefile.am).
. "${srcdir:-.}/cli_lib.sh"

syn="fmnist-cnn --data synthetic --limit 64 --epochs 1"

expect 0 "usage: brigade train" train --help
expect 0 "fashion-mnist" train -h
expect 2 "which model" train --data synthetic
expect 2 "which data" train fmnist-cnn
expect 2 "'imagenet' is neither fashion-mnist, synthetic nor a folder" train fmnist-cnn --data imagenet
expect 2 "--watchdog '-1' must be a whole number from 0" train fmnist-cnn --data synthetic --watchdog -1
# --watchdog-setup: parsed as --watchdog is; 0 is no limit, and a limit with the watchdog off is refused, not ignored
for v in -1 1h 604801; do
    expect 2 "^brigade train: --watchdog-setup '$v' must be a whole number from 0 to 604800$" train fmnist-cnn \
        --data synthetic --watchdog-setup "$v"
done
expect 2 "^brigade eval: --watchdog-setup 'x' must be a whole number from 0" eval fmnist-cnn --weights w.safetensors \
    --data synthetic --watchdog-setup x
expect 2 "^brigade train: --watchdog-setup 60 needs the watchdog, which --watchdog 0 turns off: drop --watchdog 0, or \
--watchdog-setup$" train fmnist-cnn --data synthetic --watchdog 0 --watchdog-setup 60
expect 2 "^brigade eval: --watchdog-setup 5 needs the watchdog" eval fmnist-cnn --weights w.safetensors --data synthetic \
    --watchdog 0 --watchdog-setup 5
expect 2 "each replica runs on its own processes; start a multiple of 2" train fmnist-cnn --data synthetic --devices 2x11MiB --replicas 2
expect 2 "unknown optimizer 'rmsprop'" train $syn --optimizer rmsprop
expect 2 "--lr 0 must be greater than 0" train $syn --lr 0
expect 2 "must be greater than 0" train $syn --lr -1
expect 2 "--lr 'fast' is not a number" train $syn --lr fast
expect 2 "unknown --lr-schedule 'step'" train $syn --lr-schedule step
expect 2 "--batch '0' must be a whole number" train $syn --batch 0
expect 2 "--batch '8x' must be a whole number" train $syn --batch 8x
expect 2 "--epochs '-1' must be a whole number" train $syn --epochs -1
expect 2 "--limit '0' must be a whole number" train fmnist-cnn --data synthetic --limit 0
expect 2 "--momentum 1.5 must be" train $syn --optimizer sgd --momentum 1.5
expect 2 "--momentum applies to --optimizer sgd" train $syn --momentum 0.9
expect 2 "--weight-decay -0.1 must not be negative" train $syn --weight-decay -0.1
expect 2 "--micro-batch 16 is larger than --batch 8" train $syn --batch 8 --micro-batch 16
expect 2 "--seed 'x' must be a whole number" train $syn --seed x
expect 2 "unknown option '--frobnicate'" train $syn --frobnicate
expect 2 "needs a value" train $syn --batch
expect 2 "unexpected argument 'extra'" train $syn extra
expect 2 "neither a zoo model nor a model file" train no-such-model --data synthetic
expect 2 "device" train $syn --devices 0x1MiB
expect 2 "Fashion-MNIST has 1x28x28 images" train resnet18 --data fashion-mnist

# Plans and pipelines: what makes no sense is a usage error (2).
expect 2 "--devices" train $syn --devices 2xlots
expect 2 "--microbatches 5 does not divide --batch 16" train $syn --batch 16 --microbatches 5
expect 2 "--micro-batch 5 does not divide --batch 16 into equal micro-batches; the divisors of 16: 1, 2, 4, 8, 16$" \
    train $syn --batch 16 --micro-batch 5
expect 2 "not both" train $syn --batch 16 --micro-batch 4 --microbatches 4
expect 2 "unknown --schedule 'zigzag'" train $syn --schedule zigzag
expect 2 "unknown --recompute 'some'" train $syn --recompute some
expect 2 "--chunks applies to --schedule interleaved" train $syn --chunks 2
expect 2 "has no block 'nosuch'" train $syn --devices 2x64MiB --split nosuch
expect 2 "'head' is the last block" train $syn --devices 2x64MiB --split head
expect 2 "2 cuts for 2 stages: 2 stages take 1 .*: name 1, or give 3 devices$" train $syn --devices 2x64MiB --split conv1,conv2
expect 2 "--split needs a fixed --schedule" train $syn --devices 2x64MiB --split conv1 --schedule auto
expect 1 "block 'fc' does not fit even alone" train fmnist-cnn --data synthetic --devices 4x4MiB --batch 16 \
    --epochs 1 --limit 16 --schedule auto
expect 2 "--headroom '95%' must be between 0 and 0.9" train $syn --headroom 95%
expect 2 "--device-speed '0' must be a positive" train $syn --device-speed 0
expect 2 "cannot open profile" train $syn --profile "$tmp.no-such-profile.json"
# a FIFO as --profile is refused before a byte is read (opening it waited for a writer forever, and SIGTERM only
# asked the run to stop after its first step)
mkfifo "$tmp.fifo.json"
expect_soon 2 "cannot read profile $tmp.fifo.json: it is a FIFO, not a file" train $syn --profile "$tmp.fifo.json"
expect 2 "12 training samples are fewer than --batch 16" train fmnist-cnn --data synthetic --limit 12 --batch 16

# Several devices: every schedule trains, and every device peaks exactly
# where the plan said.
two="fmnist-cnn --data synthetic --limit 64 --batch 16 --devices 2x32MiB"
for s in gpipe 1f1b zb-h1 interleaved; do
    expect 0 "peaks    measured = planned on every device" train $two --schedule $s
done
expect 0 "^epoch 1:" train $two --microbatches 2
expect 0 "conv1\.\.fc" train $two --split fc
expect 0 "deferred BatchNorm" train $two --deferred-bn
expect 0 "device 2 cpu:2: peak [0-9]* bytes measured, [0-9]* planned: equal" \
    train fmnist-cnn --data synthetic --limit 32 --batch 8 --devices 24MiB,2x16MiB --schedule gpipe
expect 0 "mem [0-9.]*/32M [0-9.]*/32M$" train $two
# The same seed gives the same numbers on any split of the model.
checks=$((checks + 1))
a=$("$BRIGADE" train $two --seed 3 --split conv1 2>&1 | sed -n 's/^epoch 1: \(.*test loss [0-9.]*\).*/\1/p')
b=$("$BRIGADE" train $two --seed 3 --split conv2 2>&1 | sed -n 's/^epoch 1: \(.*test loss [0-9.]*\).*/\1/p')
if [ -n "$a" ] && [ "$a" = "$b" ]; then
    echo "ok: two splits give the same losses ($a)"
else
    fail "splits conv1 and conv2 gave '$a' and '$b'"
fi

# brigade plan and brigade train agree on every device's peak, to the byte,
# and training measures the same: the plan's JSON peaks against train's
# measured ones.
agree() {
    checks=$((checks + 1))
    plan=$("$BRIGADE" plan "$@" --optimizer adam --json 2>&1 | sed -n 's/.*"peak_bytes": *\([0-9]*\).*/\1/p' | tr '\n' ' ')
    trained=$("$BRIGADE" train "$@" --optimizer adam --data synthetic --limit 16 2>&1 |
        sed -n 's/^device [0-9]* [^ ]*: peak \([0-9]*\) bytes measured, [0-9]* planned: equal.*/\1/p' | tr '\n' ' ')
    if [ -n "$plan" ] && [ "$plan" = "$trained" ]; then
        echo "ok: plan and train peak at $plan for $*"
    else
        fail "plan peaks '$plan', train peaks '$trained' for $*"
    fi
}
agree fmnist-cnn --devices 3x32MiB --batch 8
agree fmnist-cnn --devices 3x8MiB --batch 8 --headroom 0 --device-speed 50 --link-speed 0
agree fmnist-cnn --devices 2x32MiB --batch 8 --schedule gpipe --split conv2
agree fmnist-cnn --devices 2x32MiB --batch 8 --schedule interleaved --microbatches 4
agree fmnist-cnn --devices 2x32MiB --batch 8 --schedule zb-h1 --recompute all
agree resnet18 --input 3x32x32 --classes 4 --width-mult 0.125 --devices 4x16MiB --batch 8 --microbatches 2
agree vgg16 --input 3x32x32 --classes 4 --width-mult 0.125 --devices 24MiB,2x16MiB --batch 4 --microbatches 2 \
    --schedule gpipe
agree inception-v3 --input 3x75x75 --classes 4 --width-mult 0.125 --devices 3x32MiB --batch 4 --microbatches 2 \
    --schedule zb-h1 --split stem,mixed4

# A tiny synthetic run prints the settings, progress and the epoch line.
expect 0 "^epoch 1: train loss [0-9.]* acc [0-9.]*%, test loss [0-9.]* acc [0-9.]*%, [0-9.]* s ([0-9]* samples/s)" \
    train fmnist-cnn --data synthetic --limit 256 --epochs 1 --batch 32 --devices 1x64MiB
expect 0 "adam lr 0.001" train $syn --devices 1x64MiB
expect 0 "sgd lr 0.05 momentum 0.9" train $syn --optimizer sgd --lr 0.05 --momentum 0.9 --devices 1x64MiB
expect 0 "lr 0.01 (cosine to 0 over 4 steps)" train $syn --batch 16 --lr 0.01 --lr-schedule cosine \
    --devices 1x64MiB
expect 0 "micro-batches of 8" train $syn --batch 32 --micro-batch 8 --devices 1x64MiB
expect 0 "step 2/2 (100%)" train $syn --batch 32 --devices 1x64MiB
expect 0 "^epoch 2:" train fmnist-cnn --data synthetic --limit 32 --epochs 2 --batch 16 --width-mult 0.25 \
    --devices 1x16MiB
# Any zoo model trains on synthetic data at a small input.
expect 0 "^epoch 1:" train resnet18 --input 3x32x32 --classes 4 --width-mult 0.125 --data synthetic --limit 16 \
    --batch 8 --devices 1x64MiB

# The same seed gives the same numbers (the timing aside).
checks=$((checks + 1))
a=$("$BRIGADE" train $syn --batch 16 --devices 1x64MiB --seed 5 2>&1 | sed -n 's/^epoch 1: \(.*test loss [0-9.]*\).*/\1/p')
b=$("$BRIGADE" train $syn --batch 16 --devices 1x64MiB --seed 5 2>&1 | sed -n 's/^epoch 1: \(.*test loss [0-9.]*\).*/\1/p')
if [ -n "$a" ] && [ "$a" = "$b" ]; then
    echo "ok: the same seed gives the same losses ($a)"
else
    fail "the same seed gave '$a' and '$b'"
fi

# Per-pixel outputs need label maps, which synthetic data does not have.
expect 2 "per-pixel labels come from a segmentation folder" train unet --data synthetic --limit 8 --classes 2 --input 1x64x64 --width-mult 0.125

# A plan that does not fit: exit 1 before training, the planner's
# explanation and a hint.
expect 1 "out of memory: the plan does not fit 1x64KiB, so training does not start" train $syn --devices 1x64KiB
expect 1 "hint: the weights, gradients and optimizer state alone need about" train $syn --devices 1x64KiB
expect 1 "hint: give the device more memory.*smaller --batch" train $syn --devices 1x8MiB --batch 64
expect 1 "4 devices of 8.00 MiB would fit this batch" train $syn --devices 1x8MiB --batch 64
checks=$((checks + 1))
if "$BRIGADE" train $syn --devices 1x8MiB --batch 64 2>&1 | grep -q "^epoch\|step 1/"; then
    fail "a plan that does not fit started training"
else
    echo "ok: a plan that does not fit trains nothing"
fi

# A missing data set is a failure (1) with the library's message.
mkdir -p "$tmp.empty"
expect 1 "cannot open" train fmnist-cnn --data fashion-mnist --data-dir "$tmp.empty"
# ...and a FIFO in an IDX file's place is refused, not waited on for ever
mkfifo "$tmp.empty/train-labels-idx1-ubyte.gz"
expect_soon 1 "train-labels-idx1-ubyte.gz: it is a FIFO, not a file" train fmnist-cnn --data fashion-mnist \
    --data-dir "$tmp.empty"
rm "$tmp.empty/train-labels-idx1-ubyte.gz"
expect 2 "--data-dir applies to --data fashion-mnist" train $syn --data-dir "$tmp.empty"

# The main job, small: at batch 64 in 16 micro-batches the Fashion-MNIST CNN
# does not fit one 8 MiB device (with either CPU convolution), and trains
# across four of them to at least 88% test accuracy in 2 epochs
# (bench/README.md has the numbers).
fmdir=${BRIGADE_DATA_DIR:-${BRG_FMNIST_DIR:-/usr/share/datasets/fashion-mnist}}
fm="fmnist-cnn --data fashion-mnist --batch 64 --microbatches 16 --epochs 2 --lr 0.001 --lr-schedule cosine
    --optimizer adam --seed 1"
if [ -f "$fmdir/train-images-idx3-ubyte.gz" ] || [ -f "$fmdir/train-images-idx3-ubyte" ]; then
    expect 1 "the plan does not fit 1x8MiB, so training does not start" train $fm --devices 1x8MiB
    checks=$((checks + 1))
    start=$(date +%s)
    "$BRIGADE" train $fm --devices 4x8MiB >"$out" 2>&1
    rc=$?
    acc=$(sed -n 's/^epoch 2: .*test loss [0-9.]* acc \([0-9.]*\)%.*/\1/p' "$out")
    if [ "$rc" -eq 0 ] && [ -n "$acc" ] && awk -v a="$acc" 'BEGIN { exit !(a >= 88.0) }' &&
        grep -q "^peaks    measured = planned on every device" "$out"; then
        echo "ok: fmnist-cnn across 4x8MiB: $acc% test accuracy after 2 epochs ($(($(date +%s) - start)) s)"
    else
        fail "fmnist-cnn across 4x8MiB exited $rc with test accuracy '$acc'"
        sed 's/^/  | /' "$out"
    fi
else
    echo "skip: no Fashion-MNIST in $fmdir (apt-get install dataset-fashion-mnist)"
fi


# --cuts fine trains the same layers in finer blocks.
expect 0 "conv1.pool" train fmnist-cnn --data synthetic --limit 32 --epochs 1 --batch 8 --devices 3x64MiB --cuts fine

# The evaluation shows its progress on a terminal (a large validation set
# took minutes without a word), cleared before the epoch's line; in a pipe
# nothing of it.
checks=$((checks + 1))
if grep -q "evaluating" "$out"; then fail "an evaluation in a pipe shows its progress"; sed 's/^/  | /' "$out"; fi
if command -v script >/dev/null 2>&1; then
    checks=$((checks + 1))
    script -qec "'$BRIGADE' train fmnist-cnn --data synthetic --limit 64 --batch 32 --epochs 1 --devices 1x64MiB" \
        /dev/null >"$tmp.tty" 2>&1
    if grep -q "evaluating: 16 of 16 test samples.*epoch 1: train loss" "$tmp.tty"; then
        echo "ok: an evaluation on a terminal shows its progress"
    else fail "an evaluation on a terminal shows no progress"; sed 's/^/  | /' "$tmp.tty"; fi
fi

finish
