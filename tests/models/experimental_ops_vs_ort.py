#!/usr/bin/env python3
"""ONNX 1.0-1.4's experimental ops and MaxRoiPool, as old model-zoo files hold them, against ONNX Runtime.

ImageScaler (Tiny YOLOv2's first node), Crop (with and without scale), ScaledTanh,
ParametricSoftplus, Affine and MaxRoiPool (Fast R-CNN's ROI pooling, float32 and float64; rois
with fractional, out-of-map and degenerate boxes) in one-node models of opsets 6 to 9 (where ONNX
Runtime still runs the experimental ops; opset 6 writes Mul/Add with `broadcast`) and a Tiny
YOLOv2-style head (ImageScaler -> Conv -> BatchNormalization -> LeakyRelu -> MaxPool), built by
kiln on the CPU through the Python API and compared with ONNX Runtime (CPU EP) at 1e-5; Crop at
opset 10, which ONNX Runtime no longer runs, with NumPy's slicing.

  experimental_ops_vs_ort.py --module-dir build/python

Exits 77 (skipped) without numpy, onnx, onnxruntime or the kiln module."""
import argparse
import os
import sys
import tempfile

try:
    import numpy as np
    import onnx
    import onnxruntime  # noqa: F401 (the reference, through vs_ort)
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # pragma: no cover
    print(f"SKIP: {e}")
    sys.exit(77)

TOL = 1e-5
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from vs_ort import Tally, import_kiln, kiln_error, kiln_outputs, ort_outputs  # noqa: E402


def one_node(op, opset, x_shape, attrs, extra=(), dtype=TensorProto.FLOAT):
    ins = [helper.make_tensor_value_info("x", dtype, x_shape)] + [helper.make_tensor_value_info(n, dtype, s) for n, s in extra]
    node = helper.make_node(op, ["x"] + [n for n, _ in extra], ["y"], name="n", **attrs)
    graph = helper.make_graph([node], op, ins, [helper.make_tensor_value_info("y", dtype, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=3)


def tiny_yolo_head(rng):
    w = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3, "w")
    bn = [numpy_helper.from_array(v.astype(np.float32), n) for n, v in
          (("g", rng.uniform(0.5, 1.5, 8)), ("b", rng.standard_normal(8) * 0.1), ("m", rng.standard_normal(8) * 0.1),
           ("v", rng.uniform(0.5, 1.5, 8)))]
    nodes = [helper.make_node("ImageScaler", ["x"], ["s"], scale=1 / 255.0, bias=[0.1, -0.2, 0.3]),
             helper.make_node("Conv", ["s", "w"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "g", "b", "m", "v"], ["n"], epsilon=1e-5),
             helper.make_node("LeakyRelu", ["n"], ["l"], alpha=0.1),
             helper.make_node("MaxPool", ["l"], ["y"], kernel_shape=[2, 2], strides=[2, 2])]
    graph = helper.make_graph(nodes, "tiny_yolo_head", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w] + bn)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 8)], ir_version=3)


def cases(rng):
    x = rng.standard_normal((2, 3, 7, 9)).astype(np.float32) * 3
    out = []
    for opset in (6, 7, 9):
        out.append((f"image_scaler_{opset}", one_node("ImageScaler", opset, [2, 3, 7, 9], {"scale": 0.5, "bias": [1.0, -2.0, 0.25]}), {"x": x}))
        out.append((f"affine_{opset}", one_node("Affine", opset, [2, 3, 7, 9], {"alpha": -1.5, "beta": 0.75}), {"x": x}))
        out.append((f"scaled_tanh_{opset}", one_node("ScaledTanh", opset, [2, 3, 7, 9], {"alpha": 2.0, "beta": 0.3}), {"x": x}))
        out.append((f"parametric_softplus_{opset}", one_node("ParametricSoftplus", opset, [2, 3, 7, 9], {"alpha": 0.7, "beta": 1.3}), {"x": x}))
        out.append((f"crop_{opset}", one_node("Crop", opset, [2, 3, 7, 9], {"border": [1, 2, 3, 0]}), {"x": x}))
        out.append((f"crop_scale_{opset}", one_node("Crop", opset, [2, 3, 7, 9], {"border": [2, 1, 0, 0], "scale": [4, 5]}), {"x": x}))
    rois = np.array([[0, 0, 0, 8, 6], [1, 1.4, 2.6, 5.5, 5.2], [1, -3, -2, 20, 30], [0, 4, 4, 4, 4], [1, 6, 5, 2, 1]], np.float32)
    # Crop at opset 10 (the Slice of the expansion takes inputs there): ONNX Runtime no longer runs
    # the op, so NumPy's slicing is the reference.
    out.append(("crop_10", one_node("Crop", 10, [2, 3, 7, 9], {"border": [1, 2, 3, 1]}), {"x": x}, x[:, :, 2:6, 1:6]))
    for scale in (1.0, 0.5):
        m = one_node("MaxRoiPool", 7, [2, 3, 7, 9], {"pooled_shape": [2, 3], "spatial_scale": scale}, [("r", [5, 5])])
        out.append((f"max_roi_pool_{scale}", m, {"x": x, "r": rois}))
    # float64: ONNX Runtime has only the float32 kernel; the inputs are float32 values, so its
    # float32 result is the float64 one (a max picks an input element).
    m = one_node("MaxRoiPool", 7, [2, 3, 7, 9], {"pooled_shape": [3, 2], "spatial_scale": 0.5}, [("r", [5, 5])], TensorProto.DOUBLE)
    m32 = one_node("MaxRoiPool", 7, [2, 3, 7, 9], {"pooled_shape": [3, 2], "spatial_scale": 0.5}, [("r", [5, 5])])
    out.append(("max_roi_pool_float64", (m, m32), {"x": x.astype(np.float64), "r": rois.astype(np.float64)}))
    out.append(("tiny_yolo_head", tiny_yolo_head(rng), {"x": rng.uniform(0, 255, (1, 3, 16, 16)).astype(np.float32)}))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--module-dir", required=True)
    args = ap.parse_args()
    kiln = import_kiln(args.module_dir)
    if kiln is None:
        return 77
    tally = Tally("experimental ops vs ONNX Runtime")
    with tempfile.TemporaryDirectory(prefix="kiln_experimental_") as tmp:
        for name, model, feeds, *numpy_ref in cases(np.random.default_rng(11)):
            model, ref_model = model if isinstance(model, tuple) else (model, model)
            path, ref_path = os.path.join(tmp, name + ".onnx"), os.path.join(tmp, name + "_ref.onnx")
            onnx.save(model, path)
            onnx.save(ref_model, ref_path)
            ref_feeds = feeds if ref_model is model else {k: v.astype(np.float32) for k, v in feeds.items()}
            want = numpy_ref[0] if numpy_ref else ort_outputs(ref_path, ref_feeds)[0]
            if ref_model is not model:
                want = want.astype(np.float64)
            try:
                got = kiln_outputs(kiln, path, feeds)["y"]
            except Exception as e:
                tally.fail(name, kiln_error(e))
                continue
            if got.shape != want.shape or got.dtype != want.dtype or not np.allclose(got, want, rtol=TOL, atol=TOL):
                tally.fail(name, f"{got.dtype} {got.shape} vs {want.dtype} {want.shape}" +
                           (f", max |error| {np.abs(got - want).max():.3g}" if got.shape == want.shape else ""))
            else:
                tally.ok()
    return tally.finish()


if __name__ == "__main__":
    sys.exit(main())
