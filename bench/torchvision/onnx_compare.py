#!/usr/bin/env python3
"""torchvision models exported to ONNX, imported by brigade, and brigade's
forward on the imported weights against PyTorch's.

    onnx_compare.py [--models resnet50,inception_v3] [--batch 2] [--seed 0] [--opset 17]
                    [--predict bench/torchvision/predict] [--brigade cli/brigade] [--work DIR]

For each model:

1. The torchvision model of compare.py (inception_v3 without AuxLogits,
   transform_input=False; random initialization after
   torch.manual_seed(seed), BatchNorm running statistics made to matter).
2. torch.onnx.export (the TorchScript exporter, opset --opset, the batch
   dimension dynamic) with BatchNorm kept as it is (training=PRESERVE on a
   model in eval mode: no folding into the convolutions) and no constant
   folding, so the file holds torchvision's own parameters.
3. `brigade model import FILE.onnx -o MODEL.json --weights W.safetensors`:
   the imported parameter counts must equal torchvision's (parameters as
   trainable, BatchNorm running means and variances as the others).
4. The same random input through PyTorch (eval mode, float32) and through
   bench/torchvision/predict on MODEL.json and W (one CPU device,
   brg_pipeline_predict): max |brigade - torch| / max |torch| over every
   logit must be <= 1e-4.

The .onnx files are 100 MB each: they stay in --work (a temporary folder
unless given). Exit status 0 when every check holds, 1 otherwise.
"""

import argparse
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402
import convert  # noqa: E402

HERE = compare.HERE
TOP = compare.TOP


def torchvision_counts(model):
    trainable = sum(p.numel() for p in model.parameters())
    stats = sum(b.numel() for n, b in model.named_buffers() if n.endswith(("running_mean", "running_var")))
    return trainable, stats


def run_one(name, args, work, out):
    size = compare.SIZE.get(name, 224)
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed + 1)
    model = convert.torchvision_model(name)
    compare.randomize_batchnorm(model, size, gen)
    x = torch.randn(args.batch, 3, size, size, generator=gen)
    onnx_path = os.path.join(work, f"{name}.onnx")
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), onnx_path, opset_version=args.opset, dynamo=False,
                          training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False,
                          input_names=["input"], output_names=["logits"],
                          dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
    t_export = time.perf_counter() - t0
    json_path, weights = os.path.join(work, f"{name}.json"), os.path.join(work, f"{name}.safetensors")
    t0 = time.perf_counter()
    run = subprocess.run([args.brigade, "model", "import", onnx_path, "-o", json_path, "--weights", weights],
                         capture_output=True, text=True)
    t_import = time.perf_counter() - t0
    if run.returncode != 0:
        out(f"{name}: brigade model import failed ({run.returncode}):\n{run.stdout}{run.stderr}")
        return False
    report = run.stdout
    m = re.search(r"(\d+) layers in (\d+) blocks, ([\d,]+) parameters \(([\d,]+) trainable\)", report)
    layers, blocks = int(m.group(1)), int(m.group(2))
    total, trainable = int(m.group(3).replace(",", "")), int(m.group(4).replace(",", ""))
    want_trainable, want_stats = torchvision_counts(model)
    counts_ok = trainable == want_trainable and total - trainable == want_stats
    lines = report.splitlines()
    at = next((i for i, l in enumerate(lines) if l.strip().startswith("blocks:")), len(lines))
    block_names = []
    for line in lines[at:]:
        if line.strip().startswith("note:") or (block_names and not line.startswith("          ")):
            break
        block_names += line.replace("blocks:", "").split()

    inputs, outputs = os.path.join(work, f"{name}.in.f32"), os.path.join(work, f"{name}.out.f32")
    x.numpy().astype("<f4").tofile(inputs)
    with torch.no_grad():
        y_torch = model(x).numpy()
    cmd = [args.predict, json_path, "--weights", weights, "--inputs", inputs, "--outputs", outputs]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        out(f"{name}: {' '.join(cmd)} failed ({run.returncode}):\n{run.stderr}")
        return False
    y_brigade = np.fromfile(outputs, dtype="<f4").reshape(y_torch.shape)
    err = compare.rel_err(y_brigade, y_torch)
    forward_ok = err <= compare.TOLERANCE
    out(f"{name}: exported opset {args.opset} ({os.path.getsize(onnx_path) / 2**20:.0f} MiB, {t_export:.1f} s), "
        f"imported in {t_import:.1f} s: {layers} layers in {blocks} blocks")
    out(f"  blocks: {' '.join(block_names)}")
    out(f"  parameters: brigade {trainable:,} trainable + {total - trainable:,} running statistics; torchvision "
        f"{want_trainable:,} + {want_stats:,}  {'ok' if counts_ok else 'FAIL'}")
    out(f"  max|brigade - torch| / max|torch| = {err:.3e} over {y_torch.size} logits  "
        f"{'ok' if forward_ok else f'FAIL (> {compare.TOLERANCE:g})'}")
    return counts_ok and forward_ok


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default="resnet50,inception_v3")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--opset", type=int, default=17)
    p.add_argument("--predict", default=os.path.join(HERE, "predict"))
    p.add_argument("--brigade", default=os.path.join(TOP, "cli", "brigade"))
    p.add_argument("--work", help="keep the files here (default: a temporary folder)")
    args = p.parse_args()

    def out(line):
        print(line, flush=True)

    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")),
               platform.processor())
    out(f"onnx_compare.py {' '.join(sys.argv[1:])}".rstrip())
    out(f"date {time.strftime('%Y-%m-%d %H:%M:%S %Z')}; {platform.node()}: {cpu}, {os.cpu_count()} cpus; "
        f"python {platform.python_version()}, torch {torch.__version__}, "
        f"torchvision {__import__('torchvision').__version__}")
    head = subprocess.run(["git", "-C", TOP, "describe", "--always", "--dirty"], capture_output=True,
                          text=True).stdout.strip()
    out(f"brigade {head or '(not a git checkout)'}: {args.brigade}")
    ok = True
    with tempfile.TemporaryDirectory(prefix="brigade-onnx-") as tmp:
        work = args.work or tmp
        os.makedirs(work, exist_ok=True)
        for name in args.models.split(","):
            ok &= run_one(name, args, work, out)
    out("all checks hold" if ok else "SOME CHECKS FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
