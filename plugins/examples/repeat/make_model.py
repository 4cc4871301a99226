#!/usr/bin/env python3
"""Writes repeat.onnx: RepeatInterleave(repeats=3, axis=1) (domain com.kiln.examples) on an
input with dynamic batch and length, followed by a built-in Add so that the plugin's dynamic
output shape flows into the rest of the network."""
import argparse

import onnx
from onnx import TensorProto, helper


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    nodes = [
        helper.make_node("RepeatInterleave", ["x"], ["r"], domain="com.kiln.examples", repeats=3, axis=1,
                         plugin_version="1", name="repeat"),
        helper.make_node("Add", ["r", "r"], ["y"], name="double"),
    ]
    g = helper.make_graph(nodes, "repeat_example",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "len", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "len3", 4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.kiln.examples", 1)])
    onnx.save(m, a.out)


if __name__ == "__main__":
    main()
