#!/usr/bin/env python3
"""FP8 Q/DQ for an ONNX model, the way NVIDIA ModelOpt's FP8 recipe exports one: every MatMul / Gemm
with a constant 2-D weight gets per-tensor float8e4m3fn quantization of its activation input
(QuantizeLinear -> DequantizeLinear, scale = amax / 448 from a calibration run on ONNX Runtime) and
of its weight (float8e4m3fn codes behind a DequantizeLinear, scale = max |W| / 448). kiln lowers the
result to Fp8MatMul layers (builder/passes/lower_qdq_fp8.cpp); ONNX Runtime runs it as written.

  python3 bench/fp8_qdq.py model.onnx model_fp8.onnx --calib input:sample.npy [--calib name:file.npy ...]

(`--calib` takes .npy or ONNX TensorProto .pb files.) Used by bench/fp8_bench.py."""
import argparse
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

E4M3_MAX = 448.0


def _load(path):
    if path.endswith(".pb"):
        t = onnx.TensorProto()
        with open(path, "rb") as f:
            t.ParseFromString(f.read())
        return numpy_helper.to_array(t)
    return np.load(path)


def targets(model):
    """(node, weight initializer, weight transposed) of each MatMul / Gemm with a constant 2-D weight."""
    inits = {i.name: i for i in model.graph.initializer}
    out = []
    for n in model.graph.node:
        if n.op_type not in ("MatMul", "Gemm") or len(n.input) < 2 or n.input[1] not in inits:
            continue
        if len(inits[n.input[1]].dims) != 2:
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        if n.op_type == "Gemm" and (attrs.get("transA", 0) or attrs.get("alpha", 1.0) != 1.0):
            continue
        out.append((n, inits[n.input[1]], bool(attrs.get("transB", 0))))
    return out


def activation_amax(model, feeds):
    """max |x| of each target's activation input over the calibration feeds (ONNX Runtime, CPU)."""
    import onnxruntime as ort
    names = sorted({n.input[0] for n, _, _ in targets(model)})
    m = onnx.ModelProto()
    m.CopyFrom(model)
    known = {o.name for o in m.graph.output}
    for name in names:
        if name not in known:
            m.graph.output.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, None))
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # the float model, as written
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    outs = sess.run(names, feeds)
    return {n: float(np.abs(v).max()) for n, v in zip(names, outs)}


def quantize_fp8(model, amax):
    """The model with FP8 Q/DQ around the targets' activations and weights (opset raised to 19)."""
    g = model.graph
    for op in model.opset_import:
        if op.domain in ("", "ai.onnx") and op.version < 19:
            op.version = 19
    zero = "fp8_zero"
    g.initializer.append(helper.make_tensor(zero, TensorProto.FLOAT8E4M3FN, [], [0.0]))
    qdq_of = {}
    new_nodes = []
    for n in list(g.node):
        new_nodes.append(n)
    by_output = {}
    for node, w_init, _ in targets(model):
        x = node.input[0]
        if x not in qdq_of:
            s = f"{x}_fp8_scale"
            g.initializer.append(numpy_helper.from_array(np.array(max(amax.get(x, 1.0), 1e-12) / E4M3_MAX, np.float32), s))
            q, dq = f"{x}_fp8_q", f"{x}_fp8_dq"
            by_output[x] = [helper.make_node("QuantizeLinear", [x, s, zero], [q], name=q),
                            helper.make_node("DequantizeLinear", [q, s, zero], [dq], name=dq)]
            qdq_of[x] = dq
        node.input[0] = qdq_of[x]
        w = numpy_helper.to_array(w_init).astype(np.float32)
        ws = max(float(np.abs(w).max()), 1e-12) / E4M3_MAX
        codes = helper.make_tensor(f"{w_init.name}_fp8", TensorProto.FLOAT8E4M3FN, list(w.shape), (w / ws).flatten().tolist())
        g.initializer.append(codes)
        g.initializer.append(numpy_helper.from_array(np.array(ws, np.float32), f"{w_init.name}_fp8_scale"))
        wdq = f"{w_init.name}_fp8_dq_{node.name or len(new_nodes)}"
        by_output.setdefault(("w", wdq), []).append(
            helper.make_node("DequantizeLinear", [codes.name, f"{w_init.name}_fp8_scale"], [wdq], name=wdq))
        node.input[1] = wdq
    # Q/DQ of an activation right after its producer (graph inputs: first); weight DQs first.
    ordered = [nd for k, v in by_output.items() if isinstance(k, tuple) for nd in v]
    produced = {o: nd for nd in new_nodes for o in nd.output}
    for x, v in by_output.items():
        if not isinstance(x, tuple) and x not in produced:
            ordered += v
    for nd in new_nodes:
        ordered.append(nd)
        for o in nd.output:
            if o in by_output:
                ordered += by_output[o]
    del g.node[:]
    g.node.extend(ordered)
    used = {i for nd in g.node for i in nd.input}
    keep = [i for i in g.initializer if i.name in used]
    del g.initializer[:]
    g.initializer.extend(keep)
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--calib", action="append", default=[], help="input:file.npy|.pb (repeat per input)")
    a = ap.parse_args()
    m = onnx.load(a.model)
    feeds = {}
    for c in a.calib:
        name, path = c.split(":", 1)
        feeds[name] = _load(path)
    amax = activation_amax(m, feeds)
    q = quantize_fp8(m, amax)
    onnx.save(q, a.out)
    print(f"{len(targets(onnx.load(a.model)))} MatMul / Gemm layers quantized to FP8 -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
