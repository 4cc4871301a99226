#!/usr/bin/env python3
"""Explicit quantization on the CPU against ONNX Runtime.

QDQ models made here with onnxruntime.quantization.quantize_static (calibration data drawn from
the inputs' own distribution) run in kiln and in ONNX Runtime twice, on other inputs of that
distribution: ORT as shipped ("ort": it fuses the Q/DQ into QLinearConv / QLinearMatMul / QGemm and
also into QLinearAdd, QLinearSoftmax, ..., which round differently from the float Q/DQ they
replace), and ORT with graph optimizations off ("spec": every Q/DQ evaluated as written, ONNX's
semantics). Checks:
  - kiln lowered the quantized Conv / MatMul / Gemm to QLinearConv / QLinearMatMul (the engine's
    layer information names them), so the comparison is of the integer path, not of Q/DQ floats;
  - every float output is within `steps` quantization steps (of the output's final
    DequantizeLinear scale) of "spec" (1 step; ResNet-18 2: a 1-step rounding difference inside it
    can move a later requantization by one more), and within `steps` + ORT's own deviation
    between its two modes of "ort";
  - variants: per-channel weights with uint8 asymmetric activations, per-tensor weights with int8
    symmetric activations.
Prints the measured errors (max |kiln - ORT| in output steps and the share of elements that differ).

Usage: test_qdq_models.py --module-dir build/python [--keep DIR]
"""
import argparse
import json
import os
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

kiln = None
HERE = os.path.dirname(os.path.abspath(__file__))


def check(cond, msg=""):
    if not cond:
        raise AssertionError(msg)


# ---- float models ---------------------------------------------------------------------------------
def small_cnn(path):
    import torch
    import torch.nn as nn

    class Cnn(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, 16, 3, padding=1)
            self.c2 = nn.Conv2d(16, 32, 3, stride=2, padding=1)
            self.dw = nn.Conv2d(32, 32, 3, padding=1, groups=32)
            self.pool = nn.MaxPool2d(2)
            self.fc = nn.Linear(32 * 4 * 4, 10)

        def forward(self, x):
            x = torch.relu(self.c1(x))
            x = torch.relu(self.c2(x))
            x = self.pool(torch.relu(self.dw(x)) + x)  # residual Add stays float between Q/DQ
            return self.fc(x.flatten(1))

    torch.manual_seed(0)
    torch.onnx.export(Cnn().eval(), torch.randn(2, 3, 16, 16), path, input_names=["x"], output_names=["y"],
                      opset_version=17, dynamo=False)
    return {"x": (2, 3, 16, 16)}


def resnet18(path):
    import torch
    import torchvision
    torch.manual_seed(0)
    m = torchvision.models.resnet18(num_classes=100).eval()
    # Random BatchNorm statistics, so that the folded convs are not plain identity scalings.
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.2, 0.2)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.2, 0.2)
    torch.onnx.export(m, torch.randn(1, 3, 64, 64), path, input_names=["x"], output_names=["y"], opset_version=17,
                      dynamo=False)
    return {"x": (1, 3, 64, 64)}


def mlp(path):
    sys.path.insert(0, os.path.join(HERE, "..", "models"))
    import model_zoo
    onnx.save(model_zoo.make_mlp(batch=4), path)
    return {"input": (4, 784)}


def transformer(path):
    import torch
    import torch.nn as nn
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, batch_first=True, dropout=0.0)
    model = nn.Sequential(nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False), nn.Linear(64, 8)).eval()
    torch.onnx.export(model, torch.randn(2, 16, 64), path, input_names=["x"], output_names=["y"], opset_version=17,
                      dynamo=False)
    return {"x": (2, 16, 64)}


# ---- quantization ---------------------------------------------------------------------------------
class Reader(CalibrationDataReader):
    def __init__(self, shapes, batches, seed):
        self.data = iter([{n: np.random.default_rng(seed + i).standard_normal(s).astype(np.float32) for n, s in shapes.items()}
                          for i in range(batches)])

    def get_next(self):
        return next(self.data, None)


VARIANTS = {
    # name: (per_channel, activation type, symmetric activations)
    "u8_per_channel": (True, QuantType.QUInt8, False),
    "s8sym_per_tensor": (False, QuantType.QInt8, True),
}


def quantize(src, dst, shapes, variant):
    per_channel, act_type, sym = VARIANTS[variant]
    quantize_static(src, dst, Reader(shapes, 8, 100), quant_format=QuantFormat.QDQ, per_channel=per_channel,
                    activation_type=act_type, weight_type=QuantType.QInt8,
                    extra_options={"ActivationSymmetric": sym, "WeightSymmetric": True})


def output_scales(path):
    """The scale of the DequantizeLinear producing each graph output."""
    m = onnx.load(path)
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in m.graph.initializer}
    out = {}
    for o in m.graph.output:
        dq = [n for n in m.graph.node if o.name in n.output and n.op_type == "DequantizeLinear"]
        check(dq, f"output {o.name} of {path} is not produced by a DequantizeLinear")
        out[o.name] = float(inits[dq[0].input[1]])
    return out


def run(name, make, variant, tmp, steps):
    src = os.path.join(tmp, f"{name}.onnx")
    dst = os.path.join(tmp, f"{name}_{variant}_qdq.onnx")
    shapes = make(src)
    quantize(src, dst, shapes, variant)
    feeds = {n: np.random.default_rng(7).standard_normal(s).astype(np.float32) for n, s in shapes.items()}
    want = ort.InferenceSession(dst, providers=["CPUExecutionProvider"]).run(None, feeds)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    spec = ort.InferenceSession(dst, so, providers=["CPUExecutionProvider"]).run(None, feeds)
    engine = kiln.build_engine(dst, kiln.BuilderConfig(device="cpu"))
    info = json.loads(engine.layer_information)
    ops = [l.get("op", "") for l in info["layers"]]
    lowered = sum(op in ("QLinearConv", "QLinearMatMul") for op in ops)
    tactics = sorted({l.get("tactic", "") for l in info["layers"] if l.get("op") in ("QLinearConv", "QLinearMatMul")})
    check(lowered > 0, f"{name}/{variant}: no layer lowered to QLinearConv/QLinearMatMul: {sorted(set(ops))}")
    got = engine.create_execution_context().infer(feeds)
    scales = output_scales(dst)
    names = [o.name for o in onnx.load(dst).graph.output]
    def steps_between(a, b, out):
        return np.abs(a.astype(np.float64) - b.astype(np.float64)) / scales[out]

    for out, ref, ref_spec in zip(names, want, spec):
        err, err_spec, ort_own = steps_between(got[out], ref, out), steps_between(got[out], ref_spec, out), steps_between(ref, ref_spec, out)
        print(f"  {name:12s} {variant:17s} {out}: {lowered:2d} integer layers; vs spec max {err_spec.max():.2f} steps "
              f"({100 * np.mean(err_spec > 0.5):.2f}% differ), vs ort max {err.max():.2f} ({100 * np.mean(err > 0.5):.2f}% differ; "
              f"ort vs spec {ort_own.max():.2f}); tactics {','.join(tactics)}")
        check(err_spec.max() <= steps + 1e-3, f"{name}/{variant}/{out}: {err_spec.max():.2f} steps from ONNX Runtime without "
              f"graph optimizations (allowed {steps})")
        check(err.max() <= steps + ort_own.max() + 1e-3, f"{name}/{variant}/{out}: {err.max():.2f} steps from ONNX Runtime")


def main():
    global kiln
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--module-dir", required=True)
    p.add_argument("--keep", default="", help="write the models here (default: a temporary directory)")
    args = p.parse_args()
    sys.path.insert(0, args.module_dir)
    import kiln as k
    kiln = k
    models = [("cnn", small_cnn, 1), ("mlp", mlp, 1), ("transformer", transformer, 1), ("resnet18", resnet18, 2)]
    try:  # the CNN, transformer and ResNet-18 are PyTorch exports (scripts/install_deps.sh installs it where it can)
        import torch, torchvision  # noqa: F401
    except ImportError:
        models = [m for m in models if m[0] == "mlp"]
        print("SKIPPED: cnn, transformer, resnet18 (PyTorch/torchvision are not installed here); the mlp runs")
    with tempfile.TemporaryDirectory() as tmp:
        where = args.keep or tmp
        os.makedirs(where, exist_ok=True)
        for name, make, steps in models:
            for variant in VARIANTS:
                run(name, make, variant, where, steps)
    print(f"qdq models: all within tolerance of ONNX Runtime ({', '.join(m[0] for m in models)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
