#!/bin/bash
# A/B: the optimizer step on the main thread (old) or on each device's worker (new); step time.
cd /work/main
out=/work/ab/thr.txt; : > $out
for r in 1 2 3 4 5; do
  if [ $((r % 2)) = 1 ]; then order="old new"; else order="new old"; fi
  for c in "fmnist-cnn --batch 64 --devices 2x8GiB --schedules 1f1b --microbatches 16" "fmnist-cnn --batch 64 --devices 1x8GiB --schedules gpipe --microbatches 1" "resnet18 --input 3x64x64 --batch 32 --devices 1x8GiB --schedules gpipe --microbatches 1" "resnet18 --input 3x64x64 --batch 32 --devices 2x8GiB --schedules 1f1b --microbatches 4"; do
    for v in $order; do
      line=$(LD_LIBRARY_PATH=/work/ab/$v cli/.libs/brigade bench $c --steps 12 --warmup 2 2>&1 | grep "^   1 ")
      echo "$r $v | $c | $line" >> $out
    done
  done
done
echo finished >> $out
