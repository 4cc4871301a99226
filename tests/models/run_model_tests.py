#!/usr/bin/env python3
"""Runs the model tests: each model on seeded random inputs through ONNX Runtime (CPU EP, graph
optimizations off: the plain reference) and through the kiln CLI, then compares every output.

  run_model_tests.py --kiln build/bin/kiln --models DIR [--only mlp,bert] [--threads 2]

Tolerance: |kiln - ort| <= atol + rtol * |ort| with rtol = atol = 1e-4 for every model on the CPU,
1e-3 on the GPU (--device gpu: FP32 engines without TF32, cuDNN/cuBLAS summation orders). (Both sides
compute in float32; ResNet-50 and GPT-2 logits reach |x| ~ 10-60, so the relative term dominates
there; ORT with and without its own fusions already differs by up to ~3e-5 on GPT-2.)

Dynamic models are built once with an optimization profile (--minShapes/--optShapes/--maxShapes,
--saveEngine) and run from the saved engine at two different shapes (--loadEngine --shapes).
Prints PASS/FAIL per model run and a closing summary; exits 1 when any run fails.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_models  # noqa: E402
import model_zoo  # noqa: E402

RTOL = 1e-4
ATOL = 1e-4
KILN_TIMEOUT_S = 900

# Dynamic models: the profile (min, opt, max) and the shapes each run uses (two different ones).
DYNAMIC = {
    "mlp_dynamic": {
        "profile": ({"input": [1, 784]}, {"input": [8, 784]}, {"input": [16, 784]}),
        "runs": [{"input": [1, 784]}, {"input": [7, 784]}],
    },
    "bert_dynamic": {
        "profile": tuple({n: s for n in ("input_ids", "attention_mask", "token_type_ids")}
                         for s in ([1, 8], [2, 64], [4, 128])),
        "runs": [{n: [1, 128] for n in ("input_ids", "attention_mask", "token_type_ids")},
                 {n: [3, 40] for n in ("input_ids", "attention_mask", "token_type_ids")}],
    },
}


def shape_spec(shapes: dict[str, list[int]]) -> str:
    return ",".join(f"{name}:{'x'.join(str(d) for d in dims)}" for name, dims in shapes.items())


def run_ort(model_path: str, feeds: dict[str, np.ndarray], threads: int) -> dict[str, np.ndarray]:
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = threads
    sess = ort.InferenceSession(model_path, opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def run_kiln(cmd: list[str]) -> tuple[bool, str]:
    """Runs one kiln CLI command; (ok, the tail of its output for the report)."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=KILN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return False, f"timed out after {KILN_TIMEOUT_S} s: {' '.join(cmd)}"
    except OSError as e:
        return False, f"cannot run {cmd[0]}: {e}"
    if p.returncode != 0:
        tail = (p.stdout + p.stderr).strip().splitlines()[-5:]
        return False, f"exit status {p.returncode}: {' | '.join(tail)}"
    return True, ""


def read_kiln_outputs(path: str) -> dict[str, np.ndarray]:
    """--exportOutput JSON (trtexec's list): [{"name", "dimensions", "values", "dims", "dtype"}]."""
    with open(path) as f:
        doc = json.load(f)
    out = {}
    for o in doc:
        arr = np.array(o["values"], dtype=np.dtype(o["dtype"]))
        out[o["name"]] = arr.reshape(o["dims"])
    return out


def compare(kiln_out: dict[str, np.ndarray], ref: dict[str, np.ndarray]) -> tuple[bool, str]:
    notes = []
    ok = True
    for name, expected in ref.items():
        if name not in kiln_out:
            return False, f"kiln produced no output '{name}' (has {sorted(kiln_out)})"
        got = kiln_out[name]
        if got.shape != expected.shape or got.dtype != expected.dtype:
            return False, f"'{name}': kiln {got.dtype}{list(got.shape)}, expected {expected.dtype}{list(expected.shape)}"
        if expected.dtype.kind in "biu":  # integers, bool, indices: exactly
            bad = got != expected
            notes.append(f"{name}: compared exactly")
            if bad.any():
                ok = False
                i = np.unravel_index(np.argmax(bad), bad.shape)
                notes.append(f"{int(bad.sum())} of {bad.size} elements of '{name}' differ, first at {list(i)}: "
                             f"kiln {got[i]}, ort {expected[i]}")
            continue
        g64, e64 = got.astype(np.float64), expected.astype(np.float64)
        err = np.abs(g64 - e64)
        bad = ~((err <= ATOL + RTOL * np.abs(e64)) | (np.isnan(g64) & np.isnan(e64)))
        # worst err / allowed err: below 1 passes; shows the margin left.
        worst = float(np.max(err / (ATOL + RTOL * np.abs(e64)))) if err.size else 0.0
        notes.append(f"{name}: max abs err {float(err.max()) if err.size else 0:.2e}, worst err/tolerance {worst:.2f}")
        if bad.any():
            ok = False
            i = np.unravel_index(np.argmax(bad), bad.shape)
            notes.append(f"{int(bad.sum())} of {bad.size} elements of '{name}' differ, first at {list(i)}: "
                         f"kiln {got[i]}, ort {expected[i]}")
    return ok, "; ".join(notes)


def save_inputs(feeds: dict[str, np.ndarray], work: str, tag: str) -> str:
    """Writes each input as .npy; returns the --loadInputs value."""
    specs = []
    for name, arr in feeds.items():
        path = os.path.join(work, f"{tag}.{name}.npy")
        np.save(path, arr)
        specs.append(f"{name}:{path}")
    return ",".join(specs)


def reference_path(model_path: str) -> str:
    """The model ONNX Runtime runs as the reference: the model itself, or its modern equivalent
    (model_zoo.REFERENCE_MODELS) for opsets ONNX Runtime no longer loads."""
    name = os.path.splitext(os.path.basename(model_path))[0]
    if name not in model_zoo.REFERENCE_MODELS:
        return model_path
    path = os.path.join(os.path.dirname(model_path), f"{name}.reference.onnx")
    onnx.save(model_zoo.REFERENCE_MODELS[name](), path)
    return path


def check_run(kiln_cmd: list[str], model_path: str, feeds, work: str, tag: str, threads: int) -> tuple[bool, str]:
    out_json = os.path.join(work, f"{tag}.out.json")
    if os.path.exists(out_json):
        os.remove(out_json)
    cmd = kiln_cmd + [f"--loadInputs={save_inputs(feeds, work, tag)}", f"--exportOutput={out_json}",
                      "--iterations=1", "--warmUp=0", "--duration=0"]
    ok, why = run_kiln(cmd)
    if not ok:
        return False, why
    try:
        got = read_kiln_outputs(out_json)
    except (OSError, ValueError, KeyError, TypeError) as e:
        return False, f"cannot read {out_json}: {e}"
    return compare(got, run_ort(reference_path(model_path), feeds, threads))


def device_flags(args) -> list[str]:
    """The GPU runs FP32 engines without TF32 (--noTF32), as every GPU test of kiln does: TF32's
    10-bit mantissa would need a far looser tolerance than the 1e-3 they use."""
    return ["--noTF32"] if args.device == "gpu" else []


def test_static(args, name: str, model_path: str, work: str) -> list[tuple[str, bool, str]]:
    model = onnx.load(model_path, load_external_data=False)
    feeds = model_zoo.make_inputs(model, None, seed=100)
    cmd = [args.kiln, f"--onnx={model_path}", f"--device={args.device}", *device_flags(args), f"--threads={args.threads}",
           *args.build_flag]
    ok, why = check_run(cmd, model_path, feeds, work, name, args.threads)
    return [(name, ok, why)]


def test_dynamic(args, name: str, model_path: str, work: str) -> list[tuple[str, bool, str]]:
    spec = DYNAMIC[name]
    lo, opt, hi = spec["profile"]
    engine = os.path.join(work, f"{name}.engine")
    build = [args.kiln, f"--onnx={model_path}", f"--device={args.device}", *device_flags(args), f"--threads={args.threads}",
             f"--minShapes={shape_spec(lo)}", f"--optShapes={shape_spec(opt)}", f"--maxShapes={shape_spec(hi)}",
             f"--saveEngine={engine}", "--skipInference", *args.build_flag]
    ok, why = run_kiln(build)
    if not ok:
        return [(f"{name} (build with profile)", False, why)]
    model = onnx.load(model_path, load_external_data=False)
    results = []
    for i, shapes in enumerate(spec["runs"]):
        label = f"{name} [{shape_spec(shapes)}]"
        feeds = model_zoo.make_inputs(model, shapes, seed=200 + i)
        cmd = [args.kiln, f"--loadEngine={engine}", f"--device={args.device}", *device_flags(args), f"--threads={args.threads}",
               f"--shapes={shape_spec(shapes)}"]
        ok, why = check_run(cmd, model_path, feeds, work, f"{name}.{i}", args.threads)
        results.append((label, ok, why))
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kiln", required=True, help="path of the kiln CLI")
    parser.add_argument("--models", required=True, help="directory of the model files (generated if missing)")
    parser.add_argument("--only", default="", help="comma-separated model names (default: all)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu", choices=["cpu", "gpu"],
                        help="gpu: FP32 engines without TF32 (--noTF32), compared at rtol = atol = 1e-3")
    parser.add_argument("--build-flag", action="append", default=[],
                        help="extra kiln flag for every build, e.g. --build-flag=--gpuFusions (repeatable)")
    parser.add_argument("--work", default="", help="directory for inputs/outputs/engines (default: MODELS/_run)")
    args = parser.parse_args()
    if args.device == "gpu":
        global RTOL, ATOL
        RTOL = ATOL = 1e-3

    if not os.access(args.kiln, os.X_OK):
        print(f"error: {args.kiln} is not an executable", file=sys.stderr)
        return 2
    names = [n for n in args.only.split(",") if n] or list(model_zoo.TEST_MODELS)
    missing = [n for n in names if not os.path.exists(os.path.join(args.models, f"{n}.onnx"))]
    if missing:
        gen_models.generate(args.models, missing)
    work = args.work or os.path.join(args.models, "_run")
    os.makedirs(work, exist_ok=True)

    results = []
    for name in names:
        model_path = os.path.join(args.models, f"{name}.onnx")
        start = time.time()
        runs = test_dynamic(args, name, model_path, work) if name in DYNAMIC else test_static(args, name, model_path, work)
        for label, ok, why in runs:
            print(f"{'PASS' if ok else 'FAIL'} {label} ({time.time() - start:.1f} s): {why}", flush=True)
        results.extend(runs)

    failed = sum(1 for _, ok, _ in results if not ok)
    print(f"{len(results) - failed} passed, {failed} failed (rtol {RTOL}, atol {ATOL})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
