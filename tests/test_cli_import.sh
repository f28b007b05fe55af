#!/bin/sh
# brigade model import and ONNX files as MODEL: the report (blocks, notes),
# the JSON model and the weights written, the same model through every
# door (the .onnx file, the JSON file), training from the imported weights,
# and bad files and options. The ONNX file is a small PyTorch-style ResNet
# that tests/test_import writes (--write-fixture). Exits 77 when brigade
# was built without the importer.
# $BRIGADE is set by the test harness (tests/Makefile.am).
. "${srcdir:-.}/cli_lib.sh"

fixture=${BRG_BUILDDIR:-..}/tests/test_import
if "$BRIGADE" model import /nonexistent.onnx 2>&1 | grep -q "built without the ONNX importer"; then
    echo "SKIP: brigade was built without the ONNX importer"
    exit 77
fi
if ! "$fixture" --write-fixture "$tmp.net.onnx"; then
    echo "FAIL: $fixture --write-fixture did not write the model"
    exit 1
fi
onnx=$tmp.net.onnx

expect 0 "usage: brigade model import" model import --help
expect 2 "missing MODEL" model import
expect 1 "cannot open ONNX file /nonexistent.onnx" model import /nonexistent.onnx
head -c 100 "$onnx" >"$tmp.cut.onnx"
expect 1 "not an ONNX model" model import "$tmp.cut.onnx"

# The report: layers, blocks at the module boundaries, the dropped Softmax.
expect 0 "20 layers in 6 blocks, 814 parameters (774 trainable)" model import "$onnx"
expect 0 "blocks: conv1 maxpool layer1.0 layer1.1 avgpool fc" model import "$onnx"
expect 0 "note: dropped the final Softmax" model import "$onnx"
expect 0 "nothing written" model import "$onnx"

# The model and its weights written; the same model read back three ways.
expect 0 "wrote $tmp.net.safetensors: the file's weights" model import "$onnx" -o "$tmp.net.json" \
    --weights "$tmp.net.safetensors"
checks=$((checks + 1))
if [ -s "$tmp.net.json" ] && [ -s "$tmp.net.safetensors" ]; then echo "ok: both files written"
else fail "model import did not write $tmp.net.json and $tmp.net.safetensors"; fi
"$BRIGADE" model summary "$onnx" >"$tmp.sum1" 2>/dev/null
"$BRIGADE" model summary "$tmp.net.json" >"$tmp.sum2" 2>/dev/null
checks=$((checks + 1))
if [ -s "$tmp.sum1" ] && cmp -s "$tmp.sum1" "$tmp.sum2"; then echo "ok: the .onnx and the .json summaries agree"
else fail "the summaries of the .onnx file and its JSON differ"; diff "$tmp.sum1" "$tmp.sum2" | head; fi
expect 0 '"name": "layer1.0"' model import "$onnx" -o -

# Every command takes the .onnx file; training starts from its weights.
expect 0 "peak" plan "$onnx" --devices cpu:64MiB,cpu:64MiB --batch 8
expect 0 "the file's weights are not read here" train "$onnx" --data synthetic --limit 16 --batch 8 --epochs 1
expect 0 "weights  from $tmp.net.safetensors" train "$tmp.net.json" --data synthetic --limit 16 --batch 8 \
    --epochs 1 --init-weights "$tmp.net.safetensors"

# A file whose weights are graph inputs without values has none to write.
node=${BRG_ONNX_NODE_TESTS:-/usr/share/libonnx-testdata/data/node}/test_conv_with_strides_padding/model.onnx
if [ -f "$node" ]; then
    expect 1 "gives weight 'W' as a graph input, without values" model import "$node" --weights "$tmp.w.safetensors"
fi
finish
