#!/usr/bin/env python3
"""Writes the demo model used by `make demo`: a small ResNet-style CNN with seeded random weights.

  make_demo_model.py --out demo/resnet_small.onnx

Topology (CIFAR-style ResNet): 3x3 stem conv + BN + ReLU, three stages of two basic residual blocks
(16, 32, 64 channels; stages 2 and 3 downsample with stride 2 and a 1x1 projection), global average
pool, flatten, fully connected layer to 10 classes. Input "input" [1, 3, 32, 32], output "logits".
"""
from __future__ import annotations

import argparse
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "models"))
from model_zoo import GraphBuilder, conv_bn, gemm, rename_outputs  # noqa: E402
from onnx import TensorProto  # noqa: E402

STAGES = [(16, 1), (32, 2), (64, 2)]  # (channels, stride of the first block)
BLOCKS_PER_STAGE = 2


def basic_block(g: GraphBuilder, x: str, scope: str, cin: int, cout: int, stride: int) -> str:
    """Two 3x3 conv + BN, ReLU between, identity or 1x1-projection shortcut, ReLU after the add."""
    y = g.node("Relu", [conv_bn(g, x, f"{scope}/conv1", cin, cout, 3, stride=stride)], f"{scope}/relu")
    y = conv_bn(g, y, f"{scope}/conv2", cout, cout, 3, gamma_scale=0.5)
    if stride != 1 or cin != cout:
        x = conv_bn(g, x, f"{scope}/downsample/downsample.0", cin, cout, 1, stride=stride)
    return g.node("Relu", [g.node("Add", [y, x], scope)], f"{scope}/relu_1")


def make_resnet_small(num_classes: int = 10, seed: int = 11):
    g = GraphBuilder("resnet_small", seed)
    x = g.add_input("input", TensorProto.FLOAT, [1, 3, 32, 32])
    y = g.node("Relu", [conv_bn(g, x, "/conv1", 3, 16, 3)], "/relu")
    cin = 16
    for s, (cout, stride) in enumerate(STAGES, start=1):
        for b in range(BLOCKS_PER_STAGE):
            y = basic_block(g, y, f"/layer{s}/layer{s}.{b}", cin, cout, stride if b == 0 else 1)
            cin = cout
    y = g.node("Flatten", [g.node("GlobalAveragePool", [y], "/avgpool")], "/Flatten", axis=1)
    logits = gemm(g, y, "/fc/Gemm", cin, num_classes)
    g.add_output(logits, TensorProto.FLOAT, [1, num_classes])
    model = g.model()
    rename_outputs(model, {logits: "logits"})
    return model


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="path of the .onnx file to write")
    args = parser.parse_args()
    out_dir = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(out_dir, exist_ok=True)
    data = make_resnet_small().SerializeToString()
    with open(args.out + ".tmp", "wb") as f:
        f.write(data)
    os.replace(args.out + ".tmp", args.out)
    print(f"wrote {args.out} ({len(data) / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
