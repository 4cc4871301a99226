#!/usr/bin/env python3
"""ONNX control flow through the kiln CLI on the CPU: If (constant, shape-derived, run-time
condition, branches of different shapes as data-dependent shapes), Loop (constant or shape-derived
trip count, unrolled; run-time trip counts and conditions, nested, TorchScript's: one run-time Loop layer), Scan (unrolled over a static length, else a run-time Loop: axes, directions, state), the sequence
and optional ops (lowered at import), against ONNX Runtime, and FlexAttention (expanded at import,
its score_mod / prob_mod subgraphs inlined) against a NumPy model; plus the errors for what kiln
refuses (loops over the unroll limit, lengths known only at run time).
The CLI helpers are test_cli.py's."""
from __future__ import annotations

import os
import re
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import test_cli as cli  # noqa: E402

FAST = cli.FAST
F = TensorProto.FLOAT


def model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def vi(name, dims, t=F):
    return helper.make_tensor_value_info(name, t, dims)


def save_unchecked(m, name):
    p = cli.path(name)
    onnx.save(m, p)
    return p


def run_vs_ort(model_path, feeds, tag, no_if=False, extra=()):
    """Runs the model with kiln (inputs from .npy) and compares every output with ONNX Runtime."""
    args = ["--onnx=" + model_path, "--exportOutput=" + cli.path(tag + ".json"), "--dumpLayerInfo", *FAST, *extra]
    for name, value in feeds.items():
        np.save(cli.path(f"{tag}_{name}.npy"), value)
        args.append(f"--loadInputs={name}:" + cli.path(f"{tag}_{name}.npy"))
    proc = cli.run(args)
    got = cli.read_outputs(cli.path(tag + ".json"))
    want = cli.ort_outputs(model_path, feeds)
    cli.check(set(got) == set(want), f"outputs {sorted(got)} != {sorted(want)}")
    for name, ref in want.items():
        cli.check(got[name][1].shape == ref.shape, f"{tag} {name}: shape {got[name][1].shape} != {ref.shape}")
        np.testing.assert_allclose(got[name][1], ref, rtol=1e-5, atol=1e-6, err_msg=f"{tag} {name}")
    if no_if:
        cli.check(not re.search(r"\bIf\b", proc.stdout), f"{tag}: an If layer is left in the engine:\n{proc.stdout}")
    return proc


def run_vs_reference(m, feeds, tag, extra=()):
    """Runs model m with kiln and compares its first output with the ONNX reference evaluator (which,
    unlike ONNX Runtime, runs only the taken branch); no If layer may be left in the engine."""
    from onnx.reference import ReferenceEvaluator
    p = cli.save_model(m, tag + ".onnx")
    args = ["--onnx=" + p, "--exportOutput=" + cli.path(tag + ".json"), "--dumpLayerInfo", *FAST, *extra]
    for name, value in feeds.items():
        np.save(cli.path(f"{tag}_{name}.npy"), value)
        args.append(f"--loadInputs={name}:" + cli.path(f"{tag}_{name}.npy"))
    proc = cli.run(args)
    want = ReferenceEvaluator(m).run(None, feeds)[0]
    got = next(iter(cli.read_outputs(cli.path(tag + ".json")).values()))[1]
    cli.check(got.shape == want.shape, f"{tag}: shape {got.shape} != {want.shape}")
    np.testing.assert_allclose(got, want, rtol=1e-6)
    cli.check(not re.search(r"\bIf\b", proc.stdout), f"{tag}: an If layer is left in the engine:\n{proc.stdout}")


def branch(nodes, outputs, inits=()):
    return helper.make_graph(nodes, "branch", [], outputs, list(inits))


def if_node(cond, then_g, else_g, outs, name="if"):
    return helper.make_node("If", [cond], outs, name=name, then_branch=then_g, else_branch=else_g)


# ---------------------------------------------------------------- If

def test_constant_if_inlines_taken_branch():
    # then: x + c (c a branch initializer), else: x * y (outer-scope tensors); cond an initializer.
    for flag in (True, False):
        then_g = branch([helper.make_node("Add", ["x", "c"], ["t"])], [vi("t", [2, 3])],
                        [numpy_helper.from_array(np.full((2, 3), 1.5, np.float32), "c")])
        else_g = branch([helper.make_node("Mul", ["x", "y"], ["e"])], [vi("e", [2, 3])])
        m = model([if_node("cond", then_g, else_g, ["o"]), helper.make_node("Relu", ["o"], ["z"])],
                  [vi("x", [2, 3]), vi("y", [2, 3])], [vi("z", [2, 3])],
                  [numpy_helper.from_array(np.array(flag), "cond")])
        p = cli.save_model(m, f"const_if_{flag}.onnx")
        rng = np.random.default_rng(1)
        feeds = {"x": rng.uniform(-2, 2, (2, 3)).astype(np.float32), "y": rng.uniform(-2, 2, (2, 3)).astype(np.float32)}
        run_vs_ort(p, feeds, f"const_if_{flag}", no_if=True)


def shape_if_model():
    """`if x.shape[1] > 4: x.reshape(3, 4) else: x.reshape(5, -1)`: the else-branch is invalid for
    x [2, 6], so it must never be inferred; nested: the then-branch holds another If on x.shape[0]."""
    shape_const = lambda name, v: helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(v, np.int64)))
    inner_then = branch([helper.make_node("Neg", ["r"], ["n"])], [vi("n", ["r0", "r1"])])
    inner_else = branch([helper.make_node("Abs", ["r"], ["a"])], [vi("a", ["r0", "r1"])])
    then_g = branch([shape_const("s34", [3, 4]), helper.make_node("Reshape", ["x", "s34"], ["r"]),
                     helper.make_node("Equal", ["d0", "two"], ["is2"]),
                     if_node("is2", inner_then, inner_else, ["ri"], name="inner_if")], [vi("ri", ["r0", "r1"])])
    else_g = branch([shape_const("s5", [5, -1]), helper.make_node("Reshape", ["x", "s5"], ["q"])], [vi("q", ["r0", "r1"])])
    nodes = [helper.make_node("Shape", ["x"], ["shp"]),
             helper.make_node("Gather", ["shp", "one"], ["d1"], axis=0),
             helper.make_node("Gather", ["shp", "zero"], ["d0"], axis=0),
             helper.make_node("Greater", ["d1", "four"], ["big"]),
             if_node("big", then_g, else_g, ["o"])]
    inits = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in [("one", 1), ("zero", 0), ("four", 4), ("two", 2)]]
    return model(nodes, [vi("x", [2, 6])], [vi("o", ["r0", "r1"])], inits)


def test_shape_derived_if_never_infers_the_untaken_branch():
    # ONNX Runtime refuses this model at load (its static inference tries the invalid else-branch).
    x = np.random.default_rng(2).uniform(-2, 2, (2, 6)).astype(np.float32)
    run_vs_reference(shape_if_model(), {"x": x}, "shape_if")


def dynamic_batch_shape_if_model():
    """x [N, 6] with a dynamic batch: `if x.shape[1] > 4: x.reshape(-1, 3) else: x.reshape(5, -1)`.
    Shape(x) has no value (N is dynamic) but the gathered dim 1 is static, so the If is settled at
    build time; the branches' shapes differ, which a run-time If could not take."""
    shape_const = lambda name, v: helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(v, np.int64)))
    then_g = branch([shape_const("s3", [-1, 3]), helper.make_node("Reshape", ["x", "s3"], ["r"])], [vi("r", ["r0", "r1"])])
    else_g = branch([shape_const("s5", [5, -1]), helper.make_node("Reshape", ["x", "s5"], ["q"])], [vi("q", ["r0", "r1"])])
    nodes = [helper.make_node("Shape", ["x"], ["shp"]),
             helper.make_node("Gather", ["shp", "one"], ["d1"], axis=0),
             helper.make_node("Greater", ["d1", "four"], ["big"]),
             if_node("big", then_g, else_g, ["o"])]
    inits = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in [("one", 1), ("four", 4)]]
    return model(nodes, [vi("x", ["N", 6])], [vi("o", ["r0", "r1"])], inits)


def test_shape_derived_if_under_a_dynamic_batch():
    x = np.random.default_rng(4).uniform(-2, 2, (3, 6)).astype(np.float32)
    run_vs_reference(dynamic_batch_shape_if_model(), {"x": x}, "dyn_shape_if",
                     ["--minShapes=x:1x6", "--optShapes=x:2x6", "--maxShapes=x:4x6", "--shapes=x:3x6"])


def test_constant_if_with_two_outputs():
    """A build-time If with two outputs read by one Concat (AffineGrid's expansion splits `size`
    this way): every output of the taken branch survives the inlining."""
    I64 = TensorProto.INT64
    then_g = branch([helper.make_node("Split", ["size"], ["a_t", "b_t"], num_outputs=2)], [vi("a_t", [1], I64), vi("b_t", [1], I64)])
    else_g = branch([helper.make_node("Identity", ["size"], ["a_e"]), helper.make_node("Neg", ["size"], ["b_e"])],
                    [vi("a_e", [2], I64), vi("b_e", [2], I64)])
    m = model([helper.make_node("Size", ["size"], ["n"]), helper.make_node("Equal", ["n", "two"], ["c"]),
               if_node("c", then_g, else_g, ["A", "B"]), helper.make_node("Concat", ["A", "B"], ["y"], axis=0)],
              [vi("size", [2], I64)], [vi("y", ["k"], I64)], [numpy_helper.from_array(np.array(2, np.int64), "two")], opset=18)
    run_vs_reference(m, {"size": np.array([3, 5], np.int64)}, "if_two_outputs")


def runtime_if_model():
    then_g = branch([helper.make_node("Sigmoid", ["x"], ["t"])], [vi("t", [2, 3])])
    else_g = branch([helper.make_node("Mul", ["x", "k"], ["e"])], [vi("e", [2, 3])],
                    [numpy_helper.from_array(np.full((3,), -3.0, np.float32), "k")])
    return model([if_node("cond", then_g, else_g, ["o"]), helper.make_node("Add", ["o", "x"], ["z"])],
                 [vi("x", [2, 3]), vi("cond", [], TensorProto.BOOL)], [vi("z", [2, 3])])


def test_runtime_if_selects_per_run():
    p = cli.save_model(runtime_if_model(), "runtime_if.onnx")
    x = np.random.default_rng(3).uniform(-2, 2, (2, 3)).astype(np.float32)
    for flag in (True, False):
        run_vs_ort(p, {"x": x, "cond": np.array(flag)}, f"runtime_if_{flag}")


def test_runtime_if_with_differing_shapes_selects_per_run():
    """The branches give [2, 3] and [1, 1]: the output's shape is data-dependent (the engine reads the
    condition back while running; the CLI receives the output through its output allocator)."""
    then_g = branch([helper.make_node("Identity", ["x"], ["t"])], [vi("t", [2, 3])])
    else_g = branch([helper.make_node("ReduceSum", ["x"], ["e"], keepdims=1)], [vi("e", [1, 1])])
    m = model([if_node("cond", then_g, else_g, ["o"])], [vi("x", [2, 3]), vi("cond", [], TensorProto.BOOL)], [vi("o", ["r0", "r1"])])
    p = cli.save_model(m, "runtime_if_shapes.onnx")
    x = np.random.default_rng(4).uniform(-2, 2, (2, 3)).astype(np.float32)
    for flag in (True, False):
        run_vs_ort(p, {"x": x, "cond": np.array(flag)}, f"runtime_if_shapes_{flag}")


def test_if_with_mismatched_branch_outputs_is_refused():
    then_g = branch([helper.make_node("Identity", ["x"], ["t"]), helper.make_node("Neg", ["x"], ["t2"])],
                    [vi("t", [2]), vi("t2", [2])])
    else_g = branch([helper.make_node("Identity", ["x"], ["e"])], [vi("e", [2])])
    m = model([if_node("cond", then_g, else_g, ["o"])], [vi("x", [2]), vi("cond", [], TensorProto.BOOL)], [vi("o", [2])])
    p = save_unchecked(m, "if_mismatch.onnx")
    cli.expect_error(["--onnx=" + p, *FAST], r"If node 'if' has 1 outputs but its then-branch has 2 and its else-branch 1")


# ---------------------------------------------------------------- Loop

def loop_model(trips, opset=17):
    """acc_{i+1} = acc_i + x * i (loop-carried), scan outputs Relu(acc_{i+1}) and i*2 (int64)."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Cast", ["i"], ["fi"], to=F),
         helper.make_node("Mul", ["x", "fi"], ["xi"]),
         helper.make_node("Add", ["acc_in", "xi"], ["acc_out"]),
         helper.make_node("Sub", ["acc_out", "bias"], ["shifted"]),
         helper.make_node("Relu", ["shifted"], ["scan"]),
         helper.make_node("Mul", ["i", "two"], ["i2"])],
        "body", [vi("i", [], TensorProto.INT64), vi("cond_in", [], TensorProto.BOOL), vi("acc_in", [2, 3])],
        [vi("cond_out", [], TensorProto.BOOL), vi("acc_out", [2, 3]), vi("scan", [2, 3]), vi("i2", [], TensorProto.INT64)],
        [numpy_helper.from_array(np.array(2, np.int64), "two"), numpy_helper.from_array(np.float32(1.0), "bias")])
    nodes = [helper.make_node("Constant", [], ["M"], value=numpy_helper.from_array(np.array(trips, np.int64))),
             helper.make_node("Loop", ["M", "", "acc0"], ["acc", "scans", "iters"], name="loop", body=body),
             helper.make_node("Cast", ["iters"], ["iters_f"], to=F)]
    return model(nodes, [vi("x", [2, 3]), vi("acc0", [2, 3])],
                 [vi("acc", [2, 3]), vi("scans", [trips, 2, 3]), vi("iters_f", [trips])], opset=opset)


def test_loop_with_constant_trip_count_is_unrolled():
    rng = np.random.default_rng(4)
    feeds = {"x": rng.uniform(-1, 1, (2, 3)).astype(np.float32), "acc0": rng.uniform(-1, 1, (2, 3)).astype(np.float32)}
    for opset in (11, 17):  # Unsqueeze takes its axes as an attribute before opset 13
        p = cli.save_model(loop_model(5, opset), f"loop_{opset}.onnx")
        proc = run_vs_ort(p, feeds, f"loop_{opset}")
        cli.check(not re.search(r"\bLoop\b", proc.stdout), f"a Loop layer is left:\n{proc.stdout}")


def test_loop_whose_condition_is_an_outer_constant_is_unrolled():
    """torch's exporter passes the Loop's constant cond into the body from the enclosing scope
    (body: cond_out = Identity(go), go an outer Constant true; torchvision's MViT-v2 pools this way):
    the condition stays true, so the loop unrolls (it ran as a run-time Loop before)."""
    rng = np.random.default_rng(6)
    feeds = {"x": rng.uniform(-1, 1, (2, 3)).astype(np.float32), "acc0": rng.uniform(-1, 1, (2, 3)).astype(np.float32)}
    m = loop_model(4)
    body = m.graph.node[1].attribute[0].g
    body.node[0].input[0] = "go"  # the outer constant, not the body's cond_in
    m.graph.node.insert(0, helper.make_node("Constant", [], ["go"], value=numpy_helper.from_array(np.array(True))))
    m.graph.node[2].input[1] = "go"
    proc = run_vs_ort(cli.save_model(m, "loop_outer_cond.onnx"), feeds, "loop_outer_cond")
    cli.check(not re.search(r"\bLoop\b", proc.stdout), f"a Loop layer is left:\n{proc.stdout}")


def test_loop_slicing_with_scalar_bounds_as_torch_exports_it():
    """torchvision's MViT-v2 export: a Loop with a constant trip count whose body slices x between
    Gather(bounds, i) and Gather(bounds, i + 1) (scalar starts / ends / axes, which ONNX Runtime
    refuses and PyTorch runs) into a sequence; kiln unrolls it and takes a scalar as one value.
    Expected: the same slices by NumPy."""
    I = TensorProto.INT64
    body = helper.make_graph(
        [helper.make_node("Identity", ["go"], ["cond_out"]),
         helper.make_node("Gather", ["bounds", "i"], ["s"]),
         helper.make_node("Add", ["i", "one"], ["i1"]),
         helper.make_node("Gather", ["bounds", "i1"], ["e"]),
         helper.make_node("Slice", ["x", "s", "e", "axis"], ["part"]),
         helper.make_node("Mul", ["part", "scale"], ["scaled"]),
         helper.make_node("SequenceInsert", ["seq_in", "scaled"], ["seq_out"])],
        "body", [vi("i", [], I), vi("cond_in", [], TensorProto.BOOL), helper.make_tensor_sequence_value_info("seq_in", F, None)],
        [vi("cond_out", [], TensorProto.BOOL), helper.make_tensor_sequence_value_info("seq_out", F, None)],
        [numpy_helper.from_array(np.array(1, np.int64), "one"), numpy_helper.from_array(np.array(1, np.int64), "axis")])
    const = lambda name, v: helper.make_node("Constant", [], [name], value=numpy_helper.from_array(v))
    nodes = [const("go", np.array(True)), const("M", np.array(3, np.int64)), const("bounds", np.array([0, 1, 4, 6], np.int64)),
             const("scale", np.array([2.0], np.float32)),
             helper.make_node("SequenceEmpty", [], ["seq0"], dtype=F),
             helper.make_node("Loop", ["M", "go", "seq0"], ["parts"], name="pool", body=body),
             helper.make_node("ConcatFromSequence", ["parts"], ["y"], axis=1)]
    m = model(nodes, [vi("x", [2, 6])], [vi("y", [2, 6])])
    x = np.arange(12, dtype=np.float32).reshape(2, 6) - 5
    np.save(cli.path("scalar_slice_x.npy"), x)
    proc = cli.run(["--onnx=" + save_unchecked(m, "scalar_slice.onnx"), "--loadInputs=x:" + cli.path("scalar_slice_x.npy"),
                    "--exportOutput=" + cli.path("scalar_slice.json"), "--dumpLayerInfo", *FAST])
    cli.check(not re.search(r"\bLoop\b", proc.stdout), f"a Loop layer is left:\n{proc.stdout}")
    want = np.concatenate([x[:, 0:1] * 2, x[:, 1:4] * 2, x[:, 4:6] * 2], axis=1)
    np.testing.assert_array_equal(cli.read_outputs(cli.path("scalar_slice.json"))["y"][1], want)


def run_loop_vs_ort(model_path, feeds, tag, extra=()):
    """run_vs_ort, and the engine must hold a run-time Loop layer."""
    proc = run_vs_ort(model_path, feeds, tag, extra=extra)
    cli.check(re.search(r"\bLoop\b", proc.stdout), f"{tag}: no run-time Loop layer:\n{proc.stdout}")


def with_dynamic_scan_rows(m, name):
    """loop_model's scan outputs with a symbolic first dim (their row count is known at run time)."""
    for o in m.graph.output[1:]:
        o.type.tensor_type.shape.dim[0].dim_param = name
    return m


def test_loop_over_the_unroll_limit_runs_at_run_time():
    """100 iterations (over the unroll limit of 64): one run-time Loop layer; its body reads the
    outer-scope tensor x."""
    rng = np.random.default_rng(6)
    feeds = {"x": rng.uniform(-1, 1, (2, 3)).astype(np.float32), "acc0": rng.uniform(-1, 1, (2, 3)).astype(np.float32)}
    run_loop_vs_ort(cli.save_model(loop_model(100), "loop_100.onnx"), feeds, "loop_100")


def data_dependent_condition_model():
    """Runs while max(acc) < 1 (at most 10 times): the iteration count, and so the scan outputs'
    length, depend on the data."""
    m = loop_model(10)
    body = m.graph.node[1].attribute[0].g
    body.node[0].CopyFrom(helper.make_node("ReduceMax", ["acc_in"], ["mx"], keepdims=0))
    body.node.append(helper.make_node("Less", ["mx", "bias"], ["cond_out"]))
    return with_dynamic_scan_rows(m, "iterations")


def test_loop_with_data_dependent_condition_runs_at_run_time():
    rng = np.random.default_rng(7)
    p = save_unchecked(data_dependent_condition_model(), "loop_cond.onnx")
    for tag, scale in (("few", 0.5), ("many", 0.05)):  # fewer iterations when acc grows fast
        feeds = {"x": rng.uniform(0, scale, (2, 3)).astype(np.float32), "acc0": rng.uniform(-1, 0, (2, 3)).astype(np.float32)}
        run_loop_vs_ort(p, feeds, f"loop_cond_{tag}")


def run_time_trip_count_model():
    """M is a graph input: the loop runs M times, its scan outputs have M rows."""
    m = loop_model(3)
    del m.graph.node[0]  # the Constant M
    m.graph.input.append(vi("M", [], TensorProto.INT64))
    return with_dynamic_scan_rows(m, "M")


def test_loop_with_run_time_trip_count():
    rng = np.random.default_rng(8)
    p = save_unchecked(run_time_trip_count_model(), "loop_m.onnx")
    for trips in (0, 1, 7):
        feeds = {"x": rng.uniform(-1, 1, (2, 3)).astype(np.float32), "acc0": rng.uniform(-1, 1, (2, 3)).astype(np.float32),
                 "M": np.array(trips, np.int64)}
        run_loop_vs_ort(p, feeds, f"loop_m{trips}")


def test_while_loop_without_trip_count():
    """No M: y = y * 2 while sum(y) < limit, the count of doublings as a loop-carried int64."""
    body = helper.make_graph(
        [helper.make_node("Mul", ["y_in", "two"], ["y_out"]),
         helper.make_node("Add", ["n_in", "one"], ["n_out"]),
         helper.make_node("ReduceSum", ["y_out"], ["s"], keepdims=0),
         helper.make_node("Less", ["s", "limit"], ["cond_out"])],
        "body", [vi("i", [], TensorProto.INT64), vi("cond_in", [], TensorProto.BOOL), vi("y_in", [3]),
                 vi("n_in", [], TensorProto.INT64)],
        [vi("cond_out", [], TensorProto.BOOL), vi("y_out", [3]), vi("n_out", [], TensorProto.INT64)],
        [numpy_helper.from_array(np.float32(2), "two"), numpy_helper.from_array(np.array(1, np.int64), "one")])
    nodes = [helper.make_node("ReduceSum", ["y0"], ["s0"], keepdims=0),
             helper.make_node("Less", ["s0", "limit"], ["go"]),
             helper.make_node("Loop", ["", "go", "y0", "n0"], ["y", "n"], name="while", body=body)]
    m = model(nodes, [vi("y0", [3]), vi("limit", [])], [vi("y", [3]), vi("n", [], TensorProto.INT64)],
              [numpy_helper.from_array(np.array(0, np.int64), "n0")])
    p = cli.save_model(m, "while.onnx")
    for tag, limit in (("none", -1.0), ("some", 1000.0)):  # the condition is false from the start, then true for a while
        feeds = {"y0": np.array([0.5, 0.25, 1.0], np.float32), "limit": np.array(limit, np.float32)}
        run_loop_vs_ort(p, feeds, f"while_{tag}")


def test_nested_run_time_loops():
    """An outer loop over a run-time M whose body holds an inner loop over a run-time count (k, a
    tensor of the outermost scope): acc += x * k per outer iteration, in k inner steps."""
    inner = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("Add", ["a_in", "x"], ["a_out"])],
        "inner", [vi("j", [], TensorProto.INT64), vi("c_in", [], TensorProto.BOOL), vi("a_in", [2, 3])],
        [vi("c_out", [], TensorProto.BOOL), vi("a_out", [2, 3])])
    outer = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Loop", ["k", "", "acc_in"], ["acc_out"], name="inner", body=inner),
         helper.make_node("Identity", ["acc_out"], ["trace"])],
        "outer", [vi("i", [], TensorProto.INT64), vi("cond_in", [], TensorProto.BOOL), vi("acc_in", [2, 3])],
        [vi("cond_out", [], TensorProto.BOOL), vi("acc_out", [2, 3]), vi("trace", [2, 3])])
    nodes = [helper.make_node("Loop", ["M", "", "acc0"], ["acc", "traces"], name="outer", body=outer)]
    m = model(nodes, [vi("x", [2, 3]), vi("acc0", [2, 3]), vi("M", [], TensorProto.INT64), vi("k", [], TensorProto.INT64)],
              [vi("acc", [2, 3]), vi("traces", ["M", 2, 3])])
    rng = np.random.default_rng(9)
    feeds = {"x": rng.uniform(-1, 1, (2, 3)).astype(np.float32), "acc0": rng.uniform(-1, 1, (2, 3)).astype(np.float32),
             "M": np.array(4, np.int64), "k": np.array(3, np.int64)}
    run_loop_vs_ort(cli.save_model(m, "nested_loops.onnx"), feeds, "nested_loops")


def test_if_in_a_run_time_loop_runs_only_the_taken_branch():
    """acc += table[i] while i < 2, else acc += 1: the then-branch's Gather is out of range from
    i = 2 on, where the branch is not taken (ONNX Runtime evaluates If lazily too)."""
    then_g = helper.make_graph([helper.make_node("Gather", ["table", "i"], ["t_out"], axis=0)], "then", [],
                               [vi("t_out", [3])])
    else_g = helper.make_graph([helper.make_node("Identity", ["ones"], ["e_out"])], "else", [], [vi("e_out", [3])])
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Less", ["i", "two"], ["small"]),
         helper.make_node("If", ["small"], ["step"], then_branch=then_g, else_branch=else_g),
         helper.make_node("Add", ["acc_in", "step"], ["acc_out"])],
        "body", [vi("i", [], TensorProto.INT64), vi("cond_in", [], TensorProto.BOOL), vi("acc_in", [3])],
        [vi("cond_out", [], TensorProto.BOOL), vi("acc_out", [3])],
        [numpy_helper.from_array(np.array(2, np.int64), "two"), numpy_helper.from_array(np.ones(3, np.float32), "ones")])
    m = model([helper.make_node("Loop", ["M", "", "acc0"], ["acc"], name="loop", body=body)],
              [vi("acc0", [3]), vi("M", [], TensorProto.INT64), vi("table", [2, 3])], [vi("acc", [3])])
    rng = np.random.default_rng(11)
    feeds = {"acc0": rng.uniform(-1, 1, 3).astype(np.float32), "M": np.array(5, np.int64),
             "table": rng.uniform(-1, 1, (2, 3)).astype(np.float32)}
    run_loop_vs_ort(cli.save_model(m, "loop_if.onnx"), feeds, "loop_if")


def appending_loop_model(start_empty=True, output_sequence=False):
    """rows.append(acc) in a loop over a run-time M: a sequence carried from SequenceEmpty, read after
    the loop by ConcatFromSequence (concatenated and stacked), SequenceLength and SequenceAt."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["acc_in", "x"], ["acc_out"]),
         helper.make_node("SequenceInsert", ["rows_in", "acc_out"], ["rows_out"])],
        "body", [vi("i", [], TensorProto.INT64), vi("cond_in", [], TensorProto.BOOL), vi("acc_in", [2, 3]),
                 helper.make_tensor_sequence_value_info("rows_in", F, None)],
        [vi("cond_out", [], TensorProto.BOOL), vi("acc_out", [2, 3]), helper.make_tensor_sequence_value_info("rows_out", F, None)])
    start = (helper.make_node("SequenceEmpty", [], ["rows0"], dtype=F) if start_empty
             else helper.make_node("SequenceConstruct", ["x"], ["rows0"]))
    nodes = [start, helper.make_node("Loop", ["M", "", "acc0", "rows0"], ["acc", "rows"], name="loop", body=body)]
    outputs = [vi("acc", [2, 3])]
    if output_sequence:
        outputs.append(helper.make_tensor_sequence_value_info("rows", F, None))
    else:
        nodes += [helper.make_node("ConcatFromSequence", ["rows"], ["cat"], axis=0),
                  helper.make_node("ConcatFromSequence", ["rows"], ["stack"], axis=0, new_axis=1),
                  helper.make_node("SequenceLength", ["rows"], ["count"]),
                  helper.make_node("SequenceAt", ["rows", "last"], ["final_row"])]
        outputs += [vi("cat", ["n", 3]), vi("stack", ["M", 2, 3]), vi("count", [], TensorProto.INT64), vi("final_row", [2, 3])]
    return model(nodes, [vi("x", [2, 3]), vi("acc0", [2, 3]), vi("M", [], TensorProto.INT64)], outputs,
                 [numpy_helper.from_array(np.array(-1, np.int64), "last")])


def test_loop_appending_to_a_list_runs_at_run_time():
    p = save_unchecked(appending_loop_model(), "loop_append.onnx")
    rng = np.random.default_rng(12)
    for trips in (1, 6):
        feeds = {"x": rng.uniform(-1, 1, (2, 3)).astype(np.float32), "acc0": rng.uniform(-1, 1, (2, 3)).astype(np.float32),
                 "M": np.array(trips, np.int64)}
        run_loop_vs_ort(p, feeds, f"loop_append_{trips}")


def test_torch_export_embedding_bag_runs_at_run_time():
    """data/embedding_bag_dynamo.onnx: torch.onnx.export(dynamo=True, opset 18) of
    nn.EmbeddingBag(10, 4, mode="mean") on [[1, 2, 3], [4, 5, 9]] (random weights): a Loop over the
    bags, appending each bag's row to a sequence, then ConcatFromSequence."""
    p = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "embedding_bag_dynamo.onnx")
    run_loop_vs_ort(p, {"i0": np.array([[1, 2, 3], [4, 5, 9]], np.int64)}, "embedding_bag")


def test_loop_appending_to_a_non_empty_list_is_refused():
    p = save_unchecked(appending_loop_model(start_empty=False), "loop_append_nonempty.onnx")
    cli.expect_error(["--onnx=" + p, *FAST], r"loop.*sequence 'rows0' does not start empty")


def test_appended_list_as_a_graph_output_is_refused():
    p = save_unchecked(appending_loop_model(output_sequence=True), "loop_append_output.onnx")
    cli.expect_error(["--onnx=" + p, *FAST], r"graph output 'rows' is a sequence whose length is known only at run time")


def test_torchscript_loop_runs_at_run_time():
    """A loop exported from TorchScript (data/torchscript_loop.onnx: torch.jit.script of
    `for i in range(int(n)): y = y * 0.5 + tanh(y) + i`, torch.onnx.export(dynamo=False, opset 17)):
    its trip count is the graph input n."""
    p = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "torchscript_loop.onnx")
    rng = np.random.default_rng(10)
    for n in (0, 5):
        feeds = {"x": rng.standard_normal((2, 3)).astype(np.float32), "n": np.array(n, np.int64)}
        run_loop_vs_ort(p, feeds, f"torchscript_loop_{n}")


def test_loop_that_never_stops_is_refused():
    """A while loop whose condition stays true ends with an error at kiln's iteration limit, not a hang."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("Identity", ["y_in"], ["y_out"])],
        "body", [vi("i", [], TensorProto.INT64), vi("cond_in", [], TensorProto.BOOL), vi("y_in", [1])],
        [vi("cond_out", [], TensorProto.BOOL), vi("y_out", [1])])
    m = model([helper.make_node("Loop", ["", "go", "y0"], ["y"], name="forever", body=body)],
              [vi("y0", [1]), vi("go", [], TensorProto.BOOL)], [vi("y", [1])])
    p = cli.save_model(m, "forever.onnx")
    np.save(cli.path("forever_y0.npy"), np.zeros(1, np.float32))
    np.save(cli.path("forever_go.npy"), np.array(True))
    cli.expect_error(["--onnx=" + p, "--loadInputs=y0:" + cli.path("forever_y0.npy") + ",go:" + cli.path("forever_go.npy"),
                      *FAST], r"forever.*iterations without its condition turning false")


def test_loop_with_shape_derived_trip_count_is_unrolled():
    """M = x.shape[0], known only by shape inference at import (Shape -> Gather)."""
    m = loop_model(4)
    m.graph.node[0].CopyFrom(helper.make_node("Shape", ["x4"], ["shp"]))
    m.graph.node.insert(1, helper.make_node("Gather", ["shp", "zero"], ["M"]))
    m.graph.initializer.append(numpy_helper.from_array(np.array(0, np.int64), "zero"))
    m.graph.input.append(vi("x4", [4, 1]))
    rng = np.random.default_rng(5)
    feeds = {"x": rng.uniform(-1, 1, (2, 3)).astype(np.float32), "acc0": rng.uniform(-1, 1, (2, 3)).astype(np.float32),
             "x4": np.zeros((4, 1), np.float32)}
    proc = run_vs_ort(cli.save_model(m, "loop_shape.onnx"), feeds, "loop_shape")
    cli.check(not re.search(r"\bLoop\b", proc.stdout), f"a Loop layer is left:\n{proc.stdout}")


# ---------------------------------------------------------------- Scan

def scan_model(opset=17, length=4, dynamic=False):
    """Two states (a running sum and a running max) over two scan inputs: xs read along axis 1 in
    reverse, ys along axis 0 forward; outputs stacked along axis -1 (reversed) and axis 0. The
    scan input xs comes through a Transpose, so its length is known only by shape inference."""
    body = helper.make_graph(
        [helper.make_node("Add", ["sum_in", "x_t"], ["sum_out"]),
         helper.make_node("Max", ["max_in", "y_t"], ["max_out"]),
         helper.make_node("Mul", ["sum_out", "max_out"], ["prod"]),
         helper.make_node("Sub", ["x_t", "y_t"], ["diff"])],
        "body", [vi("sum_in", [3]), vi("max_in", [3]), vi("x_t", [3]), vi("y_t", [3])],
        [vi("sum_out", [3]), vi("max_out", [3]), vi("prod", [3]), vi("diff", [3])])
    n = "n" if dynamic else length
    nodes = [helper.make_node("Transpose", ["x"], ["xs"], perm=[1, 0]),
             helper.make_node("Scan", ["s0", "m0", "xs", "ys"], ["s", "m", "prods", "diffs"], name="scan", body=body,
                              num_scan_inputs=2, scan_input_axes=[1, 0], scan_input_directions=[1, 0],
                              scan_output_axes=[-1, 0], scan_output_directions=[1, 0])]
    return model(nodes, [vi("s0", [3]), vi("m0", [3]), vi("x", [n, 3]), vi("ys", [n, 3])],
                 [vi("s", [3]), vi("m", [3]), vi("prods", [3, n]), vi("diffs", [n, 3])], opset=opset)


def scan_feeds(length=4):
    rng = np.random.default_rng(6)
    return {k: rng.uniform(-1, 1, shape).astype(np.float32)
            for k, shape in (("s0", (3,)), ("m0", (3,)), ("x", (length, 3)), ("ys", (length, 3)))}


def test_scan_with_axes_directions_and_state_is_unrolled():
    for opset in (11, 17):  # Unsqueeze takes its axes as an attribute before opset 13
        proc = run_vs_ort(cli.save_model(scan_model(opset), f"scan_{opset}.onnx"), scan_feeds(), f"scan_{opset}")
        cli.check(not re.search(r"\bScan\b", proc.stdout), f"a Scan layer is left:\n{proc.stdout}")


def test_scan_of_unknown_length_runs_at_run_time():
    """The length is the dynamic dim n: a run-time Loop (slices gathered per iteration, reverse
    directions and the output axis -1 included), for several lengths of one model."""
    p = cli.save_model(scan_model(dynamic=True), "scan_dynamic.onnx")
    for length in (1, 4, 9):
        run_loop_vs_ort(p, scan_feeds(length), f"scan_dynamic_{length}", extra=[f"--shapes=x:{length}x3,ys:{length}x3"])


def test_scan_over_the_unroll_limit_runs_at_run_time():
    run_loop_vs_ort(cli.save_model(scan_model(length=65), "scan_65.onnx"), scan_feeds(65), "scan_65")


# ---------------------------------------------------------------- sequences

def test_sequence_ops_are_lowered_at_import():
    """SplitToSequence (sizes, and one element per index), SequenceInsert/Erase/At with constant
    positions (negative too), SequenceLength, SequenceAt with a run-time position,
    ConcatFromSequence with and without a new axis, SequenceMap over a sequence and a tensor."""
    I = TensorProto.INT64
    c = lambda name, v: helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(v, np.int64)))
    map_body = helper.make_graph([helper.make_node("Mul", ["e", "k"], ["o"])], "map", [vi("e", None), vi("k", None)],
                                 [vi("o", None)])
    nodes = [c("sizes", [1, 3]), c("minus1", -1), c("one", 1),
             helper.make_node("SplitToSequence", ["x", "sizes"], ["parts"], axis=1),           # [2,1], [2,3]
             helper.make_node("SplitToSequence", ["x"], ["rows"], axis=0, keepdims=0),         # [4], [4]
             helper.make_node("SequenceAt", ["parts", "minus1"], ["last"]),                    # [2,3]
             helper.make_node("SequenceInsert", ["rows", "w", "one"], ["rows3"]),               # r0, w, r1
             helper.make_node("SequenceErase", ["rows3", "minus1"], ["rows2"]),                # r0, w
             helper.make_node("SequenceLength", ["rows3"], ["n"]),
             helper.make_node("ConcatFromSequence", ["rows3"], ["stacked"], axis=-1, new_axis=1),  # [4,3]
             helper.make_node("ConcatFromSequence", ["rows2"], ["joined"], axis=0),              # [8]
             helper.make_node("SequenceAt", ["rows3", "pos"], ["picked"]),                      # run-time position
             helper.make_node("SequenceMap", ["rows2", "w"], ["scaled"], body=map_body),
             helper.make_node("ConcatFromSequence", ["scaled"], ["scaled_cat"], axis=0)]
    m = model(nodes, [vi("x", [2, 4]), vi("w", [4]), vi("pos", [], I)],
              [vi("last", [2, 3]), vi("n", [], I), vi("stacked", [4, 3]), vi("joined", [8]), vi("picked", [4]),
               vi("scaled_cat", [8])])
    rng = np.random.default_rng(7)
    feeds = {"x": rng.uniform(-1, 1, (2, 4)).astype(np.float32), "w": rng.uniform(-1, 1, (4,)).astype(np.float32),
             "pos": np.array(-2, np.int64)}
    run_vs_ort(cli.save_model(m, "sequences.onnx"), feeds, "sequences")


def test_sequence_position_known_only_at_run_time_is_refused():
    nodes = [helper.make_node("SplitToSequence", ["x"], ["rows"], axis=0, keepdims=0),
             helper.make_node("SequenceErase", ["rows", "pos"], ["rest"]),
             helper.make_node("ConcatFromSequence", ["rest"], ["y"], axis=0)]
    m = model(nodes, [vi("x", [2, 4]), vi("pos", [], TensorProto.INT64)], [vi("y", [4])])
    p = cli.save_model(m, "sequence_runtime_pos.onnx")
    cli.expect_error(["--onnx=" + p, *FAST], r"SequenceErase node .*the position 'pos' is known only at run time")


# ---------------------------------------------------------------- optionals and FlexAttention

def test_optional_ops_are_lowered_at_import():
    """Optional(x) is x; OptionalGetElement gives it back; OptionalHasElement is true for a tensor
    and false for an empty Optional or an omitted input."""
    B = TensorProto.BOOL
    opt_type = helper.make_optional_type_proto(helper.make_tensor_type_proto(F, [2, 3]))
    nodes = [helper.make_node("Optional", ["x"], ["ox"]),
             helper.make_node("OptionalGetElement", ["ox"], ["got"]),
             helper.make_node("Relu", ["got"], ["y"]),
             helper.make_node("OptionalHasElement", ["ox"], ["has_x"]),
             helper.make_node("Optional", [], ["empty"], type=opt_type.optional_type.elem_type),
             helper.make_node("OptionalHasElement", ["empty"], ["has_empty"]),
             helper.make_node("OptionalHasElement", [""], ["has_omitted"])]
    m = model(nodes, [vi("x", [2, 3])], [vi("y", [2, 3]), vi("has_x", [], B), vi("has_empty", [], B),
                                         vi("has_omitted", [], B)], opset=18)
    feeds = {"x": np.random.default_rng(3).uniform(-1, 1, (2, 3)).astype(np.float32)}
    run_vs_ort(cli.save_model(m, "optionals.onnx"), feeds, "optionals")


def test_optional_get_element_of_an_empty_optional_is_refused():
    opt_type = helper.make_optional_type_proto(helper.make_tensor_type_proto(F, [2]))
    nodes = [helper.make_node("Optional", [], ["empty"], type=opt_type.optional_type.elem_type),
             helper.make_node("OptionalGetElement", ["empty"], ["y"])]
    m = model(nodes, [], [vi("y", [2])], opset=18)
    p = save_unchecked(m, "optional_empty_get.onnx")
    cli.expect_error(["--onnx=" + p, *FAST], r"OptionalGetElement node .*the optional is empty")


def flex_attention_numpy(q, k, v, scale=None, score_mod=None, prob_mod=None):
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = (q.astype(np.float64) @ np.swapaxes(k, -1, -2).astype(np.float64)) * scale
    s = score_mod(s) if score_mod else s
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    p = prob_mod(p) if prob_mod else p
    return (p @ v.astype(np.float64)).astype(q.dtype)


def test_flex_attention_is_expanded_at_import():
    """GQA (4 query heads on 2 kv heads), an explicit scale, a causal score_mod reading an outer
    tensor, a prob_mod, and a dynamic batch (the expansion reads shapes with Shape ops)."""
    L, S, E = 5, 6, 8
    gs = lambda nodes, inits=(): helper.make_graph(nodes, "mod", [vi("s_in", None)], [vi("s_out", None)], list(inits))
    score_mod = gs([helper.make_node("Add", ["s_in", "mask"], ["s_out"])])  # `mask` is the main graph's
    prob_mod = gs([helper.make_node("Mul", ["s_in", "half"], ["s_out"])],
                  [numpy_helper.from_array(np.array(0.5, np.float32), "half")])
    mask = np.triu(np.full((L, S), -np.inf, np.float32), k=2)
    node = helper.make_node("FlexAttention", ["q", "k", "v"], ["y"], domain="ai.onnx.preview", scale=0.3,
                            score_mod=score_mod, prob_mod=prob_mod)
    g = helper.make_graph([node], "g", [vi("q", ["batch", 4, L, E]), vi("k", ["batch", 2, S, E]), vi("v", ["batch", 2, S, 3])],
                          [vi("y", ["batch", 4, L, 3])], [numpy_helper.from_array(mask, "mask")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 26), helper.make_opsetid("ai.onnx.preview", 1)],
                          ir_version=10)
    p = save_unchecked(m, "flex_attention.onnx")
    rng = np.random.default_rng(11)
    feeds = {"q": rng.uniform(-1, 1, (3, 4, L, E)).astype(np.float32), "k": rng.uniform(-1, 1, (3, 2, S, E)).astype(np.float32),
             "v": rng.uniform(-1, 1, (3, 2, S, 3)).astype(np.float32)}
    shapes = lambda b: f"q:{b}x4x5x8,k:{b}x2x6x8,v:{b}x2x6x3"  # noqa: E731
    args = ["--onnx=" + p, "--exportOutput=" + cli.path("flex.json"), *FAST, "--minShapes=" + shapes(1),
            "--optShapes=" + shapes(3), "--maxShapes=" + shapes(4), "--shapes=" + shapes(3)]
    for name, value in feeds.items():
        np.save(cli.path(f"flex_{name}.npy"), value)
        args.append(f"--loadInputs={name}:" + cli.path(f"flex_{name}.npy"))
    cli.run(args)
    got = cli.read_outputs(cli.path("flex.json"))["y"][1]
    want = flex_attention_numpy(feeds["q"], feeds["k"], feeds["v"], 0.3, lambda s: s + mask, lambda pr: pr * 0.5)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- runner

def main():
    return cli.run_suite(globals(), __doc__, "control-flow")


if __name__ == "__main__":
    sys.exit(main())
