#!/usr/bin/python3
"""read_checkpoint.py - read an mnist-train checkpoint (safetensors) without
any of the trainer's code, check it, and score its weights on the MNIST test set.

    python3 tests/reliability/read_checkpoint.py CKPT [--test-data DIR]
        [--expect-accuracy A] [--tolerance T] [--print-meta]

The file is read with Python's standard library alone: 8-byte little-endian
header length, JSON header, raw little-endian F32 tensors, so checking a file
and --print-meta need nothing else. Scoring (--test-data) needs numpy; without
it the reader says so ("needs numpy (apt-get install python3-numpy)") and
exits 2. Everything is checked before use: the
header length against the file, each tensor's dtype, shape and byte range
(the ranges must tile the data), the __metadata__ format and the whole-file
CRC-32 ("checksum": "crc32:XXXXXXXX", computed with those 8 digits read as
'0'). The metadata stores the position as global_step and steps_per_epoch;
the epoch and step of the last completed step are derived from them. The
network is rebuilt from the tensors alone, in PyTorch's layout: dense models
from fc<l>.weight (out, in), ReLU between layers and on the logits for model
"seed"; LeNet-5 ("lenet") from conv1.weight (6, 1, 5, 5), conv2.weight
(16, 6, 5, 5), fc1 .. fc3: conv (padding 2, then 0), ReLU, 2x2 max-pool, twice,
then the dense layers with ReLU between.

Accuracy is computed in float32 with numpy; when PyTorch is installed the
weights are also loaded into a torch.nn.Module whose submodules carry the
tensors' names (fc0, fc1, ... or conv1, conv2, fc1, fc2, fc3) with
load_state_dict(strict=True) and scored again; when the safetensors package is
installed its loader must give the same arrays.

The optimizer's state is checked too: SGD's velocity optimizer.<name>, or
AdamW's optimizer.<name>.exp_avg and .exp_avg_sq and the scalar
optimizer.step (the global step).

Prints "accuracy=A" (and "torch_accuracy=A"); exit 0, or 1 when the file is
invalid or an --expect-accuracy check fails (the message says which), 2 when
what was asked needs numpy and there is none.

As a module, load_file(CKPT) gives the checked file's tensors as a dict of
torch tensors, as safetensors.torch.load_file does (docs/reliability.md, "In
PyTorch", loads a model with it).
"""
import argparse
import array
import gzip
import json
import math
import os
import struct
import sys
import zlib

try:  # only scoring needs it (need_numpy)
    import numpy as np
except ImportError:
    np = None

MAX_HEADER = 1 << 20
FORMAT = "mnist-ddp-checkpoint-2"
PIXEL_MEAN = 0.1307  # include/elem.h: ELEM_PIXEL_MEAN, ELEM_PIXEL_STD (as float32 where used)
PIXEL_STD = 0.3081


class Invalid(Exception):
    pass


def need_numpy(what):
    """Exit 2 saying that WHAT needs numpy when there is none (the header needs only the
    standard library)."""
    if np is None:
        print(f"read_checkpoint: {what} needs numpy (apt-get install python3-numpy); "
              f"{sys.executable} has none", file=sys.stderr)
        sys.exit(2)


class Tensor:
    """One F32 tensor of the file: its shape and its little-endian bytes."""

    def __init__(self, shape, data):
        self.shape = tuple(shape)
        self.data = data

    def floats(self):
        """The values as an array of Python floats (standard library only)."""
        a = array.array("f")
        a.frombytes(self.data)
        if sys.byteorder == "big":
            a.byteswap()
        return a

    def numpy(self):
        need_numpy("reading the tensors as arrays")
        return np.frombuffer(self.data, dtype="<f4").reshape(self.shape).astype(np.float32)


def read_checkpoint(path):
    """(metadata dict, {name: Tensor}) of a checked file."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise Invalid(f"{path}: truncated: {len(blob)} bytes")
    (hlen,) = struct.unpack("<Q", blob[:8])
    if hlen < 2 or hlen > MAX_HEADER or hlen > len(blob) - 8:
        raise Invalid(f"{path}: header length {hlen} does not fit the {len(blob)}-byte file")
    try:
        header = json.loads(blob[8:8 + hlen].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise Invalid(f"{path}: header is not JSON: {e}")
    if not isinstance(header, dict):
        raise Invalid(f"{path}: header is not a JSON object")
    meta = header.pop("__metadata__", None)
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise Invalid(f"{path}: no __metadata__ of strings")
    if meta.get("format") != FORMAT:
        raise Invalid(f"{path}: format {meta.get('format')!r}, expected {FORMAT!r}")

    # Whole-file CRC-32 with the checksum's digits read as '0'.
    want = meta.get("checksum", "")
    if len(want) != 14 or not want.startswith("crc32:"):
        raise Invalid(f"{path}: checksum {want!r} is not crc32:XXXXXXXX")
    key = b'"checksum":"' + want.encode() + b'"'
    at = blob.find(key, 8, 8 + hlen)
    if at < 0 or blob.find(key, at + 1, 8 + hlen) >= 0:
        raise Invalid(f"{path}: checksum field not found exactly once in the header")
    digits = at + len(key) - 9
    sealed = bytearray(blob)
    sealed[digits:digits + 8] = b"00000000"
    got = zlib.crc32(bytes(sealed)) & 0xFFFFFFFF
    if f"{got:08x}" != want[6:]:
        raise Invalid(f"{path}: checksum mismatch (file says {want[6:]}, contents give {got:08x})")

    data = memoryview(blob)[8 + hlen:]
    tensors, ranges = {}, []
    for name, info in header.items():
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise Invalid(f"{path}: tensor {name}: entry must hold dtype, shape, data_offsets")
        if info["dtype"] != "F32":
            raise Invalid(f"{path}: tensor {name}: dtype {info['dtype']}, expected F32")
        shape, (begin, end) = info["shape"], info["data_offsets"]
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise Invalid(f"{path}: tensor {name}: shape {shape} is not a list of sizes")
        count = math.prod(shape)
        if not (0 <= begin <= end <= len(data)) or end - begin != 4 * count:
            raise Invalid(f"{path}: tensor {name}: data_offsets [{begin}, {end}] do not fit shape {shape}")
        ranges.append((begin, end, name))
        tensors[name] = Tensor(shape, bytes(data[begin:end]))
    at = 0
    for begin, end, name in sorted(ranges):
        if begin != at:
            raise Invalid(f"{path}: tensor {name} starts at {begin}, expected {at}")
        at = end
    if at != len(data):
        raise Invalid(f"{path}: tensors cover {at} of {len(data)} data bytes")
    return meta, tensors


def load_file(path):
    """{name: torch.Tensor} of a checked checkpoint, every tensor of the file (the
    parameters and the optimizer's state), as safetensors.torch.load_file gives them;
    raises Invalid for a file that fails a check. Needs torch, not numpy."""
    import torch

    _, tensors = read_checkpoint(path)
    out = {}
    for name, t in tensors.items():
        data = bytearray(t.data)
        if sys.byteorder == "big":
            data = bytearray(t.floats().tobytes())
        out[name] = torch.frombuffer(data, dtype=torch.float32).reshape(t.shape) if data else \
            torch.zeros(t.shape, dtype=torch.float32)
    return out


def position(meta):
    """(epoch, step) of the last completed step: global_step counts the steps done."""
    done = int(meta["global_step"]) - 1
    per_epoch = int(meta["steps_per_epoch"])
    return done // per_epoch, done % per_epoch


def read_idx(directory, prefix):
    """(images (n, 784) uint8, labels (n) uint8) of an IDX pair, raw or gzip."""
    def load(what):
        for name in (f"{prefix}-{what}", f"{prefix}-{what}.gz"):
            p = os.path.join(directory, name)
            if os.path.exists(p):
                with open(p, "rb") as f:
                    raw = f.read()
                return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
        raise SystemExit(f"read_checkpoint: no {prefix}-{what} in {directory}")
    img, lab = load("images-idx3-ubyte"), load("labels-idx1-ubyte")
    n, rows, cols = struct.unpack(">III", img[4:16])
    if struct.unpack(">I", img[:4])[0] != 0x803 or rows * cols != 784 or len(img) != 16 + n * 784:
        raise SystemExit(f"read_checkpoint: {directory}: bad image file")
    if struct.unpack(">II", lab[:8]) != (0x801, n) or len(lab) != 8 + n:
        raise SystemExit(f"read_checkpoint: {directory}: bad label file")
    return (np.frombuffer(img, np.uint8, offset=16).reshape(n, 784),
            np.frombuffer(lab, np.uint8, offset=8))


LENET = ("conv1", "conv2", "fc1", "fc2", "fc3")
LENET_PAD = {"conv1": 2, "conv2": 0}


def layers(tensors):
    """[(name, W, b)] in order: fc0, fc1, ... or LeNet-5's conv1, conv2, fc1, fc2, fc3."""
    if "conv1.weight" in tensors:
        names = LENET
    else:
        names, l = [], 0
        while f"fc{l}.weight" in tensors:
            names.append(f"fc{l}")
            l += 1
    out = []
    for name in names:
        if f"{name}.weight" not in tensors or f"{name}.bias" not in tensors:
            raise Invalid(f"no {name}.weight or {name}.bias tensor")
        out.append((name, tensors[f"{name}.weight"], tensors[f"{name}.bias"]))
    if not out:
        raise Invalid("no fc0.weight tensor")
    return out


def normalise(images):
    # The trainer's normalize_pixel_elem, in float32: (p * (1/255) - mean) * (1/std).
    x = images.astype(np.float32) * np.float32(1.0 / 255.0)
    return (x - np.float32(PIXEL_MEAN)) * (np.float32(1.0) / np.float32(PIXEL_STD))


def conv_numpy(x, w, b, pad):
    """x (n, c, h, w) * w (oc, c, k, k) + b, stride 1, zero padding: (n, oc, oh, ow)."""
    n, c, h, wd = x.shape
    oc, _, k, _ = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(2, 3))  # n, c, oh, ow, k, k
    oh, ow = win.shape[2], win.shape[3]
    cols = win.transpose(0, 2, 3, 1, 4, 5).reshape(n * oh * ow, c * k * k)
    y = cols @ w.reshape(oc, c * k * k).T + b
    return y.reshape(n, oh, ow, oc).transpose(0, 3, 1, 2)


def maxpool_numpy(x):
    n, c, h, w = x.shape
    return x[:, :, :h // 2 * 2, :w // 2 * 2].reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))


def accuracy_numpy(meta, tensors, images, labels):
    net = layers(tensors)
    hits = 0
    for at in range(0, len(labels), 1000):
        x = normalise(images[at:at + 1000])
        if net[0][0] == "conv1":
            x = x.reshape(-1, 1, 28, 28)
        for l, (name, w, b) in enumerate(net):
            if name.startswith("conv"):
                x = maxpool_numpy(np.maximum(conv_numpy(x, w, b, LENET_PAD[name]), np.float32(0.0)))
                continue
            x = x.reshape(x.shape[0], -1) @ w.T + b
            if l < len(net) - 1 or meta["model"] == "seed":
                x = np.maximum(x, np.float32(0.0))
        hits += int(np.sum(np.argmax(x, axis=1) == labels[at:at + 1000]))
    return hits / len(labels)


def accuracy_torch(meta, tensors, images, labels):
    import torch

    net = layers(tensors)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            for name, w, _ in net:
                if name.startswith("conv"):
                    setattr(self, name, torch.nn.Conv2d(w.shape[1], w.shape[0], w.shape[2],
                                                        padding=LENET_PAD[name]))
                else:
                    setattr(self, name, torch.nn.Linear(w.shape[1], w.shape[0]))

        def forward(self, x):
            if net[0][0] == "conv1":
                x = x.reshape(-1, 1, 28, 28)
            for l, (name, _, _) in enumerate(net):
                if name.startswith("conv"):
                    x = torch.nn.functional.max_pool2d(torch.relu(getattr(self, name)(x)), 2)
                    continue
                x = getattr(self, name)(torch.flatten(x, 1))
                if l < len(net) - 1 or meta["model"] == "seed":
                    x = torch.relu(x)
            return x

    model = Net()
    state = {k: torch.from_numpy(v.copy()) for k, v in tensors.items() if not k.startswith("optimizer.")}
    model.load_state_dict(state, strict=True)
    with torch.no_grad():
        logits = model(torch.from_numpy(normalise(images)))
    return float((logits.argmax(dim=1).numpy() == labels).mean())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--test-data", help="directory with t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte")
    ap.add_argument("--expect-accuracy", type=float)
    ap.add_argument("--tolerance", type=float, default=0.0)
    ap.add_argument("--print-meta", action="store_true")
    a = ap.parse_args()
    if a.test_data:
        need_numpy("scoring the test set (--test-data)")
    try:
        meta, tensors = read_checkpoint(a.checkpoint)
        # The optimizer's state (host/train/optim.h): SGD's velocity under the
        # parameter's name, AdamW's moments with PyTorch's suffixes and its
        # update count, a scalar equal to the global step. Older files are SGD's.
        adamw = meta.get("optimizer", "sgd") == "adamw"
        for name, w, b in layers(tensors):
            for suffix in (".exp_avg", ".exp_avg_sq") if adamw else ("",):
                v = tensors.get(f"optimizer.{name}.weight{suffix}")
                vb = tensors.get(f"optimizer.{name}.bias{suffix}")
                if v is None or vb is None or v.shape != w.shape or vb.shape != b.shape:
                    raise Invalid(f"{a.checkpoint}: optimizer state {name}.*{suffix} missing or misshapen")
        if adamw:
            step = tensors.get("optimizer.step")
            if step is None or step.shape != () or step.floats()[0] != float(int(meta["global_step"])):
                raise Invalid(f"{a.checkpoint}: optimizer.step missing, not a scalar, or not the global step")
    except Invalid as e:
        print(f"read_checkpoint: invalid: {e}", file=sys.stderr)
        return 1
    epoch, step = position(meta)
    print(f"checkpoint={a.checkpoint} model={meta['model']} epoch={epoch} step={step} "
          f"global_step={meta['global_step']} tensors={len(tensors)} "
          f"finite={int(all(all(map(math.isfinite, t.floats())) for t in tensors.values()))}")
    if a.print_meta:
        for k in sorted(meta):
            print(f"meta {k}={meta[k]}")
    try:
        from safetensors.numpy import load_file as safetensors_load_file  # needs numpy too
        ref = safetensors_load_file(a.checkpoint)
        same = set(ref) == set(tensors) and all(np.array_equal(ref[k], tensors[k].numpy()) for k in ref)
        print(f"safetensors_package=same" if same else "safetensors_package=DIFFERENT")
        if not same:
            return 1
    except ImportError:
        pass
    if not a.test_data:
        return 0
    tensors = {k: t.numpy() for k, t in tensors.items()}
    images, labels = read_idx(a.test_data, "t10k")
    acc = accuracy_numpy(meta, tensors, images, labels)
    print(f"accuracy={acc:.4f} ({int(round(acc * len(labels)))}/{len(labels)})")
    results = [("numpy", acc)]
    try:
        import torch  # noqa: F401
        tacc = accuracy_torch(meta, tensors, images, labels)
        print(f"torch_accuracy={tacc:.4f}")
        results.append(("torch", tacc))
    except ImportError:
        print("torch_accuracy=unavailable (PyTorch not installed)")
    if a.expect_accuracy is not None:
        for what, value in results:
            if abs(value - a.expect_accuracy) > a.tolerance + 1e-9:
                print(f"read_checkpoint: {what} accuracy {value:.4f} differs from the expected "
                      f"{a.expect_accuracy:.4f} by more than {a.tolerance}", file=sys.stderr)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
