#!/usr/bin/env python3
"""The Keras fixtures of brigade's tests (tests/models/keras/), made with
Keras from PyPI (any backend; KERAS_BACKEND=torch needs no TensorFlow):

    KERAS_BACKEND=torch bench/.venv/bin/python bench/keras/make_fixtures.py [--out tests/models/keras]

- inception_v3.json: keras.applications.InceptionV3(weights=None).to_json()
  (23,851,784 parameters, 23,817,352 trainable);
- small_cnn.json: a functional model with every layer brigade imports
  (ZeroPadding2D folded into a Conv2D with a relu, BatchNormalization,
  pools with 'valid' and 'same' padding, Add, UpSampling2D, Concatenate,
  a channels-last Flatten before a Dense, Dropout), and
  small_cnn.data.json: its weights by Keras's variable paths
  ("conv/kernel"), a random NHWC input of 2 samples and Keras's outputs
  on it (inference: moving statistics, no dropout), which
  tests/test_keras.c compares brigade's forward with; small_cnn.keras:
  the same model and weights as model.save writes them (a zip of
  config.json and model.weights.h5);
- sequential.json: a Sequential model (Input, Conv2D, MaxPooling2D,
  Flatten, Dense with a final softmax);
- channels_first.keras: a model whose every layer is channels_first (a
  Conv2D, whose kernel Keras still keeps as [kh, kw, in, out], a
  BatchNormalization on axis 1, a pool, a Flatten that Keras makes
  height-width-channel before the Dense), and channels_first.data.json:
  a random NCHW input of 2 samples and Keras's outputs on it;
  channels_first_bad_kernel.keras: the same archive with the Conv2D's
  kernel stored [3, 2, 3, 2] instead of [3, 2, 2, 3] (as many values),
  which brigade must refuse;
- channels_first_flatten.keras: a channels_first Conv2D and pool before a
  Flatten left at its default data_format (channels_last), which Keras
  flattens as the tensor is, channel-height-width, and
  channels_first_flatten.data.json: an NCHW input and Keras's outputs.
Printed: Keras's version and backend, the parameter counts.
"""

import argparse
import json
import os

import keras
import numpy as np


def small_cnn():
    x = keras.Input((8, 8, 3), name="image")
    p = keras.layers.ZeroPadding2D(1, name="pad")(x)
    p = keras.layers.Conv2D(4, 3, activation="relu", name="conv")(p)
    p = keras.layers.BatchNormalization(name="bn")(p)
    p = keras.layers.MaxPooling2D(2, name="pool")(p)
    a = keras.layers.Conv2D(4, 1, padding="same", name="conv_1x1")(p)
    s = keras.layers.Add(name="add")([p, a])
    u = keras.layers.UpSampling2D(2, name="up")(s)
    v = keras.layers.AveragePooling2D(2, name="down")(u)
    w = keras.layers.AveragePooling2D(3, strides=1, padding="same", name="smooth")(v)
    c = keras.layers.Concatenate(name="join")([s, w])
    f = keras.layers.Flatten(name="flat")(c)
    f = keras.layers.Dropout(0.5, name="drop")(f)
    y = keras.layers.Dense(5, name="logits")(f)
    return keras.Model(x, y, name="small_cnn")


def channels_first_cnn():
    x = keras.Input((2, 6, 5), name="image")
    p = keras.layers.Conv2D(3, (3, 2), activation="relu", data_format="channels_first", name="conv")(x)
    p = keras.layers.BatchNormalization(axis=1, name="bn")(p)
    p = keras.layers.MaxPooling2D(2, data_format="channels_first", name="pool")(p)
    f = keras.layers.Flatten(data_format="channels_first", name="flat")(p)
    y = keras.layers.Dense(4, name="logits")(f)
    return keras.Model(x, y, name="channels_first")


def channels_first_flatten_cnn():
    x = keras.Input((2, 6, 5), name="image")
    p = keras.layers.Conv2D(3, (3, 2), activation="relu", data_format="channels_first", name="conv")(x)
    p = keras.layers.MaxPooling2D(2, data_format="channels_first", name="pool")(p)
    f = keras.layers.Flatten(name="flat")(p)  # the default data_format: flattens [C, H, W] as it is
    y = keras.layers.Dense(4, name="logits")(f)
    return keras.Model(x, y, name="channels_first_flatten")


def write_nchw_fixture(out, name, model, rng):
    """name.keras (random weights) and name.data.json: an NCHW input of 2 samples and Keras's outputs."""
    for v in model.weights:
        low = 0.5 if v.path.endswith("moving_variance") else -1.0
        v.assign(rng.uniform(low, 1.5, tuple(v.shape)).astype("float32"))
    x = rng.normal(0.0, 1.0, (2, 2, 6, 5)).astype("float32")
    y = np.asarray(model.predict(x, verbose=0), dtype="float32")
    model.save(os.path.join(out, f"{name}.keras"))
    with open(os.path.join(out, f"{name}.data.json"), "w") as f:
        json.dump({"keras": keras.__version__, "backend": keras.backend.backend(),
                   "input_nchw": {"shape": list(x.shape), "values": x.ravel().tolist()},
                   "output": {"shape": list(y.shape), "values": y.ravel().tolist()}}, f)
    print(f"{name}.keras: {model.count_params():,} parameters; outputs {y.shape}")


def write_channels_first(out, rng):
    write_nchw_fixture(out, "channels_first", channels_first_cnn(), rng)
    write_bad_kernel(os.path.join(out, "channels_first.keras"), os.path.join(out, "channels_first_bad_kernel.keras"))


def write_bad_kernel(good, bad):
    """A copy of the archive good whose conv/kernel has another shape of as many values."""
    import io
    import zipfile

    import h5py

    with zipfile.ZipFile(good) as z:
        members = {n: z.read(n) for n in z.namelist()}
    image = io.BytesIO(members["model.weights.h5"])
    with h5py.File(image, "r+") as f:
        kernel = f["layers/conv2d/vars/0"][...]
        del f["layers/conv2d/vars/0"]
        f["layers/conv2d/vars/0"] = kernel.reshape(3, 2, 3, 2)
    members["model.weights.h5"] = image.getvalue()
    with zipfile.ZipFile(bad, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "models", "keras"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    print(f"keras {keras.__version__}, backend {keras.backend.backend()}")

    inc = keras.applications.InceptionV3(weights=None)
    with open(os.path.join(args.out, "inception_v3.json"), "w") as f:
        f.write(inc.to_json())
    trainable = sum(int(np.prod(w.shape)) for w in inc.trainable_weights)
    print(f"inception_v3.json: {inc.count_params():,} parameters, {trainable:,} trainable")

    rng = np.random.default_rng(7)
    model = small_cnn()
    weights = {}
    for v in model.weights:
        shape = tuple(v.shape)
        if v.path.endswith("moving_variance"):
            value = rng.uniform(0.5, 1.5, shape)
        else:
            value = rng.normal(0.0, 0.5, shape)
        v.assign(value.astype("float32"))
        weights[v.path] = np.asarray(v.numpy(), dtype="float32").ravel().tolist()
    x = rng.normal(0.0, 1.0, (2, 8, 8, 3)).astype("float32")
    y = np.asarray(model.predict(x, verbose=0), dtype="float32")
    with open(os.path.join(args.out, "small_cnn.json"), "w") as f:
        f.write(model.to_json())
    model.save(os.path.join(args.out, "small_cnn.keras"))
    with open(os.path.join(args.out, "small_cnn.data.json"), "w") as f:
        json.dump({"keras": keras.__version__, "backend": keras.backend.backend(), "weights": weights,
                   "input_nhwc": {"shape": list(x.shape), "values": x.ravel().tolist()},
                   "output": {"shape": list(y.shape), "values": y.ravel().tolist()}}, f)
    print(f"small_cnn.json: {model.count_params():,} parameters; outputs {y.shape}")

    seq = keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Conv2D(8, 3, activation="relu", name="conv"),
                            keras.layers.MaxPooling2D(name="pool"), keras.layers.Flatten(name="flat"),
                            keras.layers.Dense(10, activation="softmax", name="fc")], name="sequential")
    with open(os.path.join(args.out, "sequential.json"), "w") as f:
        f.write(seq.to_json())
    print(f"sequential.json: {seq.count_params():,} parameters")

    write_channels_first(args.out, np.random.default_rng(11))
    write_nchw_fixture(args.out, "channels_first_flatten", channels_first_flatten_cnn(), np.random.default_rng(13))


if __name__ == "__main__":
    main()
