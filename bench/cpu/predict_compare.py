#!/usr/bin/env python3
"""How well the planner predicts CPU devices: predicted against measured.

For each case (a model, its batch, the CPU devices and a schedule), in rounds
interleaved so that every variant sees the same load on a shared machine:
  - `brigade bench CASE --json` with the default times: this CPU's calibration
    (docs/planning.md, "Times on CPU devices"), recalibrated every round in a
    fresh XDG_CACHE_HOME so that the calibration's own noise is measured too;
  - the same with `--profile auto` (each layer of the model measured first);
  - the same with `--device-speed 10000` (the old default, 10 TFLOP/s).
Each run gives the plan's simulated makespan (predicted_makespan) and the
measured one: the median step's (measured_makespan_median; a makespan is
first action start to last action end, the optimizer step outside both).
The median, because a slow spell of a shared machine lengthens a few steps
and with them the mean, while a profile's times are medians too; the mean
is kept in the JSON beside it. Prints the median ratio predicted/measured
per case and variant with its range (and the same against the mean step),
the load average before and after, and writes --json FILE with every run.
Needs only brigade (no PyTorch).

    python3 bench/cpu/predict_compare.py --rounds 3 --json out.json
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

CASES = [
    # (label, brigade bench arguments)
    ("fmnist-cnn b64, 1 device", ["fmnist-cnn", "--batch", "64", "--devices", "1x8GiB",
                                  "--schedules", "gpipe", "--microbatches", "1"]),
    ("fmnist-cnn b64, 2 devices 1f1b m4", ["fmnist-cnn", "--batch", "64", "--devices", "2x8GiB",
                                           "--schedules", "1f1b", "--microbatches", "4"]),
    ("fmnist-cnn b64, 2 devices 1f1b m16", ["fmnist-cnn", "--batch", "64", "--devices", "2x8GiB",
                                            "--schedules", "1f1b", "--microbatches", "16"]),
    ("resnet18 3x64x64 b32, 1 device", ["resnet18", "--input", "3x64x64", "--batch", "32", "--devices", "1x8GiB",
                                        "--schedules", "gpipe", "--microbatches", "1"]),
    ("resnet18 3x64x64 b32, 2 devices 1f1b m4", ["resnet18", "--input", "3x64x64", "--batch", "32",
                                                 "--devices", "2x8GiB", "--schedules", "1f1b",
                                                 "--microbatches", "4"]),
    ("inception-v3 b8, 1 device", ["inception-v3", "--batch", "8", "--devices", "1x8GiB",
                                   "--schedules", "gpipe", "--microbatches", "1"]),
]
VARIANTS = [
    ("calibrated", []),
    ("profile auto", ["--profile", "auto"]),
    ("10 TFLOP/s", ["--device-speed", "10000"]),
]


def run(brigade, args, steps, warmup, env):
    cmd = [brigade, "bench"] + args + ["--steps", str(steps), "--warmup", str(warmup), "--json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    r = json.loads(out)["results"][0]
    shown = ["brigade", "bench"] + cmd[2:]  # the command as anyone would type it
    return {"predicted": r["predicted_makespan"], "measured": r["measured_makespan_median"],
            "measured_mean": r["measured_makespan"], "step": r["step_seconds"], "command": " ".join(shown)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--brigade", default=os.path.join(os.path.dirname(__file__), "..", "..", "cli", "brigade"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--json", help="write every run here")
    ap.add_argument("--cases", help="labels of the cases to run, separated by semicolons (default: all)")
    ap.add_argument("--variants", default=",".join(v for v, _ in VARIANTS),
                    help="comma-separated subset of: " + ", ".join(v for v, _ in VARIANTS))
    a = ap.parse_args()
    wanted = a.variants.split(",")
    variants = [(v, extra) for v, extra in VARIANTS if v in wanted]
    if len(variants) != len(wanted):
        ap.error(f"--variants: expected a subset of {', '.join(v for v, _ in VARIANTS)}")
    cases = CASES
    if a.cases:
        names = a.cases.split(";")
        cases = [c for c in CASES if c[0] in names]
        if len(cases) != len(names):
            ap.error("--cases: expected labels among: " + "; ".join(c[0] for c in CASES))
    load_before = os.getloadavg()
    runs = []
    for rnd in range(a.rounds):
        with tempfile.TemporaryDirectory() as cache:
            for label, args in cases:
                for variant, extra in variants:
                    env = dict(os.environ, XDG_CACHE_HOME=cache)
                    r = run(a.brigade, args + extra, a.steps, a.warmup, env)
                    r.update(case=label, variant=variant, round=rnd)
                    runs.append(r)
                    print(f"round {rnd + 1}: {label:42s} {variant:13s} predicted {r['predicted'] * 1e3:9.1f} ms"
                          f"  measured {r['measured'] * 1e3:9.1f} ms", file=sys.stderr)
    load_after = os.getloadavg()
    summary = {}
    for against, key in (("the median step", "measured"), ("the mean step", "measured_mean")):
        print(f"\npredicted / measured makespan ({against}), median of {a.rounds} rounds (range)")
        print(f"{'case':42s}" + "".join(f"  {v:>22s}" for v, _ in variants))
        for label, _ in cases:
            row = f"{label:42s}"
            for variant, _ in variants:
                ratios = [r["predicted"] / r[key] for r in runs if r["case"] == label and r["variant"] == variant]
                med = statistics.median(ratios)
                name = f"{label} / {variant}" + ("" if key == "measured" else " / mean step")
                summary[name] = {"median": med, "min": min(ratios), "max": max(ratios)}
                row += f"  {med:8.3g} ({min(ratios):.2g}-{max(ratios):.2g})"
            print(row)
    print(f"\nload average before {load_before[0]:.2f}, after {load_after[0]:.2f} ({os.cpu_count()} CPUs, "
          f"{platform.processor() or platform.machine()})")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"date": time.strftime("%Y-%m-%d"), "machine": platform.node(), "cpus": os.cpu_count(),
                       "load_before": load_before, "load_after": load_after, "rounds": a.rounds,
                       "summary": summary, "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
