#!/usr/bin/env python3
"""Probe: is a strided stem conv with few input channels faster as SpaceToDepth(stride) + a stride-1 conv?

A 7x7 / stride-2 conv of a 3-channel image (ResNet's stem) runs on tensor cores with C padded to 8,
each tap's reduction only 8 deep. After SpaceToDepth(2) the same conv is a 4x4 / stride-1 conv of 12
channels (16 padded): 256 multiply-adds per output instead of 392, in 16-deep taps. Both forms are
written as ONNX models here; ONNX Runtime (CPU) checks that they compute the same function, then each
is built and timed with `kiln --fp16` (CUDA graph, no transfers, median of 100) where a kiln is given.
The same holds for stride s with SpaceToDepth(s); a patchify conv (kernel = stride, ConvNeXt's and
ViT's) becomes a 1x1 conv, a GEMM.
Usage: stem_s2d_probe.py [--kiln KILN] [--batches 32,256] [--work DIR]
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def s2d_weights(w, pad, s):
    """W [K, C, k, k] of a stride-s conv with symmetric pads `pad` -> (W' [K, s*s*C, t, t], pads) of the
    stride-1 conv over SpaceToDepth(s)'s output (channel (dy * s + dx) * C + c, ONNX's DCR order)."""
    K, C, k, _ = w.shape
    lo = (0 - pad) // s           # a = floor((ky - pad) / s) over ky in [0, k)
    hi = (k - 1 - pad) // s
    t = hi - lo + 1
    w2 = np.zeros((K, s * s * C, t, t), dtype=w.dtype)
    for ky in range(k):
        a, dy = divmod(ky - pad, s)
        for kx in range(k):
            b, dx = divmod(kx - pad, s)
            for c in range(C):
                w2[:, (dy * s + dx) * C + c, a - lo, b - lo] = w[:, c, ky, kx]
    return w2, [-lo, -lo, hi, hi]  # pads begin (top, left) then end (bottom, right)


def model(n, c, hw, k_out, k, pad, stride, s2d, seed=0):
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((k_out, c, k, k)) * (2.0 / (c * k * k)) ** 0.5).astype(np.float32)
    b = rng.standard_normal(k_out).astype(np.float32) * 0.1
    nodes, inits = [], [numpy_helper.from_array(b, "b")]
    x = "x"
    if s2d:
        w2, pads = s2d_weights(w, pad, stride)
        nodes.append(helper.make_node("SpaceToDepth", ["x"], ["xs"], blocksize=stride))
        nodes.append(helper.make_node("Conv", ["xs", "w", "b"], ["c"], kernel_shape=list(w2.shape[2:]), pads=pads))
        inits.append(numpy_helper.from_array(w2, "w"))
    else:
        nodes.append(helper.make_node("Conv", [x, "w", "b"], ["c"], kernel_shape=[k, k], pads=[pad] * 4, strides=[stride, stride]))
        inits.append(numpy_helper.from_array(w, "w"))
    nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    g = helper.make_graph(nodes, "stem", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, c, hw, hw])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


# name: (C, H = W, K, kernel, pad, stride): ResNet's stem, EfficientNet's / RegNet's, ConvNeXt's patchify, ViT's.
STEMS = {"r50_7x7s2": (3, 224, 64, 7, 3, 2), "effnet_3x3s2": (3, 224, 32, 3, 1, 2), "convnext_4x4s4": (3, 224, 96, 4, 0, 4),
         "vit_16x16s16": (3, 224, 768, 16, 0, 16)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln")
    ap.add_argument("--batches", default="32,256")
    ap.add_argument("--work", default="/tmp/s2d")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    import onnxruntime as ort
    for name, (c, hw, ko, k, pad, st) in STEMS.items():
        x = np.random.default_rng(1).standard_normal((2, c, hw, hw)).astype(np.float32)
        ys = [ort.InferenceSession(model(2, c, hw, ko, k, pad, st, s).SerializeToString()).run(None, {"x": x})[0] for s in (False, True)]
        err = float(np.abs(ys[0] - ys[1]).max() / (ys[0].max() - ys[0].min()))
        print(f"{name}: ONNX Runtime, plain vs SpaceToDepth form: shapes {ys[0].shape} {ys[1].shape}, max err / range {err:.2e}")
        assert ys[0].shape == ys[1].shape and err < 1e-5
        if not a.kiln:
            continue
        import fp8_bench
        for bs in [int(v) for v in a.batches.split(",")]:
            for s in (False, True):
                tag = f"{name}_b{bs}_{'s2d' if s else 'plain'}"
                d = os.path.join(a.work, tag)
                os.makedirs(d, exist_ok=True)
                p = os.path.join(d, "m.onnx")
                onnx.save(model(bs, c, hw, ko, k, pad, st, s), p)
                row = fp8_bench.engine_row(a.kiln, p, tag, d, None, profile=True)
                print(f"{tag}: {row.get('ms', row.get('error'))} ms; profile {row.get('profile')}", flush=True)


if __name__ == "__main__":
    main()
