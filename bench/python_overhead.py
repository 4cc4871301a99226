#!/usr/bin/env python3
"""Per-call overhead of kiln's Python API on a tiny model (x[1, 16] -> Relu -> y), where the engine's
own work is negligible: what one call costs in each binding style, next to kiln's enqueue alone
(execute_async with addresses bound once), ONNX Runtime's run and PyTorch eager.

Usage: python_overhead.py --module-dir build/python [--device cpu|gpu] [--calls 20000]
Prints one line per style: the median over 7 rounds of the mean time of `calls` calls, in us.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper


def per_call_us(fn, calls, rounds=7, sync=None):
    for _ in range(min(calls, 1000)):
        fn()
    if sync:
        sync()
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        if sync:
            sync()
        times.append((time.perf_counter() - t) / calls * 1e6)
    return statistics.median(times)


def tiny_model(path):
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "tiny",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--module-dir", required=True)
    ap.add_argument("--device", default="cpu", choices=["cpu", "gpu"])
    ap.add_argument("--calls", type=int, default=20000)
    args = ap.parse_args()
    sys.path.insert(0, args.module_dir)
    import kiln
    import torch
    gpu = args.device == "gpu"
    dev = torch.device("cuda" if gpu else "cpu")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tiny.onnx")
        tiny_model(path)
        engine = kiln.build_engine(path, kiln.BuilderConfig(device=args.device, threads=1))
    ctx = engine.create_execution_context()
    xn, yn = np.ones((1, 16), np.float32), np.empty((1, 16), np.float32)
    xt, yt = torch.ones(1, 16, device=dev), torch.empty(1, 16, device=dev)
    stream = torch.cuda.current_stream().cuda_stream if gpu else None
    sync = torch.cuda.synchronize if gpu else None
    rows = []

    def row(name, fn, **kw):
        rows.append((name, per_call_us(fn, args.calls, sync=kw.get("sync"))))
        print(f"{name:62s} {rows[-1][1]:8.2f} us", flush=True)

    row("a pybind11 call that does nothing (kiln.gpu_available)", kiln.gpu_available)
    for name, t in (("x", xt), ("y", yt)):
        ctx.set_tensor_address(name, t.data_ptr())
    row("kiln enqueue alone: execute_async(stream) on bound addresses", lambda: ctx.execute_async(stream), sync=sync)
    row("set_tensor_address x2 + execute_async (TensorRT style)",
        lambda: (ctx.set_tensor_address("x", xt.data_ptr()), ctx.set_tensor_address("y", yt.data_ptr()),
                 ctx.execute_async(stream)), sync=sync)
    row("infer({'x': torch}, {'y': torch}, stream) (DLPack, in place)",
        lambda: ctx.infer({"x": xt}, {"y": yt}, stream), sync=sync)
    row("infer([torch], [torch], stream) (DLPack, in place)", lambda: ctx.infer([xt], [yt], stream), sync=sync)
    row("infer({'x': numpy}, {'y': numpy})", lambda: ctx.infer({"x": xn}, {"y": yn}))
    row("infer({'x': numpy}) -> new NumPy output", lambda: ctx.infer({"x": xn}))
    import kiln.torch
    with tempfile.TemporaryDirectory() as tmp:
        fast = kiln.torch.compile(torch.nn.ReLU(), (xt,), cache_dir=tmp, threads=1)
    row("kiln.torch.compile(ReLU)(x) (new output tensor each call)", lambda: fast(xt), sync=sync)
    relu = torch.nn.ReLU()
    row("PyTorch eager ReLU(x)", lambda: relu(xt), sync=sync)
    if not gpu:
        import onnxruntime as ort
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "tiny.onnx")
            tiny_model(path)
            so = ort.SessionOptions()
            so.intra_op_num_threads = 1
            sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        row("ONNX Runtime session.run(None, {'x': numpy})", lambda: sess.run(None, {"x": xn}))


if __name__ == "__main__":
    main()
