#!/usr/bin/env python3
"""Two per-layer profiles of one model compared by layer kind (markdown).

    compare_profiles.py BASELINE.json TESTED.json [--label NAME]
    compare_profiles.py --torch TORCH.json TESTED.json [--label NAME]

The files are `brigade model profile ... -o FILE` outputs (format
brigade-profile) of the same model and micro-batch, typically the commit
before a kernel change and the change itself, taken in one run on one GPU
(bench/gpu/run.sh, BRG_BASELINE). Layers are grouped by their names as the
zoo writes them: convolutions (conv*, downsample.0), BatchNorm (bn*,
downsample.1), ReLU, pools, the rest. Prints the total of each kind and
phase in both, their ratio, and the layers that changed most.

With --torch, the baseline is PyTorch's step of the same model and batch
(bench/gpu/torch_bench.py --profile-out: each aten op's own GPU time under
torch.profiler, by the same kinds), and phases are forward and backward
(brigade's input and weight gradients together). PyTorch's "rest" holds
its optimizer step, which brigade's per-layer profile does not time.
"""
import argparse
import json
import sys

PHASES = ("forward_ms", "backward_input_ms", "backward_weight_ms")


def kind_of(name):
    last = name.split(".")[-1]
    if last.startswith("conv") or (last == "0" and "downsample" in name):
        return "conv"
    if last.startswith("bn") or (last == "1" and "downsample" in name):
        return "bn"
    if last.startswith("relu"):
        return "relu"
    if "pool" in last:
        return "pool"
    return "rest"


def load(path):
    with open(path) as f:
        d = json.load(f)
    if d.get("format") != "brigade-profile":
        sys.exit(f"compare_profiles: {path} is not a brigade profile (format {d.get('format')!r})")
    return d


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("baseline")
    ap.add_argument("tested")
    ap.add_argument("--label", default=None, help="a title for the table (default: the model)")
    ap.add_argument("--torch", action="store_true", help="the baseline is torch_bench.py's --profile-out")
    args = ap.parse_args()
    if args.torch:
        return against_torch(args)
    base, new = load(args.baseline), load(args.tested)
    if base.get("model") != new.get("model") or base.get("micro_batch") != new.get("micro_batch"):
        sys.exit(f"compare_profiles: different runs ({base.get('model')} at {base.get('micro_batch')} against "
                 f"{new.get('model')} at {new.get('micro_batch')})")
    b, n = base["layers"], new["layers"]
    totals = {}
    for name in b:
        if name not in n:
            continue
        for ph in PHASES:
            if ph in b[name]:
                key = (kind_of(name), ph)
                old, cur = totals.get(key, (0.0, 0.0))
                totals[key] = (old + b[name][ph], cur + n[name].get(ph, 0.0))
    sum_b = sum(v[0] for v in totals.values())
    sum_n = sum(v[1] for v in totals.values())
    print(f"### {args.label or new.get('model')}, micro-batch {new.get('micro_batch')}: baseline against tested (ms)")
    print()
    print("| kind | phase | baseline | tested | tested / baseline |")
    print("|---|---|---|---|---|")
    for (kind, ph), (old, cur) in sorted(totals.items(), key=lambda kv: -kv[1][0]):
        ratio = f"{cur / old:.2f}" if old > 0 else "-"
        print(f"| {kind} | {ph[:-3]} | {old:.3f} | {cur:.3f} | {ratio} |")
    print(f"| all | | {sum_b:.3f} | {sum_n:.3f} | {sum_n / sum_b:.3f} |" if sum_b > 0 else "| all | | 0 | 0 | - |")
    moved = []
    for name in b:
        if name in n:
            for ph in PHASES:
                if ph in b[name] and ph in n[name]:
                    moved.append((n[name][ph] - b[name][ph], name, ph))
    moved.sort(key=lambda m: -abs(m[0]))
    print()
    print("Layers that moved most: " + ", ".join(
        f"{name} {ph[:-3]} {b[name][ph]:.3f} -> {n[name][ph]:.3f}" for _, name, ph in moved[:8]))
    return 0


def against_torch(args):
    with open(args.baseline) as f:
        torch = json.load(f)
    if torch.get("format") != "torch-profile":
        sys.exit(f"compare_profiles: {args.baseline} is not a torch_bench.py profile (format {torch.get('format')!r})")
    new = load(args.tested)
    if torch.get("model") != new.get("model") or torch.get("micro_batch") != new.get("micro_batch"):
        sys.exit(f"compare_profiles: different runs (PyTorch: {torch.get('model')} at {torch.get('micro_batch')}, "
                 f"brigade: {new.get('model')} at {new.get('micro_batch')})")
    ours = {}
    for name, layer in new["layers"].items():
        for ph in PHASES:
            if ph in layer:
                key = (kind_of(name), "forward" if ph == "forward_ms" else "backward")
                ours[key] = ours.get(key, 0.0) + layer[ph]
    theirs = {(k, ph): v.get(ph + "_ms", 0.0) for k, v in torch["kinds"].items() for ph in ("forward", "backward")}
    keys = sorted(set(ours) | set(theirs), key=lambda k: -max(ours.get(k, 0.0), theirs.get(k, 0.0)))
    print(f"### {args.label or new.get('model')}, micro-batch {new.get('micro_batch')}: brigade against PyTorch "
          f"{torch.get('torch')} (GPU ms of one step, TF32 {'on' if torch.get('tf32') else 'off'})")
    print()
    print("| kind | phase | PyTorch | brigade | brigade / PyTorch |")
    print("|---|---|---|---|---|")
    for kind, ph in keys:
        t, o = theirs.get((kind, ph), 0.0), ours.get((kind, ph), 0.0)
        if t == 0.0 and o == 0.0:
            continue
        print(f"| {kind} | {ph} | {t:.3f} | {o:.3f} | {o / t:.2f} |" if t > 0 else f"| {kind} | {ph} | 0 | {o:.3f} | - |")
    st, so = sum(theirs.values()), sum(ours.values())
    print(f"| all | | {st:.3f} | {so:.3f} | {so / st:.2f} |" if st > 0 else f"| all | | 0 | {so:.3f} | - |")
    print()
    print("PyTorch's largest ops: " + ", ".join(f"{o['op']} {o['ms']:.2f}" for o in torch.get("ops", [])[:8]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
