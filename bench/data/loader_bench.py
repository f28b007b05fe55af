"""Decode-and-augment throughput: brigade's loader against PyTorch's
DataLoader with torchvision's transforms (PIL), in one run, on the same
folder, with the same number of workers.

Both make training batches of 299x299 random crops: resize the shorter side
to 342, random crop 299, random horizontal flip, normalize by ImageNet's
mean and std, into float32 NCHW batches of 32. Each side runs `--repeat`
times, alternating, over the same `--images` images; the median images/s
of each and their ratio are printed.

usage: python loader_bench.py DIR [--brigade PATH] [--workers 2] [--images 1000] [--repeat 3]
"""
import argparse
import re
import statistics
import subprocess
import time

import torch
import torchvision
from torchvision import transforms


def torch_rate(folder, workers, images, batch):
    tf = transforms.Compose([
        transforms.Resize(342),
        transforms.RandomCrop(299),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
    ])
    ds = torchvision.datasets.ImageFolder(folder, transform=tf)
    sampler = torch.utils.data.RandomSampler(ds, replacement=False, num_samples=images)
    dl = torch.utils.data.DataLoader(ds, batch_size=batch, sampler=sampler, num_workers=workers,
                                     persistent_workers=False, prefetch_factor=4 if workers else None)
    t0 = time.perf_counter()  # worker start-up counts, as brigade's thread start does
    n = 0
    for x, _ in dl:
        n += x.shape[0]
    return n / (time.perf_counter() - t0)


def brigade_rate(brigade, folder, workers, images, batch):
    out = subprocess.run([brigade, "data", "bench", folder, "--input", "3x299x299", "--resize", "342",
                          "--threads", str(workers), "--batch", str(batch), "--images", str(images)],
                         check=True, capture_output=True, text=True).stdout
    return float(re.search(r"([0-9.]+) images/s", out).group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", help="a folder of class folders (DIR/train when it has one)")
    ap.add_argument("--brigade", default="cli/brigade")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--images", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    import os
    folder = os.path.join(args.dir, "train") if os.path.isdir(os.path.join(args.dir, "train")) else args.dir
    torch.set_num_threads(1)
    b, t = [], []
    for r in range(args.repeat):
        b.append(brigade_rate(args.brigade, folder, args.workers, args.images, args.batch))
        t.append(torch_rate(folder, args.workers, args.images, args.batch))
        print("run %d: brigade %.1f images/s, PyTorch DataLoader %.1f images/s" % (r + 1, b[-1], t[-1]), flush=True)
    mb, mt = statistics.median(b), statistics.median(t)
    print("median: brigade %.1f images/s, PyTorch DataLoader (torchvision %s, Pillow %s) %.1f images/s: %.2fx"
          % (mb, torchvision.__version__, __import__("PIL").__version__, mt, mb / mt))


if __name__ == "__main__":
    main()
