#!/usr/bin/env python3
"""Data-dependent output shapes through the Python module, against ONNX Runtime: infer() returns
them as new arrays; set_output_allocator with execute(); a bad allocator is a clear error.

Usage: test_python_dds.py --module-dir build/python [--device cpu|gpu]
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from harness import Env, Skip, check, expect_error, main


def nonzero_model():
    """x [6, 5] -> positions = Transpose(NonZero(x > 0.3)) [n, 2], values = GatherND(x, positions) * 2 [n],
    and a static output y = Relu(x)."""
    nodes = [helper.make_node("Greater", ["x", "t"], ["m"]),
             helper.make_node("NonZero", ["m"], ["nz"]),
             helper.make_node("Transpose", ["nz"], ["positions"], perm=[1, 0]),
             helper.make_node("GatherND", ["x", "positions"], ["g"]),
             helper.make_node("Mul", ["g", "two"], ["values"]),
             helper.make_node("Relu", ["x"], ["y"])]
    inits = [numpy_helper.from_array(np.array(0.3, np.float32), "t"), numpy_helper.from_array(np.array(2, np.float32), "two")]
    graph = helper.make_graph(nodes, "nonzero", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 5])],
                              [helper.make_tensor_value_info("positions", TensorProto.INT64, ["n", 2]),
                               helper.make_tensor_value_info("values", TensorProto.FLOAT, ["n"]),
                               helper.make_tensor_value_info("y", TensorProto.FLOAT, [6, 5])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    path = os.path.join(TMP, "nonzero.onnx")
    onnx.save(model, path)
    return path


def nms_model():
    """boxes [1, 20, 4], scores [1, 3, 20] -> NonMaxSuppression (iou 0.4, score 0.2, 4 per class)."""
    inits = [numpy_helper.from_array(np.array([4], np.int64), "max_out"),
             numpy_helper.from_array(np.array([0.4], np.float32), "iou"),
             numpy_helper.from_array(np.array([0.2], np.float32), "score")]
    nodes = [helper.make_node("Sigmoid", ["logits"], ["scores"]),
             helper.make_node("NonMaxSuppression", ["boxes", "scores", "max_out", "iou", "score"], ["selected"])]
    graph = helper.make_graph(nodes, "nms", [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, 20, 4]),
                                             helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 3, 20])],
                              [helper.make_tensor_value_info("selected", TensorProto.INT64, ["n", 3])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    path = os.path.join(TMP, "nms.onnx")
    onnx.save(model, path)
    return path


def ort_run(path, feeds):
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)


def test_infer_returns_data_dependent_outputs():
    path = nonzero_model()
    engine = kiln.build_engine(path, kiln.BuilderConfig(device=DEVICE))
    shapes = {t["name"]: t["shape"] for t in engine.io_tensors}
    check(shapes["positions"] == [-1, 2] and shapes["values"] == [-1], shapes)
    ctx = engine.create_execution_context()
    check(ctx.get_tensor_shape("positions") == [-1, 2], ctx.get_tensor_shape("positions"))
    rng = np.random.default_rng(0)
    for threshold_hits in range(3):  # a different count each run
        x = rng.uniform(-1, 1, (6, 5)).astype(np.float32)
        if threshold_hits == 2:
            x[:] = -1  # nothing selected: empty outputs
        got = ctx.infer({"x": x})
        want = ort_run(path, {"x": x})
        for name, w in zip(["positions", "values", "y"], want):
            check(got[name].shape == w.shape and got[name].dtype == w.dtype, (name, got[name].shape, w.shape))
            np.testing.assert_allclose(got[name], w, rtol=1e-6, atol=0)
    # A data-dependent output cannot be given: its size is unknown before the run.
    expect_error(lambda: ctx.infer({"x": x}, {"positions": np.zeros((1, 2), np.int64)}), "data-dependent shape")


def test_nms_matches_onnxruntime():
    path = nms_model()
    engine = kiln.build_engine(path, kiln.BuilderConfig(device=DEVICE))
    ctx = engine.create_execution_context()
    rng = np.random.default_rng(5)
    for _ in range(3):
        xy = rng.uniform(0, 40, (1, 20, 2)).astype(np.float32)
        boxes = np.concatenate([xy, xy + rng.uniform(5, 20, (1, 20, 2)).astype(np.float32)], axis=2)
        logits = rng.standard_normal((1, 3, 20)).astype(np.float32)
        got = ctx.infer({"boxes": boxes, "logits": logits})["selected"]
        want = ort_run(path, {"boxes": boxes, "logits": logits})[0]
        check(got.shape == want.shape and (got == want).all(), (got, want))


class NumpyAllocator:
    """Host memory (CPU engines) from NumPy arrays, kept alive here; records the shapes told."""

    def __init__(self, fail=None):
        self.arrays, self.shapes, self.calls, self.fail = {}, {}, 0, fail

    def reallocate_output(self, name, current, size, alignment):
        self.calls += 1
        if self.fail == "null":
            return 0
        if self.fail == "raise":
            raise RuntimeError("no memory for you")
        a = np.empty(max(size, 1) + alignment, np.uint8)
        offset = (-a.ctypes.data) % alignment
        self.arrays[name] = (a, offset)
        return a.ctypes.data + offset

    def notify_shape(self, name, shape):
        self.shapes[name] = tuple(shape)

    def read(self, name, dtype):
        a, offset = self.arrays[name]
        count = int(np.prod(self.shapes[name]))
        return np.frombuffer(a[offset:offset + count * np.dtype(dtype).itemsize].tobytes(), dtype).reshape(self.shapes[name])


def test_set_output_allocator_with_execute():
    if DEVICE != "cpu":
        raise Skip("the NumPy allocator gives host memory (the GPU engine needs device memory)")
    path = nonzero_model()
    engine = kiln.build_engine(path, kiln.BuilderConfig(device=DEVICE))
    ctx = engine.create_execution_context()
    x = np.random.default_rng(7).uniform(-1, 1, (6, 5)).astype(np.float32)
    y = np.empty((6, 5), np.float32)
    alloc = NumpyAllocator()
    ctx.set_tensor_address("x", x.ctypes.data)
    ctx.set_tensor_address("y", y.ctypes.data)
    # Without an allocator, execute cannot place a data-dependent output.
    expect_error(ctx.execute, "setOutputAllocator")
    ctx.set_output_allocator("positions", alloc)
    ctx.set_output_allocator("values", alloc)
    check(ctx.get_output_allocator("positions") is alloc)
    ctx.execute()
    want = ort_run(path, {"x": x})
    check((alloc.read("positions", np.int64) == want[0]).all())
    np.testing.assert_allclose(alloc.read("values", np.float32), want[1], rtol=1e-6, atol=0)
    np.testing.assert_allclose(y, want[2], rtol=1e-6, atol=0)
    # infer() uses its own memory, and leaves the allocators set here in place.
    got = ctx.infer({"x": x})
    check((got["positions"] == want[0]).all() and ctx.get_output_allocator("values") is alloc)
    calls = alloc.calls
    ctx.execute()
    check(alloc.calls == calls + 2, (alloc.calls, calls))


def test_bad_allocators_are_clear_errors():
    if DEVICE != "cpu":
        raise Skip("the NumPy allocator gives host memory")
    path = nonzero_model()
    engine = kiln.build_engine(path, kiln.BuilderConfig(device=DEVICE))
    ctx = engine.create_execution_context()
    x = np.ones((6, 5), np.float32)
    y = np.empty((6, 5), np.float32)
    ctx.set_tensor_address("x", x.ctypes.data)
    ctx.set_tensor_address("y", y.ctypes.data)
    ctx.set_output_allocator("values", NumpyAllocator())
    ctx.set_output_allocator("positions", NumpyAllocator(fail="null"))
    expect_error(ctx.execute, "output 'positions': the output allocator returned null for 480 bytes")
    ctx.set_output_allocator("positions", NumpyAllocator(fail="raise"))
    expect_error(ctx.execute, "no memory for you")
    expect_error(lambda: ctx.set_output_allocator("positions", object()), "reallocate_output")
    expect_error(lambda: ctx.set_output_allocator("x", NumpyAllocator()), "not an output")
    ctx.set_output_allocator("positions", None)
    check(ctx.get_output_allocator("positions") is None)


def setup():
    g = globals()
    g["kiln"], g["TMP"], g["DEVICE"] = Env.kiln, Env.tmp, Env.device


if __name__ == "__main__":
    sys.exit(main(globals(), "Python data-dependent shape tests", setup))
