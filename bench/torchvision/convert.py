#!/usr/bin/env python3
"""Convert weights between torchvision's state_dict and brigade's safetensors.

    convert.py to-brigade MODEL OUT.safetensors [--pth FILE | --seed S]
    convert.py to-torchvision MODEL IN.safetensors OUT.pth

MODEL is torchvision's name: resnet18, resnet50, resnet101, resnet152 or
inception_v3. The brigade model is the zoo model of the same architecture:
resnetNN, and inception-v3-torchvision for inception_v3 (torchvision's
Inception3 without AuxLogits: BatchNorm with gamma, average pools that count
the padding). brigade's Keras-flavoured inception-v3 has no BatchNorm gamma
and other pools, so torchvision's weights do not convert to it.

to-brigade reads a state_dict from a .pth file (torch.save of a state_dict,
or of a dict holding one under "state_dict" or "model"), or makes one with
torchvision's own initialization after torch.manual_seed(S) (default 0),
and writes brigade's names (docs/checkpoints.md has the table):

    torchvision                       brigade
    <bn>.weight, <bn>.bias            <bn>.gamma, <bn>.beta
    <bn>.running_mean, .running_var   the same
    <bn>.num_batches_tracked          not kept (brigade keeps no count)
    inception_v3: Conv2d_1a_3x3.*     stem.Conv2d_1a_3x3.* (and the other stem convolutions)
                  Mixed_5b..Mixed_7c  mixed0..mixed10
                  fc                  predictions
                  AuxLogits.*         not kept (brigade builds no auxiliary classifier)
    everything else                   the same name

Every tensor is written as float32 (brigade's only dtype), in the model's
layout (convolutions [K, C, R, S], linear [out, in]), which is PyTorch's.
to-torchvision does the reverse for a model built with the same number of
classes (read from the classifier's weight); num_batches_tracked comes back
as 0, the value of a fresh torch model, because brigade does not keep it.
Everything else round-trips bit for bit (compare.py checks it).

Needs torch, torchvision, safetensors and numpy (bench/torchvision/README.md).
"""

import argparse
import collections
import sys

import numpy as np

# torchvision's name -> brigade's zoo name.
BRIGADE_MODEL = {
    "resnet18": "resnet18",
    "resnet50": "resnet50",
    "resnet101": "resnet101",
    "resnet152": "resnet152",
    "inception_v3": "inception-v3-torchvision",
}

# Inception3's modules and brigade's blocks (Keras's names).
INCEPTION_BLOCKS = {
    "Mixed_5b": "mixed0", "Mixed_5c": "mixed1", "Mixed_5d": "mixed2",
    "Mixed_6a": "mixed3", "Mixed_6b": "mixed4", "Mixed_6c": "mixed5", "Mixed_6d": "mixed6", "Mixed_6e": "mixed7",
    "Mixed_7a": "mixed8", "Mixed_7b": "mixed9", "Mixed_7c": "mixed10",
}
INCEPTION_STEM = ("Conv2d_1a_3x3", "Conv2d_2a_3x3", "Conv2d_2b_3x3", "Conv2d_3b_1x1", "Conv2d_4a_3x3")
INCEPTION_BLOCKS_BACK = {v: k for k, v in INCEPTION_BLOCKS.items()}

BN_TO_BRIGADE = {"weight": "gamma", "bias": "beta", "running_mean": "running_mean", "running_var": "running_var"}
BN_TO_TORCHVISION = {v: k for k, v in BN_TO_BRIGADE.items()}


class ConvertError(Exception):
    pass


def check_model(model):
    if model not in BRIGADE_MODEL:
        raise ConvertError(f"unknown model '{model}'; give one of {', '.join(BRIGADE_MODEL)}")


def torchvision_model(model, num_classes=1000):
    """torchvision's model as brigade's zoo builds it: for inception_v3 no
    AuxLogits, torchvision's own initialization, no input transform."""
    import torchvision

    check_model(model)
    if model == "inception_v3":
        return torchvision.models.inception_v3(weights=None, num_classes=num_classes, aux_logits=False,
                                               init_weights=True, transform_input=False)
    return getattr(torchvision.models, model)(weights=None, num_classes=num_classes)


def _module_to_brigade(model, module):
    """A torchvision module path ("Mixed_5b.branch1x1.bn") as brigade's
    layer name, or None for a module brigade does not build."""
    if model != "inception_v3":
        return module
    head, _, rest = module.partition(".")
    if head == "AuxLogits":
        return None
    if head in INCEPTION_STEM:
        return "stem." + module
    if head in INCEPTION_BLOCKS:
        return INCEPTION_BLOCKS[head] + ("." + rest if rest else "")
    if head == "fc":
        return "predictions" + ("." + rest if rest else "")
    return module


def _layer_to_torchvision(model, layer):
    if model != "inception_v3":
        return layer
    head, _, rest = layer.partition(".")
    if head == "stem":
        return rest
    if head in INCEPTION_BLOCKS_BACK:
        return INCEPTION_BLOCKS_BACK[head] + ("." + rest if rest else "")
    if head == "predictions":
        return "fc" + ("." + rest if rest else "")
    return layer


def to_brigade(model, state_dict):
    """brigade's tensors (name -> contiguous float32 numpy array) from a
    torchvision state_dict, and the names of what was left out."""
    check_model(model)
    # A BatchNorm is a module with running statistics.
    bn_modules = {k[: -len(".running_mean")] for k in state_dict if k.endswith(".running_mean")}
    out, dropped = collections.OrderedDict(), []
    for key, value in state_dict.items():
        module, _, param = key.rpartition(".")
        layer = _module_to_brigade(model, module)
        if layer is None or (module in bn_modules and param == "num_batches_tracked"):
            dropped.append(key)
            continue
        if module in bn_modules:
            if param not in BN_TO_BRIGADE:
                raise ConvertError(f"'{key}': a BatchNorm tensor brigade does not know")
            param = BN_TO_BRIGADE[param]
        elif param not in ("weight", "bias"):
            raise ConvertError(f"'{key}': brigade's {BRIGADE_MODEL[model]} has no such tensor")
        if not value.is_floating_point():
            raise ConvertError(f"'{key}' is {value.dtype}; brigade's weights are float32")
        name = f"{layer}.{param}"
        if name in out:
            raise ConvertError(f"'{key}' and another tensor both become '{name}'")
        out[name] = np.ascontiguousarray(value.detach().to("cpu").float().numpy())
    return out, dropped


def to_torchvision(model, tensors):
    """A torchvision state_dict (ordered as the model's own) from brigade's
    tensors: every tensor of the model filled, each of its shape, and no
    brigade tensor left over; num_batches_tracked 0."""
    import torch

    check_model(model)
    fc = "predictions.weight" if model == "inception_v3" else "fc.weight"
    if fc not in tensors:
        raise ConvertError(f"no '{fc}': not brigade's {BRIGADE_MODEL[model]}")
    template = torchvision_model(model, num_classes=tensors[fc].shape[0]).state_dict()
    by_torchvision = {}
    for name, value in tensors.items():
        layer, _, param = name.rpartition(".")
        if param in BN_TO_TORCHVISION:
            param = BN_TO_TORCHVISION[param]
        by_torchvision[f"{_layer_to_torchvision(model, layer)}.{param}"] = (name, value)
    out = collections.OrderedDict()
    for key, like in template.items():
        if key.endswith(".num_batches_tracked"):
            out[key] = torch.zeros_like(like)
            continue
        if key not in by_torchvision:
            raise ConvertError(f"torchvision's {model} has '{key}', which the brigade file lacks")
        name, value = by_torchvision.pop(key)
        if tuple(value.shape) != tuple(like.shape):
            raise ConvertError(f"'{name}' has shape {list(value.shape)}; torchvision's '{key}' is {list(like.shape)}")
        out[key] = torch.from_numpy(np.array(value, dtype=np.float32))
    if by_torchvision:
        extra = sorted(v[0] for v in by_torchvision.values())
        raise ConvertError(f"the brigade file has {len(extra)} tensors torchvision's {model} lacks: "
                           + ", ".join(extra[:5]) + (" ..." if len(extra) > 5 else ""))
    return out


def save_brigade(path, model, tensors, source):
    from safetensors.numpy import save_file

    save_file(dict(tensors), path, metadata={"brigade.model": BRIGADE_MODEL[model], "brigade.parts": "weights",
                                             "converted.from": source})


def load_brigade(path):
    from safetensors.numpy import load_file

    return load_file(path)


def load_pth(path):
    import torch

    obj = torch.load(path, map_location="cpu", weights_only=True)
    for key in ("state_dict", "model"):
        if isinstance(obj, dict) and key in obj and isinstance(obj[key], dict):
            obj = obj[key]
    if not isinstance(obj, dict):
        raise ConvertError(f"{path} holds a {type(obj).__name__}, not a state_dict")
    # DataParallel's "module." prefix.
    if obj and all(k.startswith("module.") for k in obj):
        obj = {k[len("module."):]: v for k, v in obj.items()}
    return obj


def main(argv=None):
    p = argparse.ArgumentParser(description="Convert weights between torchvision's state_dict and brigade's "
                                "safetensors (names: docs/checkpoints.md).")
    sub = p.add_subparsers(dest="command", required=True)
    a = sub.add_parser("to-brigade", help="a torchvision state_dict to brigade's safetensors")
    a.add_argument("model", help="torchvision's name: " + ", ".join(BRIGADE_MODEL))
    a.add_argument("out", help="the brigade weights file to write (.safetensors)")
    src = a.add_mutually_exclusive_group()
    src.add_argument("--pth", help="a state_dict saved with torch.save")
    src.add_argument("--seed", type=int, default=0, help="else torchvision's initialization after "
                     "torch.manual_seed(SEED) (default 0)")
    a.add_argument("--classes", type=int, default=1000, help="with --seed: the classifier's outputs (default 1000)")
    b = sub.add_parser("to-torchvision", help="brigade's safetensors to a torchvision state_dict")
    b.add_argument("model", help="torchvision's name: " + ", ".join(BRIGADE_MODEL))
    b.add_argument("weights", help="brigade's weights (.safetensors)")
    b.add_argument("out", help="the state_dict to write with torch.save (.pth)")
    args = p.parse_args(argv)
    try:
        import torch

        if args.command == "to-brigade":
            if args.pth:
                state, source = load_pth(args.pth), f"torchvision {args.model} state_dict {args.pth}"
            else:
                torch.manual_seed(args.seed)
                state = torchvision_model(args.model, args.classes).state_dict()
                source = f"torchvision {args.model} initialized after torch.manual_seed({args.seed})"
            tensors, dropped = to_brigade(args.model, state)
            save_brigade(args.out, args.model, tensors, source)
            count = sum(int(v.size) for v in tensors.values())
            kinds = sorted({"AuxLogits.*" if d.startswith("AuxLogits.") else d.rpartition(".")[2] for d in dropped})
            print(f"wrote {args.out}: {len(tensors)} tensors, {count} floats, for brigade's "
                  f"{BRIGADE_MODEL[args.model]}; left out {len(dropped)} tensors ({', '.join(kinds) or 'none'})")
        else:
            state = to_torchvision(args.model, load_brigade(args.weights))
            torch.save(state, args.out)
            print(f"wrote {args.out}: torchvision {args.model} state_dict, {len(state)} tensors "
                  f"(num_batches_tracked 0: brigade keeps no count)")
    except (ConvertError, OSError) as e:
        print(f"convert.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
