#!/usr/bin/env python3
"""PyTorch reference for bench/gpu/run.sh: the same model, batch and
precision as gpu_bench, on one GPU.

torchvision resnet50 or inception_v3 (aux_logits off, 299x299), synthetic
data (one random batch reused), FP32 with TF32 off for matmuls and cuDNN,
SGD with momentum 0.9, cross-entropy; warm-up steps, then timed steps
between torch.cuda.synchronize() calls. Prints a readable line and one

    RESULT tag=torch model=... batch=... images_per_s=... ...

line in gpu_bench's format, so run.sh puts both in one table.
Exit status: 0 done, 1 failed, 4 PyTorch or a GPU is missing (skipped)."""
import argparse
import os
import statistics
import sys
import time

MODELS = {"resnet50": 224, "inception-v3": 299}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(MODELS), required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--tf32", action="store_true", help="allow TF32 (default: off, plain FP32)")
    ap.add_argument("--tag", default="torch",
                    help="the RESULT line's tag (default torch: the baseline run.sh divides by)")
    ap.add_argument("--tf32-modes", default=None,
                    help="comma list of 0 (FP32) and 1 (TF32): one run each, in this process (overrides --tf32)")
    ap.add_argument("--profile-out", default=None, metavar="FILE",
                    help="after the first run's timed steps, profile one more step (torch.profiler) and write "
                         "the GPU time of each kind of layer as JSON (format torch-profile), for "
                         "compare_profiles.py --torch")
    args = ap.parse_args()

    try:
        import torch
        import torchvision
    except ImportError as e:
        print(f"torch_bench: PyTorch or torchvision is not installed ({e}): skipped", file=sys.stderr)
        return 4
    if not torch.cuda.is_available():
        print("torch_bench: torch.cuda.is_available() is False: skipped", file=sys.stderr)
        return 4

    modes = [m == "1" for m in args.tf32_modes.split(",")] if args.tf32_modes else [args.tf32]
    rc = 0
    for i, tf32 in enumerate(modes):
        args.tf32 = tf32
        rc = rc or run(args, torch, torchvision, args.profile_out if i == 0 else None)
    return rc


def kind_of(op):
    """The kind of layer (as compare_profiles.py names brigade's) and the
    phase an aten op's GPU time belongs to."""
    phase = "backward" if "backward" in op else "forward"
    if "conv" in op:
        return "conv", phase
    if "batch_norm" in op:
        return "bn", phase
    if "relu" in op or "threshold_backward" in op or "clamp_min" in op:
        return "relu", phase
    if "pool" in op:
        return "pool", phase
    return "rest", phase


def profile_step(step, torch, args, path):
    """One step under torch.profiler: each aten op's own GPU time (its
    kernels'), summed by kind and phase, to path as JSON."""
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    kinds, ops = {}, []
    for ev in prof.key_averages():
        us = getattr(ev, "self_device_time_total", None)
        if us is None:
            us = getattr(ev, "self_cuda_time_total", 0)
        if not us or not ev.key.startswith("aten::"):
            continue
        kind, phase = kind_of(ev.key)
        k = kinds.setdefault(kind, {"forward_ms": 0.0, "backward_ms": 0.0})
        k[phase + "_ms"] += us / 1000.0
        ops.append({"op": ev.key, "kind": kind, "ms": us / 1000.0, "calls": ev.count})
    ops.sort(key=lambda o: -o["ms"])
    doc = {"format": "torch-profile", "model": args.model, "micro_batch": args.batch, "tf32": int(args.tf32),
           "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
           "total_ms": sum(o["ms"] for o in ops), "kinds": kinds, "ops": ops[:40]}
    import json
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"profile: {doc['total_ms']:.2f} ms of GPU time in aten ops, by kind: " +
          ", ".join(f"{k} {v['forward_ms'] + v['backward_ms']:.2f}" for k, v in sorted(kinds.items())) +
          f" -> {path}", file=sys.stderr)


def run(args, torch, torchvision, profile_out=None):
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32
    torch.backends.cudnn.benchmark = True  # cuDNN picks its fastest algorithms during the warm-up
    dev = torch.device("cuda:0")
    size = MODELS[args.model]
    if args.model == "resnet50":
        model = torchvision.models.resnet50(weights=None)
    else:
        model = torchvision.models.inception_v3(weights=None, aux_logits=False, init_weights=True)
    model = model.to(dev).train()
    params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    opt = torch.optim.SGD(model.parameters(), lr=0.005, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    gen = torch.Generator(device=dev).manual_seed(42)
    x = torch.rand(args.batch, 3, size, size, device=dev, generator=gen) * 2 - 1
    y = torch.randint(0, 1000, (args.batch,), device=dev, generator=gen)

    def step():
        opt.zero_grad(set_to_none=True)
        out = model(x)
        loss = loss_fn(out, y)
        loss.backward()
        opt.step()
        return loss

    times, first, last = [], None, None
    torch.cuda.reset_peak_memory_stats(dev)
    for s in range(args.warmup + args.steps):
        torch.cuda.synchronize(dev)
        t0 = time.perf_counter()
        loss = step()
        torch.cuda.synchronize(dev)
        dt = time.perf_counter() - t0
        last = float(loss.detach())
        if first is None:
            first = last
        if s >= args.warmup:
            times.append(dt)
        print(f"step {s}{' (warm-up)' if s < args.warmup else ''}: {dt:.4f} s, loss {last:.4f}", file=sys.stderr)
    mean = sum(times) / len(times)
    median = statistics.median(times)
    peak = torch.cuda.max_memory_allocated(dev)
    print(f"torch {torch.__version__} torchvision {torchvision.__version__} cudnn {torch.backends.cudnn.version()} "
          f"on {torch.cuda.get_device_name(dev)}: {args.model} ({params} parameters) batch {args.batch}, "
          f"TF32 {'on' if args.tf32 else 'off'}")
    print(f"result   {args.batch / mean:.1f} images/s (mean step {mean:.4f} s, median {median:.4f} s), "
          f"peak {peak / 2**30:.2f} GiB allocated, loss {first:.4f} -> {last:.4f}")
    # TORCH_CUDNN_V8_API_DISABLED=1 sends PyTorch's convolutions through
    # cuDNN's legacy API, as brigade's (cudnnFind*); else its graph API.
    api = "legacy" if os.environ.get("TORCH_CUDNN_V8_API_DISABLED") == "1" else "graph"
    print(f"RESULT tag={args.tag} model={args.model} batch={args.batch} devices=1 schedule=- micro_batches=1 "
          f"recompute=none images_per_s={args.batch / mean:.2f} step_mean_s={mean:.5f} step_median_s={median:.5f} "
          f"peak_allocated_bytes={peak} loss_first={first:.5f} loss_last={last:.5f} "
          f"torch={torch.__version__} tf32={int(args.tf32)} conv_algo=cudnn.benchmark-{api}-api")
    if profile_out:  # after the RESULT line: a failing profiler never costs the timing
        try:
            profile_step(step, torch, args, profile_out)
        except Exception as e:  # noqa: BLE001 (any profiler failure is reported, not fatal)
            print(f"torch_bench: the profile failed: {e!r}", file=sys.stderr)
            return 1
    del model, opt, x, y
    torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
