#!/bin/sh
# brigade data and train on segmentation folders (images/ beside masks/):
#   - brigade data export shapes writes OUT/{train,val}/{images,masks},
#     the same files for the same --seed and other files for another;
#   - data info reports the pairs, their size and the pixels of each mask
#     value (which sum to the pixels written, and hold only the classes and
#     the ignore label 255), and the files left out;
#   - data bench reads images with their masks;
#   - options that do not apply, and a class-logit model on masks;
#   - train on them: the data line, --val-split and the layouts,
#     --ignore-label, files left out (a warning, or an error with
#     --bad-images fail), and per-pixel models on other data;
#   - a U-Net trained across 3 devices and evaluated from its checkpoint
#     on 2: eval's loss, pixel accuracy and mean IoU are the epoch line's.
# $BRIGADE is set by the test harness (tests/Makefile.am).
. "${srcdir:-.}/cli_lib.sh"

shapes=$tmp-shapes
expect 0 "wrote 30 images and masks to $shapes/train" data export shapes "$shapes" --limit 30 --size 40
grep -q "wrote 6 images and masks to $shapes/val" "$out" || fail "not 30 / 5 = 6 validation images"
grep -q "255 marks the shapes' outlines" "$out" || fail "the export does not say what 255 is"
checks=$((checks + 1))
n_img=$(ls "$shapes/train/images" | wc -l)
n_mask=$(ls "$shapes/train/masks" | wc -l)
if [ "$n_img" -eq 30 ] && [ "$n_mask" -eq 30 ] && [ -f "$shapes/val/masks/00005.png" ]; then
    echo "ok: 30 images and 30 masks in train/, 6 in val/"
else
    fail "train/ holds $n_img images and $n_mask masks"
fi

# On a terminal an export shows its progress, rewritten in place and cleared
# at the end (a minute of Fashion-MNIST was silent); in a pipe, only the
# summary lines.
# progress WHAT WORD ARGS FIRST SECOND: the last command (its $out, a
# pipe) showed no line with WORD; brigade ARGS on a terminal shows lines
# matching FIRST and SECOND.
progress() {
    checks=$((checks + 1))
    if grep -q "$2" "$out"; then fail "$1 to a pipe shows its progress"; sed 's/^/  | /' "$out"; fi
    command -v script >/dev/null 2>&1 || return 0
    checks=$((checks + 1))
    script -qec "'$BRIGADE' $3" /dev/null >"$tmp.tty" 2>&1
    if grep -q "$4" "$tmp.tty" && grep -q "$5" "$tmp.tty"; then echo "ok: $1 on a terminal shows its progress"
    else fail "$1 on a terminal shows no progress"; sed 's/^/  | /' "$tmp.tty"; fi
}
progress "an export" "writing" "data export shapes '$tmp-tty' --limit 20 --size 8" \
    "writing train: 20 of 20 images.*wrote 20 images and masks to $tmp-tty/train" "writing val: 4 of 4 images"

# Seeded: the same seed gives the same bytes, another seed other images.
expect 0 "wrote 30 images" data export shapes "$tmp-again" --limit 30 --size 40
checks=$((checks + 1))
if diff -r "$shapes" "$tmp-again" >/dev/null; then echo "ok: the same seed writes the same files"
else fail "two exports with seed 1 differ"; fi
expect 0 "wrote 30 images" data export shapes "$tmp-seed2" --limit 30 --size 40 --seed 2
checks=$((checks + 1))
if cmp -s "$shapes/train/masks/00000.png" "$tmp-seed2/train/masks/00000.png"; then fail "seed 2 wrote seed 1's mask"
else echo "ok: seed 2 writes other shapes"; fi

# data info: the pairs, their size, a value table whose pixels add up to
# 30 x 40 x 40 = 48000 with only 0, 1, 2 and 255.
expect 0 "^train $shapes/train: 30 images with masks, 40x40$" data info "$shapes"
grep -q "^segmentation folder $shapes: train/ and val/" "$out" || fail "info does not name the layout"
grep -q "^val   $shapes/val: 6 images with masks, 40x40" "$out" || fail "info lacks val/"
awk '/^train /{t=1; next} /^val /{t=0} t && $1 ~ /^[0-9]+$/ {sum += $2; vals = vals " " $1} END {print sum, vals}' \
    "$out" >"$tmp.table"
checks=$((checks + 1))
if [ "$(cat "$tmp.table")" = "48000  0 1 2 255" ]; then echo "ok: the mask values of train/: $(cat "$tmp.table")"
else fail "train/'s value table is '$(cat "$tmp.table")', expected 48000 pixels of 0 1 2 255"; fi
grep -q "255 .*(the default ignore label)" "$out" || fail "info does not mark 255 as the ignore label"
# Every mask is read: on a terminal with progress (each split's own, cleared
# before its table), in a pipe without.
progress "data info" "reading" "data info '$shapes'" \
    "reading train: 30 of 30 masks.*train $shapes/train: 30 images with masks" "reading val: 6 of 6 masks"

# Six classes: triangles (3), crosses (4) and rings (5) appear too, and no
# value outside 0..5 and 255.
expect 0 "wrote 40 images" data export shapes "$tmp-six" --limit 40 --size 32 --classes 6
grep -q "3 triangle, 4 cross, 5 ring" "$out" || fail "the export does not name classes 3 to 5"
expect 0 "^train $tmp-six/train: 40 images with masks, 32x32" data info "$tmp-six"
checks=$((checks + 1))
vals=$(awk '/^train /{t=1; next} /^val /{t=0} t && $1 ~ /^[0-9]+$/ {printf " %s", $1}' "$out")
if [ "$vals" = " 0 1 2 3 4 5 255" ]; then echo "ok: six classes give the values$vals"
else fail "six classes give the values '$vals'"; fi

# A layout without train/: images/ and masks/ at the top, with files left
# out (an image without its mask, a mask without its image, a note).
flat=$tmp-flat
mkdir -p "$flat"
cp -r "$shapes/train/images" "$shapes/train/masks" "$flat/"
rm "$flat/masks/00003.png" "$flat/images/00007.png"
echo "notes" >"$flat/images/notes.txt"
expect 0 "^all   $flat: 28 images with masks, 40x40, 3 files left out" data info "$flat"
grep -q "images/ and masks/ (train and eval split them with --val-split)" "$out" || fail "info lacks the flat layout"
for what in "left out: $flat/images/00003.png: has no mask ($flat/masks/00003.png)" \
    "left out: $flat/images/notes.txt: not a .jpg, .jpeg or .png image" \
    "left out: $flat/masks/00007.png: has no image in $flat/images"; do
    checks=$((checks + 1))
    if grep -qF -- "$what" "$out"; then echo "ok: info says '$what'"; else fail "info lacks '$what'"; sed 's/^/  | /' "$out"; fi
done
# A bad mask is named, and the rest still counted.
cp "$shapes/train/images/00000.png" "$flat/masks/00001.png"
expect 0 "bad mask: $flat/masks/00001.png: the PNG is RGB, 8 bits a sample; a mask is a grey or palette PNG" \
    data info "$flat"
# ...below the heading of its folder, which counts it (it came above it)
checks=$((checks + 1))
awk -v h="^all   $flat: 28 images with masks, 40x40, 1 bad mask, 3 files left out\$" \
    '$0 ~ h { at = NR } /bad mask:/ { b = NR } END { exit !(at && b == at + 1) }' "$out" ||
    { fail "the bad mask is not counted and listed under its heading"; sed 's/^/  | /' "$out"; }

# data bench reads images with their masks.
expect 0 "data bench: 64 images and masks of $shapes/train to 3x32x32 (resize 32, random crops, flips)" \
    data bench "$shapes" --input 3x32x32 --images 64 --threads 2
expect 0 "data bench: 1 image and its mask of " data bench "$shapes" --input 3x32x32 --images 1 --threads 1
# Wrong numbers are the command line's: exit 2, said once and headed, before
# the folder is read (a malformed --input was said twice, the second time
# empty; other channels and a short --resize were exit 1 after the reading).
expect 2 "^brigade data bench: --input '3x0x32' is not CxHxW" data bench "$shapes" --input 3x0x32
checks=$((checks + 1))
[ "$(wc -l <"$out")" -eq 1 ] || { fail "a malformed --input is not said in one line"; sed 's/^/  | /' "$out"; }
expect 2 "^brigade data bench: --input '5x32x32': images decode to 1 channel (grey) or 3 (RGB)" \
    data bench "$shapes" --input 5x32x32
expect 2 "^brigade data bench: --input '32x32': images decode to 1 channel" data bench "$shapes" --input 32x32
expect 2 "^brigade data bench: --resize 16 is smaller than the 32x32 input" \
    data bench "$shapes" --input 3x32x32 --resize 16

# Options that do not apply or are out of range.
expect 2 "--classes '7' must be a whole number from 2 to 6" data export shapes "$tmp-x" --classes 7
expect 2 "--size '4' must be a whole number from 8" data export shapes "$tmp-x" --size 4
expect 2 "--data-dir applies to fashion-mnist" data export shapes "$tmp-x" --data-dir /nowhere
expect 2 "--size applies to shapes" data export fashion-mnist "$tmp-x" --size 32
expect 2 "expected 'fashion-mnist OUT' or 'shapes OUT'" data export squares "$tmp-x"
expect 2 "--ignore-label apply to --data DIR" train fmnist-cnn --data synthetic --ignore-label 9
expect 2 "--ignore-label '300' must be a whole number from 0 to 255" train fmnist-cnn --data "$shapes" --ignore-label 300
expect 0 "--ignore-label N      segmentation: the mask value (0..255)" train --help

# Masks need per-pixel outputs: a classification model is told so.
expect 2 "$shapes is a segmentation folder (images/ and masks/), but model 'fmnist-cnn' ends in class logits \[10, 1, 1\]" \
    train fmnist-cnn --data "$shapes" --devices 1x256MiB

# train reads the folders: the data line and the masks line, --val-split
# and the layouts, --ignore-label, files left out (a warning, or an error
# with --bad-images fail), and per-pixel models on other data.
unet="unet --input 3x32x32 --classes 3 --width-mult 0.125 --epochs 1 --batch 4 --devices 1x256MiB --limit 8"
expect 0 "^data     segmentation folder $shapes (32x32 RGB with masks, shorter side to 32; training: random crops and flips; test: centre crops): 8 training samples, 6 test samples" \
    train $unet --data "$shapes"
grep -q "^masks    3 classes per pixel (0..2), ignore label 255; resized by nearest neighbour" "$out" ||
    fail "no masks line"
# With --ignore-label 200 the outlines' 255 is neither a class nor the
# void: every mask is bad, and the run says so.
expect 1 "^data     segmentation folder $flat .*shorter side to 40;.*8 training samples, 7 test samples" \
    train $unet --data "$flat" --val-split 0.25 --resize 40 --ignore-label 200
grep -q "holds 255, which is neither a class (0..2) nor the ignore label 200" "$out" || fail "no bad mask value named"
grep -q "none of its [0-9]* image and mask pairs can be read" "$out" || fail "no error for a folder of bad masks"
for what in "warning: $flat/images/00003.png: has no mask ($flat/masks/00003.png); left out" \
    "warning: $flat/masks/00007.png: has no image in $flat/images"; do
    checks=$((checks + 1))
    if grep -qF -- "$what" "$out"; then echo "ok: train says '$what'"; else fail "train lacks '$what'"; fi
done
expect 1 "error: $flat/images/00003.png: has no mask ($flat/masks/00003.png) (--bad-images fail)" \
    train $unet --data "$flat" --val-split 0.25 --bad-images fail
expect 2 "holds images/ and masks/ but no train/ and val/ folders; give --val-split" train $unet --data "$flat"
mkdir -p "$tmp-trainonly"
cp -r "$shapes/train" "$tmp-trainonly/"
expect 2 "has train/images and train/masks but no val/images and val/masks" train $unet --data "$tmp-trainonly"
expect 2 "--ignore-label 2 is one of the model's 3 classes (0..2)" train $unet --data "$shapes" --ignore-label 2
expect 2 "model 'unet' has per-pixel outputs \[3, 32, 32\]; --data synthetic gives one class per image" \
    train $unet --data synthetic
mkdir -p "$tmp-classes/a" "$tmp-classes/b"
cp "$shapes/train/images/00000.png" "$tmp-classes/a/"
cp "$shapes/train/images/00001.png" "$tmp-classes/b/"
expect 2 "model 'unet' has per-pixel outputs \[3, 32, 32\]; --data DIR needs images/ and masks/ folders" \
    train $unet --data "$tmp-classes" --val-split 0.5

# Trained across 3 devices with a checkpoint, then evaluated from its
# weights on 2: the epoch line's test loss, pixel accuracy and mean IoU are
# eval's, which also gives each class's IoU; peaks as planned.
unet3="unet --input 3x32x32 --classes 3 --width-mult 0.125 --batch 8"
expect 0 "^epoch 2: train loss [0-9.]* pixel acc [0-9.]*%, test loss [0-9.]* pixel acc [0-9.]*% mean IoU 0\.[0-9]*," \
    train $unet3 --optimizer adam --lr 0.01 --data "$shapes" --epochs 2 --devices 3x64MiB --checkpoint "$tmp-ck"
grep -q "^peaks    measured = planned on every device, to the byte" "$out" || fail "peaks not as planned"
line=$(grep "^epoch 2:" "$out" | sed 's/.*test loss \([0-9.]*\) pixel acc \([0-9.]*\)% mean IoU \([0-9.]*\),.*/loss \1, pixel accuracy \2%, mean IoU \3 /')
weights=$(ls -d "$tmp-ck"/step-* | tail -1)/weights.safetensors
expect 0 "$line" eval $unet3 --data "$shapes" --weights "$weights" --devices 2x64MiB
grep -q "^IoU  *0: [0-9.-]*  *1: [0-9.-]*  *2: [0-9.-]* *$" "$out" || fail "eval gives no IoU per class"

# Validation masks all the ignore label (255; a 40x40 grey PNG written
# byte by byte): no test pixel counts, and the figures say "-", not a loss
# of 0 and 0% (which read as a perfect loss)
cp -r "$shapes" "$tmp-ign"
for f in "$tmp-ign"/val/masks/*.png; do
    printf '\211\120\116\107\015\012\032\012\000\000\000\015\111\110\104\122\000\000\000\050\000\000\000\050\010\000\000\000\000\251\225\347\261\000\000\000\034\111\104\101\124\170\332\143\370\117\044\140\030\125\070\252\160\124\341\250\302\121\205\243\012\111\127\010\000\054\226\072\033\141\175\066\147\000\000\000\000\111\105\116\104\256\102\140\202' >"$f"
done
expect 0 "^epoch 1: train loss [0-9.]* pixel acc [0-9.]*%, test loss - pixel acc - mean IoU - (no test label counted" \
    train $unet3 --data "$tmp-ign" --epochs 1 --devices 1x64MiB --checkpoint "$tmp-ign-ck"
weights=$(ls -d "$tmp-ign-ck"/step-* | tail -1)/weights.safetensors
expect 0 ": loss -, pixel accuracy -, mean IoU - (no test label counted" eval $unet3 --data "$tmp-ign" \
    --weights "$weights" --devices 1x64MiB

finish
