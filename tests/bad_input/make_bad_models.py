#!/usr/bin/env python3
"""Writes malformed and hostile ONNX models for the bad-input tests.

Each case is DIR/<case>/model.onnx (plus whatever files the case needs next to it), and
DIR/cases.json lists every case with the regular expressions (case-insensitive) that the error
message must match, and extra CLI arguments ("args") where the case needs them. The models are written without onnx.checker on purpose: they are invalid.
"""
from __future__ import annotations

import argparse
import json
import os
import random

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8


def make_model(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, "bad", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)


def tensor(name, dims, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, dims)


def valid_model():
    """x[2,4] @ W[4,3] -> Relu: a well-formed model to damage."""
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3), "W")
    nodes = [helper.make_node("MatMul", ["x", "W"], ["m"]), helper.make_node("Relu", ["m"], ["y"])]
    return make_model(nodes, [tensor("x", [2, 4])], [tensor("y", [2, 3])], [w])


def write_case(root, name, data: bytes, expect, extra_files=None):
    folder = os.path.join(root, name)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "model.onnx"), "wb") as f:
        f.write(data)
    for rel, content in (extra_files or {}).items():
        with open(os.path.join(folder, rel), "wb") as f:
            f.write(content)
    return {"name": name, "model": os.path.join(folder, "model.onnx"), "expect": expect}


PARSE_ERROR = [r"pars|protobuf|malformed|invalid|not an onnx|ModelProto|empty"]
EXTERNAL_ERROR = [r"external", r"outside|escap|absolute|\.\.|symlink|not allowed|refus"]


def external_model(location: str):
    """A model whose weight W lives in external data at `location`."""
    m = valid_model()
    w = m.graph.initializer[0]
    w.ClearField("float_data")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    del w.external_data[:]
    for key, value in (("location", location), ("offset", "0"), ("length", "48")):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    return m.SerializeToString()


def make_cases(root):
    rng = random.Random(1234)
    cases = []
    good = valid_model().SerializeToString()

    # Malformed protobuf.
    cases.append(write_case(root, "random_bytes", bytes(rng.getrandbits(8) for _ in range(4096)), PARSE_ERROR))
    cases.append(write_case(root, "truncated", good[: len(good) // 2], PARSE_ERROR))
    cases.append(write_case(root, "empty_file", b"", PARSE_ERROR))

    # A graph with a cycle: t1 = Add(x, t2), t2 = Relu(t1).
    cyc = make_model([helper.make_node("Add", ["x", "t2"], ["t1"], name="add_in_cycle"),
                      helper.make_node("Relu", ["t1"], ["t2"], name="relu_in_cycle")],
                     [tensor("x", [2, 4])], [tensor("t2", [2, 4])])
    cases.append(write_case(root, "cycle", cyc.SerializeToString(), [r"cycle"]))

    # A node reads a tensor that no node, input or initializer produces.
    ghost = make_model([helper.make_node("Add", ["x", "ghost_tensor"], ["y"], name="reads_ghost")],
                       [tensor("x", [2, 4])], [tensor("y", [2, 4])])
    cases.append(write_case(root, "missing_input", ghost.SerializeToString(), [r"ghost_tensor"]))

    # An input dimension of 2^62 (and a product of dims that overflows int64).
    big = 1 << 62
    huge = make_model([helper.make_node("Relu", ["x"], ["y"])], [tensor("x", [big, 4])], [tensor("y", [big, 4])])
    size_error = [r"overflow|too large|exceed|4611686018427387904|limit|out of memory"]
    cases.append(write_case(root, "huge_dim", huge.SerializeToString(), size_error))
    huge2 = make_model([helper.make_node("Relu", ["x"], ["y"])], [tensor("x", [big, big])], [tensor("y", [big, big])])
    cases.append(write_case(root, "huge_dim_product", huge2.SerializeToString(), size_error))
    neg = make_model([helper.make_node("Relu", ["x"], ["y"])], [tensor("x", [2, 4])], [tensor("y", [2, 4])])
    neg.graph.input[0].type.tensor_type.shape.dim[0].dim_value = -5
    cases.append(write_case(root, "negative_dim", neg.SerializeToString(), [r"-5|negative|invalid"]))

    # A valid dynamic model asked to run at an absurd runtime shape (16 TiB of input).
    dyn = make_model([helper.make_node("MatMul", ["x", "W"], ["y"])], [tensor("x", ["N", 4])], [tensor("y", ["N", 3])],
                     [valid_model().graph.initializer[0]])
    case = write_case(root, "huge_runtime_shape", dyn.SerializeToString(),
                      [r"overflow|too large|exceed|memory|limit|1099511627776"])
    case["args"] = ["--shapes=x:1099511627776x4"]
    cases.append(case)

    # An initializer that claims 2^62 elements but carries no data.
    lying = valid_model()
    lying.graph.initializer[0].dims[:] = [big, 3]
    cases.append(write_case(root, "initializer_huge_dims", lying.SerializeToString(),
                            [r"overflow|too large|exceed|mismatch|size|expected|elements|bytes"]))

    # Two nodes of ops nobody implements: the error must name both.
    unsupported = make_model([helper.make_node("KilnNoSuchOpA", ["x"], ["a"], name="first_unknown"),
                              helper.make_node("KilnNoSuchOpB", ["a"], ["y"], name="second_unknown")],
                             [tensor("x", [2, 4])], [tensor("y", [2, 4])])
    cases.append(write_case(root, "unsupported_ops", unsupported.SerializeToString(),
                            [r"KilnNoSuchOpA", r"KilnNoSuchOpB"]))

    # External data that points outside the model's folder.
    weights = np.arange(12, dtype=np.float32).tobytes()
    secret_dir = os.path.join(root, "outside_secret")
    os.makedirs(secret_dir, exist_ok=True)
    secret = os.path.join(secret_dir, "weights.bin")
    with open(secret, "wb") as f:
        f.write(weights)
    cases.append(write_case(root, "external_absolute", external_model(secret), EXTERNAL_ERROR))
    cases.append(write_case(root, "external_dotdot", external_model("../outside_secret/weights.bin"), EXTERNAL_ERROR))
    link_case = write_case(root, "external_symlink", external_model("link.bin"), EXTERNAL_ERROR)
    link = os.path.join(root, "external_symlink", "link.bin")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(secret, link)
    cases.append(link_case)
    # A model-local function that calls itself: refused, not an endless inlining.
    rec = helper.make_function("com.bad", "Loop1", ["a"], ["b"], [helper.make_node("Loop1", ["a"], ["b"], domain="com.bad")],
                               [helper.make_opsetid("", 17), helper.make_opsetid("com.bad", 1)])
    m = make_model([helper.make_node("Loop1", ["x"], ["y"], domain="com.bad")], [tensor("x", [2])], [tensor("y", [2])])
    m.functions.append(rec)
    m.opset_import.append(helper.make_opsetid("com.bad", 1))
    cases.append(write_case(root, "recursive_local_function", m.SerializeToString(), [r"Loop1", r"nests|recursive"]))
    # Two model-local functions with the same key.
    dup = helper.make_function("com.bad", "Twice", ["a"], ["b"], [helper.make_node("Relu", ["a"], ["b"])],
                               [helper.make_opsetid("", 17)])
    m = make_model([helper.make_node("Twice", ["x"], ["y"], domain="com.bad")], [tensor("x", [2])], [tensor("y", [2])])
    m.functions.extend([dup, dup])
    m.opset_import.append(helper.make_opsetid("com.bad", 1))
    cases.append(write_case(root, "duplicate_local_function", m.SerializeToString(), [r"Twice", r"defined twice"]))
    # A plugin library that does not exist.
    cases.append(dict(write_case(root, "missing_plugin_library", valid_model().SerializeToString(), [r"does not exist"]),
                      args=["--plugins=/nonexistent/libnothing.so"]))
    # In the folder but the offset/length run past the end of the file.
    short = external_model("weights.bin")
    cases.append(write_case(root, "external_past_end", short, [r"external|weights\.bin", r"length|offset|short|end|size|trunc"],
                            {"weights.bin": weights[:20]}))
    # Narrow-type initializers whose data does not fit their dims: float8 raw_data one byte short,
    # int4 packed into one byte too many, int4 with data in the unused half of its last byte.
    def narrow_case(name, elem, dims, raw, expect):
        w = TensorProto(name="W", data_type=elem, dims=dims, raw_data=raw)  # onnx.helper would refuse it
        m = make_model([helper.make_node("DequantizeLinear", ["W", "s"], ["y"])], [], [tensor("y", dims)],
                       [w, numpy_helper.from_array(np.array(0.5, np.float32), "s")])
        cases.append(write_case(root, name, m.SerializeToString(), expect))
    narrow_case("float8_raw_too_short", TensorProto.FLOAT8E4M3FN, [4], bytes([1, 2, 3]), [r"'W'", r"3 bytes", r"need 4"])
    narrow_case("int4_packed_too_long", TensorProto.INT4, [3], bytes([0x21, 0x03, 0x00]), [r"'W'", r"need 2 \(packed\)"])
    narrow_case("int4_odd_padding", TensorProto.INT4, [3], bytes([0x21, 0x53]), [r"int4", r"unused bits"])
    return cases


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True, help="folder to write the cases into")
    args = ap.parse_args()
    root = os.path.abspath(args.out)
    os.makedirs(root, exist_ok=True)
    cases = make_cases(root)
    with open(os.path.join(root, "cases.json"), "w") as f:
        json.dump(cases, f, indent=2)
    print(f"wrote {len(cases)} bad-input cases to {root}")


if __name__ == "__main__":
    main()
