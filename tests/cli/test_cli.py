#!/usr/bin/env python3
"""End-to-end tests of the kiln CLI.

Small models are made with onnx.helper; expected outputs come from ONNX Runtime. Covers the
build/save/load round trip, --exportOutput against ONNX Runtime, --loadInputs (.npy and .pb),
dynamic shapes through the profile flags, every flag, the trtexec-style summary, and errors.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import traceback

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

KILN = ""
TMP = ""
FAST = ["--iterations=2", "--warmUp=0", "--duration=0", "--device=cpu"]


# ---------------------------------------------------------------- helpers

def check(cond, msg=""):
    """assert that `python -O` does not remove."""
    if not cond:
        raise AssertionError(msg)


def path(name):
    return os.path.join(TMP, name)


def run(args, expect_ok=True, timeout=120):
    proc = subprocess.run([KILN, *args], capture_output=True, text=True, timeout=timeout, errors="replace")
    check(proc.returncode >= 0, f"kiln killed by signal {-proc.returncode}: {args}\n{proc.stderr}")
    if expect_ok:
        check(proc.returncode == 0, f"kiln failed ({proc.returncode}): {args}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc


def expect_error(args, pattern, status=None):
    proc = run(args, expect_ok=False)
    check(proc.returncode != 0, f"kiln accepted {args}\n{proc.stdout}")
    if status is not None:
        check(proc.returncode == status, f"exit {proc.returncode}, expected {status}: {args}\n{proc.stderr}")
    errors = "\n".join(l for l in proc.stderr.splitlines() if l.startswith("[E]"))
    check(errors, f"no [E] line on stderr for {args}:\n{proc.stderr}")
    check(re.search(pattern, errors, re.IGNORECASE), f"error for {args} does not match /{pattern}/: {errors}")
    return proc


def save_model(model, name):
    onnx.checker.check_model(model)
    p = path(name)
    onnx.save(model, p)
    return p


def mlp_model(batch):
    """y = Relu(x @ W + B), z = Sigmoid(y); x: [batch, 4] float32."""
    rng = np.random.default_rng(7)
    w = numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "W")
    b = numpy_helper.from_array(rng.standard_normal(3).astype(np.float32), "B")
    nodes = [helper.make_node("MatMul", ["x", "W"], ["m"], name="matmul"),
             helper.make_node("Add", ["m", "B"], ["a"], name="add"),
             helper.make_node("Relu", ["a"], ["y"], name="relu"),
             helper.make_node("Sigmoid", ["y"], ["z"], name="sigmoid")]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 3]),
                               helper.make_tensor_value_info("z", TensorProto.FLOAT, [batch, 3])], [w, b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def ort_outputs(model_path, feeds):
    sess = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def read_outputs(json_path):
    with open(json_path) as f:
        doc = json.load(f)
    out = {}
    for o in doc:  # trtexec's list, with kiln's dims and dtype
        check(set(o) == {"name", "dimensions", "values", "dims", "dtype"}, o.keys())
        check(o["dimensions"] == "x".join(map(str, o["dims"])), o)
        out[o["name"]] = (o["dtype"], np.array(o["values"], dtype=np.float64).reshape(o["dims"]))
    return out


def assert_matches_ort(json_path, model_path, feeds):
    got = read_outputs(json_path)
    want = ort_outputs(model_path, feeds)
    check(set(got) == set(want), f"outputs {sorted(got)} != {sorted(want)}")
    for name, ref in want.items():
        dtype, values = got[name]
        check(dtype == "float32", dtype)
        check(values.shape == ref.shape, f"{name}: shape {values.shape} != {ref.shape}")
        np.testing.assert_allclose(values, ref, rtol=1e-5, atol=1e-6, err_msg=name)


def static_model():
    if not os.path.exists(path("static.onnx")):
        save_model(mlp_model(2), "static.onnx")
    return path("static.onnx")


def dynamic_model():
    if not os.path.exists(path("dynamic.onnx")):
        save_model(mlp_model("N"), "dynamic.onnx")
    return path("dynamic.onnx")


def input_npy(name, shape, seed):
    data = np.random.default_rng(seed).uniform(-2, 2, shape).astype(np.float32)
    np.save(path(name), data)
    return path(name), data


# ---------------------------------------------------------------- tests

def test_help_lists_every_flag():
    out = run(["--help"]).stdout
    for flag in ["--onnx", "--saveEngine", "--loadEngine", "--shapes", "--minShapes", "--optShapes", "--maxShapes",
                 "--loadInputs", "--exportOutput", "--iterations", "--warmUp", "--duration", "--avgRuns",
                 "--percentile", "--dumpProfile", "--exportProfile", "--exportTimes", "--dumpLayerInfo",
                 "--exportLayerInfo", "--threads", "--device", "--fp16", "--bf16", "--int8", "--noTF32",
                 "--stronglyTyped", "--builderOptimizationLevel", "--maxAuxStreams", "--useCudaGraph", "--streams",
                 "--noDataTransfers", "--verbose", "--help", "--timingCacheFile", "--plugins", "--listPlugins",
                 "--enablePluginOverride", "--precisionConstraints", "--layerPrecisions", "--useProfile", "--gpu",
                 "--disableTactics", "--skipPasses", "--noChannelsLast", "--channelsLastMinBatch", "--gpuFusions", "--poisonFreedMemory", "--memPoolSize", "--workspace"]:
        check(flag in out, f"{flag} missing from --help")


def test_roundtrip_and_outputs_match_ort():
    model = static_model()
    npy, data = input_npy("x_static.npy", (2, 4), 1)
    plan = path("static.plan")
    built = run(["--onnx=" + model, "--saveEngine=" + plan, "--loadInputs=x:" + npy,
                 "--exportOutput=" + path("built.json"), *FAST])
    check(os.path.getsize(plan) > 0)
    check("Engine built in" in built.stdout and "Engine I/O" in built.stdout and "arena" in built.stdout)
    run(["--loadEngine=" + plan, "--loadInputs=x:" + npy, "--exportOutput=" + path("loaded.json"), *FAST])
    a, b = read_outputs(path("built.json")), read_outputs(path("loaded.json"))
    check(a.keys() == b.keys())
    for name in a:
        np.testing.assert_array_equal(a[name][1], b[name][1], err_msg=f"{name}: built vs loaded engine")
    assert_matches_ort(path("built.json"), model, {"x": data})


def test_load_inputs_pb():
    model = static_model()
    data = np.random.default_rng(3).uniform(-1, 1, (2, 4)).astype(np.float32)
    with open(path("x.pb"), "wb") as f:
        f.write(numpy_helper.from_array(data, "x").SerializeToString())
    run(["--onnx=" + model, "--loadInputs=x:" + path("x.pb"), "--exportOutput=" + path("pb.json"), *FAST])
    assert_matches_ort(path("pb.json"), model, {"x": data})


def test_load_inputs_claiming_huge_shapes_are_refused_before_allocating():
    """A .npy header (or --shapes for a raw file) claiming 40 GB with a few bytes behind it: a clear
    error from the size check, never a 40 GB zero-filled allocation first (found by reading the
    loaders for the libFuzzer target kiln_libfuzzer_input_files; fixed in tools/kiln/inputs.cpp)."""
    model = static_model()
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (100000, 100000), }"
    header += " " * (118 - len(header)) + "\n"
    with open(path("huge.npy"), "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + bytes(8))
    expect_error(["--onnx=" + model, "--loadInputs=x:" + path("huge.npy"), *FAST],
                 r"\.npy data holds 8 bytes; shape \[100000,100000\] of <f4 needs 40000000000", status=1)


def test_load_inputs_pb_claiming_huge_dims_is_refused_before_allocating():
    """A 16-byte TensorProto claiming [805306368, 2] floats (6 GiB): refused by the size check, not
    allocated first (found by kiln_libfuzzer_input_files; fixed in src/onnx/tensor_proto.cpp; the
    finding is also in its seed corpus, tests/fuzz/corpus/input_files/regress_pb_dims_over_tiny_data)."""
    model = static_model()
    t = numpy_helper.from_array(np.ones(4, np.float32), "x")
    del t.dims[:]
    t.dims.extend([805306368, 2])
    with open(path("huge.pb"), "wb") as f:
        f.write(t.SerializeToString())
    expect_error(["--onnx=" + model, "--loadInputs=x:" + path("huge.pb"), *FAST],
                 r"raw_data holds 16 bytes, dims \[805306368,2\] need 6442450944", status=1)


def test_int4_inputs_raw_pb_and_float8_outputs():
    """An int4 input, DequantizeLinear'd, then QuantizeLinear'd to float8 e4m3fn: a raw file holds one
    byte per element (kiln's layout); a .pb holds ONNX's packing (5 elements in 3 bytes). A raw byte
    outside int4's range is refused. Expected values: numpy and ml_dtypes, not kiln."""
    import ml_dtypes
    zp = numpy_helper.from_array(np.array(-3, ml_dtypes.int4), "zp")
    nodes = [helper.make_node("DequantizeLinear", ["x", "s", "zp"], ["y"]),
             helper.make_node("QuantizeLinear", ["y", "s8", "zp8"], ["q"])]
    graph = helper.make_graph(nodes, "int4", [helper.make_tensor_value_info("x", TensorProto.INT4, [5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5]),
                               helper.make_tensor_value_info("q", TensorProto.FLOAT8E4M3FN, [5])],
                              [numpy_helper.from_array(np.array(0.75, np.float32), "s"), zp,
                               numpy_helper.from_array(np.array(0.125, np.float32), "s8"),
                               numpy_helper.from_array(np.array(0, ml_dtypes.float8_e4m3fn), "zp8")])
    model = save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10), "int4.onnx")
    x = np.array([-8, 7, -3, 0, 1], np.int8)
    want_y = (x.astype(np.float32) + 3) * np.float32(0.75)
    want_q = (want_y / np.float32(0.125)).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)  # RNE, in range
    x.tofile(path("x_int4.bin"))
    with open(path("x_int4.pb"), "wb") as f:
        f.write(numpy_helper.from_array(x.astype(ml_dtypes.int4), "x").SerializeToString())
    for src in ("x_int4.bin", "x_int4.pb"):
        run(["--onnx=" + model, "--loadInputs=x:" + path(src), "--exportOutput=" + path("int4.json"), *FAST])
        got = read_outputs(path("int4.json"))
        check(np.array_equal(got["y"][1], want_y), f"{src}: y {got['y']} want {want_y}")
        check(got["q"][0] == "float8e4m3fn" and np.array_equal(got["q"][1], want_q), f"{src}: q {got['q']} want {want_q}")
    np.array([1, 2, 9, 0, 0], np.int8).tofile(path("x_bad_int4.bin"))
    expect_error(["--onnx=" + model, "--loadInputs=x:" + path("x_bad_int4.bin"), *FAST],
                 r"byte 2 \(9\) is not a int4 value", status=1)


def test_random_inputs_are_seeded():
    model = static_model()
    run(["--onnx=" + model, "--exportOutput=" + path("r1.json"), *FAST])
    run(["--onnx=" + model, "--exportOutput=" + path("r2.json"), *FAST])
    r1, r2 = read_outputs(path("r1.json")), read_outputs(path("r2.json"))
    np.testing.assert_array_equal(r1["y"][1], r2["y"][1])


def test_dynamic_shapes_profile_and_runtime():
    model = dynamic_model()
    plan = path("dynamic.plan")
    npy, data = input_npy("x_dyn3.npy", (3, 4), 5)
    run(["--onnx=" + model, "--minShapes=x:1x4", "--optShapes=x:4x4", "--maxShapes=x:8x4", "--shapes=x:3x4",
         "--loadInputs=x:" + npy, "--saveEngine=" + plan, "--exportOutput=" + path("dyn3.json"), *FAST])
    assert_matches_ort(path("dyn3.json"), model, {"x": data})
    npy5, data5 = input_npy("x_dyn5.npy", (5, 4), 6)
    loaded = run(["--loadEngine=" + plan, "--shapes=x:5x4", "--loadInputs=x:" + npy5,
                  "--exportOutput=" + path("dyn5.json"), *FAST])
    check(re.search(r"min \[1,4\] opt \[4,4\] max \[8,4\]", loaded.stdout), loaded.stdout)
    assert_matches_ort(path("dyn5.json"), model, {"x": data5})
    # Runtime shape from the loaded file alone; random data at the opt shape.
    run(["--loadEngine=" + plan, "--loadInputs=x:" + npy5, *FAST])
    opt = run(["--loadEngine=" + plan, "--exportOutput=" + path("dynopt.json"), *FAST])
    check(read_outputs(path("dynopt.json"))["y"][1].shape == (4, 3), opt.stdout)
    # Outside the profile.
    expect_error(["--loadEngine=" + plan, "--shapes=x:9x4", *FAST], r"x|profile|range|max")


def test_multiple_optimization_profiles():
    """Two profiles (trtexec: the shape flags repeated), each with its own tactics; --useProfile picks one."""
    model = dynamic_model()
    plan, info = path("two_profiles.plan"), path("two_profiles_layers.json")
    build = run(["--onnx=" + model, "--minShapes=x:1x4", "--optShapes=x:2x4", "--maxShapes=x:4x4",
                 "--minShapes=x:16x4", "--optShapes=x:32x4", "--maxShapes=x:64x4",
                 "--saveEngine=" + plan, "--exportLayerInfo=" + info, "--skipInference", "--device=cpu"])
    check(re.search(r"profile 0 min \[1,4\] opt \[2,4\] max \[4,4\]", build.stdout), build.stdout)
    check(re.search(r"profile 1 min \[16,4\] opt \[32,4\] max \[64,4\]", build.stdout), build.stdout)
    with open(info) as f:
        layers = json.load(f)
    check(layers["optimizationProfiles"] == 2, layers)
    for l in layers["layers"]:
        check(len(l["profiles"]) == 2 and l["profiles"][0]["tactic"] == l["tactic"], l)
    npy, data = input_npy("x_prof20.npy", (20, 4), 7)
    run(["--loadEngine=" + plan, "--useProfile=1", "--shapes=x:20x4", "--loadInputs=x:" + npy,
         "--exportOutput=" + path("prof1.json"), *FAST])
    assert_matches_ort(path("prof1.json"), model, {"x": data})
    npy3, data3 = input_npy("x_prof3.npy", (3, 4), 8)
    run(["--loadEngine=" + plan, "--loadInputs=x:" + npy3, "--exportOutput=" + path("prof0.json"), *FAST])
    assert_matches_ort(path("prof0.json"), model, {"x": data3})
    # Random inputs take the selected profile's opt shape.
    run(["--loadEngine=" + plan, "--useProfile=1", "--exportOutput=" + path("prof1opt.json"), *FAST])
    check(read_outputs(path("prof1opt.json"))["y"][1].shape == (32, 3))
    # A shape is checked against the selected profile only.
    expect_error(["--loadEngine=" + plan, "--shapes=x:20x4", *FAST], r"outside the optimization profile")
    expect_error(["--loadEngine=" + plan, "--useProfile=1", "--shapes=x:3x4", *FAST], r"outside the optimization profile")
    expect_error(["--loadEngine=" + plan, "--useProfile=2", *FAST], r"useProfile=2.*2 optimization profile", status=2)
    # Flags that disagree on the number of profiles, a profile missing an input, --useProfile beyond them.
    expect_error(["--onnx=" + model, "--minShapes=x:1x4", "--minShapes=x:16x4", "--optShapes=x:2x4", *FAST],
                 r"--optShapes gives 1 optimization profile", status=2)
    expect_error(["--onnx=" + model, "--optShapes=x:2x4", "--useProfile=1", *FAST], r"useProfile=1", status=2)


def test_dynamic_input_without_shapes_warns():
    proc = run(["--onnx=" + dynamic_model(), "--exportOutput=" + path("dyn1.json"), *FAST])
    check(re.search(r"\[W\].*'x'.*no shapes given", proc.stderr), proc.stderr)
    check(read_outputs(path("dyn1.json"))["y"][1].shape == (1, 3))


def test_zero_sized_batch():
    model = dynamic_model()
    npy, data = input_npy("x_empty.npy", (0, 4), 9)
    run(["--onnx=" + model, "--shapes=x:0x4", "--loadInputs=x:" + npy, "--exportOutput=" + path("empty.json"), *FAST])
    assert_matches_ort(path("empty.json"), model, {"x": data})


def test_random_input_rules():
    """Floats in [-1, 1], integers in [0, 10), integer inputs named like masks all ones."""
    one = numpy_helper.from_array(np.array(1, np.int64), "one")
    one_f = numpy_helper.from_array(np.array(1, np.float32), "onef")
    nodes = [helper.make_node("Mul", ["ids", "one"], ["ids_out"]),
             helper.make_node("Mul", ["attention_mask", "one"], ["mask_out"]),
             helper.make_node("Mul", ["x", "onef"], ["x_out"])]
    graph = helper.make_graph(
        nodes, "rand",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [64]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [64]),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [256])],
        [helper.make_tensor_value_info(n, t, [k]) for n, t, k in
         (("ids_out", TensorProto.INT64, 64), ("mask_out", TensorProto.INT64, 64), ("x_out", TensorProto.FLOAT, 256))],
        [one, one_f])
    model = save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8),
                       "rand.onnx")
    run(["--onnx=" + model, "--exportOutput=" + path("rand.json"), *FAST])
    out = read_outputs(path("rand.json"))
    ids, mask, x = out["ids_out"][1], out["mask_out"][1], out["x_out"][1]
    check(out["ids_out"][0] == "int64" and ids.min() >= 0 and ids.max() <= 9 and len(np.unique(ids)) > 3, ids)
    check(np.all(mask == 1), mask)
    check(x.min() >= -1 and x.max() <= 1 and x.std() > 0.3, x)


def test_pre_opset7_forms_match_numpy():
    """Forms only the oldest model-zoo files use, checked against NumPy: Tile-1 (tiles, axis
    inputs), Mul-6 with legacy broadcast along axis 1 of a computed tensor, Cast-1 with a string
    `to`, Concat-1 without axis."""
    from onnx import numpy_helper
    vi = lambda n, sh, t=TensorProto.FLOAT: helper.make_tensor_value_info(n, t, sh)
    inits = [numpy_helper.from_array(np.array(3, np.int64), "t"), numpy_helper.from_array(np.array(1, np.int64), "ax"),
             numpy_helper.from_array(np.array([2.0, -1.0], np.float32), "scale")]
    nodes = [helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Tile", ["r", "t", "ax"], ["tiled"]),
             helper.make_node("Mul", ["tiled", "scale"], ["scaled"], broadcast=1, axis=0),
             helper.make_node("Concat", ["scaled", "scaled"], ["cat"]),
             helper.make_node("Cast", ["cat"], ["y"], to="INT32")]
    g = helper.make_graph(nodes, "old_forms", [vi("a", [2, 3])] + [vi(i.name, list(i.dims), i.data_type) for i in inits],
                          [vi("y", [2, 18], TensorProto.INT32)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 1)])
    m.ir_version = 3
    model = path("old_forms.onnx")
    onnx.save(m, model)
    x = (np.arange(6, dtype=np.float32).reshape(2, 3) - 2) * 1.5
    npy = path("old_forms_x.npy")
    np.save(npy, x)
    run(["--onnx=" + model, "--loadInputs=a:" + npy, "--exportOutput=" + path("old_forms.json"), *FAST])
    scaled = np.tile(np.maximum(x, 0), (1, 3)) * np.array([2.0, -1.0], np.float32)[:, None]
    want = np.concatenate([scaled, scaled], axis=1).astype(np.int32)
    got = read_outputs(path("old_forms.json"))["y"][1]
    np.testing.assert_array_equal(got, want)


def test_legacy_prelu_per_channel_slope():
    """PRelu-6 with a per-channel slope [C] on x [N, C, L] (numpy broadcasting fails): the slope
    applies along the channel axis, as the ONNX reference evaluator computes it; after a Relu (a
    computed X, inferred while importing) and on the graph input itself."""
    from onnx import numpy_helper
    from onnx.reference import ReferenceEvaluator
    slope = numpy_helper.from_array(np.array([0.5, -2.0, 3.0], np.float32), "slope")
    nodes = [helper.make_node("PRelu", ["x", "slope"], ["p0"]),
             helper.make_node("Neg", ["p0"], ["n"]),
             helper.make_node("PRelu", ["n", "slope"], ["y"])]
    vi = lambda n, sh: helper.make_tensor_value_info(n, TensorProto.FLOAT, sh)  # noqa: E731
    g = helper.make_graph(nodes, "prelu6", [vi("x", [2, 3, 4]), vi("slope", [3])], [vi("y", [2, 3, 4])], [slope])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 6)])
    m.ir_version = 3
    model = path("prelu6.onnx")
    onnx.save(m, model)
    x = np.random.default_rng(5).standard_normal((2, 3, 4)).astype(np.float32)
    npy = path("prelu6_x.npy")
    np.save(npy, x)
    run(["--onnx=" + model, "--loadInputs=x:" + npy, "--exportOutput=" + path("prelu6.json"), *FAST])
    want = ReferenceEvaluator(m).run(None, {"x": x})[0]
    got = read_outputs(path("prelu6.json"))["y"][1]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_shape_tensor_input_values():
    """A graph input that is an Expand's target shape (a shape tensor): its values come from
    --loadInputs or from --shapes=name:[v,...] (trtexec's shape-tensor values), and the output has
    the shape they give; a float input given values is a usage error."""
    g = helper.make_graph([helper.make_node("Expand", ["x", "shape"], ["y"])], "expand",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 1]),
                           helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b"])])
    model = save_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), "expand.onnx")
    x = np.arange(3, dtype=np.float32).reshape(3, 1)
    np.save(path("expand_x.npy"), x)
    np.save(path("expand_shape.npy"), np.array([2, 3, 4], np.int64)[1:])
    want = np.broadcast_to(x, (3, 4))
    run(["--onnx=" + model, "--loadInputs=x:" + path("expand_x.npy") + ",shape:" + path("expand_shape.npy"),
         "--exportOutput=" + path("expand1.json"), *FAST])
    np.testing.assert_array_equal(read_outputs(path("expand1.json"))["y"][1], want)
    run(["--onnx=" + model, "--shapes=shape:[3,4]", "--loadInputs=x:" + path("expand_x.npy"),
         "--exportOutput=" + path("expand2.json"), *FAST])
    np.testing.assert_array_equal(read_outputs(path("expand2.json"))["y"][1], want)
    expect_error(["--onnx=" + model, "--shapes=x:[3,4]", *FAST], "not an int32/int64 shape tensor", status=2)
    expect_error(["--onnx=" + model, "--shapes=shape:[3,q]", *FAST], "bad value 'q'", status=2)


def test_layer_precisions():
    model = static_model()
    ok = run(["--onnx=" + model, "--precisionConstraints=obey", "--layerPrecisions=*:fp32", *FAST])
    check("[W]" not in ok.stderr, ok.stderr)  # float32 is what the CPU computes: nothing to report
    # fp16 on the CPU: obey fails naming a layer (exit 3), prefer builds and warns naming it
    expect_error(["--onnx=" + model, "--precisionConstraints=obey", "--layerPrecisions=*:fp16", *FAST],
                 r"layer '.*' \(.*\) asks for fp16 compute but it runs in fp32: the CPU", status=3)
    ok = run(["--onnx=" + model, "--precisionConstraints=prefer", "--layerPrecisions=*:fp16", *FAST])
    check(re.search(r"\[W\] layer '.*asks for fp16.*falling back", ok.stderr), ok.stderr)
    expect_error(["--onnx=" + model, "--precisionConstraints=obey", "--layerPrecisions=no_such_layer:fp32", *FAST],
                 r"no layer named 'no_such_layer'", status=2)
    expect_error(["--onnx=" + model, "--precisionConstraints=obey", "--layerPrecisions=*:fp8", *FAST], r"fp32, fp16, bf16 or int8",
                 status=2)
    expect_error(["--onnx=" + model, "--layerPrecisions=*:fp32", *FAST], r"precisionConstraints", status=2)


def test_timing_cache():
    """A rebuild with --timingCacheFile times nothing it timed before and picks the same tactics;
    a damaged cache is a clear error."""
    model = static_model()
    cache = path("timing.cache")
    if os.path.exists(cache):
        os.remove(cache)
    infos = []
    for k in range(2):
        info = path(f"tc_layers{k}.json")
        p = run(["--onnx=" + model, "--timingCacheFile=" + cache, "--exportLayerInfo=" + info, "--skipInference",
                 "--device=cpu", "--builderOptimizationLevel=3"])
        m = re.search(r"Timing cache: (\d+) hits, (\d+) misses; saved (\d+) entries", p.stdout)
        check(m, p.stdout)
        hits, misses, saved = map(int, m.groups())
        if k == 0:
            check(hits == 0 and misses > 0 and saved == misses, m.group(0))
        else:
            check(misses == 0 and hits == saved, m.group(0))
        with open(info) as f:
            infos.append([(l["name"], l["tactic"]) for l in json.load(f)["layers"]])
    check(infos[0] == infos[1])
    data = bytearray(open(cache, "rb").read())
    data[-3] ^= 0xFF
    open(cache, "wb").write(bytes(data))
    expect_error(["--onnx=" + model, "--timingCacheFile=" + cache, "--skipInference", "--device=cpu"], r"timing cache.*corrupt|checksum",
                 status=1)


def test_every_flag_parsed():
    model = static_model()
    files = {k: path(f"all_{k}.json") for k in ("profile", "times", "layers", "out")}
    proc = run(["--onnx=" + model, "--saveEngine=" + path("all.plan"), "--shapes=x:2x4",
                "--iterations=3", "--warmUp=1", "--duration=0", "--avgRuns=2", "--percentile=50,99.9",
                "--dumpProfile", "--exportProfile=" + files["profile"], "--exportTimes=" + files["times"],
                "--dumpLayerInfo", "--exportLayerInfo=" + files["layers"], "--exportOutput=" + files["out"],
                "--dumpOutput", "--threads=1", "--device=cpu", "--fp16", "--bf16", "--int8", "--noTF32",
                "--builderOptimizationLevel=1", "--maxAuxStreams=0", "--streams=2", "--noDataTransfers",
                "--verbose"])
    for what in ("FP16", "BF16"):
        check(re.search(rf"\[W\] {what}.*not supported on the CPU", proc.stderr), proc.stderr)
    # INT8 without Q/DQ layers or calibration: never silent
    check(re.search(r"\[W\] INT8 .*has no effect: no layer runs INT8, because the network has no QuantizeLinear/DequantizeLinear", proc.stderr), proc.stderr)
    check("=== Profile (3 iterations ) ===" in proc.stdout)
    check("Layer Information" in proc.stdout and "Output 'y'" in proc.stdout)
    check("percentile(50%)" in proc.stdout and "percentile(99.9%)" in proc.stdout)
    with open(files["times"]) as f:
        times = json.load(f)
    check(len(times) >= 6, len(times))  # two streams, three iterations each at least
    for t in times:
        check({"startMs", "endMs", "latencyMs", "enqueueMs", "computeMs"} <= set(t), t)
        check(t["endMs"] >= t["startMs"] and abs(t["latencyMs"] - (t["endMs"] - t["startMs"])) < 1e-6)
    with open(files["profile"]) as f:
        prof = json.load(f)
    check(prof[0]["count"] == 3, prof[0])
    check(len(prof) > 1 and all({"name", "timeMs", "averageMs", "percentage"} <= set(p) for p in prof[1:]))
    check(abs(sum(p["percentage"] for p in prof[1:]) - 100.0) < 0.1)
    with open(files["layers"]) as f:
        json.load(f)  # valid JSON
    run(["--onnx=" + model, "--stronglyTyped", "--skipInference", "--device=cpu"])
    # Build knobs (BuilderConfig fields, formerly environment variables).
    knobs = run(["--onnx=" + model, "--device=cpu", "--gpu=0", "--disableTactics=avx2,onednn", "--skipPasses=fuse,layout",
                 "--noChannelsLast", "--channelsLastMinBatch=1", "--gpuFusions", "--verbose", "--skipInference"])
    assert "pass skipped (--skipPasses): fuse activation into producer" in knobs.stdout + knobs.stderr, knobs.stderr
    run(["--loadEngine=" + path("all.plan"), "--threads=2", *FAST])
    graph = run(["--onnx=" + model, "--useCudaGraph", *FAST])
    check("no CUDA graphs" in graph.stderr, graph.stderr)  # the CPU warns and runs plain enqueue
    expect_error(["--onnx=" + model, "--fp16", "--stronglyTyped", *FAST], r"stronglyTyped")
    expect_error(["--onnx=" + model, "--channelsLastMinBatch=0", *FAST], r"channelsLastMinBatch")


def strict_json(file):
    """json.load that refuses NaN/Infinity (Python's json accepts them; JSON does not)."""
    def refuse(name):
        raise AssertionError(f"{file}: {name} is not valid JSON")
    with open(file) as f:
        return json.load(f, parse_constant=refuse)


def test_json_exports_valid_with_nonfinite_values():
    """Outputs that hold NaN and +-inf: every export is strict JSON, the outputs' non-finite values
    are the strings "nan"/"inf"/"-inf" and read back equal to NumPy's log and reciprocal."""
    nodes = [helper.make_node("Log", ["x"], ["log"], name="log"),
             helper.make_node("Reciprocal", ["x"], ["rcp"], name="rcp")]
    graph = helper.make_graph(nodes, "nonfinite", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6])],
                              [helper.make_tensor_value_info("log", TensorProto.FLOAT, [6]),
                               helper.make_tensor_value_info("rcp", TensorProto.FLOAT, [6])])
    model = save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), "nonfinite.onnx")
    x = np.array([0.0, -1.0, 1.0, np.e, -0.0, np.inf], dtype=np.float32)
    np.save(path("nonfinite_x.npy"), x)
    files = {k: path(f"nonfinite_{k}.json") for k in ("out", "times", "profile", "layers")}
    run(["--onnx=" + model, "--loadInputs=x:" + path("nonfinite_x.npy"), "--exportOutput=" + files["out"],
         "--exportTimes=" + files["times"], "--exportProfile=" + files["profile"], "--exportLayerInfo=" + files["layers"],
         *FAST])
    docs = {k: strict_json(f) for k, f in files.items()}
    with np.errstate(divide="ignore", invalid="ignore"):
        want = {"log": np.log(x), "rcp": np.reciprocal(x)}
    got = {o["name"]: o["values"] for o in docs["out"]}
    check(set(got) == set(want), got.keys())
    for name, ref in want.items():
        check(all(isinstance(v, str) for v, r in zip(got[name], ref) if not np.isfinite(r)), f"{name}: {got[name]}")
        values = np.array([float(v) for v in got[name]], dtype=np.float32)  # float() reads "nan"/"inf"/"-inf"
        np.testing.assert_allclose(values, ref, rtol=1e-6, err_msg=name)  # NaN equals NaN here


def test_profile_roofline():
    """--dumpProfile / --exportProfile carry the per-layer roofline: each layer's FLOPs and bytes at
    the run's shapes, counted here from the model's definition (a multiply-add is 2 FLOPs; every
    input, weight and output crosses memory once), and a bound."""
    rng = np.random.default_rng(3)
    n, c, h, w, k, g = 2, 8, 10, 10, 16, 2  # grouped 3x3 conv, pad 1: output [n, k, h, w]
    wconv = numpy_helper.from_array(rng.standard_normal((k, c // g, 3, 3)).astype(np.float32), "Wc")
    wmm = numpy_helper.from_array(rng.standard_normal((w, 6)).astype(np.float32), "Wm")
    nodes = [helper.make_node("Conv", ["x", "Wc"], ["y"], name="conv", group=g, pads=[1, 1, 1, 1]),
             helper.make_node("MatMul", ["y", "Wm"], ["z"], name="matmul")]
    graph = helper.make_graph(nodes, "roof", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", c, h, w])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", k, h, 6])], [wconv, wmm])
    model = save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), "roof.onnx")
    prof = path("roof_profile.json")
    out = run(["--onnx=" + model, f"--shapes=x:{n}x{c}x{h}x{w}", "--dumpProfile", "--exportProfile=" + prof,
               "--skipPasses=fuse,layout", *FAST]).stdout
    check("=== Roofline (" in out and "Time by bound:" in out, out)
    with open(prof) as f:
        doc = json.load(f)
    check({"count", "device", "total"} <= set(doc[0]), doc[0])
    layers = {p["name"]: p for p in doc[1:]}
    check({"conv", "matmul"} <= set(layers), sorted(layers))
    conv_macs = sum(1 for _ in np.ndindex(n, k, h, w)) * (c // g) * 3 * 3
    conv_bytes = 4 * (n * c * h * w + k * (c // g) * 9 + n * k * h * w)
    mm_macs = n * k * h * 6 * w
    mm_bytes = 4 * (n * k * h * w + w * 6 + n * k * h * 6)
    for name, macs, nbytes in (("conv", conv_macs, conv_bytes), ("matmul", mm_macs, mm_bytes)):
        p = layers[name]
        check(p["flops"] == 2 * macs, (name, p["flops"], 2 * macs))
        check(p["bytes"] == nbytes, (name, p["bytes"], nbytes))
        check(p["bound"] in ("compute", "memory", "launch", "-"), p)
        check(p["averageMs"] <= 0 or abs(p["tflops"] - p["flops"] / p["averageMs"] / 1e9) <= 1e-6 * p["tflops"] + 1e-12, p)
    check(doc[0]["total"]["flops"] >= 2 * (conv_macs + mm_macs), doc[0]["total"])


def test_workspace_limit():
    """--memPoolSize=workspace:N (trtexec's form) excludes tactics needing more workspace; an
    impossible limit is an error naming the layer. The chosen tactics' workspace is reported."""
    rng = np.random.default_rng(5)
    w = numpy_helper.from_array(rng.standard_normal((32, 16, 3, 3)).astype(np.float32), "W")
    graph = helper.make_graph([helper.make_node("Conv", ["x", "W"], ["y"], name="conv", pads=[1, 1, 1, 1])], "ws",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 28, 28])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 28, 28])], [w])
    model = save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), "ws.onnx")
    def workspace_mib(args):
        out = run(["--onnx=" + model, *args, *FAST]).stdout
        m = re.search(r"Memory per context: arena [\d.]+ MiB \(lower bound [\d.]+ MiB\), workspace ([\d.]+) MiB", out)
        check(m, out)
        return float(m.group(1))
    free = workspace_mib(["--builderOptimizationLevel=5"])
    verbose = run(["--onnx=" + model, "--memPoolSize=workspace:1K", "--verbose", *FAST], expect_ok=False)
    needs = [int(n) for n in re.findall(r"tactic \S+ needs (\d+) bytes of workspace, over the limit", verbose.stdout + verbose.stderr)]
    check(needs and min(needs) > 1024, verbose.stderr)
    expect_error(["--onnx=" + model, "--memPoolSize=workspace:1K", *FAST], r"conv.*every tactic needs more workspace")
    # A limit between the smallest and the largest need: honoured.
    limit = (min(needs) + max(needs)) / 2 / (1 << 20)
    check(limit < max(free, max(needs) / (1 << 20)) or min(needs) == max(needs), (limit, free, needs))
    got = workspace_mib([f"--memPoolSize=workspace:{limit:.4f}M", "--builderOptimizationLevel=5"])
    check(got <= limit + 1e-3, (got, limit))
    check(workspace_mib([f"--workspace={limit:.4f}"]) <= limit + 1e-3)
    expect_error(["--onnx=" + model, "--memPoolSize=bogus:1", *FAST], r"unknown pool")
    expect_error(["--onnx=" + model, "--memPoolSize=workspace:lots", *FAST], r"not a size")


def test_performance_summary_format():
    out = run(["--onnx=" + static_model(), "--iterations=20", "--warmUp=10", "--duration=0.2", "--device=cpu"]).stdout
    stat = r"min = [\d.e+-]+ ms, max = [\d.e+-]+ ms, mean = [\d.e+-]+ ms, median = [\d.e+-]+ ms, " \
           r"percentile\(90%\) = [\d.e+-]+ ms, percentile\(95%\) = [\d.e+-]+ ms, percentile\(99%\) = [\d.e+-]+ ms"
    lines = [r"\[I\] === Performance summary ===", r"\[I\] Throughput: [\d.e+-]+ qps",
             r"\[I\] Latency: " + stat, r"\[I\] Enqueue Time: " + stat, r"\[I\] Compute Time: " + stat,
             r"\[I\] Total Host Walltime: [\d.e+-]+ s", r"\[I\] Total Compute Time: [\d.e+-]+ s"]
    all_lines = out.splitlines()
    first = all_lines.index("[I] === Performance summary ===")
    got = all_lines[first:first + len(lines)]
    check(len(got) == len(lines), out)
    for pattern, line in zip(lines, got):
        check(re.fullmatch(pattern, line), f"{pattern!r} vs {line!r}")
    walltime = float(re.search(r"Total Host Walltime: ([\d.e+-]+) s", out).group(1))
    check(walltime >= 0.2, walltime)  # --duration is honoured


def test_errors():
    model = static_model()
    expect_error(["--onnx=" + path("does_not_exist.onnx"), *FAST], r"does_not_exist")
    expect_error(["--loadEngine=" + path("does_not_exist.plan"), *FAST], r"does_not_exist", status=1)
    expect_error(["--onnx=" + model, "--bogusFlag"], r"bogusFlag", status=2)
    expect_error([], r"--onnx", status=2)
    expect_error(["--onnx=" + model, "--loadEngine=" + path("x.plan")], r"mutually exclusive", status=2)
    for bad in ["x:1xAx4", "x1x4", "x:-1x4", "x:", "x:2x4,x:2x4", "x:99999999999999999999x4", "x:2x4,"]:
        expect_error(["--onnx=" + model, "--shapes=" + bad, *FAST], r"--shapes", status=2)
    expect_error(["--onnx=" + model, "--shapes=nope:2x4", *FAST], r"'nope' is not an input", status=2)
    expect_error(["--onnx=" + model, "--shapes=x:3x4", *FAST], r"does not fit input 'x'", status=2)
    expect_error(["--onnx=" + model, "--iterations=0"], r"iterations", status=2)
    expect_error(["--onnx=" + model, "--percentile=101"], r"percentile", status=2)
    expect_error(["--onnx=" + model, "--device=tpu"], r"device", status=2)
    expect_error(["--onnx=" + model, "--builderOptimizationLevel=9"], r"builderOptimizationLevel", status=2)
    expect_error(["--onnx=" + model, "--loadInputs=x:" + path("missing.npy"), *FAST], r"missing\.npy")
    np.save(path("x_f64.npy"), np.zeros((2, 4), np.float64))
    expect_error(["--onnx=" + model, "--loadInputs=x:" + path("x_f64.npy"), *FAST], r"float64.*float32")
    np.save(path("x_wrong.npy"), np.zeros((3, 4), np.float32))
    expect_error(["--onnx=" + model, "--loadInputs=x:" + path("x_wrong.npy"), *FAST], r"\[3,4\]")
    with open(path("garbage.npy"), "wb") as f:
        f.write(b"\x93NUMPY\x01\x00\xff\xff{'descr'")
    expect_error(["--onnx=" + model, "--loadInputs=x:" + path("garbage.npy"), *FAST], r"garbage\.npy")
    with open(path("garbage.plan"), "wb") as f:
        f.write(os.urandom(1000))
    expect_error(["--loadEngine=" + path("garbage.plan"), *FAST], r".")
    # --loadEngine maps the file: an empty file, a directory and a truncated plan are clear errors
    open(path("empty.plan"), "wb").close()
    expect_error(["--loadEngine=" + path("empty.plan"), *FAST], r"not a kiln plan", status=1)
    os.makedirs(path("plan_dir"), exist_ok=True)
    expect_error(["--loadEngine=" + path("plan_dir"), *FAST], r"plan_dir.*not a regular file", status=1)
    good = path("errors_good.plan")
    run(["--onnx=" + model, "--saveEngine=" + good, "--skipInference", "--device=cpu"])
    with open(good, "rb") as f:
        data = f.read()
    with open(path("truncated.plan"), "wb") as f:
        f.write(data[: len(data) // 2])
    expect_error(["--loadEngine=" + path("truncated.plan"), *FAST], r"truncated", status=1)
    expect_error(["--onnx=" + model, "--exportOutput=" + path("no_such_dir/out.json"), *FAST], r"no_such_dir")


# ---------------------------------------------------------------- runner

def run_suite(namespace, description, what):
    """Runs the test_* functions of `namespace` (a module's globals) against the CLI given by --kiln."""
    global KILN, TMP
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--kiln", required=True, help="path of the kiln CLI")
    ap.add_argument("--filter", default="", help="run only tests whose name contains this")
    args = ap.parse_args()
    KILN = os.path.abspath(args.kiln)
    tests = [(n, f) for n, f in sorted(namespace.items()) if n.startswith("test_") and args.filter in n]
    failed = 0
    with tempfile.TemporaryDirectory(prefix="kiln_cli_") as tmp:
        TMP = tmp
        for name, fn in tests:
            try:
                fn()
                print(f"ok   {name}")
            except Exception:  # report every failing test, not just the first
                failed += 1
                print(f"FAIL {name}\n{traceback.format_exc()}")
    print(f"{len(tests) - failed}/{len(tests)} {what} tests passed")
    return 1 if failed or not tests else 0


def main():
    return run_suite(globals(), __doc__, "CLI")


if __name__ == "__main__":
    sys.exit(main())
