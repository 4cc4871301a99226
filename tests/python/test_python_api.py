#!/usr/bin/env python3
"""kiln's Python module against ONNX Runtime: build from ONNX, profiles, plans, errors.

Usage: test_python_api.py --module-dir build/python [--device cpu|gpu]
GPU checks run with --device gpu where kiln.gpu_available(); elsewhere they are skipped (and say
so; exit status 77, which ctest reports as skipped).
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from harness import Env, check, expect_error, main

# FP32 on the CPU against ONNX Runtime's float32: 1e-5, as the CLI's tests; the GPU (no TF32) 1e-3.
RTOL = ATOL = 1e-5


def conv_model(batch):
    """x[batch, 3, 16, 16] -> Conv 3x3 (8) + Relu -> GlobalAveragePool -> Flatten -> Gemm (5) -> y."""
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.uniform(-0.3, 0.3, (8, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.uniform(-0.1, 0.1, 8).astype(np.float32), "b")
    fc = numpy_helper.from_array(rng.uniform(-0.3, 0.3, (5, 8)).astype(np.float32), "fc")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("GlobalAveragePool", ["r"], ["g"], name="gap"),
             helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "fc"], ["y"], transB=1, name="fc")]
    graph = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 5])], [w, b, fc])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    path = os.path.join(TMP, f"conv_{batch}.onnx")
    onnx.save(model, path)
    return path


# tf32=False: outputs are compared with ONNX Runtime's float32 (at RTOL/ATOL).
def reference(path, x):
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def test_static_build_and_plan_roundtrip():
    path = conv_model(2)
    engine = kiln.build_engine(path, kiln.BuilderConfig(tf32=False, device=DEVICE))
    check(engine.device == DEVICE and engine.num_layers >= 1 and engine.num_optimization_profiles == 1)
    io = engine.io_tensors
    check([(t["name"], t["mode"], t["dtype"], t["shape"]) for t in io] == [
        ("x", "input", "float32", [2, 3, 16, 16]), ("y", "output", "float32", [2, 5])], io)
    x = np.random.default_rng(1).standard_normal((2, 3, 16, 16)).astype(np.float32)
    y = engine.create_execution_context().infer({"x": x})["y"]
    np.testing.assert_allclose(y, reference(path, x), rtol=RTOL, atol=ATOL)
    # The same model from memory (bytes) and as a path-like object.
    with open(path, "rb") as f:
        from_bytes = kiln.build_engine(f.read(), kiln.BuilderConfig(tf32=False, device=DEVICE))
    np.testing.assert_allclose(from_bytes.create_execution_context().infer({"x": x})["y"], y, rtol=1e-5, atol=1e-6)
    import pathlib
    kiln.build_engine(pathlib.Path(path), kiln.BuilderConfig(tf32=False, device=DEVICE))
    plan = os.path.join(TMP, "conv.plan")
    engine.save(plan)
    for loaded in (kiln.Engine.load(plan), kiln.Engine.deserialize(engine.serialize())):
        np.testing.assert_array_equal(loaded.create_execution_context().infer({"x": x})["y"], y)
    check('"layers"' in engine.layer_information)
    # Memory: the arena covers the planner's lower bound, which is at least the live curve's peak
    # (more where aux streams run branches at once), per layer.
    mem = engine.create_execution_context().memory_usage
    check(set(mem) == {"arena_bytes", "arena_lower_bound", "workspace_bytes", "live_bytes"}, mem)
    check(mem["arena_bytes"] >= mem["arena_lower_bound"] >= max(mem["live_bytes"], default=0), mem)
    check(len(mem["live_bytes"]) == engine.num_layers, mem)
    check(engine.weight_bytes >= 4 * 8 * 3 * 3 * 3, engine.weight_bytes)  # the conv's float32 weights at least
    # A non-contiguous view is read as its values (copied to C order first).
    wide = np.random.default_rng(5).standard_normal((2, 3, 16, 32)).astype(np.float32)
    view = wide[:, :, :, ::2]
    check(not view.flags["C_CONTIGUOUS"])
    np.testing.assert_allclose(engine.create_execution_context().infer({"x": view})["y"],
                               reference(path, np.ascontiguousarray(view)), rtol=RTOL, atol=ATOL)


def test_dynamic_batch_two_profiles():
    path = conv_model("N")
    cfg = kiln.BuilderConfig(tf32=False, device=DEVICE, optimization_level=1)
    for lo, opt, hi in ((1, 2, 4), (8, 16, 32)):
        p = kiln.OptimizationProfile()
        p.set_shape("x", [lo, 3, 16, 16], [opt, 3, 16, 16], [hi, 3, 16, 16])
        cfg.add_optimization_profile(p)
    engine = kiln.build_engine(path, cfg)
    check(engine.num_optimization_profiles == 2)
    check(engine.profile_shape("x", 1) == ([8, 3, 16, 16], [16, 3, 16, 16], [32, 3, 16, 16]))
    ctx = engine.create_execution_context()
    rng = np.random.default_rng(2)
    for profile, batch in ((0, 3), (1, 20), (0, 1), (1, 32)):
        ctx.optimization_profile = profile
        check(ctx.optimization_profile == profile)
        x = rng.standard_normal((batch, 3, 16, 16)).astype(np.float32)
        np.testing.assert_allclose(ctx.infer({"x": x})["y"], reference(path, x), rtol=RTOL, atol=ATOL)
    ctx.optimization_profile = 0
    expect_error(lambda: ctx.infer({"x": np.zeros((20, 3, 16, 16), np.float32)}), "outside the optimization profile 0")


def test_load_on_a_device():
    """Engine.load / Engine.deserialize take a CUDA device index: a CPU plan ignores it; a GPU plan
    runs there (its contexts too), and a device that does not exist is an error."""
    path = conv_model(2)
    engine = kiln.build_engine(path, kiln.BuilderConfig(tf32=False, device=DEVICE))
    x = np.random.default_rng(2).standard_normal((2, 3, 16, 16)).astype(np.float32)
    y = engine.create_execution_context().infer({"x": x})["y"]
    plan = os.path.join(TMP, "device.plan")
    engine.save(plan)
    index = 0 if DEVICE == "gpu" else 3  # a CPU plan ignores any index
    for loaded in (kiln.Engine.load(plan, device=index), kiln.Engine.deserialize(engine.serialize(), device=index)):
        check(loaded.device_index == (0 if DEVICE == "gpu" else -1), loaded.device_index)
        np.testing.assert_array_equal(loaded.create_execution_context().infer({"x": x})["y"], y)
    if DEVICE == "gpu":
        expect_error(lambda: kiln.Engine.load(plan, device=1000), "does not exist")


def test_errors_are_exceptions():
    path = conv_model(2)
    engine = kiln.build_engine(path, kiln.BuilderConfig(tf32=False, device=DEVICE))
    ctx = engine.create_execution_context()
    expect_error(lambda: ctx.infer({"x": np.zeros((2, 3, 16, 16), np.float64)}), "float64")
    expect_error(lambda: ctx.infer({"x": np.zeros((3, 3, 16, 16), np.float32)}), "shape")
    expect_error(lambda: ctx.infer({}), "no value given for input 'x'")
    expect_error(lambda: ctx.infer({"x": np.zeros((2, 3, 16, 16), np.float32), "z": np.zeros(1)}), "'z' is not an input")
    expect_error(lambda: setattr(ctx, "optimization_profile", 1), "optimization profile 1 does not exist")
    expect_error(lambda: kiln.Engine.deserialize(b"not a plan"), "plan")
    expect_error(lambda: kiln.build_engine(os.path.join(TMP, "missing.onnx"), kiln.BuilderConfig()), "missing.onnx")
    expect_error(lambda: kiln.BuilderConfig(device="tpu"), "device")
    expect_error(lambda: kiln.build_engine(b"garbage", kiln.BuilderConfig()), "malformed ONNX model")
    check(issubclass(kiln.UnsupportedError, kiln.Error) and issubclass(kiln.Error, RuntimeError))
    # An op kiln has no importer for is an UnsupportedError that names the node.
    node = helper.make_node("NoSuchOp", ["x"], ["y"], name="mystery", domain="example.custom")
    graph = helper.make_graph([node], "u", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("example.custom", 1)], ir_version=8)
    unsupported = os.path.join(TMP, "unsupported.onnx")
    onnx.save(model, unsupported)
    expect_error(lambda: kiln.build_engine(unsupported, kiln.BuilderConfig(tf32=False, device=DEVICE)), "mystery", kiln.UnsupportedError)


def test_output_shape_from_input_values():
    """Expand's target shape is an input: each call's output takes that call's values."""
    graph = helper.make_graph([helper.make_node("Expand", ["x", "shape"], ["y"], name="expand")], "e",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3]),
                               helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    path = os.path.join(TMP, "expand.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    engine = kiln.build_engine(path, kiln.BuilderConfig(tf32=False, device=DEVICE))
    check(engine.is_shape_inference_input("shape") and not engine.is_shape_inference_input("x"))
    expect_error(lambda: engine.is_shape_inference_input("y"), "'y' is not an input")
    ctx = engine.create_execution_context()
    x = np.array([[1, 2, 3]], np.float32)
    for rows in (2, 5, 1, 7):
        y = ctx.infer({"x": x, "shape": np.array([rows, 3], np.int64)})["y"]
        np.testing.assert_array_equal(y, np.broadcast_to(x, (rows, 3)))


def test_bfloat16_and_float16_io():
    """bfloat16 I/O through ml_dtypes' NumPy type, float16 through NumPy's; Relu is exact in both."""
    import ml_dtypes
    for onnx_type, np_type in ((TensorProto.BFLOAT16, ml_dtypes.bfloat16), (TensorProto.FLOAT16, np.float16)):
        graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "r",
                                  [helper.make_tensor_value_info("x", onnx_type, [2, 4])],
                                  [helper.make_tensor_value_info("y", onnx_type, [2, 4])])
        path = os.path.join(TMP, f"relu_{onnx_type}.onnx")
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
        ctx = kiln.build_engine(path, kiln.BuilderConfig(tf32=False, device=DEVICE)).create_execution_context()
        x = np.linspace(-2, 2, 8, dtype=np.float32).reshape(2, 4).astype(np_type)
        y = ctx.infer({"x": x})["y"]
        check(y.dtype == np.dtype(np_type), y.dtype)
        np.testing.assert_array_equal(y.astype(np.float32), np.maximum(x.astype(np.float32), 0))


def build_stderr(path, level, **config):
    """What a build of `path` writes on stderr (file descriptor 2) at log level `level`."""
    kiln.set_log_level(level)
    log = os.path.join(TMP, f"log_{level}.txt")
    saved = os.dup(2)
    try:
        with open(log, "wb") as f:
            os.dup2(f.fileno(), 2)
            kiln.build_engine(path, kiln.BuilderConfig(tf32=False, device=DEVICE, **config))
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        kiln.set_log_level("warning")
    with open(log) as f:
        return f.read()


def test_log_level():
    """kiln.set_log_level decides what the default logger writes to stderr."""
    path = conv_model(2)
    check("[I] engine built" in build_stderr(path, "info"))
    check("[I]" not in build_stderr(path, "error"))
    expect_error(lambda: kiln.set_log_level("loud"), "log level")


def test_timing_cache_file():
    """The second build takes its timings from the cache the first one wrote: every timing it logs
    comes "(timing cache)", and it adds nothing to the file."""
    path = conv_model(2)
    cache = os.path.join(TMP, "timing.cache")
    first = build_stderr(path, "verbose", timing_cache=cache)
    timed = [ln for ln in first.splitlines() if " tactic " in ln and ln.endswith(" ms")]
    check(timed and "(timing cache)" not in first, f"the first build timed nothing or hit an empty cache:\n{first}")
    with open(cache, "rb") as f:
        written = f.read()
    check(len(written) > 0, "empty timing cache file")
    second = build_stderr(path, "verbose", timing_cache=cache)
    cached = [ln for ln in second.splitlines() if ln.endswith(" ms (timing cache)")]
    retimed = [ln for ln in second.splitlines() if " tactic " in ln and ln.endswith(" ms")]
    check(len(cached) == len(timed) and not retimed,
          f"{len(timed)} timings in the first build; the second took {len(cached)} from the cache and timed {retimed}")
    with open(cache, "rb") as f:
        check(f.read() == written, "the second build changed the timing cache")


def roll_model_onnx_helper(path, shape, shifts, axes):
    """torch.roll as the TorchScript exporter writes it: per axis Concat(Slice(x, -s..end), Slice(x, 0..-s))."""
    nodes, inits, cur = [], [], "x"
    big = np.iinfo(np.int64).max
    for i, (s, a) in enumerate(zip(shifts, axes)):
        for name, v in ((f"s{i}", -s), (f"e{i}", big), (f"z{i}", 0), (f"m{i}", -s), (f"a{i}", a)):
            inits.append(numpy_helper.from_array(np.array([v], np.int64), name))
        nodes += [helper.make_node("Slice", [cur, f"s{i}", f"e{i}", f"a{i}"], [f"hi{i}"]),
                  helper.make_node("Slice", [cur, f"z{i}", f"m{i}", f"a{i}"], [f"lo{i}"]),
                  helper.make_node("Concat", [f"hi{i}", f"lo{i}"], ["y" if i == len(shifts) - 1 else f"r{i}"], axis=a)]
        cur = f"r{i}"
    graph = helper.make_graph(nodes, "roll", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)


def test_torch_roll_becomes_gathers():
    """torch.roll (Swin's shifted windows: two axes of [B, H, W, C]; one axis, negative shift) runs
    as one Gather per rolled axis, no Slice or Concat left, equal to np.roll and ONNX Runtime."""
    import json
    shape = [2, 7, 9, 4]
    x = np.random.default_rng(11).standard_normal(shape).astype(np.float32)
    models = []
    for shifts, axes in (((3, -2), (1, 2)), ((-5,), (2,)), ((1,), (-1,))):
        path = os.path.join(TMP, f"roll_helper_{len(models)}.onnx")
        roll_model_onnx_helper(path, shape, shifts, axes)
        models.append((path, shifts, axes))
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:  # the exporter's own form, where torch is installed
        import io

        class Roll(torch.nn.Module):
            def forward(self, t):
                return torch.roll(t, shifts=(3, -2), dims=(1, 2))
        buf = io.BytesIO()
        torch.onnx.export(Roll(), (torch.from_numpy(x),), buf, dynamo=False, opset_version=17,
                          input_names=["x"], output_names=["y"])
        path = os.path.join(TMP, "roll_torch.onnx")
        with open(path, "wb") as f:
            f.write(buf.getvalue())
        models.append((path, (3, -2), (1, 2)))
    for path, shifts, axes in models:
        engine = kiln.build_engine(path, kiln.BuilderConfig(device=DEVICE))
        y = engine.create_execution_context().infer({"x": x})["y"]
        np.testing.assert_array_equal(y, np.roll(x, shifts, axes))
        np.testing.assert_array_equal(y, reference(path, x))
        ops = [layer.get("type", layer.get("op")) for layer in json.loads(engine.layer_information)["layers"]]
        check(ops.count("Gather") == len(shifts) and "Slice" not in ops and "Concat" not in ops, (path, ops))


def setup():
    """The names this file's tests use, from the harness."""
    g = globals()
    g["kiln"], g["TMP"], g["DEVICE"] = Env.kiln, Env.tmp, Env.device
    if Env.device == "gpu":  # the GPU (no TF32) against ONNX Runtime's float32
        g["RTOL"], g["ATOL"] = 1e-3, 1e-4


if __name__ == "__main__":
    sys.exit(main(globals(), "Python API tests", setup))
