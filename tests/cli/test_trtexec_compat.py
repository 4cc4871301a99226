#!/usr/bin/env python3
"""kiln as a trtexec drop-in (CPU): real trtexec command lines run unchanged, every accepted
trtexec flag without an effect prints exactly one warning, refused flags stop with exit 3 and
their reason, --device=N / --backend, and the JSON exports have trtexec's keys.

Usage: test_trtexec_compat.py --kiln build/bin/kiln
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def make_model(path):
    """A dynamic-batch Conv -> Relu -> Sigmoid (named nodes), x: [N, 2, 4, 4]."""
    w = numpy_helper.from_array(np.random.default_rng(1).standard_normal((3, 2, 3, 3)).astype(np.float32), "W")
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Sigmoid", ["r"], ["y"], name="sigmoid")]
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, 4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, 4, 4])], [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--kiln", required=True)
    kiln = os.path.abspath(ap.parse_args().kiln)
    tmp = tempfile.mkdtemp(prefix="kiln_trtexec_")
    p = lambda n: os.path.join(tmp, n)  # noqa: E731
    model, plan = p("model.onnx"), p("model.plan")
    make_model(model)
    failures = []

    def run(args, status=0):
        proc = subprocess.run([kiln, *args], capture_output=True, text=True, timeout=300)
        if proc.returncode != status:
            failures.append(f"exit {proc.returncode} (expected {status}): kiln {' '.join(args)}\n{proc.stderr[-2000:]}")
        return proc

    # 1. Real trtexec command lines, unchanged but for file names (random inputs, CPU or GPU 0).
    quick = ["--iterations=2", "--warmUp=0", "--duration=0"]
    shapes = ["--minShapes=x:1x2x4x4", "--optShapes=x:2x2x4x4", "--maxShapes=x:4x2x4x4"]
    lines = [
        ["--onnx=" + model, *shapes, "--saveEngine=" + plan, "--memPoolSize=workspace:1024M", "--verbose",
         "--inputIOFormats=fp32:chw", "--outputIOFormats=fp32:chw", "--profilingVerbosity=detailed", "--skipInference"],
        ["--onnx=" + model, *shapes, "--shapes=x:2x2x4x4", "--fp16", "--timingCacheFile=" + p("cache"), "--best",
         "--builderOptimizationLevel=1", "--tacticSources=-CUDNN,+CUBLAS", "--avgTiming=2", "--noBuilderCache",
         "--separateProfileRun", "--dumpProfile", "--dumpLayerInfo", *quick],
        ["--onnx=" + model, "--optShapes=x:2x2x4x4", "--maxShapes=x:2x2x4x4", "--minShapes=x:2x2x4x4",
         "--precisionConstraints=obey", "--layerPrecisions=relu:fp32", "--layerOutputTypes=relu:fp32",
         "--sparsity=disable", "--refit", "--versionCompatible", "--hardwareCompatibilityLevel=ampere+", "--stripWeights",
         "--maxAuxStreams=2", "--explicitBatch", "--workspace=1024", "--buildOnly"],
        ["--loadEngine=" + plan, "--shapes=x:2x2x4x4", "--infStreams=2", "--threads", "--useSpinWait", "--useCudaGraph",
         "--noDataTransfers", "--exposeDMA", "--device=0", "--useDLACore=0", "--allowGPUFallback", "--dumpRefit",
         "--avgRuns=1", "--percentile=90,99", "--dumpOutput", "--exportTimes=" + p("times.json"),
         "--exportOutput=" + p("out.json"), "--exportProfile=" + p("profile.json"),
         "--exportLayerInfo=" + p("layers.json"), "--dumpOptimizationProfile", "--iterations=3", "--warmUp=0", "--duration=0"],
        ["--getPlanVersionOnly", "--loadEngine=" + plan],
        ["--loadEngine=" + plan, "--timeDeserialize"],
        ["--onnx=" + model, "--shapes=x:1x2x4x4", "--stronglyTyped", "--useProfile=0", *quick],
    ]
    for args in lines:
        run(args)
    version = run(["--getPlanVersionOnly", "--loadEngine=" + plan]).stdout
    if not re.search(r"Plan was created with kiln version: \d+\.\d+\.\d+", version):
        failures.append("--getPlanVersionOnly printed no version:\n" + version)

    # 2. JSON exports in trtexec's shapes.
    try:
        times = json.load(open(p("times.json")))
        keys = {"startEnqMs", "endEnqMs", "startH2dMs", "endH2dMs", "startComputeMs", "endComputeMs", "startD2hMs",
                "endD2hMs", "h2dMs", "computeMs", "d2hMs", "latencyMs"}
        assert isinstance(times, list) and len(times) >= 6 and all(keys <= set(t) for t in times), times[:1]
        out = json.load(open(p("out.json")))
        assert isinstance(out, list) and out[0]["name"] == "y" and out[0]["dimensions"] == "2x3x4x4", out[0].keys()
        assert len(out[0]["values"]) == 2 * 3 * 4 * 4
        prof = json.load(open(p("profile.json")))
        assert "count" in prof[0] and all({"name", "timeMs", "averageMs", "medianMs", "percentage"} <= set(r) for r in prof[1:])
        layers = json.load(open(p("layers.json")))
        assert layers["Bindings"] == ["x", "y"], layers["Bindings"]
        assert layers["Layers"] and all({"Name", "LayerType", "Inputs", "Outputs"} <= set(l) for l in layers["Layers"])
    except Exception as e:  # noqa: BLE001
        failures.append(f"JSON exports: {type(e).__name__}: {e}")

    # 3. Every accepted flag without an effect warns exactly once (even when repeated).
    help_text = run(["--help"]).stdout
    no_effect = re.findall(r"^\s+(--\w+)(?:,--\w+)?( TEXT ...)?\s+Accepted, no effect", help_text, re.M)
    refused = re.findall(r"^\s+(--\w+)(?:,--\w+)?( TEXT ...)?\s+Refused:", help_text, re.M)
    if len(no_effect) < 40 or len(refused) < 5:
        failures.append(f"--help lists {len(no_effect)} no-effect and {len(refused)} refused trtexec flags")
    for flag, takes_value in no_effect + [("--threads", "")]:
        arg = flag + ("=1" if takes_value else "")
        proc = run(["--loadEngine=" + plan, arg, arg, "--skipInference"])
        warned = [l for l in proc.stderr.splitlines() if l.startswith(f"[W] {flag} ") and "has no effect" in l]
        if len(warned) != 1:
            failures.append(f"{flag}: {len(warned)} 'no effect' warnings (expected 1):\n{proc.stderr}")
    for flag, takes_value in refused:
        proc = run(["--loadEngine=" + plan, flag + ("=1" if takes_value else ""), "--skipInference"], status=3)
        if not re.search(rf"\[E\] Unsupported: {flag} is not supported: \S", proc.stderr):
            failures.append(f"{flag}: refused without its reason:\n{proc.stderr}")

    # 4. --device=N is a GPU index; the backend moved to --backend (--device=cpu|gpu still works).
    run(["--onnx=" + model, "--shapes=x:1x2x4x4", "--backend=cpu", *quick])
    run(["--onnx=" + model, "--shapes=x:1x2x4x4", "--device=cpu", *quick])
    run(["--onnx=" + model, "--backend=gpu", "--device=cpu"], status=2)
    run(["--onnx=" + model, "--device=fast"], status=2)
    run(["--onnx=" + model, "--shapes=x:1x2x4x4", "--device=999", *quick], status=3)
    v = run(["--version"]).stdout.strip()
    if not re.fullmatch(r"kiln \d+\.\d+\.\d+", v):
        failures.append(f"--version printed {v!r}")

    # 5. A layer with an omitted optional input (Clip without min) in --exportLayerInfo: the omitted
    # input is no tensor in trtexec's Inputs (it once made the export fail with a JSON type error).
    mx = numpy_helper.from_array(np.array(0.5, np.float32), "mx")
    g = helper.make_graph([helper.make_node("Clip", ["x", "", "mx"], ["y"], name="clip")], "clip",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [mx])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), p("clip.onnx"))
    run(["--onnx=" + p("clip.onnx"), "--backend=cpu", "--exportLayerInfo=" + p("clip_layers.json"), *quick])
    try:
        clip = [l for l in json.load(open(p("clip_layers.json")))["Layers"] if l["LayerType"] == "Clip"]
        assert clip and [t["Name"] for t in clip[0]["Inputs"]] == ["x", "mx"], clip
    except Exception as e:  # noqa: BLE001
        failures.append(f"layer info with an omitted input: {type(e).__name__}: {e}")

    for f in failures:
        print("FAIL", f)
    print(f"trtexec compatibility: {len(failures)} failure(s); {len(no_effect)} no-effect and {len(refused)} refused flags checked")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
