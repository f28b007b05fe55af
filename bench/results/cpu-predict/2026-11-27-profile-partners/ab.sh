#!/bin/bash
# A/B: profile measured over 1 (old) or 2 (new) micro-batches; --profile auto predictions.
cd /work/main
for r in 1 2 3; do
  if [ $((r % 2)) = 1 ]; then order="old new"; else order="new old"; fi
  for v in $order; do
    LD_LIBRARY_PATH=/work/ab/$v bench/.venv/bin/python bench/cpu/predict_compare.py --brigade cli/.libs/brigade --rounds 1 --variants "calibrated,profile auto" --json /work/ab/$v-$r.json > /work/ab/$v-$r.txt 2>&1
  done
done
echo finished > /work/ab/done
