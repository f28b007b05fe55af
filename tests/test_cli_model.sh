#!/bin/sh
# brigade model: list, summary, export; the published parameter counts;
# round trips through JSON files; exit codes and messages of every error.
# $BRIGADE is set by the test harness (tests/Makefile.am).
. "${srcdir:-.}/cli_lib.sh"

# params KIND ARGS...: the number on the "KIND params:" line of a summary
# (KIND is Total, Trainable or Non-trainable), without separators; empty if
# the summary failed.
params() {
    kind=$1; shift
    "$BRIGADE" model summary "$@" 2>/dev/null | sed -n "s/^$kind params: \([0-9,]*\)\$/\1/p" | tr -d ,
}

# totals ARGS...: the three parameter lines of a summary
totals() {
    "$BRIGADE" model summary "$@" 2>/dev/null | grep -E '^(Total|Trainable|Non-trainable) params: '
}

# --- help and usage ---
expect 0 "usage: brigade model" model --help
expect 0 "usage: brigade model" model -h
expect 0 "usage: brigade model summary" model help summary
expect 0 "usage: brigade model list" model list --help
expect 0 "usage: brigade model summary" model summary --help
expect 0 "examples:" model summary --help
expect 0 "usage: brigade model export" model export --help
expect 0 "\-o FILE" model export --help
# The help names every kind of file MODEL may be.
expect 0 "a Keras model's JSON or a .keras archive" model --help
expect 0 "or Keras file (as 'brigade model import' reads it)" model summary --help
expect 2 "missing subcommand" model
expect 2 "unknown subcommand 'frobnicate'" model frobnicate
expect 2 "unknown subcommand 'frobnicate'" model help frobnicate
expect 2 "expected a subcommand" model --input 3x32x32
expect 2 "unknown option '--bogus'" model summary resnet50 --bogus
expect 2 "unknown option '-x'" model summary resnet50 -x
expect 2 "needs a value" model summary resnet50 --input
expect 2 "unexpected argument 'extra'" model list extra
expect 2 "unexpected argument 'vgg16'" model summary resnet50 vgg16
expect 2 "missing MODEL" model summary
expect 2 "missing MODEL" model export -o "$tmp.json"

# --- list ---
expect 0 "inception-v3" model list
expect 0 "resnet50" model list
expect 0 "^resnet50  *3x224x224  *1,000  *25,557,032 " model list
expect 0 "^inception-v3  *3x299x299  *1,000 " model list

# --- summary: the published counts, exactly ---
expect 0 "^Total params: 23,851,784\$" model summary inception-v3
expect 0 "^Trainable params: 23,817,352\$" model summary inception-v3
expect 0 "^Non-trainable params: 34,432\$" model summary inception-v3
expect 0 "^Trainable params: 25,557,032\$" model summary resnet50
expect 0 "^Trainable params: 138,357,544\$" model summary vgg16
expect 0 "^Trainable params: 11,689,512\$" model summary resnet18
expect 0 "^Parameter memory (float32): 90.99 MiB\$" model summary inception-v3
expect 0 "^Activation memory per sample" model summary inception-v3
expect 0 "^Activation memory for batch 32: " model summary inception-v3 --batch 32
expect 0 "^Blocks: [0-9]" model summary inception-v3
expect 0 "^Block boundaries" model summary inception-v3
expect 0 "^  after [^ ].* 1 tensor  *[0-9.]* [KMG]iB/sample" model summary resnet50
# U-Net's skips cross block boundaries along with the main path.
expect 0 "^  after .* [2-9] tensors .*/sample" model summary unet
expect 0 "conv2d 3x3/2" model summary inception-v3
expect 0 "maxpool 3x3/2" model summary inception-v3
expect 0 "^  subtotal " model summary resnet50
expect 0 "(block 1 of " model summary resnet50
expect 0 "2048 x   7 x   7" model summary resnet50
expect 0 "^Input: 3 x 512 x 512, " model summary inception-v3 --input 3x512x512
expect 0 "^Total params: 23,851,784\$" model summary inception-v3 --input 3x512x512
expect 0 "^Input: 3 x 299 x 299, 10 classes" model summary inception-v3 --classes 10
expect 0 "^Input: 3 x 64 x 64, " model summary resnet18 --input 64x64

checks=$((checks + 1))
std=$(params Total resnet50)
wide=$(params Total resnet50 --width-mult 2)
if [ -z "$std" ] || [ -z "$wide" ] || [ "$wide" -le "$std" ]; then
    fail "--width-mult 2 should give resnet50 more parameters: '$wide' vs '$std'"
else
    echo "ok: resnet50 --width-mult 2 has $wide parameters, more than $std"
fi

checks=$((checks + 1))
wide=$(params Total inception-v3 --width-mult 2)
if [ -z "$wide" ] || [ "$wide" -le 23851784 ]; then
    fail "--width-mult 2 should give inception-v3 more than 23851784 parameters: '$wide'"
else
    echo "ok: inception-v3 --width-mult 2 has $wide parameters"
fi

# Results on stdout, nothing on stderr.
checks=$((checks + 1))
"$BRIGADE" model summary resnet18 >"$out" 2>"$err"
if [ $? -ne 0 ] || ! grep -q "^Total params: " "$out" || [ -s "$err" ]; then
    fail "summary resnet18 should print to stdout only"; sed 's/^/  | /' "$out" "$err"
else
    echo "ok: summary prints to stdout only"
fi

# --- export and read back ---
for model in inception-v3 resnet50 unet fmnist-cnn; do
    checks=$((checks + 1))
    if ! "$BRIGADE" model export "$model" -o "$tmp.$model.json" >"$out" 2>&1; then
        fail "export $model"; sed 's/^/  | /' "$out"; continue
    fi
    a=$(totals "$model")
    b=$(totals "$tmp.$model.json")
    if [ -z "$a" ] || [ "$a" != "$b" ]; then
        fail "$model and its export differ:"; echo "$a" | sed 's/^/  zoo  | /'; echo "$b" | sed 's/^/  file | /'
    else
        echo "ok: export $model, summary of the file has the same totals"
    fi
done
expect 0 "^wrote $tmp.big.json: model fmnist-cnn, " model export fmnist-cnn --input 1x64x64 --classes 5 --width-mult 1.5 -o "$tmp.big.json"
expect 0 "^Input: 1 x 64 x 64, 5 classes" model summary "$tmp.big.json"
expect 0 "^Trainable params: 421,738\$" model summary "$tmp.fmnist-cnn.json"

checks=$((checks + 1))
"$BRIGADE" model export resnet18 -o - >"$out" 2>"$err"
if [ $? -ne 0 ] || [ ! -s "$out" ]; then
    fail "export -o - should write JSON to stdout"; sed 's/^/  | /' "$err"
elif command -v python3 >/dev/null 2>&1; then
    if python3 -c 'import json,sys; json.load(sys.stdin)' <"$out"; then
        echo "ok: export -o - is valid JSON"
    else
        fail "export -o - is not valid JSON"
    fi
else
    echo "ok: export -o - wrote $(wc -c <"$out") bytes (no python3 here to check the JSON)"
fi

# -o - with --weights: standard output holds the JSON alone, a model file.
checks=$((checks + 1))
"$BRIGADE" model export fmnist-cnn -o - --weights "$tmp.so.st" >"$tmp.so.json" 2>"$err"
if [ "$(head -c 1 "$tmp.so.json")" = "{" ] && grep -q "^wrote $tmp.so.st: the initial weights" "$err" &&
    [ "$(params Total "$tmp.so.json")" = "$(params Total fmnist-cnn)" ]; then
    echo "ok: export -o - --weights: the JSON on standard output, the report on standard error"
else fail "export -o - --weights mixed its report into the JSON: $(head -c 80 "$tmp.so.json")"; fi

# --- errors ---
# Each message is headed by the command that failed.
expect 2 "^brigade model summary: 'resnet51' is neither a zoo model nor a model file" model summary resnet51
expect 2 "zoo models:.*inception-v3" model summary resnet51
expect 2 "zoo models:.*resnet50" model export resnet51 -o "$tmp.x.json"
expect 2 "^brigade model summary: --input '3x0x5' is not CxHxW" model summary inception-v3 --input 3x0x5
expect 2 "^brigade model profile: --input '3x' is not CxHxW" model profile resnet18 --batch 2 --input 3x
expect 2 "^brigade data bench: --input '3x' is not CxHxW" data bench --input 3x
expect 2 "--input '3x299x'" model summary inception-v3 --input 3x299x
expect 2 "--input" model summary inception-v3 --input 299
expect 2 "--input" model summary inception-v3 --input abc
expect 2 "--input" model summary inception-v3 --input 3x299x299x1
expect 2 "--input '16777217x28x28' is not CxHxW or HxW with numbers from 1 to 1048576" model summary fmnist-cnn \
    --input 16777217x28x28
# --classes beyond the zoo's million: refused by the command, without the zoo's "0 = the standard" (0 is refused)
expect 2 "--classes.*1000000" model summary resnet18 --classes 1000001
expect 2 "--width-mult '-1'" model summary inception-v3 --width-mult -1
expect 2 "--width-mult '0'" model summary inception-v3 --width-mult 0
expect 2 "--width-mult 'wide'" model summary inception-v3 --width-mult wide
expect 2 "--width-mult 'nan'" model summary inception-v3 --width-mult nan
expect 2 "--classes '0'" model summary resnet50 --classes 0
expect 2 "--classes '1.5'" model summary resnet50 --classes 1.5
expect 2 "--classes '-3'" model summary resnet50 --classes -3
expect 2 "--batch '0'" model summary resnet50 --batch 0
expect 2 "--batch 'many'" model summary resnet50 --batch many
expect 2 "unknown option '--batch'" model export resnet50 --batch 2 -o "$tmp.x.json"
# An input the architecture cannot take (VGG's five poolings need 32x32):
# the zoo explains.
expect "1|2" "." model summary vgg16 --input 3x16x16
expect 2 "unknown option '--help=x'\|does not take" model summary resnet50 --help=x
expect 2 "\-o FILE" model export resnet50
expect 1 "$tmp.nodir/x.json" model export resnet50 -o "$tmp.nodir/x.json"

printf '{ "name": "broken", "input": [3, 32, 32], "blocks": [ \n' >"$tmp.bad.json"
expect "1|2" "$tmp.bad.json" model summary "$tmp.bad.json"
expect "1|2" "$tmp.bad.json" model export "$tmp.bad.json" -o "$tmp.x.json"
printf 'not json at all\n' >"$tmp.bad2.json"
expect "1|2" "$tmp.bad2.json" model summary "$tmp.bad2.json"
expect 1 "$tmp.missing.json" model summary "$tmp.missing.json"
if [ -f "$tmp.resnet50.json" ]; then
    expect 2 "model file" model summary "$tmp.resnet50.json" --input 3x512x512
    expect 2 "model file" model summary "$tmp.resnet50.json" --width-mult 2
    expect 2 "model file" model export "$tmp.resnet50.json" --classes 10 -o "$tmp.x.json"
fi

# The malformed model files of the JSON reader's tests: each is refused
# with its file name, never a crash.
models=${srcdir:-.}/models
if [ -d "$models/bad" ]; then
    for f in "$models"/bad/*.json; do
        [ -f "$f" ] || continue
        expect "1|2" "$f" model summary "$f"
    done
fi
if [ -f "$models/tiny-inception.json" ]; then
    expect 0 "^Total params: " model summary "$models/tiny-inception.json"
fi

# A failed write to stdout is a failure, not success.
if [ -w /dev/full ]; then
    checks=$((checks + 1))
    "$BRIGADE" model summary resnet18 >/dev/full 2>"$err"
    if [ $? -ne 1 ]; then fail "summary to a full disk should exit 1"; else echo "ok: summary >/dev/full exits 1"; fi
fi

# a total past 2^64 bytes is said so (it printed 16777216.00 TiB, 2^64 saturated)
printf '%s' '{"format":"brigade-model","version":1,"name":"ovf","input":{"channels":1,"height":1048576,
"width":1048576},"blocks":[{"name":"b1","layers":[{"name":"c","type":"conv2d","inputs":["input"],"out_channels":1,
"kernel":1,"bias":false},{"name":"r","type":"relu","inputs":["c"]}]},{"name":"b2","layers":[{"name":"g",
"type":"global_avgpool","inputs":["r"]},{"name":"fc","type":"linear","inputs":["g"],"out_features":2,
"bias":true}]}]}' >"$tmp.ovf.json"
expect 0 "^Activation memory for batch 16777216: more than 16 EiB" model summary "$tmp.ovf.json" --batch 16777216
expect 0 "^Activation memory for batch 8192: 65536.00 TiB" model summary "$tmp.ovf.json" --batch 8192

finish
