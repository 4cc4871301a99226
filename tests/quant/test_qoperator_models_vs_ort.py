#!/usr/bin/env python3
"""Quantized models in ONNX Runtime's QOperator format (the "-int8" files of the ONNX model zoo)
against ONNX Runtime.

A small CNN (convs, a residual Add, LeakyRelu, a Swish-style Mul of a Sigmoid, Concat, AveragePool,
GlobalAveragePool, Gemm, Softmax) is quantized with onnxruntime.quantization.quantize_static in
QOperator format, per tensor and per channel, uint8 (with reduce_range, see below) and int8
activations, at opsets 11, 13 and 17:
that writes QLinearConv and the com.microsoft QLinearAdd, QLinearLeakyRelu, QLinearSigmoid,
QLinearMul, QLinearConcat, QLinearAveragePool, QLinearGlobalAveragePool, QGemm and QLinearSoftmax.
Then one-node models of the forms quantize_static does not write (channels_last pools, QGemm with a
float output, Softmax-11 semantics in an opset-17 model, int8 QLinearAdd with broadcasting and no
output zero point). kiln (CPU, Python API) and ONNX Runtime (CPU EP) run each on the same input;
quantized results may differ by one step where a value lies on a rounding tie computed in another
order, so outputs must agree within two quantization steps of the output (the models' last
layers: softmax probabilities in steps of 1/256) and the CNN's argmax must agree.

  test_qoperator_models_vs_ort.py --module-dir build/python

Exits 77 (skipped) without numpy, onnx, onnxruntime (with its quantization tools) or the kiln module."""
import argparse
import os
import sys
import tempfile

try:
    import numpy as np
    import onnx
    import onnxruntime  # noqa: F401 (the reference, through vs_ort)
    from onnx import TensorProto, helper, numpy_helper
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
except ImportError as e:  # pragma: no cover
    print(f"SKIP: {e}")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from vs_ort import Tally, import_kiln, kiln_error, kiln_outputs, ort_outputs  # noqa: E402


def cnn(opset, rng):
    inits, nodes = [], []

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr, np.float32), name))
        return name

    def node(op, ins, out, **kw):
        nodes.append(helper.make_node(op, ins, [out], name=out, **kw))
        return out

    r1 = node("Relu", [node("Conv", ["x", const("w1", rng.standard_normal((8, 3, 3, 3)) * 0.3), const("b1", rng.standard_normal(8) * 0.1)],
                            "c1", pads=[1, 1, 1, 1])], "r1")
    c2 = node("Conv", [r1, const("w2", rng.standard_normal((8, 8, 3, 3)) * 0.15), const("b2", rng.standard_normal(8) * 0.1)], "c2",
              pads=[1, 1, 1, 1])
    l1 = node("LeakyRelu", [node("Add", [c2, r1], "a1")], "l1", alpha=0.1)
    c3 = node("Conv", [l1, const("w3", rng.standard_normal((4, 8, 1, 1)) * 0.3)], "c3")
    m1 = node("Mul", [c3, node("Sigmoid", [c3], "s1")], "m1")
    ap = node("AveragePool", [node("Concat", [m1, l1], "cat", axis=1)], "ap", kernel_shape=[2, 2], strides=[2, 2])
    fl = node("Flatten", [node("GlobalAveragePool", [ap], "gap")], "fl", axis=1)
    g = node("Gemm", [fl, const("wf", rng.standard_normal((10, 12)) * 0.3), const("bf", rng.standard_normal(10) * 0.1)], "g", transB=1)
    node("Softmax", [g], "y", axis=1)
    graph = helper.make_graph(nodes, "qcnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=7)


class Batches(CalibrationDataReader):
    def __init__(self, rng):
        self.data = iter([{"x": rng.standard_normal((2, 3, 16, 16)).astype(np.float32)} for _ in range(8)])

    def get_next(self):
        return next(self.data, None)


def one_node(op, inputs, inits, out_type, attrs, opset=17):
    """A com.microsoft node between a QuantizeLinear of each float input and a DequantizeLinear of
    its output (float in, float out), or with a float output as is (out_type None)."""
    nodes, ins, feeds_spec = [], [], []
    for k, (name, shape, scale, zero, qtype) in enumerate(inputs):
        feeds_spec.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, shape))
        inits += [numpy_helper.from_array(np.float32(scale), f"{name}_s"), numpy_helper.from_array(np.array(zero, qtype), f"{name}_z")]
        nodes.append(helper.make_node("QuantizeLinear", [name, f"{name}_s", f"{name}_z"], [f"{name}_q"]))
    main_out = "q" if out_type is not None else "y"
    nodes.append(helper.make_node(op, attrs.pop("_inputs"), [main_out], domain="com.microsoft", **attrs))
    if out_type is not None:
        inits += [numpy_helper.from_array(np.float32(out_type[0]), "y_s"), numpy_helper.from_array(np.array(out_type[1], out_type[2]), "y_z")]
        nodes.append(helper.make_node("DequantizeLinear", ["q", "y_s", "y_z"], ["y"]))
    graph = helper.make_graph(nodes, op, feeds_spec, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("com.microsoft", 1)], ir_version=8)


def single_cases(rng):
    u8, i8 = np.uint8, np.int8
    x = rng.standard_normal((2, 5, 6, 4)).astype(np.float32)  # NHWC for the channels_last pools
    cases = []
    cases.append(("gap_channels_last", one_node("QLinearGlobalAveragePool", [("x", [2, 5, 6, 4], 0.02, 128, u8)], [], (0.01, 120, u8),
                                                {"_inputs": ["x_q", "x_s", "x_z", "y_s", "y_z"], "channels_last": 1}), {"x": x}, 0.02))
    cases.append(("avgpool_channels_last", one_node("QLinearAveragePool", [("x", [2, 5, 6, 4], 0.02, 0, i8)], [], (0.015, 3, i8),
                                                    {"_inputs": ["x_q", "x_s", "x_z", "y_s", "y_z"], "channels_last": 1, "kernel_shape": [2, 2],
                                                     "strides": [1, 2], "pads": [1, 0, 0, 0], "count_include_pad": 0}), {"x": x}, 0.03))
    w = rng.integers(-100, 100, (6, 4)).astype(i8)
    cases.append(("qgemm_float_out", one_node("QGemm", [("a", [3, 6], 0.05, 0, i8)],
                                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.float32(0.01), "w_s"),
                                               numpy_helper.from_array(np.int8(0), "w_z"),
                                               numpy_helper.from_array(rng.integers(-500, 500, 4).astype(np.int32), "bias")], None,
                                              {"_inputs": ["a_q", "a_s", "a_z", "w", "w_s", "w_z", "bias"], "alpha": 0.5}),
                  {"a": rng.standard_normal((3, 6)).astype(np.float32)}, 1e-4))
    cases.append(("softmax_11_in_opset_17", one_node("QLinearSoftmax", [("x", [2, 3, 4], 0.05, 128, u8)], [], (1 / 256, 0, u8),
                                                     {"_inputs": ["x_q", "x_s", "x_z", "y_s", "y_z"], "axis": 1, "opset": 11}),
                  {"x": rng.standard_normal((2, 3, 4)).astype(np.float32)}, 2 / 256))
    cases.append(("add_int8_broadcast_no_out_zero", one_node("QLinearAdd", [("a", [2, 3, 4], 0.03, -5, i8), ("b", [4], 0.02, 7, i8)], [], (0.04, 0, i8),
                                                             {"_inputs": ["a_q", "a_s", "a_z", "b_q", "b_s", "b_z", "y_s"]}),
                  {"a": rng.standard_normal((2, 3, 4)).astype(np.float32), "b": rng.standard_normal(4).astype(np.float32)}, 0.08))
    return cases


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--module-dir", required=True)
    args = ap.parse_args()
    kiln = import_kiln(args.module_dir)
    if kiln is None:
        return 77
    rng = np.random.default_rng(3)
    tally = Tally("QOperator models vs ONNX Runtime")

    def check(name, path, feeds, tol, argmax=False):
        want = ort_outputs(path, feeds)[0]
        try:
            got = kiln_outputs(kiln, path, feeds)["y"]
        except Exception as e:
            tally.fail(name, kiln_error(e))
            return
        err = float(np.abs(got - want).max()) if got.shape == want.shape else float("inf")
        if err > tol or (argmax and not (got.argmax(1) == want.argmax(1)).all()):
            tally.fail(name, f"max |error| {err:.3g} (tolerance {tol:.3g}){'' if got.shape == want.shape else f', shape {got.shape} vs {want.shape}'}")
        else:
            tally.ok()

    with tempfile.TemporaryDirectory(prefix="kiln_qop_") as tmp:
        x = rng.standard_normal((2, 3, 16, 16)).astype(np.float32)
        for opset in (11, 13, 17):
            fp = os.path.join(tmp, f"cnn_{opset}.onnx")
            onnx.save(cnn(opset, np.random.default_rng(opset)), fp)
            for per_channel in (False, True):
                for act in (QuantType.QUInt8, QuantType.QInt8):
                    name = f"cnn_opset{opset}_{'per_channel' if per_channel else 'per_tensor'}_{act.name}"
                    qp = os.path.join(tmp, name + ".onnx")
                    # uint8 x int8: reduce_range (7-bit weights), as ONNX Runtime advises for CPUs without
                    # VNNI: there MLAS sums u8 x s8 pairs in saturating int16 and its QLinearConv is off
                    # by up to 42 steps where the exact integer result (kiln's, and NumPy's) is not.
                    quantize_static(fp, qp, Batches(np.random.default_rng(5)), quant_format=QuantFormat.QOperator,
                                    per_channel=per_channel, activation_type=act, weight_type=QuantType.QInt8,
                                    reduce_range=act == QuantType.QUInt8)
                    ops = {n.op_type for n in onnx.load(qp).graph.node if n.domain == "com.microsoft"}
                    if len(ops) < 8:
                        tally.fail(name, f"quantize_static wrote only {sorted(ops)} (the test expects the com.microsoft ops)")
                        continue
                    check(name, qp, {"x": x}, 2 / 256, argmax=True)
        for name, model, feeds, tol in single_cases(rng):
            path = os.path.join(tmp, name + ".onnx")
            onnx.save(model, path)
            check(name, path, feeds, tol)
    return tally.finish()


if __name__ == "__main__":
    sys.exit(main())
