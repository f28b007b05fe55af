#!/usr/bin/env python3
"""brigade's forward on torchvision's weights against PyTorch's, and the
conversion's round trips, for resnet18, resnet50 and inception_v3.

    compare.py [--models resnet18,resnet50,inception_v3] [--batch 2] [--seed 0]
               [--predict bench/torchvision/predict] [--brigade cli/brigade] [--work DIR]

For each model:

1. A torchvision model (convert.torchvision_model: inception_v3 without
   AuxLogits, transform_input=False) with torchvision's random
   initialization after torch.manual_seed(seed), whose BatchNorm running
   statistics are made to matter: two forwards in train mode on random
   batches of 4 with momentum=None (a cumulative average) set them to the
   activations' real means and variances, then every gamma is drawn from
   U(0.5, 1.5) and every beta from N(0, 0.1^2).
2. convert.to_brigade, written as brigade's safetensors.
3. The same random input, N(0, 1), batch --batch, at the model's standard
   size (224 x 224, 299 x 299 for inception_v3): PyTorch's forward in eval
   mode, float32, and brigade's through bench/torchvision/predict (one CPU
   device, brg_pipeline_predict).
4. The error: max |brigade - torch| / max |torch| over every output (the
   logits of every sample), which must be <= 1e-4. For scale, the same
   figure for each of them against PyTorch in float64 (the model and input
   cast to double).
5. Round trips: torchvision -> brigade -> torchvision gives every tensor of
   the state_dict back bit for bit except num_batches_tracked (brigade keeps
   no count; it comes back 0), and the result loads with strict=True;
   brigade -> torchvision -> brigade (the initial weights `brigade model
   export` writes) gives every tensor back bit for bit.

Exit status 0 when every check holds, 1 otherwise.
"""

import argparse
import copy
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import convert  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
TOLERANCE = 1e-4
SIZE = {"inception_v3": 299}


def rel_err(a, b):
    """max |a - b| / max |b|."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def randomize_batchnorm(model, size, gen):
    bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # cumulative average over the forwards below
    model.train()
    with torch.no_grad():
        for _ in range(2):
            model(torch.randn(4, 3, size, size, generator=gen))
        for m in bns:
            m.momentum = 0.1
            m.weight.copy_(torch.rand(m.weight.shape, generator=gen) + 0.5)
            m.bias.copy_(torch.randn(m.bias.shape, generator=gen) * 0.1)
    model.eval()


def compare(name, args, work, out):
    ok = True
    zoo = convert.BRIGADE_MODEL[name]
    size = SIZE.get(name, 224)
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed + 1)
    model = convert.torchvision_model(name)
    randomize_batchnorm(model, size, gen)
    state = model.state_dict()

    tensors, dropped = convert.to_brigade(name, state)
    weights = os.path.join(work, f"{name}.safetensors")
    convert.save_brigade(weights, name, tensors, f"compare.py: torchvision {name}, seed {args.seed}")

    x = torch.randn(args.batch, 3, size, size, generator=gen)
    inputs, outputs = os.path.join(work, f"{name}.in.f32"), os.path.join(work, f"{name}.out.f32")
    x.numpy().astype("<f4").tofile(inputs)
    t0 = time.perf_counter()
    with torch.no_grad():
        y_torch = model(x).numpy()
    t_torch = time.perf_counter() - t0
    with torch.no_grad():
        y_double = copy.deepcopy(model).double()(x.double()).numpy()
    cmd = [args.predict, zoo, "--weights", weights, "--inputs", inputs, "--outputs", outputs]
    t0 = time.perf_counter()
    run = subprocess.run(cmd, capture_output=True, text=True)
    t_brigade = time.perf_counter() - t0
    if run.returncode != 0:
        out(f"{name}: {' '.join(cmd)} failed ({run.returncode}):\n{run.stderr}")
        return False
    y_brigade = np.fromfile(outputs, dtype="<f4").reshape(y_torch.shape)

    err = rel_err(y_brigade, y_torch)
    e_b64, e_t64 = rel_err(y_brigade, y_double), rel_err(y_torch, y_double)
    same_top1 = bool(np.all(np.argmax(y_brigade, 1) == np.argmax(y_torch, 1)))
    verdict = "ok" if err <= TOLERANCE else f"FAIL (> {TOLERANCE:g})"
    ok &= err <= TOLERANCE
    params = sum(int(v.size) for v in tensors.values())
    out(f"{name} -> brigade {zoo}: {len(tensors)} tensors ({params:,} floats), left out {len(dropped)} "
        f"num_batches_tracked")
    out(f"  input {args.batch}x3x{size}x{size}, outputs {y_torch.shape[1]} logits each, max |torch| "
        f"{np.max(np.abs(y_torch)):.4g}")
    out(f"  max|brigade - torch| / max|torch| = {err:.3e}  {verdict}")
    out(f"  against torch float64: brigade {e_b64:.3e}, torch float32 {e_t64:.3e}; same top-1: {same_top1}")
    out(f"  brigade: {run.stdout.strip()} ({t_brigade:.2f} s in all); torch forward {t_torch:.2f} s")

    # torchvision -> brigade -> torchvision.
    back = convert.to_torchvision(name, convert.load_brigade(weights))
    bad = [k for k in state if not k.endswith("num_batches_tracked") and not torch.equal(state[k], back[k])]
    counts = [k for k in state if k.endswith("num_batches_tracked")]
    fresh = convert.torchvision_model(name)
    fresh.load_state_dict(back, strict=True)
    out(f"  torchvision -> brigade -> torchvision: {len(state) - len(counts) - len(bad)} of "
        f"{len(state) - len(counts)} tensors identical{'' if not bad else ' FAIL: ' + ', '.join(bad[:5])}; "
        f"{len(counts)} num_batches_tracked ({int(state[counts[0]])} here) come back 0; loads with strict=True")
    ok &= not bad and set(back) == set(state)

    # brigade -> torchvision -> brigade, from brigade's own initial weights.
    initial = os.path.join(work, f"{name}.brigade-initial.safetensors")
    run = subprocess.run([args.brigade, "model", "export", zoo, "--weights", initial, "--seed", "3"],
                         capture_output=True, text=True)
    if run.returncode != 0:
        out(f"{name}: brigade model export failed ({run.returncode}):\n{run.stderr}")
        return False
    original = convert.load_brigade(initial)
    again, _ = convert.to_brigade(name, convert.to_torchvision(name, original))
    bad = [k for k in original if k not in again or not np.array_equal(original[k], again[k])]
    ok &= not bad and set(again) == set(original)
    out(f"  brigade -> torchvision -> brigade: {len(original) - len(bad)} of {len(original)} tensors identical"
        f"{'' if not bad and set(again) == set(original) else ' FAIL: ' + ', '.join(bad[:5])}")
    return ok


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default="resnet18,resnet50,inception_v3")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--predict", default=os.path.join(HERE, "predict"))
    p.add_argument("--brigade", default=os.path.join(TOP, "cli", "brigade"))
    p.add_argument("--work", help="keep the files here (default: a temporary folder)")
    p.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's)")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    def out(line):
        print(line, flush=True)

    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")),
               platform.processor())
    out(f"compare.py {' '.join(sys.argv[1:])}".rstrip())
    out(f"date {time.strftime('%Y-%m-%d %H:%M:%S %Z')}; {platform.node()}: {cpu}, {os.cpu_count()} cpus; "
        f"python {platform.python_version()}, torch {torch.__version__} ({torch.get_num_threads()} threads), "
        f"torchvision {__import__('torchvision').__version__}, numpy {np.__version__}")
    try:
        head = subprocess.run(["git", "-C", TOP, "describe", "--always", "--dirty"], capture_output=True,
                              text=True).stdout.strip()
    except OSError:
        head = ""
    out(f"brigade {head or '(not a git checkout)'}: {args.predict}")
    out(f"error = max|brigade - torch| / max|torch| over all logits; tolerance {TOLERANCE:g}")
    ok = True
    with tempfile.TemporaryDirectory(prefix="brigade-compare-") as tmp:
        work = args.work or tmp
        os.makedirs(work, exist_ok=True)
        for name in args.models.split(","):
            ok &= compare(name, args, work, out)
    out("all checks hold" if ok else "SOME CHECKS FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
