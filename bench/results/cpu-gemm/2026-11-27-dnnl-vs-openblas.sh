#!/bin/bash
# (recorded from /tmp/gemm_ab.sh) resnet18 3x64x64 b32, one device: the im2col fallback's sgemm through dnnl_sgemm (default) or OpenBLAS (BRG_GEMM_OPENBLAS=1, a patch of 1ba6661's gemm.c), 5 interleaved rounds
cd /work/oldbuild
for r in 1 2 3 4 5; do
  if [ $((r % 2)) = 1 ]; then order="dnnl openblas"; else order="openblas dnnl"; fi
  for v in $order; do
    e=""; [ $v = openblas ] && e="BRG_GEMM_OPENBLAS=1"
    line=$(env $e ./cli/brigade bench resnet18 --input 3x64x64 --batch 32 --devices 1x8GiB --schedules gpipe --microbatches 1 --steps 6 --warmup 1 2>&1 | grep "^   1 ")
    echo "$r $v | $line"
  done
done
