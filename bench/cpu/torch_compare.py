#!/usr/bin/env python3
"""One CPU device, brigade against PyTorch eager: training samples/s.

For each model (fmnist-cnn at batch 64, resnet18 at 3x64x64 batch 32,
inception-v3 at 299x299 batch 8), interleaved in rounds so that both see the
same load on a shared machine:
  - PyTorch: the same architecture (torchvision's resnet18 and inception_v3
    without the auxiliary head; fmnist-cnn written out below), SGD with
    momentum 0.9, cross-entropy, random data, torch.set_num_threads(THREADS),
    the median step time of --steps steps after --warmup;
  - brigade: `brigade bench MODEL --devices 1x8GiB --batch B --schedules gpipe
    --microbatches 1 --json` for each CPU convolution (BRG_CPU_CONV=onednn
    and im2col; onednn-plain is oneDNN with BRG_CPU_LAYOUT=plain, every
    activation plain NCHW and reordered around each convolution), the same
    steps, its step_seconds.
Prints a table of samples/s and ratios, the load average before and after,
and writes --json FILE with every measurement.

    bench/.venv/bin/python bench/cpu/torch_compare.py --rounds 3 --json out.json
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

MODELS = {
    # name: (brigade zoo name, extra brigade args, input CxHxW, classes, batch)
    "fmnist-cnn": ("fmnist-cnn", [], (1, 28, 28), 10, 64),
    "resnet18": ("resnet18", ["--input", "3x64x64"], (3, 64, 64), 1000, 32),
    "inception-v3": ("inception-v3-torchvision", [], (3, 299, 299), 1000, 8),
}


def torch_model(name, torch, nn):
    if name == "fmnist-cnn":
        return nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.25), nn.Linear(128, 10))
    import torchvision
    if name == "resnet18":
        return torchvision.models.resnet18(num_classes=1000)
    return torchvision.models.inception_v3(num_classes=1000, aux_logits=False, init_weights=False)


def time_torch(name, threads, steps, warmup):
    import torch
    from torch import nn
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    _, _, chw, classes, batch = MODELS[name]
    model = torch_model(name, torch, nn)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(batch, *chw)
    y = torch.randint(0, classes, (batch,))
    times = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def time_brigade(brigade, name, impl, steps, warmup):
    zoo, extra, _, _, batch = MODELS[name]
    cmd = [brigade, "bench", zoo, *extra, "--devices", "1x8GiB", "--batch", str(batch), "--schedules", "gpipe",
           "--microbatches", "1", "--steps", str(steps), "--warmup", str(warmup), "--json"]
    conv, _, layout = impl.partition("-")
    env = dict(os.environ, BRG_CPU_CONV=conv, BRG_CPU_LAYOUT=layout or "blocked")
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    data = json.loads(out)
    results = data["results"] if isinstance(data, dict) and "results" in data else data
    return results[0]["step_seconds"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--brigade", default="cli/brigade")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--impls", default="onednn,onednn-plain,im2col",
                    help="brigade CPU convolutions to measure (onednn-plain: with plain layouts)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", help="write every measurement here")
    args = ap.parse_args()
    models = args.models.split(",")
    impls = args.impls.split(",")
    load_before = os.getloadavg()
    runs = {m: {"pytorch": [], **{i: [] for i in impls}} for m in models}
    for r in range(args.rounds):
        for m in models:
            runs[m]["pytorch"].append(time_torch(m, args.threads, args.steps, args.warmup))
            # PyTorch's OpenMP threads live on in this process and spin a
            # while after its last step: let them stop before brigade runs,
            # and rotate brigade's order so that no impl always goes first.
            time.sleep(1.0)
            for i in impls[r % len(impls):] + impls[:r % len(impls)]:
                runs[m][i].append(time_brigade(args.brigade, m, i, args.steps, args.warmup))
            print(f"round {r + 1}/{args.rounds} {m}: " +
                  ", ".join(f"{k} {v[-1] * 1000:.0f} ms" for k, v in runs[m].items()), file=sys.stderr)
    load_after = os.getloadavg()
    import torch
    print(f"{platform.node()}, {os.cpu_count()} CPUs, torch {torch.__version__}, {args.threads} threads; "
          f"load {load_before[0]:.2f} before, {load_after[0]:.2f} after; median of {args.rounds} rounds of "
          f"{args.steps} steps")
    head = "| model | batch | PyTorch samples/s | " + " | ".join(f"brigade {i} samples/s | {i} / PyTorch" for i in impls) + " |"
    print(head)
    print("|" + "---|" * (3 + 2 * len(impls)))
    summary = {}
    for m in models:
        batch = MODELS[m][4]
        pt = batch / statistics.median(runs[m]["pytorch"])
        cells = [f"{m}", f"{batch}", f"{pt:.1f}"]
        summary[m] = {"pytorch": pt}
        for i in impls:
            b = batch / statistics.median(runs[m][i])
            summary[m][i] = b
            cells += [f"{b:.1f}", f"{b / pt:.2f}x"]
        print("| " + " | ".join(cells) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": runs, "samples_per_s": summary, "load": [load_before, load_after],
                       "threads": args.threads, "steps": args.steps, "rounds": args.rounds}, f, indent=1)


if __name__ == "__main__":
    main()
