#!/bin/bash
# Interleaved A/B of libbrigade builds (each in its own directory as
# libbrigade.so.0): one-device training steps, samples/s from brigade bench.
#   bash 2026-11-28-ab.sh ROUNDS DIR... (run from a built checkout)
rounds=$1; shift
libs=("$@")
uptime
for r in $(seq 1 "$rounds"); do
  n=${#libs[@]}
  for i in $(seq 0 $((n - 1))); do
    lib=${libs[$(( (i + r) % n ))]}
    for m in "resnet18 --input 3x64x64 --batch 32 --steps 5 --warmup 2" \
             "inception-v3-torchvision --batch 8 --steps 3 --warmup 1"; do
      out=$(LD_LIBRARY_PATH=$lib cli/.libs/brigade bench $m --devices 1x8GiB --schedules gpipe \
            --microbatches 1 --json 2>/dev/null)
      echo "$r $(basename "$lib") ${m%% *} $(echo "$out" | python3 -c 'import json,sys; r=json.load(sys.stdin)["results"][0]; print(round(r["samples_per_s"],2), round(r["measured_makespan_median"]*1e3,1))')"
    done
  done
done
uptime
