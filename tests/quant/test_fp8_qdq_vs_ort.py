#!/usr/bin/env python3
"""FP8 Q/DQ models (float8e4m3fn, ModelOpt-style explicit quantization) against ONNX Runtime.

Each case is a model written with onnx.helper (opset 19): activations pass QuantizeLinear ->
DequantizeLinear with a per-tensor scale and a float8e4m3fn zero point, weights are float8e4m3fn
constants behind a DequantizeLinear (or float constants behind Q -> DQ), and the MatMul / Gemm
consumes both: an MLP with a bias Add and Relu, a Gemm with transB and C, one activation Q shared
by three projections of a 3-D input (attention's Q, K, V), activations that saturate at +-448,
a per-channel weight (which kiln keeps on the float Q/DQ path), and transformer FFNs with
erf-GELU and tanh-GELU between two FP8 matmuls, a LayerNorm quantized once for three projections, GPT-2's MLP with its Qs below Reshapes, a post-LN LayerNorm whose Y the residual reads too, and a pre-LN skip LayerNorm whose sum it reads. Each also with the GPU fusions (on the CPU's
reference kernels): shared Fp8Quantize layers, and quantized outputs fused into the Fp8MatMul
that produces them (y_scale), where the layer counts say so. Implicit FP8 too: a float MLP
built with fp8=True and a min-max calibrator (Python API) must give what ONNX Runtime gives for the
same MLP with explicit FP8 Q/DQ at the scales min-max calibration means (activation amax / 448 over
the calibration batches, weight max|W| / 448), with every MatMul an Fp8MatMul. kiln (CPU engine through the
Python API) and ONNX Runtime (CPU EP, graph optimizations off: with them, ONNX Runtime 1.32 computed
an FP8 Q/DQ Gemm with transB wrongly, 130% of the output's range off its own unoptimized result and
the ONNX reference evaluator) run it on the same input; outputs must agree at
rtol = atol = 1e-4 of the output's range, and the engine's layers must be the lowered Fp8MatMul
where the pattern allows it (and not where it does not).

  test_fp8_qdq_vs_ort.py --module-dir build/python

Exits 77 (skipped) without numpy, onnx, onnxruntime or the kiln module."""
import argparse
import json
import os
import sys
import tempfile

try:
    import numpy as np
    import onnx
    import onnxruntime  # noqa: F401 (the reference, through vs_ort)
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # pragma: no cover
    print(f"SKIP: {e}")
    sys.exit(77)

TOL = 1e-4
E4M3 = TensorProto.FLOAT8E4M3FN
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from vs_ort import Tally, import_kiln, kiln_error, ort_outputs  # noqa: E402


class Graph:
    """A small builder of float32 graphs with FP8 Q/DQ."""

    def __init__(self, rng):
        self.rng, self.nodes, self.inits, self.n = rng, [], [], 0

    def name(self, base):
        self.n += 1
        return f"{base}{self.n}"

    def const(self, value, base="c"):
        n = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(value, np.float32), n))
        return n

    def const_i64(self, value, base="shape"):
        n = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(value, np.int64), n))
        return n

    def fp8_const(self, value, base="w"):
        n = self.name(base)
        self.inits.append(helper.make_tensor(n, E4M3, list(value.shape), value.flatten().tolist()))
        return n

    def node(self, op, inputs, **attrs):
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def qdq(self, x, scale):
        """DQ(Q(x)) with a per-tensor scale and a float8e4m3fn zero point."""
        s = self.const(scale, "s")
        z = self.name("z")
        self.inits.append(helper.make_tensor(z, E4M3, [], [0.0]))
        return self.node("DequantizeLinear", [self.node("QuantizeLinear", [x, s, z]), s, z])

    def weight(self, shape, in_graph=False, per_channel_axis=None):
        """DQ(float8e4m3fn codes) (or DQ(Q(float constant)) when in_graph) of random weights."""
        w = self.rng.standard_normal(shape).astype(np.float32) * 0.2
        if per_channel_axis is not None:
            scale = np.abs(w).max(axis=1 - per_channel_axis) / 448.0
            s = self.const(scale.astype(np.float32), "ws")
            codes = w / (scale[None, :] if per_channel_axis == 1 else scale[:, None])
            return self.node("DequantizeLinear", [self.fp8_const(codes), s], axis=per_channel_axis)
        scale = float(np.abs(w).max() / 448.0)
        if in_graph:
            s = self.const(scale, "ws")
            return self.node("DequantizeLinear", [self.node("QuantizeLinear", [self.const(w, "wf"), s, self._zero()]), s, self._zero()])
        return self.node("DequantizeLinear", [self.fp8_const(w / scale), self.const(scale, "ws")])

    def _zero(self):
        z = self.name("z")
        self.inits.append(helper.make_tensor(z, E4M3, [], [0.0]))
        return z

    def model(self, x_shape, outputs):
        graph = helper.make_graph(self.nodes, "fp8", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                                  [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs], self.inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=9)


def mlp(g):
    h = g.node("MatMul", [g.qdq("x", 0.01), g.weight((64, 128))])
    h = g.node("Relu", [g.node("Add", [h, g.const(g.rng.standard_normal(128) * 0.1, "b")])])
    y = g.node("Add", [g.node("MatMul", [g.qdq(h, 0.02), g.weight((128, 32))]), g.const(g.rng.standard_normal(32) * 0.1, "b")])
    return g.model([4, 64], [y]), (4, 64), 2


def gemm_trans_b(g):
    y = g.node("Gemm", [g.qdq("x", 0.008), g.weight((32, 48)), g.const(g.rng.standard_normal(32) * 0.1, "c")], transB=1)
    return g.model([8, 48], [y]), (8, 48), 1


def shared_q_qkv(g):
    s = g.const(0.01, "s")
    z = g._zero()
    q = g.node("QuantizeLinear", ["x", s, z])
    outs = [g.node("MatMul", [g.node("DequantizeLinear", [q, s, z]), g.weight((64, 64), in_graph=True)]) for _ in range(3)]
    return g.model([2, 5, 64], outs), (2, 5, 64), 3


def saturating(g):
    # x in +-20 at scale 0.01: |x| / scale up to 2000, far beyond E4M3's 448.
    y = g.node("MatMul", [g.qdq("x", 0.01), g.weight((32, 16))])
    return g.model([6, 32], [y]), (6, 32), 1


def per_channel_weight(g):
    y = g.node("MatMul", [g.qdq("x", 0.01), g.weight((32, 16), per_channel_axis=1)])
    return g.model([3, 32], [y]), (3, 32), 0


def gelu_erf(g, x):
    """x * 0.5 * (1 + erf(x / sqrt(2))), as PyTorch exports nn.GELU()."""
    e = g.node("Erf", [g.node("Div", [x, g.const(np.sqrt(2.0))])])
    return g.node("Mul", [g.node("Mul", [x, g.const(0.5)]), g.node("Add", [e, g.const(1.0)])])


def gelu_tanh(g, x):
    """0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))), GPT-2's GELU."""
    cube = g.node("Mul", [g.node("Pow", [x, g.const(3.0)]), g.const(0.044715)])
    t = g.node("Tanh", [g.node("Mul", [g.node("Add", [x, cube]), g.const(np.sqrt(2.0 / np.pi))])])
    return g.node("Mul", [g.node("Mul", [x, g.const(0.5)]), g.node("Add", [t, g.const(1.0)])])


def ffn(gelu):
    """A transformer FFN: up projection + bias -> GELU -> Q/DQ -> down projection + bias."""
    def make(g):
        h = g.node("Add", [g.node("MatMul", [g.qdq("x", 0.01), g.weight((64, 128))]), g.const(g.rng.standard_normal(128) * 0.1, "b")])
        y = g.node("Add", [g.node("MatMul", [g.qdq(gelu(g, h), 0.004), g.weight((128, 64))]), g.const(g.rng.standard_normal(64) * 0.1, "b")])
        return g.model([2, 6, 64], [y]), (2, 6, 64), 2
    return make


def layernorm_qkv(g):
    """LayerNorm -> one Q shared by three projections (a post-LN block's QKV)."""
    ln = g.node("LayerNormalization", ["x", g.const(1.0 + 0.1 * g.rng.standard_normal(64), "gamma"), g.const(0.1 * g.rng.standard_normal(64), "beta")], axis=-1)
    s = g.const(0.02, "s")
    z = g._zero()
    q = g.node("QuantizeLinear", [ln, s, z])
    outs = [g.node("MatMul", [g.node("DequantizeLinear", [q, s, z]), g.weight((64, 32))]) for _ in range(3)]
    return g.model([2, 7, 64], outs), (2, 7, 64), 3


def gpt2_mlp_views(g):
    """GPT-2's pre-LN MLP as exported: LayerNorm -> Reshape [B*S, C] -> Q/DQ -> Gemm -> Reshape
    [B, S, 4C] -> tanh-GELU -> Reshape [B*S, 4C] -> Q/DQ -> Gemm (the Qs sit below views)."""
    ln = g.node("LayerNormalization", ["x", g.const(1.0 + 0.1 * g.rng.standard_normal(64), "gamma"), g.const(0.1 * g.rng.standard_normal(64), "beta")], axis=-1)
    flat = lambda t, c: g.node("Reshape", [t, g.const_i64([-1, c])])  # noqa: E731
    h = g.node("Gemm", [g.qdq(flat(ln, 64), 0.02), g.weight((64, 128)), g.const(g.rng.standard_normal(128) * 0.1, "c")])
    h = gelu_tanh(g, g.node("Reshape", [h, g.const_i64([2, 6, 128])]))
    y = g.node("Gemm", [g.qdq(flat(h, 128), 0.01), g.weight((128, 64)), g.const(g.rng.standard_normal(64) * 0.1, "c")])
    return g.model([2, 6, 64], [y]), (2, 6, 64), 2


def post_ln_residual(g):
    """A post-LN block's LayerNorm: its Y feeds an FP8 projection and the residual Add (BERT)."""
    ln = g.node("LayerNormalization", ["x", g.const(1.0 + 0.1 * g.rng.standard_normal(64), "gamma"), g.const(0.1 * g.rng.standard_normal(64), "beta")], axis=-1)
    y = g.node("Add", [g.node("MatMul", [g.qdq(ln, 0.02), g.weight((64, 64))]), ln])
    return g.model([2, 5, 64], [y]), (2, 5, 64), 1


def pre_ln_residual(g):
    """A pre-LN block's residual sum: LayerNorm(x + a) feeds an FP8 projection, the sum the next
    residual Add (GPT-2; the GPU fusions make it a skip LayerNorm writing codes and the sum)."""
    a = g.node("MatMul", ["x", g.const(g.rng.standard_normal((64, 64)) * 0.1, "wf")])
    s = g.node("Add", ["x", a])
    ln = g.node("LayerNormalization", [s, g.const(1.0 + 0.1 * g.rng.standard_normal(64), "gamma"), g.const(0.1 * g.rng.standard_normal(64), "beta")], axis=-1)
    y = g.node("Add", [g.node("MatMul", [g.qdq(ln, 0.02), g.weight((64, 64))]), s])
    return g.model([2, 5, 64], [y]), (2, 5, 64), 1


CASES = [("mlp_bias_relu", mlp, 1.0), ("gemm_transB_C", gemm_trans_b, 1.0), ("shared_q_qkv_3d", shared_q_qkv, 1.0),
         ("saturating_x", saturating, 20.0), ("per_channel_weight_stays_float", per_channel_weight, 1.0),
         ("ffn_gelu_erf", ffn(gelu_erf), 1.0), ("ffn_gelu_tanh", ffn(gelu_tanh), 1.0), ("layernorm_qkv", layernorm_qkv, 3.0),
         ("gpt2_mlp_views", gpt2_mlp_views, 1.0), ("post_ln_residual", post_ln_residual, 2.0),
         ("pre_ln_residual", pre_ln_residual, 1.0)]

# With the GPU fusions (gpu_fusions=True: the GPU's passes on the CPU's reference kernels), the
# quantizations become Fp8Quantize layers, one per quantized tensor, and those of an Fp8MatMul's
# output move into it (y_scale): (Fp8Quantize layers, Fp8MatMul layers writing codes) expected.
GPU_FUSED = {"mlp_bias_relu": (1, 1), "gemm_transB_C": (1, 0), "shared_q_qkv_3d": (1, 0), "saturating_x": (1, 0),
             "per_channel_weight_stays_float": (0, 0), "ffn_gelu_erf": (1, 1), "ffn_gelu_tanh": (1, 1),
             "layernorm_qkv": (0, 0),  # the LayerNorm writes the codes
             "gpt2_mlp_views": (0, 1),
             "post_ln_residual": (0, 0),  # the LayerNorm writes the codes beside its Y
             "pre_ln_residual": (0, 0)}  # the skip LayerNorm writes the codes and the sum  # the Qs move above the Reshapes into the LayerNorm and the first Gemm


def implicit_fp8(kiln, rng, tmp, tally):
    """A float MLP quantized by kiln's calibration (fp8=True, min-max) against ONNX Runtime on the
    explicit FP8 Q/DQ MLP with the scales that calibration means."""
    name = "implicit_fp8_minmax_mlp"
    w1, b1 = rng.standard_normal((32, 64)).astype(np.float32) * 0.3, rng.standard_normal(64).astype(np.float32) * 0.1
    w2, b2 = rng.standard_normal((64, 16)).astype(np.float32) * 0.3, rng.standard_normal(16).astype(np.float32) * 0.1
    batches = [rng.standard_normal((8, 32)).astype(np.float32) for _ in range(3)]
    relu = lambda v: np.maximum(v, 0)  # noqa: E731
    amax_x = max(float(np.abs(b).max()) for b in batches)
    amax_h = max(float(relu(b @ w1 + b1).max()) for b in batches)

    def mlp(qdq):
        g = Graph(rng)
        xin = g.qdq("x", amax_x / 448.0) if qdq else "x"

        def weight(w):
            if not qdq:
                return g.const(w, "w")
            s = float(np.abs(w).max() / 448.0)
            return g.node("DequantizeLinear", [g.fp8_const(w / s), g.const(s, "ws")])
        h = g.node("Relu", [g.node("Add", [g.node("MatMul", [xin, weight(w1)]), g.const(b1, "b")])])
        y = g.node("Add", [g.node("MatMul", [g.qdq(h, amax_h / 448.0) if qdq else h, weight(w2)]), g.const(b2, "b")])
        return g.model([8, 32], [y])

    float_path, qdq_path = os.path.join(tmp, name + ".onnx"), os.path.join(tmp, name + "_qdq.onnx")
    onnx.save(mlp(False), float_path)
    onnx.save(mlp(True), qdq_path)

    class Batches:
        def __init__(self):
            self.left = list(batches)

        def get_batch(self):
            return {"x": self.left.pop(0)} if self.left else None

    x = (rng.standard_normal((8, 32)) * 1.5).astype(np.float32)
    try:
        want = ort_outputs(qdq_path, {"x": x}, optimize=False)[0]
        cfg = kiln.BuilderConfig(tf32=False, device="cpu")
        cfg.fp8 = True
        cfg.calibrator = Batches()
        cfg.calibration_algorithm = "minmax"
        engine = kiln.build_engine(float_path, cfg)
        got = list(engine.create_execution_context().infer({"x": x}).values())[0]
        ops = [layer.get("op") for layer in json.loads(engine.layer_information)["layers"]]
    except Exception as e:
        tally.fail(name, kiln_error(e))
        return
    if ops.count("Fp8MatMul") != 2 or "MatMul" in ops:
        tally.fail(name, f"layers {ops}: 2 Fp8MatMul and no float MatMul expected")
    elif not np.allclose(got, want, rtol=TOL, atol=TOL * max(float(np.abs(want).max()), 1.0)):
        tally.fail(name, f"max |error| {np.abs(got.astype(np.float64) - want).max()}")
    else:
        tally.ok(name)


def check(kiln, m, path, x, want, name, lowered, fused, tally):
    try:
        engine = kiln.build_engine(path, kiln.BuilderConfig(tf32=False, device="cpu", gpu_fusions=fused is not None))
        got = engine.create_execution_context().infer({"x": x})
        info = json.loads(engine.layer_information)
    except Exception as e:
        tally.fail(name, kiln_error(e))
        return
    layers = info.get("layers", info) if isinstance(info, dict) else info
    ops = [layer.get("op") for layer in layers]
    if ops.count("Fp8MatMul") != lowered:
        tally.fail(name, f"{ops.count('Fp8MatMul')} Fp8MatMul layers, {lowered} expected (layers: {ops})")
        return
    if fused is not None:
        codes_out = sum(1 for layer in layers if layer.get("op") == "Fp8MatMul" and "y_scale" in layer.get("quantization", {}))
        if (ops.count("Fp8Quantize"), codes_out) != fused:
            tally.fail(name, f"(Fp8Quantize layers, Fp8MatMul writing codes) = {(ops.count('Fp8Quantize'), codes_out)}, {fused} expected (layers: {ops})")
            return
    bad = []
    for out, w in zip(m.graph.output, want):
        g_ = got[out.name]
        tol = TOL * max(float(np.abs(w).max()), 1.0)
        if g_.shape != w.shape or not np.allclose(g_, w, rtol=TOL, atol=tol):
            bad.append(f"{out.name}: max |error| {np.abs(g_.astype(np.float64) - w).max() if g_.shape == w.shape else g_.shape}")
    if bad:
        tally.fail(name, "; ".join(bad))
    else:
        tally.ok(name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--module-dir", required=True)
    args = ap.parse_args()
    kiln = import_kiln(args.module_dir)
    if kiln is None:
        return 77
    rng = np.random.default_rng(11)
    tally = Tally("FP8 Q/DQ models vs ONNX Runtime")
    with tempfile.TemporaryDirectory(prefix="kiln_fp8_") as tmp:
        for name, make, amplitude in CASES:
            m, x_shape, lowered = make(Graph(rng))
            path = os.path.join(tmp, name + ".onnx")
            onnx.save(m, path)
            x = (rng.standard_normal(x_shape) * amplitude).astype(np.float32)
            try:
                want = ort_outputs(path, {"x": x}, optimize=False)
            except Exception as e:
                tally.not_comparable(name, f"ONNX Runtime cannot run it: {str(e).splitlines()[0][:120]}")
                continue
            for fused in (False, True):
                check(kiln, m, path, x, want, name + (" (gpu fusions)" if fused else ""), lowered, GPU_FUSED[name] if fused else None, tally)
        implicit_fp8(kiln, rng, tmp, tally)
    return tally.finish()


if __name__ == "__main__":
    sys.exit(main())
