#!/bin/sh
# brigade plan: the table, the bars and the JSON; plans that fit and plans
# that do not (exit 2 with the reason, the fewest devices and the largest
# batch); manual cuts; the automatic choice; measured times from a
# profile; every command-line error.
# $BRIGADE is set by the test harness (tests/Makefile.am).
. "${srcdir:-.}/cli_lib.sh"
# The byte counts below are planned with the im2col convolution's workspaces
# (oneDNN's depend on the machine's ISA); test_cli_train.sh and the C tests
# plan and measure with the default.
BRG_CPU_CONV=im2col
export BRG_CPU_CONV

P="plan inception-v3"

# --- help and usage errors ---
expect 0 "usage: brigade plan MODEL" plan --help
expect 0 "the cut goes" plan -h
expect 0 "plan " --help
expect 2 "missing MODEL" plan --devices 2x1GiB --batch 8
expect 2 "missing --devices" $P --batch 8
expect 2 "missing --batch" $P --devices 7x12GiB
expect 2 "unexpected argument 'vgg16'" $P vgg16 --devices 2x1GiB --batch 8
expect 2 "unknown option '--bogus'" $P --devices 2x1GiB --batch 8 --bogus
expect 2 "needs a value" $P --devices 2x1GiB --batch
expect 2 "neither a zoo model nor a model file" plan no-such-model --devices 2x1GiB --batch 8
expect 2 "\-\-devices: .*'12XB'" $P --devices 12XB --batch 8
expect 2 "\-\-devices: .*count" $P --devices 0x12GiB --batch 8
# Sizes and numbers are decimal: strtod's hexadecimal made 7x0x10GiB seven 16 GiB devices.
expect 2 "\-\-devices: device '7x0x10GiB': '0x10GiB' is not a size" $P --devices 7x0x10GiB --batch 8
expect 2 "\-\-headroom '0x1p-2' is not a number" $P --devices 7x12GiB --batch 8 --headroom 0x1p-2
# cuda:local: each rank's own GPU (one process: GPU 0), alone in its list
expect 0 "cuda:local.1  *1.00 GiB" plan fmnist-cnn --devices cuda:local:2x1GiB --batch 64
expect 2 "cuda:local names each rank's own GPU and stands alone" plan fmnist-cnn --devices cuda:local:1GiB,2x1GiB --batch 64
expect 2 "or cuda:local\[:\[Nx\]SIZE|@CARD\]" plan fmnist-cnn --devices cuda:locale --batch 64
# Whole GPUs taken as cards (@CARD): each the card less its reserve (512 MiB + 5%), on any
# machine; the plan says where the capacity came from, per run of one card size.
expect 0 "cuda:3  *10.90 GiB" plan fmnist-cnn --devices cuda:0-3@12GiB --batch 64
grep -q "^cards: cuda:0 to cuda:3, cards of 12.00 GiB, less the 1.10 GiB kept for the CUDA context and libraries: \
10.90 GiB each$" "$out" || fail "plan on cuda:0-3@12GiB does not say where the capacity came from"
expect 0 "^cards: cuda:1 to cuda:3, cards of 12.00 GiB" plan fmnist-cnn --devices cuda:0@16GiB,1-3@12GiB --batch 64
grep -q "^cards: cuda:0, a card of 16.00 GiB, less the 1.30 GiB .*: 14.70 GiB$" "$out" ||
    fail "plan on cuda:0@16GiB,1-3@12GiB does not name the 16 GiB card"
expect 0 '"card_bytes": 12884901888' plan fmnist-cnn --devices cuda:0-3@12GiB --batch 64 --json
# A run of cards names consecutive GPUs only: cuda:0 and cuda:5 are not "cuda:0 to cuda:5".
expect 0 "^cards: cuda:5, a card of 12.00 GiB" plan fmnist-cnn --devices cuda:0@12GiB,5@12GiB --batch 64
grep -q "^cards: cuda:0, a card of 12.00 GiB" "$out" && ! grep -q "cuda:0 to" "$out" ||
    fail "plan on cuda:0@12GiB,5@12GiB names a run of cards from cuda:0 to cuda:5"
expect 2 "device 'cuda:0-3:1GiB': expected cuda:GPU" plan fmnist-cnn --devices cuda:0-3:1GiB --batch 64
expect 2 "device 'cuda:0': a card of 256.00 MiB leaves nothing" plan fmnist-cnn --devices cuda:0@256MiB --batch 64
expect 2 "\-\-batch '0' must be a whole number" $P --devices 7x12GiB --batch 0
expect 2 "\-\-batch 'many' must be a whole number" $P --devices 7x12GiB --batch many
# The divisors to choose from, as docs/planning.md says.
expect 2 "\-\-microbatches 5 does not divide --batch 64 .*; the divisors of 64: 1, 2, 4, 8, 16, 32, 64$" \
    $P --devices 7x12GiB --batch 64 --microbatches 5
expect 2 "unknown --schedule 'pipedream'" $P --devices 7x12GiB --batch 64 --schedule pipedream
expect 2 "\-\-chunks applies to --schedule interleaved" $P --devices 7x12GiB --batch 64 --chunks 2
expect 2 "\-\-chunks '1' must be a whole number from 2" $P --devices 4x12GiB --batch 64 --schedule interleaved --chunks 1
expect 2 "at least 2 devices" $P --devices 1x12GiB --batch 64 --schedule interleaved
expect 2 "the v-min schedule needs at least 2 devices" plan fmnist-cnn --devices 1x64MiB --batch 8 --schedule v-min
# What to use instead is what the checks allow (it said 'at most 1 devices').
expect 2 "too few for 2 devices with their chunks: every stage needs a block; use at most 2 chunks$" \
    plan fmnist-cnn --devices 2x64MiB --batch 8 --schedule interleaved --chunks 3
expect 2 "use at most 2 devices, or at most 4 chunks$" $P --devices 3x12GiB --batch 64 --schedule interleaved --chunks 5
expect 2 "too few for 7 devices with their chunks" $P --devices 7x12GiB --batch 64 --schedule interleaved
expect 2 "unknown --recompute 'some'" $P --devices 7x12GiB --batch 64 --recompute some
expect 2 "unknown --optimizer 'rmsprop'" $P --devices 7x12GiB --batch 64 --optimizer rmsprop
expect 2 "\-\-headroom '95%' must be between 0 and 0.9" $P --devices 7x12GiB --batch 64 --headroom 95%
expect 2 "\-\-headroom 'lots' is not a number" $P --devices 7x12GiB --batch 64 --headroom lots
expect 2 "\-\-device-speed '0' must be a positive" $P --devices 7x12GiB --batch 64 --device-speed 0
# GFLOP/s and GB/s beyond a double once in FLOP/s and bytes/s (it said 'the device speed inf FLOP/s').
expect 2 "\-\-device-speed '1e300' is too large" $P --devices 7x12GiB --batch 64 --device-speed 1e300
expect 2 "\-\-link-speed '1e300' is too large" $P --devices 7x12GiB --batch 64 --link-speed 1e300
expect 2 "has 13 blocks, too few for 14 devices" $P --devices 14x12GiB --batch 64

# --- manual cuts: errors ---
expect 2 "has no block 'mixed99'; its blocks are: stem mixed0" $P --devices 3x12GiB --batch 32 --split mixed2,mixed99
expect 2 "'head' is the last block" $P --devices 2x12GiB --batch 32 --split head
expect 2 "in model order" $P --devices 3x12GiB --batch 32 --split mixed7,mixed2
expect 2 "in model order" $P --devices 3x12GiB --batch 32 --split mixed2,mixed2
# Counts in the singular, and what to change (it said '1 cuts for 3 stages: 3 stages need exactly 2 cuts').
expect 2 "1 cut for 3 stages: 3 stages take 2 (each named block ends a stage but the last): name 2, or give 2 devices" \
    $P --devices 3x12GiB --batch 32 --split mixed2
expect 2 "1 cut for 1 stage: one stage takes no cuts: drop them, or give 2 devices$" \
    $P --devices 1x12GiB --batch 32 --split mixed2
expect 2 "1 cut for 4 stages: 4 stages take 3 (each named block ends a stage but the last): name 3$" \
    $P --devices 2x12GiB --batch 32 --split mixed2 --schedule zb-v
expect 2 "expected block names separated by commas" $P --devices 3x12GiB --batch 32 --split mixed2,,mixed7
expect 2 "\-\-split needs a fixed --schedule" $P --devices 3x12GiB --batch 32 --split mixed2,mixed7 --schedule auto

# --- a plan that fits: the table, the prediction, the bars ---
expect 0 "^inception-v3 (3x299x299, 23.8M trainable parameters, 13 blocks) on 7 devices, batch 64" \
    $P --devices 7x12GiB --batch 64
expect 0 "^1f1b, 16 micro-batches of 4, recomputation none, SGD momentum 0.9, headroom 5%" $P --devices 7x12GiB --batch 64
expect 0 "^stage  device  *capacity  blocks  *params  stash/mb x in flight  *recv bufs  *peak  of cap  fwd+bwd/mb" \
    $P --devices 7x12GiB --batch 64
expect 0 "^    0  cpu:0   12.00 GiB  stem  .* x 7 " $P --devices 7x12GiB --batch 64
expect 0 "^    6  cpu:6   12.00 GiB  [a-z0-9]*\.\.head .* x 1 " $P --devices 7x12GiB --batch 64
expect 0 "^predicted: bubble [0-9.]*%, [0-9.]* samples/s" $P --devices 7x12GiB --batch 64
expect 0 "at an assumed 10 TFLOP/s per device and 10 GB/s between stages" $P --devices 7x12GiB --batch 64
expect 0 "at an assumed 2 TFLOP/s per device and free transfers" $P --devices 7x12GiB --batch 64 \
    --device-speed 2000 --link-speed 0
expect 0 "^peaks: from a dry run of each device's program" $P --devices 7x12GiB --batch 64
expect 0 "^peak per stage (full width = capacity, '|' = capacity less 5% headroom)" $P --devices 7x12GiB --batch 64
expect 0 "^   0 \[#*\.*|\.*\] *[0-9.]*%  .* of 12.00 GiB" $P --devices 7x12GiB --batch 64
expect 0 "headroom 10%" $P --devices 7x12GiB --batch 64 --headroom 0.1
# the headroom's '|' stays where it is when a peak passes it (stage 1's 92.9% against 80%)
expect 2 "^   1 \[#\{40\}|#\{6\}\.\.\.\]  92.9%" plan fmnist-cnn --devices 2x5MiB --batch 8 --headroom 20% --split conv2
# a negative zero is 0, and never prints as "-0%"
for h in -0 -0% -0.0; do
    expect 0 "^peak per stage (full width = capacity, '|' = capacity less 0% headroom)" \
        plan fmnist-cnn --devices 2x64MiB --batch 8 --headroom $h
    checks=$((checks + 1))
    ! grep -q -- "-0" "$out" || fail "--headroom $h printed a -0: $(grep -- -0 "$out")"
    expect 0 '"headroom": 0.0,' plan fmnist-cnn --devices 2x64MiB --batch 8 --headroom $h --json
done
expect 0 "gpipe, 8 micro-batches of 8" $P --devices 7x12GiB --batch 64 --schedule gpipe --microbatches 8
expect 0 "^    0  .* x 8 " $P --devices 7x12GiB --batch 64 --schedule gpipe --microbatches 8
expect 0 "zb-h1, 16 micro-batches" $P --devices 7x12GiB --batch 64 --schedule zb-h1
expect 0 ", Adam," $P --devices 7x12GiB --batch 64 --optimizer adam
expect 0 ", SGD," $P --devices 7x12GiB --batch 64 --optimizer sgd
expect 0 "interleaved with 2 chunks per device" $P --devices 4x12GiB --batch 64 --schedule interleaved
expect 0 "^    0  cpu:0 .* + " $P --devices 4x12GiB --batch 64 --schedule interleaved
# each chunk's stash times its own micro-batches in flight (the sum over
# both chunks times both chunks' in flight doubled it)
expect 0 "^    0  cpu:0 .*  [0-9.]* MiB x 8 + [0-9.]* MiB x 4  " $P --devices 4x12GiB --batch 64 --schedule interleaved
# A device's chunks share its budget by what they need, not in halves: at
# 88 MiB 7 of the 126 cuts fit (tried by hand), and the planner finds one
# (in halves none fitted up to 128 MiB, and a block was said to fit no
# device alone); at 80 MiB none fits (by hand, none below 83 MiB), and no
# block is blamed alone.
expect 0 "^    2  cpu:2 .* + " plan resnet18 --input 3x64x64 --devices 3x88MiB --batch 64 --schedule interleaved
expect 2 "nothing fits: no cut of the 10 blocks into 6 stages" plan resnet18 --input 3x64x64 --devices 3x80MiB \
    --batch 64 --schedule interleaved
checks=$((checks + 1))
! grep -q "does not fit even alone" "$out" || fail "a block blamed alone at 80 MiB"
expect 0 "^    1  cpu:1   24.00 GiB" $P --devices 2x24GiB,5x12GiB --batch 256 --microbatches 8 --schedule gpipe
expect 0 "^inception-v3 (3x139x139," $P --devices 2x1GiB --batch 8 --input 3x139x139
# Recomputation only where needed: the stem's stage, marked.
expect 0 "^    0  cpu:0 .* stem\*" $P --devices 4x12GiB --batch 512 --microbatches 8 --schedule gpipe --recompute auto
expect 0 "^\* recomputed in the backward" $P --devices 4x12GiB --batch 512 --microbatches 8 --schedule gpipe \
    --recompute auto
# Times and counts that round to 1000 in 3 digits are the next unit's 1
# (a step of 999.7 us printed '1e+03 us', 999,529 parameters '1e+03K').
expect 0 "(1 ms per step, slowest stage 1 ms per micro-batch)" \
    plan fmnist-cnn --devices 1x64MiB --batch 64 --link-speed 0 --device-speed 1641.2
expect 0 "^fmnist-cnn (1x28x28, 1M trainable parameters," plan fmnist-cnn --devices 1x64MiB --batch 64 --classes 4489
# Times under a microsecond in ns (not "0.0232 us"), under what rounds to 1 ns as "<1 ns" (not "2.42e-05 us")
expect 0 "^    1  cpu:1 .*  2.42 ns$" plan fmnist-cnn --devices 2x64MiB --batch 8 --device-speed 1e6
expect 0 "(10.2 us per step, slowest stage 23.2 ns per micro-batch)" \
    plan fmnist-cnn --devices 2x64MiB --batch 8 --device-speed 1e6
expect 0 "^    0  cpu:0 .*  <1 ns$" plan fmnist-cnn --devices 2x64MiB --batch 8 --device-speed 1e8
expect 0 "slowest stage <1 ns per micro-batch" plan fmnist-cnn --devices 2x64MiB --batch 8 --device-speed 1e8
# The automatic choice says what it chose and why.
expect 0 "^auto: .* samples/s predicted, the best of [0-9]* combinations that fit" \
    $P --devices 4x12GiB --batch 256 --schedule auto
# When no combination fits, auto explains itself as a fixed schedule does
# (it divided by zero here once): the culprit, the fewest devices, the
# largest batch.
expect 2 "^2 devices of 12.00 GiB would fit this batch" \
    $P --devices 1x12GiB --batch 32 --width-mult 7 --schedule auto
expect 2 "^block 'fc' does not fit even alone" plan fmnist-cnn --devices 4x4MiB --batch 16 --schedule auto
# --microbatches with auto: the schedules at that count only (it took 8 of 1).
expect 0 "^auto: zb-h1 with 2 micro-batches of 4, .* the best of 8 combinations that fit (of 8 tried)" \
    plan fmnist-cnn --devices 2x64MiB --batch 8 --schedule auto --microbatches 2
expect 2 "^the largest batch these devices take is 24 (8 micro-batches of 3)" \
    plan fmnist-cnn --devices 2x5MiB --batch 64 --schedule auto --microbatches 8
# ResNet-18 at 32x32 has 1x1 planes in layer4, whose BatchNorm cannot train
# on micro-batches of one sample: auto, the default M and the largest-batch
# search pass over them; asked for, they are refused with what would train.
R18="plan resnet18 --input 3x32x32"
expect 0 "^  *[0-9]* skipped, they cannot train: a micro-batch of 1 sample: BatchNorm layer 'layer4.0.bn1'" \
    $R18 --devices 4x256MiB --batch 16 --schedule auto
expect 0 "^1f1b, 8 micro-batches of 2," $R18 --devices 4x256MiB --batch 16
expect 2 "plan: a micro-batch of 1 sample: BatchNorm layer 'layer4.0.bn1' sees 1x1 planes and training needs more \
than one value per channel; give --microbatches M with batch/M >= 2" \
    $R18 --devices 4x256MiB --batch 16 --microbatches 16
expect 2 "can train: .*; give a batch of at least 2" $R18 --devices 4x256MiB --batch 1 --schedule auto
expect 2 "^no batch fits these devices, not even 2 samples per micro-batch" \
    $R18 --devices 2x64MiB --batch 64 --microbatches 8

# --- manual cuts ---
expect 0 "^    1  cpu:1   12.00 GiB  mixed3\.\.mixed7 " $P --devices 3x12GiB --batch 32 --split mixed2,mixed7
expect 2 "DOES NOT FIT" $P --devices 3x12GiB --batch 1024 --split mixed2,mixed7
expect 2 "the cuts do not fit: device 0 needs" $P --devices 3x12GiB --batch 1024 --split mixed2,mixed7
# Two chunks per device: a device fits when its chunks fit its budget
# together, and under auto only the chunk it needs recomputes (held to half
# the budget each, layer2.1..layer4.0 was recomputed: 87.6 MiB, refused).
expect 0 "^    1  cpu:1 .* layer1\.0\* + layer2\.1\.\.layer4\.0 " plan resnet18 --input 3x64x64 --devices 3x90MiB \
    --batch 32 --schedule interleaved --recompute auto --split stem,layer1.0,layer1.1,layer2.0,layer4.0
# ...and when the dry run finds a device's buffers fragmented, auto
# recomputes more of it, as for a searched cut (it was refused, though
# recomputing one chunk fits: 77.21 MiB)
expect 0 "^    2  cpu:2 .* layer1\.1\.\.layer2\.1\* + layer4\.1\.\.head  .* 77\.21 MiB" plan resnet18 --input 3x64x64 \
    --devices 3x90MiB --batch 32 --schedule interleaved --recompute auto --split stem,layer1.0,layer2.1,layer3.0,layer4.0

# --- nothing fits: exit 2 and why, in the user's terms ---
# GPipe, 8 micro-batches of 32: not on one 12 GiB device, but on seven.
expect 2 "nothing fits: no cut of the 13 blocks into 1 stage fits" \
    $P --devices 1x12GiB --batch 256 --microbatches 8 --schedule gpipe
expect 2 "^3 devices of 12.00 GiB would fit this batch" $P --devices 1x12GiB --batch 256 --microbatches 8 --schedule gpipe
expect 2 "the largest batch these devices take is 120 (8 micro-batches of 15)" \
    $P --devices 1x12GiB --batch 256 --microbatches 8 --schedule gpipe
expect 0 "^predicted" $P --devices 7x12GiB --batch 256 --microbatches 8 --schedule gpipe
# 1F1B keeps 7 micro-batches of the stem on the first device.
expect 2 "block 'stem' does not fit even alone: at best it needs about .*GiB too much" \
    $P --devices 7x12GiB --batch 512 --microbatches 8
expect 2 "no number of 12.00 GiB devices fits this batch: block 'stem'" $P --devices 7x12GiB --batch 512 --microbatches 8
# Devices of different sizes: fewer devices of the largest size may fit,
# and the culprit is held to the device it was on (it said 3, and 'no number').
expect 2 "^1 device of 64.00 MiB would fit this batch" plan fmnist-cnn --devices 1MiB,64MiB --batch 64
MIXED="plan fmnist-cnn --devices 1MiB,1MiB,1MiB,64MiB --batch 64"
expect 2 "^block 'fc' does not fit even alone: at best it needs about 4.79 MiB, and device 2 (1.00 MiB), where it \
comes closest, allows 972.80 KiB (capacity less 5% headroom): 3.84 MiB too much" $MIXED
expect 2 "^1 device of 64.00 MiB would fit this batch" $MIXED
expect 2 '"culprit_device": 2,' $MIXED --json
# A peak within the budget whose buffers leave the free bytes in pieces:
# the arena it needs, not the peak, is what does not fit.
FRAG="plan fmnist-cnn --devices 1x12MiB --batch 64 --microbatches 8 --optimizer adam"
expect 2 "nothing fits: device 0 peaks at 10.87 MiB, but its buffers fragment the arena: it needs an arena of \
11.63 MiB, more than its budget of 11.40 MiB (12.00 MiB less 5% headroom)" $FRAG
expect 2 "^    0  cpu:0 .* 10.87 MiB   90.5% .*  DOES NOT FIT: fragmented, needs an arena of 11.63 MiB$" $FRAG
expect 2 "90.5%  10.87 MiB of 12.00 MiB, needs an arena of 11.63 MiB$" $FRAG
expect 2 '"arena_bytes": 12196096,' $FRAG --json
# Told what the arena costs, the search moves the cut off the device.
expect 0 "^    0  cpu:0 *9.00 MiB  conv1 " plan fmnist-cnn --devices 2x9MiB --batch 64 --microbatches 8

# --- JSON ---
"$BRIGADE" $P --devices 7x12GiB --batch 64 --json >"$tmp.json" 2>&1
for key in '"feasible": true' '"schedule": "1f1b"' '"microbatches": 16' '"stages": \[' '"device": 0' \
    '"capacity_bytes": 12884901888' '"first_block": "stem"' '"last_block": "head"' '"param_bytes": ' \
    '"activation_bytes": ' '"peak_bytes": ' '"in_flight": 7' '"bubble": ' '"samples_per_s": '; do
    checks=$((checks + 1))
    if grep -q -- "$key" "$tmp.json"; then echo "ok: --json has $key"; else fail "--json lacks $key"; fi
done
expect 2 '"feasible": false' $P --devices 1x12GiB --batch 256 --microbatches 8 --schedule gpipe --json
expect 2 '"fewest_devices": 3' $P --devices 1x12GiB --batch 256 --microbatches 8 --schedule gpipe --json
expect 2 '"largest_batch": 120' $P --devices 1x12GiB --batch 256 --microbatches 8 --schedule gpipe --json

# The JSON is all of stdout and parses (when python3 is around).
checks=$((checks + 1))
"$BRIGADE" $P --devices 7x12GiB --batch 64 --json >"$out" 2>"$err"
if [ $? -ne 0 ] || [ -s "$err" ] || [ "$(head -c 1 "$out")" != "{" ]; then
    fail "--json should print only JSON on stdout"; sed 's/^/  | /' "$out" "$err"
elif command -v python3 >/dev/null 2>&1 &&
    ! python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); assert p["feasible"] and len(p["stages"]) == 7' "$out"; then
    fail "--json output does not parse"
else
    echo "ok: --json prints one JSON document"
fi

# --- a model file plans like the zoo model ---
checks=$((checks + 1))
if "$BRIGADE" model export fmnist-cnn -o "$tmp.model.json" >/dev/null 2>&1; then
    echo "ok: exported fmnist-cnn"
    expect 0 "^fmnist-cnn (1x28x28, " plan "$tmp.model.json" --devices 2x64MiB --batch 64
    expect 2 "apply to zoo models" plan "$tmp.model.json" --devices 2x64MiB --batch 64 --classes 10
    # a block named with a comma cannot be named by --split, and the message says why
    sed 's/"name": "conv1",/"name": "a,b",/' "$tmp.model.json" >"$tmp.comma.json"
    expect 2 "has no block 'a'; its blocks are: a,b .*(block 'a,b' has a comma, which --split reads as two names" \
        plan "$tmp.comma.json" --devices 2x64MiB --batch 8 --split a,b
else
    fail "model export fmnist-cnn"
fi

# --- measured per-layer times (--profile) ---
# fc1 is made slow: the plan gives block fc a device of its own, and says
# where its times come from.
profile_layers() {
    cat <<EOF
  "conv1.conv": {"forward_ms": 1, "backward_input_ms": 0, "backward_weight_ms": 1},
  "conv1.bn": {"forward_ms": 0.1, "backward_input_ms": 0.1},
  "conv1.relu": {"forward_ms": 0.1, "backward_input_ms": 0.1},
  "conv1.pool": {"forward_ms": 0.1, "backward_input_ms": 0.1},
  "conv2.conv": {"forward_ms": 1, "backward_input_ms": 1, "backward_weight_ms": 1},
  "conv2.bn": {"forward_ms": 0.1, "backward_input_ms": 0.1},
  "conv2.relu": {"forward_ms": 0.1, "backward_input_ms": 0.1},
  "conv2.pool": {"forward_ms": 0.1, "backward_input_ms": 0.1},
  "fc1": {"forward_ms": 40, "backward_input_ms": 40, "backward_weight_ms": 40},
  "fc1.relu": {"forward_ms": 0.1, "backward_input_ms": 0.1},
  "fc1.dropout": {"forward_ms": 0.1, "backward_input_ms": 0.1}$1
EOF
}
write_profile() { # $1: file, $2: text after the fc1.dropout entry
    { echo '{"format": "brigade-profile", "version": 1, "micro_batch": 16, "device": "test", "layers": {'
      profile_layers "$2"; echo '}}'; } >"$1"
}
FC2=',
  "fc2": {"forward_ms": 0.1, "backward_input_ms": 0.1, "backward_weight_ms": 0.1}'
write_profile "$tmp.profile.json" "$FC2"
F="plan fmnist-cnn --devices 3x1GiB --batch 64"
expect 0 "at an assumed 10 TFLOP/s" $F
expect 0 "  1  cpu:1   1.00 GiB  conv2 " $F
expect 0 "at measured per-layer times from $tmp.profile.json" $F --profile "$tmp.profile.json"
expect 0 "  1  cpu:1   1.00 GiB  fc  " $F --profile "$tmp.profile.json"
expect 0 "slowest stage 60.2 ms per micro-batch" $F --profile "$tmp.profile.json"
expect 0 "\"profile\": \"$tmp.profile.json\"" $F --profile "$tmp.profile.json" --json
expect 0 "\"profile\": null" $F --json
write_profile "$tmp.bad.json" ""
expect 2 "profile '$tmp.bad.json' has no times for layer 'fc2'" $F --profile "$tmp.bad.json"
write_profile "$tmp.bad.json" "$FC2"',
  "fc3": {"forward_ms": 1, "backward_input_ms": 1}'
expect 2 "names layer 'fc3', which model 'fmnist-cnn' does not have" $F --profile "$tmp.bad.json"
write_profile "$tmp.bad.json" ',
  "fc2": {"forward_ms": -1, "backward_input_ms": 0.1, "backward_weight_ms": 0.1}'
expect 2 "layer 'fc2': \"forward_ms\" is -1" $F --profile "$tmp.bad.json"
# a "time" past 1e9 ms summed to inf, which the plan blamed on memory
write_profile "$tmp.bad.json" ',
  "fc2": {"forward_ms": 1e308, "backward_input_ms": 0.1, "backward_weight_ms": 0.1}'
expect 2 "layer 'fc2': \"forward_ms\" is 1e+308; times must be finite, >= 0 and at most 1e9 ms" $F \
    --profile "$tmp.bad.json"
echo '{"format": "brigade-profile", "version": 1, "layers": {' >"$tmp.bad.json"
expect 2 "profile '$tmp.bad.json' is not valid JSON" $F --profile "$tmp.bad.json"
expect 2 "cannot open profile $tmp.none.json" $F --profile "$tmp.none.json"
# a profile given as MODEL: a file of another kind (exit 2), with where it goes
expect 2 "is not a brigade model file but a profile of layer times .*this file as --profile" plan \
    "$tmp.profile.json" --devices 2x64MiB --batch 8

# Replicas: the layout and the gradient sums in the predicted step; the
# devices must split into equal replicas of the same sizes.
R="plan fmnist-cnn --devices 4x1GiB --batch 64 --replicas 2"
expect 0 "on 2 devices, batch 32 per replica, 2 replicas (4 devices, batch 64 in all)" $R
expect 0 "replica 0 on devices 0..1, replica 1 on devices 2..3" $R
expect 0 "waiting for the gradient sums over 2 replicas" $R
expect 0 '"replicas": 2' $R --json
expect 2 "cannot be shared by 3 replicas" plan fmnist-cnn --devices 4x1GiB --batch 64 --replicas 3
expect 2 "same kinds and sizes" plan fmnist-cnn --devices 1GiB,2GiB --batch 64 --replicas 2
expect 2 "does not split into 2 equal shares" plan fmnist-cnn --devices 2x1GiB --batch 63 --replicas 2
# --sync-bn: said in the layout and the JSON; it needs replicas.
expect 0 "BatchNorm synchronized over them" $R --sync-bn
expect 0 '"sync_batchnorm": true' $R --sync-bn --json
expect 2 "give --replicas 2 or more" plan fmnist-cnn --devices 2x1GiB --batch 64 --sync-bn

# A failed write to stdout is a failure, not success.
if [ -w /dev/full ]; then
    checks=$((checks + 1))
    "$BRIGADE" $P --devices 7x12GiB --batch 64 >/dev/full 2>"$err"
    if [ $? -ne 1 ]; then fail "plan to a full disk should exit 1"; else echo "ok: plan >/dev/full exits 1"; fi
fi


# --cuts fine: the stem of Inception-v3 cut after each convolution and pool.
expect 0 "stem.Conv2d_1a_3x3" plan inception-v3 --devices 7x12GiB --batch 256 --microbatches 8 --schedule gpipe \
    --cuts fine
expect 0 "20 blocks" model summary inception-v3 --cuts fine
expect 2 "--cuts 'coarse' is not 'fine' or 'blocks'" plan inception-v3 --devices 7x12GiB --batch 8 --cuts coarse
# A dry run reserves address space as large as each device (no memory):
# under a ulimit -v that is smaller, the message names the limit.
checks=$((checks + 1))
(ulimit -v 4000000 && exec "$BRIGADE" plan fmnist-cnn --devices 1x12GiB --batch 64) >"$out" 2>&1
got=$?
if [ "$got" -eq 1 ] && grep -q "cannot reserve 12.00 GiB of address space .*(ulimit -v); .*raise the limit" "$out"; then
    echo "ok: plan under ulimit -v names the limit (exit 1)"
else
    fail "plan under ulimit -v exited $got:"; sed 's/^/  | /' "$out"
fi

# --split whose cuts miss on two devices names both (it named the first alone)
expect 2 "the cuts do not fit: device 0 needs .* at its peak (dry run), .*; device 1 too: [0-9.]* MiB against" plan \
    fmnist-cnn --devices 2x1MiB --batch 8 --split conv2
# A convolution over a 262144x262144 image (2^36 elements): the model
# reader takes it, and oneDNN divided by zero sizing its workspace (SIGFPE,
# exit 136); such images go to im2col, and the plan says nothing fits.
printf '%s' '{"format":"brigade-model","version":1,"name":"huge","input":{"channels":1,"height":262144,
"width":262144},"blocks":[{"name":"b1","layers":[{"name":"c","type":"conv2d","inputs":["input"],"out_channels":1,
"kernel":1,"bias":false},{"name":"r","type":"relu","inputs":["c"]}]},{"name":"b2","layers":[{"name":"g",
"type":"global_avgpool","inputs":["r"]},{"name":"fc","type":"linear","inputs":["g"],"out_features":2,
"bias":true}]}]}' >"$tmp-huge.json"
expect 2 "block 'b1' does not fit even alone: at best it needs about 1.25 TiB" plan "$tmp-huge.json" \
    --devices 2x64GiB --batch 1

finish
