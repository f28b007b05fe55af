"""Make a folder of JPEG photos for the decode benchmark.

The two photographs scikit-learn ships (china.jpg and flower.jpg, 640x427)
are cut into N random views of about 500x375 (some portrait), jittered in
brightness, and saved as JPEG (quality 90, 4:2:0) in 10 class folders:
OUT/train/class0/00000.jpg ... The same seed gives the same files.

usage: python make_photos.py OUT [--count N] [--seed S]
"""
import argparse
import os
import random

from PIL import Image, ImageEnhance
from sklearn.datasets import load_sample_images


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    photos = [Image.fromarray(a) for a in load_sample_images().images]
    for i in range(args.count):
        photo = photos[i % len(photos)]
        portrait = rng.random() < 0.25
        w, h = (375, 500) if portrait else (500, 375)
        # A crop of 70-100% of the photo's height at the target's aspect ratio.
        ch = int(photo.height * rng.uniform(0.7, 1.0))
        cw = min(photo.width, int(ch * w / h))
        x = rng.randint(0, photo.width - cw)
        y = rng.randint(0, photo.height - ch)
        view = photo.crop((x, y, x + cw, y + ch)).resize((w, h), Image.BICUBIC)
        view = ImageEnhance.Brightness(view).enhance(rng.uniform(0.8, 1.2))
        if rng.random() < 0.5:
            view = view.transpose(Image.FLIP_LEFT_RIGHT)
        folder = os.path.join(args.out, "train", "class%d" % (i % 10))
        os.makedirs(folder, exist_ok=True)
        view.save(os.path.join(folder, "%05d.jpg" % i), quality=90, subsampling="4:2:0")
    print("wrote %d JPEG photos to %s/train" % (args.count, args.out))


if __name__ == "__main__":
    main()
