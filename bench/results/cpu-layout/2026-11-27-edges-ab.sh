#!/bin/bash
# A/B: tensors between CPU stages plain (base) or blocked as they are (edges); brigade bench step times.
cd /work/main
out=/work/ab/edges.txt; : > $out
for r in 1 2 3 4; do
  if [ $((r % 2)) = 1 ]; then order="base edges"; else order="edges base"; fi
  for c in "fmnist-cnn --batch 64 --devices 2x8GiB --schedules 1f1b --microbatches 4 --steps 12" \
           "fmnist-cnn --batch 64 --devices 2x8GiB --schedules 1f1b --microbatches 16 --steps 12" \
           "resnet18 --input 3x64x64 --batch 32 --devices 2x8GiB --schedules 1f1b --microbatches 4 --steps 6" \
           "inception-v3 --batch 8 --devices 4x8GiB --schedules 1f1b --microbatches 4 --steps 3"; do
    for v in $order; do
      line=$(LD_LIBRARY_PATH=/work/ab/$v cli/.libs/brigade bench $c --warmup 1 2>&1 | grep "^   1 ")
      echo "$r $v | $c | $line" >> $out
    done
  done
done
echo finished >> $out
