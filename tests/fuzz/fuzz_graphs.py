#!/usr/bin/env python3
"""Random-graph differential tests: seeded random ONNX graphs run through the kiln CLI and
through ONNX Runtime (CPU, graph optimizations off) and compared at rtol = atol = 1e-4, once as
built and once from the saved plan reloaded in a fresh process.

Two generators: "seq" chains elementwise ops, constant broadcasts, MatMul (+ bias), Softmax /
LogSoftmax, Transpose, reductions and LayerNormalization (the fusion passes' patterns appear
at random); "conv" chains Conv (grouped, strided, with bias), BatchNormalization, activations
(Relu, Clip, LeakyRelu, HardSwish, Sigmoid), residual Adds, pools and global pools (the CPU
layout pass and the conv fusions). Every seed is reproducible: a failure prints it.

  fuzz_graphs.py --kiln build/bin/kiln --count 40 [--seed 0] [--kind seq|conv|both] [--device cpu|gpu]
                 [--jobs N]

--jobs runs N graphs at a time (each graph's files are its own); the GPU script uses one per core.
A graph ONNX Runtime rejects has no reference: it is reported as SKIP and counted apart, never as
an agreement; the run fails when any graph disagrees, none agrees, or more than 1 in 20 is skipped.

On the GPU (--device gpu) engines are FP32 without TF32 and compared at 1e-3.
"""
import argparse
import concurrent.futures
import json
import os
import random
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

WORK = tempfile.mkdtemp(prefix="kiln_fuzz_")
DEVICE = ["--device=cpu", "--threads=2"]  # --device gpu: FP32 without TF32, compared at 1e-3
TOL = 1e-4
MAX_SKIPPED_DENOMINATOR = 20  # more than 1 graph in 20 without a reference fails the run


class Skipped(str):
    """compare()'s answer for a graph with no reference: not an agreement, counted on its own."""


def compare(kiln, path, x):
    """None when kiln agrees with ONNX Runtime, Skipped(why) when ONNX Runtime rejects the graph
    (there is nothing to compare with), else what went wrong."""
    try:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        ref = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    except Exception as e:  # says nothing about kiln, and proves nothing either
        return Skipped(f"ONNX Runtime rejects the graph: {str(e).strip().splitlines()[0][:300]}")
    stem = os.path.splitext(path)[0]  # one set of files per graph: graphs may run concurrently
    xp, out, plan = stem + "_x.npy", stem + "_o.json", stem + ".plan"
    np.save(xp, x)
    # Built from the model (and saved), then the saved plan loaded in a fresh process: both must agree.
    for source in (f"--onnx={path}", f"--loadEngine={plan}"):
        # The loaded plan runs with freed activation memory poisoned: a planner that frees a tensor
        # before its last reader makes that reader see NaN.
        extra = [f"--saveEngine={plan}"] if source.startswith("--onnx") else ["--poisonFreedMemory"]
        device = DEVICE if source.startswith("--onnx") else DEVICE[:1]
        p = subprocess.run([kiln, source, f"--loadInputs=x:{xp}", f"--exportOutput={out}", "--iterations=1",
                            "--duration=0", "--warmUp=0", *device, *extra], capture_output=True, text=True)
        if p.returncode != 0:
            return f"kiln ({source.split('=')[0]}) failed: {p.stderr[-400:]}"
        o = json.load(open(out))[0]
        got = np.array(o["values"], dtype=np.float64).reshape(o["dims"])
        if got.shape != ref.shape:
            return f"shape {got.shape} vs {ref.shape}"
        err = np.abs(got - ref)
        # Equal infinities agree (inf - inf is NaN), as do NaNs in the same places.
        bad = ~((err <= TOL + TOL * np.abs(ref)) | (got == ref) | (np.isnan(got) & np.isnan(ref)))
        if bad.any():
            return f"max abs err {float(err[bad].max()):.3g} ({source.split('=')[0]})"
    return None


# ---- "seq": elementwise / matmul / softmax / reduce / layernorm chains on a 3-D input ------------

UN = ["Relu", "Sigmoid", "Tanh", "Abs", "Neg", "Exp", "Erf", "Softplus", "HardSwish", "Elu", "LeakyRelu", "Sqrt_abs", "Gelu"]
BIN = ["Add", "Sub", "Mul", "Div_safe", "Max", "Min"]
def build_seq(seed):
    rng = random.Random(seed); nrng = np.random.default_rng(seed)
    nodes, inits = [], []
    shape = [rng.choice([1, 2, 3]), rng.choice([4, 8]), rng.choice([5, 6])]
    cur = "x"; cnt = 0
    def name(p):
        nonlocal cnt; cnt += 1; return f"{p}{cnt}"
    for step in range(rng.randint(3, 9)):
        k = rng.random()
        if k < 0.3:
            op = rng.choice(UN); out = name("u")
            if op == "Sqrt_abs":
                a = name("a"); nodes.append(helper.make_node("Abs", [cur], [a])); nodes.append(helper.make_node("Sqrt", [a], [out]))
            elif op == "Gelu":
                nodes.append(helper.make_node("Gelu", [cur], [out]))
            else:
                nodes.append(helper.make_node(op, [cur], [out]))
            cur = out
        elif k < 0.55:
            op = rng.choice(BIN); out = name("b")
            bshape = rng.choice([[shape[-1]], [1, shape[1], 1], list(shape), []])
            c = name("c"); v = nrng.standard_normal(bshape).astype(np.float32)
            if op == "Div_safe": v = (np.abs(v) + 0.5).astype(np.float32); op = "Div"
            inits.append(numpy_helper.from_array(v, c))
            nodes.append(helper.make_node(op, [cur, c] if rng.random() < 0.7 else [c, cur], [out])); cur = out
        elif k < 0.7:
            out = name("m"); w = name("w"); n = rng.choice([4, 6, 8])
            inits.append(numpy_helper.from_array((nrng.standard_normal((shape[-1], n)) * 0.3).astype(np.float32), w))
            nodes.append(helper.make_node("MatMul", [cur, w], [out])); shape = shape[:-1] + [n]; cur = out
            if rng.random() < 0.5:
                b = name("bias"); out2 = name("mb")
                inits.append(numpy_helper.from_array(nrng.standard_normal(n).astype(np.float32), b))
                nodes.append(helper.make_node("Add", [b, cur] if rng.random() < 0.5 else [cur, b], [out2])); cur = out2
        elif k < 0.8:
            out = name("s"); ax = rng.choice([-1, 1])
            nodes.append(helper.make_node(rng.choice(["Softmax", "LogSoftmax"]), [cur], [out], axis=ax)); cur = out
        elif k < 0.88:
            out = name("t"); perm = [0, 2, 1]
            nodes.append(helper.make_node("Transpose", [cur], [out], perm=perm)); shape = [shape[i] for i in perm]; cur = out
        elif k < 0.94:
            out = name("r"); ax = rng.choice([1, 2])
            axes = name("ax"); inits.append(numpy_helper.from_array(np.array([ax], np.int64), axes))
            nodes.append(helper.make_node(rng.choice(["ReduceMean", "ReduceSum", "ReduceMax"]), [cur, axes], [out], keepdims=1)); shape[ax] = 1; cur = out
        else:
            out = name("ln"); sc = name("sc"); bi = name("bi")
            inits.append(numpy_helper.from_array(nrng.uniform(0.5, 1.5, shape[-1]).astype(np.float32), sc))
            inits.append(numpy_helper.from_array(nrng.standard_normal(shape[-1]).astype(np.float32), bi))
            nodes.append(helper.make_node("LayerNormalization", [cur, sc, bi], [out], axis=-1, epsilon=1e-5)); cur = out
    g = helper.make_graph(nodes, "fuzz", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                          [helper.make_tensor_value_info(cur, TensorProto.FLOAT, None)], inits)
    return g


def run_seq(kiln, seed):
    rng = random.Random(seed)
    shape = [rng.choice([1, 2, 3]), rng.choice([4, 8]), rng.choice([5, 6])]
    g = build_seq(seed)
    for d in shape:
        g.input[0].type.tensor_type.shape.dim.add().dim_value = d
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    m.ir_version = 9
    path = os.path.join(WORK, f"seq{seed}.onnx")
    onnx.save(m, path)
    return compare(kiln, path, np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


# ---- "conv": conv / batchnorm / activation / residual / pool chains on NCHW -----------------------

def run_conv(kiln, seed):
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    C = rng.choice([8, 16, 12, 24]); H = rng.choice([7, 8, 12]); B = rng.choice([1, 2])
    nodes, inits = [], []; cnt = [0]
    def nm(p): cnt[0] += 1; return f"{p}{cnt[0]}"
    def const(a): n = nm("k"); inits.append(numpy_helper.from_array(a.astype(np.float32), n)); return n
    cur = "x"; c = C; h = H
    skip = None
    for step in range(rng.randint(2, 7)):
        k = rng.random()
        if k < 0.45:
            co = rng.choice([8, 16, 24, 12]); ks = rng.choice([1, 3]); st = rng.choice([1, 1, 2]); grp = 1
            if rng.random() < 0.25 and co == c: grp = c; 
            w = const(nrng.standard_normal((co, c // grp, ks, ks)) * (0.5 / np.sqrt(c // grp * ks * ks)))
            ins = [cur, w] + ([const(nrng.standard_normal(co) * 0.1)] if rng.random() < 0.6 else [])
            out = nm("conv"); nodes.append(helper.make_node("Conv", ins, [out], kernel_shape=[ks, ks], pads=[ks // 2] * 4, strides=[st, st], group=grp))
            h = (h + 2 * (ks // 2) - ks) // st + 1; c = co; cur = out
            if rng.random() < 0.5:
                bn = nm("bn"); nodes.append(helper.make_node("BatchNormalization", [cur, const(nrng.uniform(0.5, 1.5, c)), const(nrng.standard_normal(c) * 0.1), const(nrng.standard_normal(c) * 0.1), const(nrng.uniform(0.5, 1.5, c))], [bn], epsilon=1e-5)); cur = bn
            act = rng.choice(["Relu", "Clip", "LeakyRelu", "HardSwish", "Sigmoid", None])
            if act == "Clip":
                o = nm("a"); nodes.append(helper.make_node("Clip", [cur, const(np.array(0.0)), const(np.array(6.0))], [o])); cur = o
            elif act:
                o = nm("a"); nodes.append(helper.make_node(act, [cur], [o])); cur = o
            if skip is not None and skip[1] == (c, h) and rng.random() < 0.6:
                o = nm("res"); nodes.append(helper.make_node("Add", [cur, skip[0]] if rng.random() < 0.5 else [skip[0], cur], [o])); cur = o
                if rng.random() < 0.5:
                    o2 = nm("ra"); nodes.append(helper.make_node("Relu", [cur], [o2])); cur = o2
            skip = (cur, (c, h))
        elif k < 0.65 and h >= 4:
            op = rng.choice(["MaxPool", "AveragePool"]); o = nm("p")
            nodes.append(helper.make_node(op, [cur], [o], kernel_shape=[2, 2], strides=[2, 2])); h = h // 2; cur = o; skip = None
        elif k < 0.8:
            o = nm("u"); nodes.append(helper.make_node(rng.choice(["Relu", "Sigmoid", "Tanh"]), [cur], [o])); cur = o
        else:
            o = nm("m"); nodes.append(helper.make_node("Mul", [cur, const(nrng.standard_normal((1, c, 1, 1)))], [o])); cur = o
    if rng.random() < 0.5:
        o = nm("gap"); nodes.append(helper.make_node(rng.choice(["GlobalAveragePool", "GlobalMaxPool"]), [cur], [o])); cur = o
    g = helper.make_graph(nodes, "cf", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, C, H, H])], [helper.make_tensor_value_info(cur, TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]); m.ir_version = 8
    path = os.path.join(WORK, f"conv{seed}.onnx"); onnx.save(m, path)
    x = nrng.standard_normal((B, C, H, H)).astype(np.float32)
    return compare(kiln, path, x)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--count", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--kind", choices=["seq", "conv", "both"], default="both")
    ap.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    ap.add_argument("--jobs", type=int, default=1)
    a = ap.parse_args()
    if a.device == "gpu":
        global DEVICE, TOL
        DEVICE, TOL = ["--device=gpu", "--noTF32"], 1e-3
    kinds = ["seq", "conv"] if a.kind == "both" else [a.kind]
    work = [(kind, seed) for kind in kinds for seed in range(a.seed, a.seed + a.count)]

    def one(item):
        kind, seed = item
        return (run_seq if kind == "seq" else run_conv)(a.kiln, seed)

    # Threads suffice: the time is spent in kiln's processes and ONNX Runtime, both outside the GIL.
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
        problems = list(pool.map(one, work))
    fails = skips = 0
    for (kind, seed), problem in zip(work, problems):
        if isinstance(problem, Skipped):
            skips += 1
            print(f"SKIP {kind} seed {seed}: {problem}")
        elif problem:
            fails += 1
            print(f"FAIL {kind} seed {seed}: {problem}")
    total = a.count * len(kinds)
    agree = total - fails - skips
    print(f"{agree}/{total} random graphs agree with ONNX Runtime, {fails} disagree, "
          f"{skips} skipped (no reference: ONNX Runtime rejected them)")
    # Skips are not agreements: a generator whose graphs ONNX Runtime rejects tests nothing.
    if skips * MAX_SKIPPED_DENOMINATOR > total:
        print(f"FAIL: more than 1/{MAX_SKIPPED_DENOMINATOR} of the graphs were skipped")
    return 1 if fails or agree == 0 or skips * MAX_SKIPPED_DENOMINATOR > total else 0


if __name__ == "__main__":
    sys.exit(main())
