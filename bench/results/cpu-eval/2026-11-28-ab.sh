#!/bin/bash
# Evaluation on the calling thread (OLD: a build of 22f5a72) against on the
# executor's workers (NEW: this commit's build), interleaved, on this
# machine (2 cores). Usage: OLD=/path/old NEW=/path/new bash 2026-11-28-ab.sh
# 1. resnet18 on one device, 3 epochs: each epoch's samples/s (the first is
#    before any evaluation).
# 2. brigade eval of fmnist-cnn (initial weights of seed 1) on the
#    Fashion-MNIST test set, on 4, 2 and 1 CPU devices.
set -u
OLD=${OLD:-/work/evalbase} NEW=${NEW:-/work/main}
W=/tmp/brg-ab-fmnist.safetensors
"$NEW/cli/brigade" model export fmnist-cnn --weights "$W" >/dev/null
for r in 1 2 3; do
  for v in OLD NEW; do
    dir=${!v}
    echo "== $v round $r: resnet18 train, 1 device"
    "$dir/cli/brigade" train resnet18 --data synthetic --input 3x64x64 --devices 1x8GiB --batch 32 \
      --microbatches 1 --limit 640 --epochs 3 2>&1 | grep -E "^epoch [0-9]:"
    for d in 4x8MiB 2x64MiB 1x64MiB; do
      echo -n "== $v round $r: fmnist-cnn eval $d: "
      "$dir/cli/brigade" eval fmnist-cnn --weights "$W" --data fashion-mnist --devices $d 2>&1 | grep -E "^eval"
    done
  done
done
