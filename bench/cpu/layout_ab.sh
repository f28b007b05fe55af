#!/bin/sh
# Blocked against plain activation layouts on one CPU device, interleaved:
#   bench/cpu/layout_ab.sh MODEL ROUNDS [brigade bench options...]
# runs `brigade bench MODEL --devices 1x8GiB --schedules gpipe
# --microbatches 1 --steps 3 --warmup 1 --json OPTIONS` ROUNDS times with
# BRG_CPU_LAYOUT=plain and =blocked in turn, and prints each step time and
# the medians (seconds). Run from the build directory.
set -eu
model=$1
rounds=$2
shift 2
brigade=${BRIGADE:-cli/brigade}
step_time() {
    layout=$1
    shift
    BRG_CPU_LAYOUT=$layout "$brigade" bench "$model" "$@" --devices 1x8GiB --schedules gpipe --microbatches 1 \
        --steps 3 --warmup 1 --json 2>/dev/null |
        python3 -c 'import json, sys; d = json.load(sys.stdin); d = d["results"] if isinstance(d, dict) else d; print(d[0]["step_seconds"])'
}
plain=""
blocked=""
echo "# $model, $rounds rounds, $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg) at the start, $(date -u +%FT%TZ)"
for r in $(seq "$rounds"); do
    p=$(step_time plain "$@")
    b=$(step_time blocked "$@")
    echo "round $r: plain $p s, blocked $b s"
    plain="$plain $p"
    blocked="$blocked $b"
done
python3 - "$plain" "$blocked" <<'PY'
import statistics, sys
p = [float(v) for v in sys.argv[1].split()]
b = [float(v) for v in sys.argv[2].split()]
print(f"median: plain {statistics.median(p):.4f} s, blocked {statistics.median(b):.4f} s, "
      f"blocked / plain {statistics.median(b) / statistics.median(p):.3f}; per round "
      + ", ".join(f"{y / x:.2f}" for x, y in zip(p, b)))
PY
echo "# load $(cut -d' ' -f1 /proc/loadavg) at the end"
