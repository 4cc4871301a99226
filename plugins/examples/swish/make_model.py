#!/usr/bin/env python3
"""Writes swish.onnx: Conv -> Swish(beta) in domain com.kiln.examples -> Relu (a real model
around the plugin node, so that the plugin layer sits between built-in layers)."""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--beta", type=float, default=1.7)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3, "w")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("Swish", ["c"], ["s"], domain="com.kiln.examples", beta=a.beta, name="swish"),
        helper.make_node("Relu", ["s"], ["y"], name="relu"),
    ]
    g = helper.make_graph(nodes, "swish_example",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 16, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8, 16, 16])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.kiln.examples", 1)])
    onnx.save(m, a.out)


if __name__ == "__main__":
    main()
