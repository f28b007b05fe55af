#!/bin/bash
# A/B of the calibrated default: old (eef743a: one set of rates per layer
# kind, one calibration model) against new (rates per kind and layout, an
# RGB and a grey calibration model, and the one-channel weight gradient in
# nhwc); libraries in /work/ab/{old,new}, six interleaved rounds, order
# alternating, each round recalibrating in a fresh cache.
cd /work/main
dir=${1:-/work/ab/layouts}; mkdir -p $dir
for r in 1 2 3 4 5 6; do
  if [ $((r % 2)) = 1 ]; then order="old new"; else order="new old"; fi
  for v in $order; do
    LD_LIBRARY_PATH=/work/ab/$v python3 bench/cpu/predict_compare.py --brigade cli/.libs/brigade --rounds 1 \
      --variants calibrated --json $dir/$v-$r.json > $dir/$v-$r.txt 2>&1
  done
done
echo "finished $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)" > $dir/finished
