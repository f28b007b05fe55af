#!/bin/sh
# brigade model import, and ONNX and Keras files as MODEL: the report
# (blocks, notes), the JSON model and the weights written, the same model
# through every door (the imported file, the JSON file), training from the
# imported weights, and bad files and options. The ONNX file is a small
# PyTorch-style ResNet that tests/test_import writes (--write-fixture); the
# Keras files are tests/models/keras/. The ONNX part is skipped where
# brigade was built without the ONNX importer.
# $BRIGADE is set by the test harness (tests/Makefile.am).
. "${srcdir:-.}/cli_lib.sh"

keras=${srcdir:-.}/models/keras
expect 0 "usage: brigade model import" model import --help
expect 0 "^is wrong, or FILE is of another kind (an image, a PyTorch or HDF5 file, a" model import --help
expect 2 "missing MODEL" model import
expect 2 "imports ONNX (.onnx) and Keras (.json, .keras) files, by the name's ending" model import "$keras/README"
expect 0 "312 layers in 20 blocks, 23,851,784 parameters (23,817,352 trainable)" model import "$keras/inception_v3.json"
expect 0 "blocks: conv2d conv2d_1 conv2d_2 max_pooling2d conv2d_3 conv2d_4 max_pooling2d_1 mixed0" \
    model import "$keras/inception_v3.json"
expect 1 "gives no values for weight 'conv/kernel' (a Keras JSON file holds none" \
    model import "$keras/sequential.json" --weights "$tmp.k.safetensors"
expect 0 "Total params: 13,610" model summary "$keras/sequential.json"
# The import's notes on standard error, headed as the CLI's other notes.
expect 0 "^brigade model summary: note: $keras/sequential.json: dropped the softmax of the final layer 'fc'" \
    model summary "$keras/sequential.json"
expect 0 "wrote $tmp.k.json" model import "$keras/sequential.json" -o "$tmp.k.json"
# one file for two things, or over the file read: refused, nothing written
cp "$keras/sequential.json" "$tmp.own.json"
expect 2 "-o and FILE name the same file" model import "$tmp.own.json" -o "$tmp.own.json"
expect 2 "--weights and FILE name the same file" model import "$tmp.own.json" --weights "$tmp.own.json"
expect 2 "--weights and -o name the same file" model import "$keras/sequential.json" -o "$tmp.same" \
    --weights "$tmp.same"
checks=$((checks + 1))
cmp -s "$keras/sequential.json" "$tmp.own.json" && [ ! -e "$tmp.same" ] || fail "a refused import wrote a file"
expect 0 "Total params: 13,610" model summary "$tmp.k.json"
expect 2 "a brigade model file, not a Keras one" model import "$tmp.k.json"
expect 0 "peak" plan "$keras/inception_v3.json" --devices 7x12GiB --batch 64 --microbatches 4
if "$BRIGADE" model import "$keras/small_cnn.keras" >/dev/null 2>&1; then
    expect 0 "wrote $tmp.cnn.safetensors: the file's weights" model import "$keras/small_cnn.keras" \
        -o "$tmp.cnn.json" --weights "$tmp.cnn.safetensors"
    expect 0 "weights  from $tmp.cnn.safetensors" train "$tmp.cnn.json" --data synthetic --limit 16 --batch 8 \
        --epochs 1 --init-weights "$tmp.cnn.safetensors"
    expect 2 "small_cnn.keras holds its own weights" model export "$keras/small_cnn.keras" --weights "$tmp.cnn2.st"
else
    echo "note: brigade was built without .keras archives"
fi
echo '{"class_name": "Sequential", "config": {"layers": [{"class_name": "LSTM", "config": {"name": "rnn"}}]}}' \
    >"$tmp.bad.json"
expect 1 "not read yet\|a layer brigade does not import\|no input shape" model import "$tmp.bad.json"

# Other kinds of files: said what they are and how to bring the model in,
# not where their bytes stop being JSON; the wrong file given is a mistake
# in the command line (exit 2) for every command that takes MODEL.
printf '\211HDF\r\n\032\n' >"$tmp.legacy.h5"
expect 2 "legacy.h5 is not a brigade model file but an HDF5 file, as Keras 2's model.save('model.h5') writes" \
    model summary "$tmp.legacy.h5"
expect 2 "legacy.h5: brigade imports ONNX (.onnx) and Keras (.json, .keras) files; this is an HDF5 file" \
    model import "$tmp.legacy.h5"
printf 'PK\003\004' >"$tmp.net.pth"
expect 2 "net.pth is not a brigade model file but a PyTorch file, which brigade does not read: export the model to" \
    model summary "$tmp.net.pth"
expect 2 "net.pth: brigade imports ONNX (.onnx) and Keras (.json, .keras) files; this is a PyTorch file" \
    model import "$tmp.net.pth"
# A folder is no model file (reading it said "Is a directory", exit 1).
mkdir -p "$tmp-folder.onnx" "$tmp-folder.json"
expect 2 "folder.onnx is a folder, not a model file: give the model's file" model import "$tmp-folder.onnx"
expect 2 "folder.onnx is a folder, not a model file" plan "$tmp-folder.onnx" --devices 2x1GiB --batch 8
expect 2 "folder.json is a folder, not a model file" model summary "$tmp-folder.json"
expect 2 "folder.json is a folder, not a model file" train "$tmp-folder.json" --data fashion-mnist --devices 1x1GiB
expect 2 "net.pth is not a brigade model file but a PyTorch file" plan "$tmp.net.pth" --devices 2x64MiB --batch 8
expect 2 "net.pth is not a brigade model file but a PyTorch file" train "$tmp.net.pth" --data synthetic --limit 8 \
    --batch 8 --epochs 1
cp "$tmp.net.pth" "$tmp.model"
expect 2 "model is not a brigade model file but a zip archive: brigade reads one as a Keras archive when its name" \
    model summary "$tmp.model"
# An image, whatever its name: said to be data, with the kinds MODEL may be.
printf '\211PNG\r\n\032\n\0\0\0\rIHDR' >"$tmp.photo.png"
expect 2 "photo.png: brigade imports ONNX (.onnx) and Keras (.json, .keras) files; this is an image: images are data, \
given to train and eval as --data DIR" model import "$tmp.photo.png"
expect 2 "photo.png is not a brigade model file but an image: .*(brigade reads its JSON model files, ONNX files \
(.onnx) and Keras models (.json, .keras))" model summary "$tmp.photo.png"
cp "$tmp.photo.png" "$tmp.photo.onnx"
expect 2 "photo.onnx: brigade imports ONNX .*; this is an image" plan "$tmp.photo.onnx" --devices 2x64MiB --batch 8
printf '\377\330\377\340\0\020JFIF' >"$tmp.photo.json"
expect 2 "photo.json: brigade imports ONNX .*; this is an image" model import "$tmp.photo.json"

fixture=${BRG_BUILDDIR:-..}/tests/test_import
if "$BRIGADE" model import /nonexistent.onnx 2>&1 | grep -q "built without the ONNX importer"; then
    echo "SKIP: brigade was built without the ONNX importer: the ONNX part"
    finish
    exit
fi
if ! "$fixture" --write-fixture "$tmp.net.onnx"; then
    echo "FAIL: $fixture --write-fixture did not write the model"
    exit 1
fi
onnx=$tmp.net.onnx
# Counts of one are singular.
"$fixture" --write-fixture "$tmp.conv.onnx" conv || fail "$fixture --write-fixture $tmp.conv.onnx conv failed"
expect 0 "^  2 layers in 1 block, 18 parameters (18 trainable)\$" model import "$tmp.conv.onnx"
expect 0 "^Input: 1 x 4 x 4, 2 classes, 1 block, 2 layers\$" model summary "$tmp.conv.onnx"

expect 1 "cannot open model file /nonexistent.onnx" model import /nonexistent.onnx
# a FIFO is refused before a byte is read (opening it to tell its format waited for a writer forever)
mkfifo "$tmp.fifo"
expect_soon 1 "cannot read model file $tmp.fifo: it is a FIFO, not a file" model import "$tmp.fifo"
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
# -o - with --weights: standard output holds the JSON alone, a model file.
checks=$((checks + 1))
"$BRIGADE" model import "$onnx" -o - --weights "$tmp.so.st" >"$tmp.so.json" 2>"$err"
if [ "$(head -c 1 "$tmp.so.json")" = "{" ] && grep -q "^wrote $tmp.so.st: the file's weights" "$err" &&
    "$BRIGADE" model summary "$tmp.so.json" 2>&1 | grep -q "^Total params: 814\$"; then
    echo "ok: import -o - --weights: the JSON on standard output, the report on standard error"
else fail "import -o - --weights mixed its report into the JSON: $(head -c 80 "$tmp.so.json")"; fi
# An imported file's sizes are its own: --input says how to change them.
expect 2 "^brigade model summary: --input, --classes and --width-mult apply to zoo models; '$onnx' is a model file, \
whose sizes are its own: export it again with others, or edit the JSON model file that 'brigade model import $onnx" \
    model summary "$onnx" --input 3x16x16
expect 2 "^brigade plan: --input, --classes" plan "$onnx" --input 3x16x16 --devices 2x64MiB --batch 8

# export --weights writes a seed's weights: for a file that holds its own,
# that would replace them unasked, so it is refused, pointing at import;
# --seed says a seed's are wanted.
expect 2 "net.onnx holds its own weights.*'brigade model import $onnx -o $tmp.e.json --weights $tmp.e.st'" \
    model export "$onnx" -o "$tmp.e.json" --weights "$tmp.e.st"
checks=$((checks + 1))
if [ -e "$tmp.e.json" ] || [ -e "$tmp.e.st" ]; then fail "a refused export wrote a file"
else echo "ok: the refused export wrote nothing"; fi
expect 0 "wrote $tmp.e.st: the initial weights of model .*net for seed 3 (814 parameters)" \
    model export "$onnx" --weights "$tmp.e.st" --seed 3

# Every command takes the .onnx file; training starts from its weights.
expect 0 "peak" plan "$onnx" --devices cpu:64MiB,cpu:64MiB --batch 8
expect 0 "^brigade train: note: $onnx: the file's weights are not read here" train "$onnx" --data synthetic \
    --limit 16 --batch 8 --epochs 1
expect 0 "weights  from $tmp.net.safetensors" train "$tmp.net.json" --data synthetic --limit 16 --batch 8 \
    --epochs 1 --init-weights "$tmp.net.safetensors"
# eval's note points at --weights, which it reads (it pointed at train's --init-weights, which eval has not)
expect 0 "^brigade eval: note: $onnx: the file's weights are not read here (eval reads --weights); .* then --weights W" \
    eval "$onnx" --weights "$tmp.net.safetensors" --data synthetic --limit 16 --batch 8

# A file whose weights are graph inputs without values has none to write.
node=${BRG_ONNX_NODE_TESTS:-/usr/share/libonnx-testdata/data/node}/test_conv_with_strides_padding/model.onnx
if [ -f "$node" ]; then
    expect 1 "gives no values for weight 'W'" model import "$node" --weights "$tmp.w.safetensors"
fi
finish
