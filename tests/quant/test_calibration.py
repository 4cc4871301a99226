#!/usr/bin/env python3
"""Implicit INT8 (--int8 --calibData) on the CPU against ONNX Runtime's float32 results.

For a small ResNet-style CNN and a transformer-like block (calib_models.py), each algorithm
(entropy, minmax, percentile) calibrates on 8 batches of the input distribution; kiln's INT8 engine
then runs other inputs of that distribution, and its outputs must be within cosine >= 0.99 and
max |kiln - ORT| / max |ORT| <= 0.15 of ONNX Runtime's float32 outputs (the numbers are printed).
Also checked, each against an independent computation:
  - the engine runs integer layers (layer information: QLinearConv / QLinearMatMul, precision int8,
    with their scales), and the attention's activation x activation MatMuls and Softmax stay float;
  - minmax: the input's scale is max|x| / 127 of the calibration batches (NumPy), bit for bit;
    percentile: within one histogram bin of NumPy's percentile of |x|; entropy: within one bin of
    a NumPy port of pytorch-quantization's _compute_amax_entropy on the same histogram;
  - the cache: a rebuild from it (no data) gives the same outputs bit for bit and leaves the file
    byte-identical; calibrating again writes the same bytes;
  - precision constraints: obey fails naming the layer, prefer warns naming it, fp32 keeps a conv float,
    wildcards; --layerOutputTypes;
  - --compareWith=fp32 prints per-tensor errors and names the first layer over the tolerance;
  - bad input: clear errors and their exit codes, never a crash.

Usage: test_calibration.py --kiln build/bin/kiln [--module-dir build/python] [--keep DIR]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import calib_models  # noqa: E402

KILN = None
FAST = ["--device=cpu", "--iterations=1", "--warmUp=0", "--duration=0", "--builderOptimizationLevel=0"]
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg[:2000])


def run(args, status=0):
    proc = subprocess.run([KILN] + args, capture_output=True, text=True, timeout=600)
    if proc.returncode < 0 or proc.returncode > 3:
        failures.append(f"crash or unexpected status {proc.returncode}: {' '.join(args)}\n{proc.stderr[-2000:]}")
    elif status is not None and proc.returncode != status:
        failures.append(f"exit {proc.returncode} (expected {status}): {' '.join(args)}\n{proc.stdout[-1500:]}\n{proc.stderr[-2000:]}")
    return proc


def expect_error(args, pattern, status):
    proc = run(args, status)
    check(re.search(pattern, proc.stderr), f"{' '.join(args)}: stderr lacks /{pattern}/:\n{proc.stderr[-2000:]}")
    return proc


def outputs(path):
    with open(path) as f:
        return {o["name"]: np.array(o["values"], np.float32).reshape(o["dims"]) for o in json.load(f)}


def layer_info(path):
    with open(path) as f:
        return json.load(f)["layers"]


def read_cache(path):
    scales = {}
    with open(path) as f:
        lines = f.read().splitlines()
    for line in lines[1:]:
        bits, kind, name = line.split(" ", 2)
        scales[name] = (np.frombuffer(bytes.fromhex(bits)[::-1], np.float32)[0], kind)
    return lines[0], scales


def entropy_amax(hist, edges, unsigned=False, start=128):
    """pytorch-quantization's _compute_amax_entropy (calib/histogram.py), ported to NumPy."""
    bins = hist.astype(np.float64).copy()
    bins[0] = bins[1]
    nbins = 1 << (7 + int(unsigned))
    divergences, args = [], []
    for i in range(max(start, nbins), len(bins) + 1):
        space = np.linspace(0, i, num=nbins + 1)
        dig = np.digitize(np.arange(i), space) - 1
        dig[bins[:i] == 0] = -1
        sums = np.zeros(nbins)
        counts = np.zeros(nbins)
        for j, d in enumerate(dig):
            if d != -1:
                sums[d] += bins[j]
                counts[d] += 1
        q = np.array([sums[d] / counts[d] if d != -1 else 0.0 for d in dig])
        p = bins[:i].copy()
        p[-1] += bins[i:].sum()
        p, q = p / p.sum(), q / q.sum()
        nz = p > 0
        kl = np.inf if np.any(q[nz] == 0) else float(np.sum(p[nz] * np.log(p[nz] / q[nz])))
        divergences.append(kl)
        args.append(i)
    d = np.array(divergences)
    last = len(d) - 1 - np.argmin(d[::-1])
    return edges[args[last]]


def python_api(module_dir, cnn, p):
    """The Python calibrator: the same batches give the CLI's cache byte for byte, and its engine
    runs integer layers; an exception in get_batch reaches the caller."""
    sys.path.insert(0, module_dir)
    import kiln

    calib = calib_models.batches({"x": (1, 3, 32, 32)}, 8, seed=10)

    class Calibrator:
        def __init__(self, data):
            self.data, self.written = list(data), None

        def get_batch(self):
            return self.data.pop(0) if self.data else None

        def write_calibration_cache(self, data):
            self.written = bytes(data)

    c = Calibrator(calib)
    cfg = kiln.BuilderConfig(device="cpu", int8=True, optimization_level=0)
    cfg.calibrator = c
    cfg.calibration_algorithm = "entropy"
    engine = kiln.build_engine(cnn, cfg)
    with open(p("cnn_entropy.cache"), "rb") as f:
        check(c.written == f.read(), "Python calibrator: its cache differs from the CLI's for the same batches")
    check('"QLinearConv"' in engine.layer_information, "Python calibrator: no QLinearConv in the engine")
    x = calib_models.batches({"x": (1, 3, 32, 32)}, 1, seed=99)[0]["x"]
    got = engine.create_execution_context().infer({"x": x})["logits"].ravel().astype(np.float64)
    want = ort.InferenceSession(cnn).run(None, {"x": x})[0].ravel().astype(np.float64)
    cos = float(got @ want / np.linalg.norm(got) / np.linalg.norm(want))
    print(f"python/entropy: cosine {cos:.5f}")
    check(cos >= 0.99, f"Python calibrator: cosine {cos}")

    class Broken:
        def get_batch(self):
            raise ValueError("no data today")

    cfg.calibrator = Broken()
    try:
        kiln.build_engine(cnn, cfg)
        check(False, "Python calibrator: the exception in get_batch did not reach the caller")
    except ValueError as e:
        check("no data today" in str(e), f"Python calibrator: {e!r}")


def main():
    global KILN
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--keep")
    ap.add_argument("--module-dir", help="the Python module's directory: also test the Python calibrator")
    a = ap.parse_args()
    KILN = a.kiln
    tmp = a.keep or tempfile.mkdtemp(prefix="kiln_calib_")
    os.makedirs(tmp, exist_ok=True)
    p = lambda *n: os.path.join(tmp, *n)  # noqa: E731

    models = {"cnn": calib_models.small_cnn(p("cnn.onnx")), "transformer": calib_models.small_transformer(p("tf.onnx"))}
    onnx_files = {"cnn": p("cnn.onnx"), "transformer": p("tf.onnx")}
    for name, shapes in models.items():
        calib = calib_models.batches(shapes, 8, seed=10)
        calib_models.write_calib_dir(p(name + "_calib"), calib)
        test = calib_models.batches(shapes, 1, seed=99)[0]
        np.save(p(name + "_test_x.npy"), test["x"])
        ref = ort.InferenceSession(onnx_files[name]).run(None, test)[0]
        allx = np.concatenate([b["x"].ravel() for b in calib]).astype(np.float64)
        for algo in ("entropy", "minmax", "percentile"):
            tag = f"{name}/{algo}"
            cache, out, info = p(f"{name}_{algo}.cache"), p(f"{name}_{algo}.json"), p(f"{name}_{algo}_layers.json")
            build = ["--onnx=" + onnx_files[name], "--int8", "--calibData=" + p(name + "_calib"), "--calibAlgo=" + algo,
                     "--calib=" + cache, "--loadInputs=x:" + p(name + "_test_x.npy"), "--exportOutput=" + out,
                     "--exportLayerInfo=" + info, *FAST]
            proc = run(build)
            if proc.returncode != 0:
                continue
            check("INT8 (implicit)" in proc.stdout, f"{tag}: no implicit INT8 summary:\n{proc.stdout[-1500:]}")
            got = list(outputs(out).values())[0].ravel().astype(np.float64)
            want = ref.ravel().astype(np.float64)
            cos = float(got @ want / np.linalg.norm(got) / np.linalg.norm(want))
            rel = float(np.abs(got - want).max() / np.abs(want).max())
            print(f"{tag}: cosine {cos:.5f}, max|kiln-ORT|/max|ORT| {rel:.4f}")
            check(cos >= 0.99 and rel <= 0.15, f"{tag}: cosine {cos} (>= 0.99), relative error {rel} (<= 0.15)")
            layers = layer_info(info)
            ints = [l for l in layers if l["op"] in ("QLinearConv", "QLinearMatMul")]
            expected_int = 7 if name == "cnn" else 6  # every conv and the fc / the six projections
            check(len(ints) == expected_int, f"{tag}: {len(ints)} integer layers, expected {expected_int}: "
                  f"{[(l['name'], l['op']) for l in layers]}")
            check(all(l["precision"] == "int8" and "x_scale" in l.get("quantization", {}) for l in ints),
                  f"{tag}: integer layers without Int8 precision or scales: {ints[:1]}")
            if name == "transformer":
                floats = {l["name"] for l in layers if l["op"] in ("MatMul", "Softmax")}
                check({"qk", "pv", "softmax"} <= floats, f"{tag}: attention layers not kept float: {sorted(floats)}")
            header, scales = read_cache(cache)
            check(header.startswith("kiln-int8-calibration 1 " + algo), f"{tag}: cache header {header!r}")
            sx, kind = scales["x"]
            check(kind == "i8", f"{tag}: the input (signed data) got {kind}")
            amax = float(sx) * 127
            absmax = np.abs(allx).max()
            w = np.abs(calib[0]["x"]).max()
            while w < absmax:
                w *= 2  # kiln's histogram range: the first batch's max, doubled until every value fits
            if algo == "minmax":
                check(sx == np.float32(absmax / 127.0), f"{tag}: scale {sx!r} != max|x|/127 = {np.float32(absmax / 127.0)!r}")
            elif algo == "percentile":
                # the smallest sample with 99.99% of the samples at or below it; kiln gives its bin's upper edge
                want_p = np.percentile(np.abs(allx), 99.99, method="inverted_cdf")
                check(want_p - 1e-6 <= amax <= want_p + w / 2048 + 1e-6,
                      f"{tag}: amax {amax} vs NumPy's 99.99th percentile {want_p} (bin {w / 2048})")
            else:
                hist, edges = np.histogram(np.abs(allx), bins=2048, range=(0, w))
                want_e = entropy_amax(hist, edges)
                check(abs(amax - min(want_e, absmax)) <= 2 * (w / 2048) + 1e-6,
                      f"{tag}: entropy amax {amax} vs the NumPy reference {want_e}")
            # the cache: a rebuild from it alone gives the same engine results, and does not touch it
            with open(cache, "rb") as f:
                first_bytes = f.read()
            again = p(f"{name}_{algo}_again.json")
            proc = run(["--onnx=" + onnx_files[name], "--int8", "--calib=" + cache, "--loadInputs=x:" + p(name + "_test_x.npy"),
                        "--exportOutput=" + again, *FAST])
            check("using the cache" in proc.stdout, f"{tag}: the rebuild did not use the cache:\n{proc.stdout[-1500:]}")
            with open(cache, "rb") as f:
                check(f.read() == first_bytes, f"{tag}: the cache changed on a rebuild from it")
            if proc.returncode == 0:
                a1, a2 = list(outputs(out).values())[0], list(outputs(again).values())[0]
                check(np.array_equal(a1, a2), f"{tag}: rebuild from the cache differs: max {np.abs(a1 - a2).max()}")
            fresh = p(f"{name}_{algo}_fresh.cache")
            run(["--onnx=" + onnx_files[name], "--int8", "--calibData=" + p(name + "_calib"), "--calibAlgo=" + algo,
                 "--calib=" + fresh, "--skipInference", *FAST])
            with open(fresh, "rb") as f:
                check(f.read() == first_bytes, f"{tag}: calibrating again wrote other bytes")

    cnn, calib_dir = onnx_files["cnn"], p("cnn_calib")
    tf = onnx_files["transformer"]
    int8 = ["--int8", "--calibData=" + calib_dir, "--calib=" + p("cnn_entropy.cache")]
    # precision constraints
    expect_error(["--onnx=" + tf, "--int8", "--calibData=" + p("transformer_calib"), "--precisionConstraints=obey",
                  "--layerPrecisions=softmax:int8", *FAST], r"layer 'softmax' \(Softmax\).*int8.*obey", status=3)
    proc = run(["--onnx=" + tf, "--int8", "--calibData=" + p("transformer_calib"), "--precisionConstraints=prefer",
                "--layerPrecisions=softmax:int8,qk:int8", *FAST])
    check(re.search(r"\[W\] layer 'softmax'.*falling back", proc.stderr) and re.search(r"\[W\] layer 'qk'.*falling back", proc.stderr),
          "prefer: no warning naming softmax and qk:\n" + proc.stderr[-2000:])
    expect_error(["--onnx=" + cnn, "--precisionConstraints=obey", "--layerPrecisions=block1_*:fp16", *FAST],
                 r"layer 'block1_.*fp16.*CPU", status=3)
    proc = run(["--onnx=" + cnn, *int8, "--precisionConstraints=obey", "--layerPrecisions=conv1:fp32,block2_conv*:int8,block2_down*:int8",
                "--exportLayerInfo=" + p("fp32conv.json"), *FAST])
    layers = layer_info(p("fp32conv.json"))
    check(any(l["op"] == "Conv" and l["name"] == "conv1" and l["precision"] == "float32" for l in layers) and
          sum(l["op"] == "QLinearConv" for l in layers) == 5, "conv1:fp32 did not keep conv1 float (alone): " +
          str([(l["name"], l["op"], l["precision"]) for l in layers]))
    expect_error(["--onnx=" + cnn, "--precisionConstraints=obey", "--layerPrecisions=nomatch*:fp32", *FAST],
                 r"no layer matching 'nomatch\*'", status=2)
    expect_error(["--onnx=" + cnn, "--precisionConstraints=obey", "--layerPrecisions=conv1:int8", *FAST], r"needs --int8", status=2)
    run(["--onnx=" + cnn, "--precisionConstraints=obey", "--layerOutputTypes=block1_relu:fp16", *FAST])
    expect_error(["--onnx=" + cnn, *int8, "--precisionConstraints=obey", "--layerOutputTypes=gap:int8", *FAST],
                 r"layer 'gap'.*output type int8", status=3)
    # --compareWith=fp32
    proc = run(["--onnx=" + cnn, *int8, "--compareWith=fp32", "--compareTolerance=0.5", *FAST])
    check("Accuracy against FP32" in proc.stdout and "block1_out" in proc.stdout and "logits" in proc.stdout,
          "--compareWith printed no table:\n" + proc.stdout[-2000:])
    print("\n".join(l for l in proc.stdout.splitlines() if l.startswith("[I]   ")))
    expect_error(["--onnx=" + cnn, *int8, "--compareWith=fp32", "--compareTolerance=0", *FAST],
                 r"first tensor over --compareTolerance.*produced by layer '", status=1)
    # bad input
    os.makedirs(p("empty"), exist_ok=True)
    expect_error(["--onnx=" + cnn, "--int8", "--calibData=" + p("empty"), *FAST], r"holds no calibration batch", status=1)
    expect_error(["--onnx=" + cnn, "--int8", "--calibData=" + p("nodir"), *FAST], r"is not a directory", status=1)
    os.makedirs(p("badname"), exist_ok=True)
    np.save(p("badname", "images.npy"), np.zeros((1, 3, 32, 32), np.float32))
    expect_error(["--onnx=" + cnn, "--int8", "--calibData=" + p("badname"), *FAST], r"images\.npy' names no network input.*'x'", status=1)
    os.makedirs(p("badshape"), exist_ok=True)
    np.save(p("badshape", "x.npy"), np.zeros((1, 3, 16, 16), np.float32))
    expect_error(["--onnx=" + cnn, "--int8", "--calibData=" + p("badshape"), *FAST], r"x\.npy' has dims.*input 'x'", status=1)
    os.makedirs(p("badtype"), exist_ok=True)
    np.save(p("badtype", "x.npy"), np.zeros((1, 3, 32, 32), np.float64))
    expect_error(["--onnx=" + cnn, "--int8", "--calibData=" + p("badtype"), *FAST], r"x\.npy' holds .*input 'x' is", status=1)
    expect_error(["--onnx=" + cnn, "--calibData=" + calib_dir, *FAST], r"--calibData needs --int8", status=2)
    expect_error(["--onnx=" + cnn, "--int8", "--calib=" + p("absent.cache"), *FAST], r"does not exist", status=1)
    with open(p("corrupt.cache"), "w") as f:
        f.write("kiln-int8-calibration 1 entropy\nzzzzzzzz i8 x\n")
    expect_error(["--onnx=" + cnn, "--int8", "--calib=" + p("corrupt.cache"), *FAST], r"calibration cache, line 2", status=1)
    proc = run(["--onnx=" + cnn, "--int8", *FAST])
    check(re.search(r"\[W\] INT8 .*no layer runs INT8", proc.stderr), "--int8 alone: no warning:\n" + proc.stderr[-1500:])
    # Implicit FP8 (--fp8 with calibration): the Gemm becomes an Fp8MatMul, the convs stay float;
    # with --int8 as well, the convs go INT8 and the Gemm stays FP8; --fp8 alone warns.
    proc = run(["--onnx=" + cnn, "--fp8", "--calibData=" + calib_dir, "--dumpLayerInfo", *FAST])
    check(proc.returncode == 0 and "FP8 (implicit): 1 layer(s) quantized" in proc.stdout and '"op":"Fp8MatMul"' in proc.stdout
          and '"op":"QLinearConv"' not in proc.stdout, "--fp8 --calibData:\n" + proc.stdout[-2000:] + proc.stderr[-1000:])
    proc = run(["--onnx=" + cnn, "--fp8", "--int8", "--calibData=" + calib_dir, "--dumpLayerInfo", *FAST])
    check(proc.returncode == 0 and '"op":"Fp8MatMul"' in proc.stdout and '"op":"QLinearConv"' in proc.stdout
          and "(1 of them FP8 E4M3)" in proc.stdout, "--fp8 --int8 --calibData:\n" + proc.stdout[-2000:] + proc.stderr[-1000:])
    proc = run(["--onnx=" + cnn, "--fp8", *FAST])
    check(re.search(r"\[W\] FP8 .*no layer runs FP8", proc.stderr), "--fp8 alone: no warning:\n" + proc.stderr[-1500:])
    if a.module_dir:
        python_api(a.module_dir, cnn, p)

    if failures:
        print(f"\n{len(failures)} failure(s)")
        for f in failures:
            print(" -", f.splitlines()[0][:300])
        return 1
    print("all calibration checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
