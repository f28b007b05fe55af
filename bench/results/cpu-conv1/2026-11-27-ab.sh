#!/bin/bash
# A/B: fmnist-cnn steps with the one-channel weight gradient padded to a
# block by oneDNN (old, eef743a) or in its nhwc kernels (new, 545a2eb and
# later); libraries in /work/ab/{old,new}, interleaved, order alternating.
cd /work/main
out=${1:-/work/ab/conv1.txt}; : > $out
for r in 1 2 3 4 5 6; do
  if [ $((r % 2)) = 1 ]; then order="old new"; else order="new old"; fi
  for c in "fmnist-cnn --batch 64 --devices 1x8GiB --schedules gpipe --microbatches 1" "fmnist-cnn --batch 64 --devices 2x8GiB --schedules 1f1b --microbatches 16"; do
    for v in $order; do
      line=$(LD_LIBRARY_PATH=/work/ab/$v cli/.libs/brigade bench $c --steps 12 --warmup 2 2>&1 | grep "^   1 ")
      echo "$r $v | $c | $line" >> $out
    done
  done
done
echo "finished $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)" >> $out
