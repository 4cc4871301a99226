#!/usr/bin/env python3
"""Writes rownorm.onnx: MatMul -> RowNorm (domain com.kiln.examples) with a dynamic batch."""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    rng = np.random.default_rng(1)
    w = numpy_helper.from_array(rng.standard_normal((64, 1024)).astype(np.float32) * 0.1, "w")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="proj"),
        helper.make_node("RowNorm", ["h"], ["y"], domain="com.kiln.examples", epsilon=1e-5, name="rownorm"),
    ]
    g = helper.make_graph(nodes, "rownorm_example",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 1024])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.kiln.examples", 1)])
    onnx.save(m, a.out)


if __name__ == "__main__":
    main()
