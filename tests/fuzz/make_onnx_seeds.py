#!/usr/bin/env python3
"""Writes the seed corpus of kiln's libFuzzer targets for the ONNX importer and the CLI's input
loaders and flag parsers (tests/fuzz/corpus/{onnx_import,input_files,cli_specs}). The files are committed;
rerun this after changing it (`python3 tests/fuzz/make_onnx_seeds.py`). Small on purpose: libFuzzer
mutates them, so each seed should reach a different part of the importer (initializers, attributes
of every kind, subgraphs: If, Loop, Scan, sequences, functions) or of a reader.
"""
import argparse
import io
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def model(nodes, inputs, outputs, inits=(), opset=17, functions=()):
    g = helper.make_graph(nodes, "seed", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], functions=list(functions))
    m.ir_version = 8
    return m.SerializeToString()


def vi(name, dims, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, dims)


def onnx_seeds():
    f = TensorProto.FLOAT
    w = numpy_helper.from_array(np.arange(2 * 3 * 3 * 3, dtype=np.float32).reshape(2, 3, 3, 3) / 50, "w")
    b = numpy_helper.from_array(np.array([0.1, -0.2], np.float32), "b")
    yield "conv_relu", model([helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
                              helper.make_node("Relu", ["c"], ["y"])],
                             [vi("x", [1, 3, 4, 4])], [vi("y", [1, 2, 4, 4])], [w, b])
    m = numpy_helper.from_array(np.ones((4, 3), np.float32), "m")
    shape = numpy_helper.from_array(np.array([2, -1], np.int64), "shape")
    yield "matmul_reshape", model([helper.make_node("MatMul", ["x", "m"], ["p"]),
                                   helper.make_node("Reshape", ["p", "shape"], ["r"]),
                                   helper.make_node("Softmax", ["r"], ["y"], axis=-1)],
                                  [vi("x", ["n", 4])], [vi("y", None)], [m, shape])
    yield "gather_concat", model([helper.make_node("Shape", ["x"], ["s"]),
                                  helper.make_node("Constant", [], ["i"], value=numpy_helper.from_array(np.array([1, 0], np.int64))),
                                  helper.make_node("Gather", ["s", "i"], ["g"]),
                                  helper.make_node("Cast", ["g"], ["gf"], to=f),
                                  helper.make_node("Concat", ["gf", "gf"], ["y"], axis=0)],
                                 [vi("x", [2, 3])], [vi("y", [4])])
    then_g = helper.make_graph([helper.make_node("Add", ["x", "x"], ["t"])], "then", [], [vi("t", [2])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [vi("e", [2])])
    yield "if", model([helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
                      [vi("c", [], TensorProto.BOOL), vi("x", [2])], [vi("y", [2])])
    body = helper.make_graph([helper.make_node("Identity", ["cond"], ["cond_out"]),
                              helper.make_node("Add", ["acc", "x"], ["acc_out"]),
                              helper.make_node("Identity", ["acc_out"], ["scan_out"])], "body",
                             [vi("i", [], TensorProto.INT64), vi("cond", [], TensorProto.BOOL), vi("acc", [2])],
                             [vi("cond_out", [], TensorProto.BOOL), vi("acc_out", [2]), vi("scan_out", [2])])
    trip = numpy_helper.from_array(np.array(3, np.int64), "trip")
    yield "loop", model([helper.make_node("Loop", ["trip", "", "x"], ["y", "ys"], body=body)],
                        [vi("x", [2])], [vi("y", [2]), vi("ys", [3, 2])], [trip])
    sbody = helper.make_graph([helper.make_node("Add", ["s", "e"], ["s2"]), helper.make_node("Mul", ["s2", "e"], ["o"])], "sbody",
                              [vi("s", [2]), vi("e", [2])], [vi("s2", [2]), vi("o", [2])])
    yield "scan", model([helper.make_node("Scan", ["s0", "xs"], ["s", "ys"], body=sbody, num_scan_inputs=1,
                                          scan_input_directions=[1], scan_output_axes=[1])],
                        [vi("s0", [2]), vi("xs", [3, 2])], [vi("s", [2]), vi("ys", [2, 3])])
    yield "sequence", model([helper.make_node("SplitToSequence", ["x"], ["seq"], axis=1, keepdims=0),
                             helper.make_node("SequenceErase", ["seq"], ["seq2"]),
                             helper.make_node("SequenceLength", ["seq2"], ["n"]),
                             helper.make_node("ConcatFromSequence", ["seq2"], ["y"], axis=0, new_axis=1)],
                            [vi("x", [2, 3])], [vi("y", [2, 2]), vi("n", [], TensorProto.INT64)], opset=17)
    fn = helper.make_function("local", "Twice", ["a"], ["b"], [helper.make_node("Add", ["a", "a"], ["b"])],
                              [helper.make_opsetid("", 17)])
    yield "function", model([helper.make_node("Twice", ["x"], ["y"], domain="local")], [vi("x", [3])], [vi("y", [3])],
                            functions=[fn])
    yield "legacy_opset6", model([helper.make_node("Add", ["x", "bias"], ["y"], broadcast=1, axis=1)],
                                 [vi("x", [2, 3, 2])], [vi("y", [2, 3, 2])],
                                 [numpy_helper.from_array(np.array([1, 2, 3], np.float32), "bias")], opset=6)


def npy_bytes(a):
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def input_file_seeds():
    # First byte: 0 = .npy, 1 = .pb, 2 = raw (then a type byte, a rank byte and one byte per dim).
    yield "npy_f32", b"\x00" + npy_bytes(np.arange(6, dtype=np.float32).reshape(2, 3))
    yield "npy_i64", b"\x00" + npy_bytes(np.array([1, -2, 3], np.int64))
    yield "npy_bool_scalar", b"\x00" + npy_bytes(np.array(True))
    yield "npy_f16_empty", b"\x00" + npy_bytes(np.zeros((0, 4), np.float16))
    yield "pb_f32", b"\x01" + numpy_helper.from_array(np.ones((2, 2), np.float32), "t").SerializeToString()
    yield "pb_i32", b"\x01" + numpy_helper.from_array(np.array([7, 8], np.int32), "t").SerializeToString()
    yield "raw_f32_2x3", b"\x02\x00\x02\x02\x03" + np.arange(6, dtype=np.float32).tobytes()
    yield "raw_u8_4", b"\x02\x06\x01\x04" + bytes([1, 2, 3, 4])


def cli_spec_seeds():
    # First byte: 0 = --shapes, 1 = --loadInputs, 2 = --layerPrecisions, 3 = --percentile.
    yield "shapes", b"\x00input:1x3x224x224,mask:1x128"
    yield "shapes_quoted", b"\x00'a:b':2x2,'c,d':0"
    yield "shapes_scalar", b"\x00x:,y:1"
    yield "load_inputs", b"\x01x:data/x.npy,'y:z':y.bin"
    yield "layer_precisions", b"\x02conv1:fp16,*:fp32,'fc,1':int8"
    yield "percentiles", b"\x0390,95,99.9,0,100"


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus"))
    args = ap.parse_args()
    for sub, seeds in (("onnx_import", onnx_seeds()), ("input_files", input_file_seeds()), ("cli_specs", cli_spec_seeds())):
        d = os.path.join(args.out, sub)
        os.makedirs(d, exist_ok=True)
        for name, data in seeds:
            with open(os.path.join(d, name), "wb") as fh:
                fh.write(data)


if __name__ == "__main__":
    main()
