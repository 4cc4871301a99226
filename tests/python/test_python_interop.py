#!/usr/bin/env python3
"""kiln's Python module with the tensors PyTorch users have: DLPack (torch CPU and CUDA tensors),
__cuda_array_interface__, preallocated outputs written in place, inputs read in place,
set_tensor_address/execute_async on a caller's stream, CUDA graphs, callbacks (logger, progress,
profiler) and the build options. References are NumPy.

Usage: test_python_interop.py --module-dir build/python [--device cpu|gpu]
"""
import os
import sys
import warnings

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from harness import Env, Skip, check, expect_error, main

RNG = np.random.default_rng(7)
W = RNG.uniform(-0.5, 0.5, (4, 3)).astype(np.float32)
B = RNG.uniform(-0.5, 0.5, 3).astype(np.float32)


def mlp_model(batch="N"):
    """x[batch, 4] -> MatMul W -> Add B -> Relu -> y[batch, 3]; and z = x * 2 (a second output)."""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["m"], name="matmul"),
             helper.make_node("Add", ["m", "B"], ["a"], name="add"),
             helper.make_node("Relu", ["a"], ["y"], name="relu"),
             helper.make_node("Mul", ["x", "two"], ["z"], name="double")]
    inits = [numpy_helper.from_array(W, "W"), numpy_helper.from_array(B, "B"),
             numpy_helper.from_array(np.array(2, np.float32), "two")]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 3]),
                               helper.make_tensor_value_info("z", TensorProto.FLOAT, [batch, 4])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    path = os.path.join(Env.tmp, f"mlp_{batch}.onnx")
    onnx.save(model, path)
    return path


def expected(x):
    x = np.asarray(x, np.float32)
    return np.maximum(x @ W + B, 0), x * 2


def engine(batch="N", **config):
    cfg = Env.kiln.BuilderConfig(device=Env.device, tf32=False, **config)
    if batch == "N":
        p = Env.kiln.OptimizationProfile()
        p.set_shape("x", [1, 4], [4, 4], [16, 4])
        cfg.add_optimization_profile(p)
    return Env.kiln.build_engine(mlp_model(batch), cfg)


def close(a, b):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)


def need_torch():
    try:
        import torch
        return torch
    except ImportError:
        raise Skip("PyTorch is not installed")


def test_torch_cpu_tensors_in_place():
    """CPU engine, torch CPU tensors: outputs written into the given tensors, inputs read where they
    are (changing the input and running again without binding changes the result)."""
    torch = need_torch()
    if Env.device != "cpu":
        raise Skip("a CPU engine's test")
    ctx = engine().create_execution_context()
    x = torch.from_numpy(RNG.standard_normal((5, 4)).astype(np.float32))
    y, z = torch.empty(5, 3), torch.empty(5, 4)
    y_ptr = y.data_ptr()
    out = ctx.infer({"x": x}, {"y": y, "z": z})
    check(out["y"] is y and out["z"] is z and y.data_ptr() == y_ptr, "the given output tensors are returned")
    close(y, expected(x.numpy())[0])
    close(z, expected(x.numpy())[1])
    x.mul_(-1)  # in place: the engine still points at x's memory
    ctx.execute()
    close(y, expected(x.numpy())[0])
    close(z, expected(x.numpy())[1])


def test_sequences_numpy_and_partial_outputs():
    """Inputs and outputs as sequences in engine order; outputs not given come back as NumPy."""
    ctx = engine().create_execution_context()
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    z = np.empty((3, 4), np.float32)
    out = ctx.infer([x], [None, z])
    check(isinstance(out["y"], np.ndarray) and out["z"] is z)
    close(out["y"], expected(x)[0])
    close(z, expected(x)[1])


def test_strided_inputs_are_gathered():
    """A strided torch view is read as its values (a copy is made only then)."""
    torch = need_torch()
    wide = torch.from_numpy(RNG.standard_normal((4, 8)).astype(np.float32))
    view = wide[:, ::2]
    check(not view.is_contiguous())
    out = engine().create_execution_context().infer({"x": view})
    close(out["y"], expected(view.numpy())[0])


def test_cuda_graph_option_on_the_cpu_warns():
    if Env.device != "cpu":
        raise Skip("a CPU engine's test")
    eng = engine(batch=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ctx = eng.create_execution_context(cuda_graph=True)
    check(not ctx.cuda_graph and any("no effect on the CPU" in str(w.message) for w in caught))
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    close(ctx.infer({"x": x})["y"], expected(x)[0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        expect_error(lambda: setattr(ctx, "cuda_graph", True), "no effect on the CPU", RuntimeWarning)


def test_set_tensor_address_and_execute():
    """The TensorRT-style calls: shapes, resolved output shapes, raw addresses, execute."""
    if Env.device != "cpu":
        raise Skip("host addresses are for a CPU engine (test_gpu_execute_async_and_cuda_graph binds CUDA memory)")
    ctx = engine().create_execution_context()
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    ctx.set_input_shape("x", [2, 4])
    check(ctx.get_tensor_shape("y") == [2, 3] and ctx.get_tensor_shape("z") == [2, 4])
    y, z = np.zeros((2, 3), np.float32), np.zeros((2, 4), np.float32)
    for name, a in (("x", x), ("y", y), ("z", z)):
        ctx.set_tensor_address(name, a.ctypes.data)
    ctx.execute_async()
    close(y, expected(x)[0])
    close(z, expected(x)[1])


def test_errors_name_the_tensor():
    ctx = engine(batch=2).create_execution_context()
    x = np.zeros((2, 4), np.float32)
    expect_error(lambda: ctx.infer({"x": x.astype(np.float64)}), "input 'x' is float64 but the engine takes float32")
    expect_error(lambda: ctx.infer({"x": x}, {"y": np.zeros((2, 4), np.float32)}), "output 'y' has shape [2,4] but the engine writes [2,3]")
    ro = np.zeros((2, 3), np.float32)
    ro.flags.writeable = False
    expect_error(lambda: ctx.infer({"x": x}, {"y": ro}), "output 'y' is read-only")
    expect_error(lambda: ctx.infer({"x": x}, {"y": np.zeros((2, 6), np.float32)[:, ::2]}), "output 'y' is not contiguous")
    expect_error(lambda: ctx.infer({"x": x}, {"w": x}), "'w' is not an output")
    expect_error(lambda: ctx.infer({"x": [[0.0] * 4] * 2}), "input 'x' is a list, not an array")
    expect_error(lambda: ctx.infer({"x": x}, stream="fast"), "stream must be None, an int")
    expect_error(lambda: ctx.infer(x), "inputs must be a dict")
    expect_error(lambda: ctx.infer([x, x]), "2 inputs given but the engine has 1")
    torch = need_torch()
    if torch:
        expect_error(lambda: ctx.infer({"x": torch.zeros(2, 4, dtype=torch.float16)}), "input 'x' is float16")
        if torch.cuda.is_available() and Env.device == "cpu":
            expect_error(lambda: ctx.infer({"x": torch.zeros(2, 4, device="cuda")}), "the engine runs on the CPU")


def test_logger_progress_and_profiler():
    """Build messages reach the logger callback, the builder reports its progress, an exception in
    the progress callback stops the build, and the profiler sees every layer."""
    kiln = Env.kiln
    messages, steps = [], []
    cfg = kiln.BuilderConfig(device=Env.device, tf32=False, progress=lambda *a: steps.append(a))
    eng = kiln.build_engine(mlp_model(2), cfg, logger=lambda sev, msg: messages.append((sev, msg)))
    check(any(sev == "info" and "engine built" in msg for sev, msg in messages), messages[:5])
    check(all(sev in ("error", "warning", "info", "verbose") for sev, _ in messages))
    check(steps and steps[-1][1] == steps[-1][2] and all(phase == "Selecting tactics" for phase, _, _ in steps), steps)

    class Stop(Exception):
        pass

    def stop(phase, step, total):
        raise Stop(f"stopped at {step}/{total}")

    expect_error(lambda: kiln.build_engine(mlp_model(2), kiln.BuilderConfig(device=Env.device, progress=stop)), "stopped at 0/", Stop)
    ctx = eng.create_execution_context()
    layers = []
    ctx.profiler = lambda name, ms: layers.append((name, ms))
    ctx.infer({"x": np.ones((2, 4), np.float32)})
    check(layers and all(isinstance(n, str) and ms >= 0 for n, ms in layers), layers)
    ctx.profiler = None
    layers.clear()
    ctx.infer({"x": np.ones((2, 4), np.float32)})
    check(not layers, "the profiler was removed")
    # A logger that raises does not break the build (the error goes to sys.unraisablehook).
    seen = []
    old = sys.unraisablehook
    sys.unraisablehook = lambda u: seen.append(u)
    try:
        kiln.build_engine(mlp_model(2), kiln.BuilderConfig(device=Env.device), logger=lambda s, m: 1 / 0)
    finally:
        sys.unraisablehook = old
    check(seen and all(u.exc_type is ZeroDivisionError for u in seen))


def test_builder_config_options():
    """Every option the CLI has, as keywords and attributes; options that cannot apply warn."""
    kiln = Env.kiln
    cfg = kiln.BuilderConfig(device=Env.device, device_index=0, tf32=False, strongly_typed=False,
                             precision_constraints="obey", layer_precisions={"relu": "fp32"}, optimization_level=1,
                             avg_timing=2, threads=1, workspace_limit=1 << 20, disabled_tactics=["onednn"],
                             skipped_passes=[], channels_last=True, gpu_fusions=False, plugin_override=False,
                             timing_cache=os.path.join(Env.tmp, "opts.cache"))
    check(cfg.optimization_level == 1 and cfg.layer_precisions == {"relu": "fp32"} and cfg.disabled_tactics == ["onednn"])
    cfg.optimization_level = 2
    check(cfg.optimization_level == 2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        eng = kiln.build_engine(mlp_model(2), cfg)
    check("onednn" not in eng.layer_information, "a disabled tactic was chosen")
    check(os.path.getsize(os.path.join(Env.tmp, "opts.cache")) > 0)
    if Env.device == "cpu":
        # the CPU computes float32: fp16 under obey fails naming the layer (what prefer would warn about)
        strict = kiln.BuilderConfig(device="cpu", precision_constraints="obey", layer_precisions={"relu": "fp16"})
        expect_error(lambda: kiln.build_engine(mlp_model(2), strict), "asks for fp16 compute", kiln.UnsupportedError)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            kiln.build_engine(mlp_model(2), kiln.BuilderConfig(device="cpu", fp16=True, max_aux_streams=2))
        said = " ".join(str(w.message) for w in caught)
        check("fp16 is not supported on the CPU" in said and "max_aux_streams has no effect" in said, said)
    expect_error(lambda: kiln.BuilderConfig(precision_constraints="always"), "precision_constraints")
    expect_error(lambda: kiln.BuilderConfig(layer_precisions={"relu": "fp16"}), "needs precision_constraints")
    expect_error(lambda: kiln.BuilderConfig(precision_constraints="obey", layer_precisions={"relu": "fp8"}), "not fp32, fp16, bf16 or int8")
    expect_error(lambda: kiln.BuilderConfig(optimization_level=9), "optimization_level")
    expect_error(lambda: kiln.BuilderConfig(fp16=True, strongly_typed=True), "strongly_typed")
    bad = kiln.BuilderConfig(device=Env.device, precision_constraints="prefer", layer_precisions={"nope": "fp32"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expect_error(lambda: kiln.build_engine(mlp_model(2), bad), "no layer named 'nope'")
    if not kiln.gpu_available():
        expect_error(lambda: kiln.BuilderConfig(device="gpu"), "no usable CUDA device", kiln.UnsupportedError)
        check(kiln.build_engine(mlp_model(2), kiln.BuilderConfig()).device == "cpu", "device='auto' is the CPU without a GPU")


# --- GPU (skipped without one) --------------------------------------------------------------------

def gpu_torch():
    torch = need_torch()
    if Env.device != "gpu" or not torch.cuda.is_available():
        raise Skip("needs --device gpu and PyTorch with CUDA")
    return torch


def test_gpu_torch_cuda_tensors_on_the_torch_stream():
    """CUDA tensors bound in place, the run enqueued on torch's stream without a host wait."""
    torch = gpu_torch()
    ctx = engine().create_execution_context()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        x = torch.randn(6, 4, device="cuda")
        y, z = torch.empty(6, 3, device="cuda"), torch.empty(6, 4, device="cuda")
        out = ctx.infer({"x": x}, {"y": y, "z": z}, stream=torch.cuda.current_stream())
        check(out["y"] is y)
        y2 = y * 1  # ordered after the run on the same stream
    s.synchronize()
    close(y2.cpu(), expected(x.cpu().numpy())[0])
    close(z.cpu(), expected(x.cpu().numpy())[1])
    # No stream: the context's own, ordered after torch's pending work through DLPack, synchronous.
    x = torch.randn(3, 4, device="cuda") * 3
    out = ctx.infer({"x": x})
    close(out["y"], expected(x.cpu().numpy())[0])  # NumPy outputs when none are given


def test_gpu_execute_async_and_cuda_graph():
    torch = gpu_torch()
    eng = engine(batch=8)
    ctx = eng.create_execution_context(cuda_graph=True)
    x = torch.randn(8, 4, device="cuda")
    y, z = torch.empty(8, 3, device="cuda"), torch.empty(8, 4, device="cuda")
    s = torch.cuda.Stream()
    for name, t in (("x", x), ("y", y), ("z", z)):
        ctx.set_tensor_address(name, t.data_ptr())
    torch.cuda.synchronize()
    for k in range(3):  # capture once, replay; new input values each time through the same buffer
        with torch.cuda.stream(s):
            x.copy_(torch.full((8, 4), float(k - 1), device="cuda"))
            ctx.execute_async(s)
        s.synchronize()
        close(y.cpu(), expected(np.full((8, 4), k - 1, np.float32))[0])
    check(ctx.cuda_graph)
    # An object with __cuda_array_interface__ (and its stream) only.
    class CaiOnly:
        def __init__(self, t):
            self.t = t
            self.__cuda_array_interface__ = t.__cuda_array_interface__
    ctx2 = eng.create_execution_context()
    out = ctx2.infer({"x": CaiOnly(x)}, {"y": CaiOnly(y), "z": CaiOnly(z)})
    close(y.cpu(), expected(x.cpu().numpy())[0])
    check(isinstance(out["y"], CaiOnly))


def test_gpu_host_tensors_to_a_gpu_engine():
    """Host tensors (torch CPU, NumPy) are copied through the context's buffers."""
    torch = gpu_torch()
    ctx = engine().create_execution_context()
    x = torch.randn(4, 4)
    y = torch.empty(4, 3)
    ctx.infer({"x": x}, {"y": y})
    close(y, expected(x.numpy())[0])


if __name__ == "__main__":
    sys.exit(main(globals(), "Python interop tests"))
