#!/bin/bash
# A/B, 6 interleaved rounds: profile measured alone (old) or with the other devices beside it (new).
cd /work/main
CASES="fmnist-cnn b64, 2 devices 1f1b m4;fmnist-cnn b64, 2 devices 1f1b m16;resnet18 3x64x64 b32, 2 devices 1f1b m4"
for r in 1 2 3 4 5 6; do
  if [ $((r % 2)) = 1 ]; then order="old new"; else order="new old"; fi
  for v in $order; do
    LD_LIBRARY_PATH=/work/ab/$v bench/.venv/bin/python bench/cpu/predict_compare.py --brigade /work/distbuild/cli/.libs/brigade --rounds 1 --cases "$CASES" --variants "calibrated,profile auto" --json /work/ab/$v-$r.json > /work/ab/$v-$r.txt 2>&1
  done
done
echo finished > /work/ab/done
