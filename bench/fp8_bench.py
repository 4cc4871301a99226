#!/usr/bin/env python3
"""FP8 against FP16, kiln alone (issue 15's FP8 rows): for each model of the peer script, the FP16
engine of its ONNX export and the FP16 engine of the same export with FP8 Q/DQ on every MatMul /
Gemm with constant weights (bench/fp8_qdq.py, ModelOpt's per-tensor recipe, calibrated on the batch-1
input), built with `kiln --fp16` and timed alike (CUDA graph, no transfers, median of 100), with
each engine's error against PyTorch's FP32 output at batch 1 (max |out - ref| / range(ref)) and the
number of Fp8MatMul layers the FP8 engine runs.
Usage (on the GPU machine):
  python3 bench/fp8_bench.py --kiln /tmp/kb/bin/kiln --peers .device_deps/peers.py --out fp8.md \
      [--models bert_base_s128,gpt2_s512] [--batches 1,32]"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fp8_qdq  # noqa: E402


def sh(cmd, timeout=900):
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def last_line(p):
    lines = (p.stderr.strip() or p.stdout.strip()).splitlines()
    return lines[-1][:300] if lines else f"exit {p.returncode}"


def profile_groups(prof_path, info_path, groups=8):
    """Total ms per (op, tactic, precision) of one engine (kiln's --exportProfile / --exportLayerInfo)."""
    with open(prof_path) as f:
        prof = json.load(f)
    with open(info_path) as f:
        info = {layer["name"]: layer for layer in json.load(f).get("layers", [])}
    by = {}
    for r in prof[1:]:
        if "averageMs" not in r:
            continue
        layer = info.get(r["name"], {})
        key = f'{layer.get("op", "?")} {layer.get("tactic", "?")} {layer.get("precision", "?")}'
        n, ms = by.get(key, (0, 0.0))
        by[key] = (n + 1, ms + r["averageMs"])
    return [[k, n, round(ms, 4)] for k, (n, ms) in sorted(by.items(), key=lambda kv: -kv[1][1])[:groups]]


def fmt(v, p):
    """A table number with p decimals, '-' for none."""
    return f"{v:.{p}f}" if isinstance(v, float) else ("-" if v is None else str(v))


def write_profiles(f, rows, tags):
    """Each row's per-(op, tactic, precision) profile lines, for the engines `tags`."""
    for r in rows:
        for tag in tags:
            if f"{tag}_profile" in r:
                f.write(f"\n{r['model']} b{r['batch']} {tag} (`--exportProfile`, ms per op / tactic / precision): " +
                        "; ".join(f"{k} x{n} {ms}" for k, n, ms in r[f"{tag}_profile"]) + "\n")


def engine_row(kiln, onnx_path, tag, d, ref_dir, profile=False, build_args=("--fp16",), quant_ops=("Fp8MatMul",)):
    """Builds and times one engine; `quant_layers` counts its layers of `quant_ops`; with `ref_dir`,
    err (max |out - ref| / range) and cos (cosine similarity) against PyTorch's FP32 output."""
    plan = os.path.join(d, f"{tag}.plan")
    row = {}
    b = sh([kiln, f"--onnx={onnx_path}", *build_args, f"--saveEngine={plan}", "--skipInference"], timeout=1800)
    if b.returncode != 0:
        return {"error": "build: " + last_line(b)}
    times, info = os.path.join(d, f"{tag}_times.json"), os.path.join(d, f"{tag}_layers.json")
    r = sh([kiln, f"--loadEngine={plan}", "--useCudaGraph", "--noDataTransfers", "--iterations=100", "--warmUp=300",
            "--duration=0", "--avgRuns=1", f"--exportTimes={times}", f"--exportLayerInfo={info}"])
    if r.returncode != 0:
        return {"error": "run: " + last_line(r)}
    with open(times) as f:
        t = json.load(f)
    row["ms"] = statistics.median(x["computeMs"] for x in (t["iterations"] if isinstance(t, dict) else t) if "computeMs" in x)
    if profile:
        prof = os.path.join(d, f"{tag}_profile.json")
        p = sh([kiln, f"--loadEngine={plan}", "--iterations=20", "--warmUp=50", "--duration=0", f"--exportProfile={prof}"])
        if p.returncode == 0:
            row["profile"] = profile_groups(prof, info)
    with open(info) as f:
        layers = json.load(f)
    layers = layers.get("layers", layers) if isinstance(layers, dict) else layers
    row["quant_layers"] = sum(1 for layer in layers if layer.get("op") in quant_ops)
    if ref_dir:
        out_json = os.path.join(d, f"{tag}_out.json")
        c = sh([kiln, f"--loadEngine={plan}", f"--loadInputs=input:{os.path.join(ref_dir, 'input_0.pb')}",
                f"--exportOutput={out_json}", "--iterations=1", "--warmUp=0", "--duration=0"])
        if c.returncode != 0:
            row["error"] = "check: " + last_line(c)
            return row
        with open(out_json) as f:
            got = json.load(f)[0]
        ref = numpy_helper.to_array(onnx.load_tensor(os.path.join(ref_dir, "output_0.pb"))).astype(np.float64)
        val = np.array([float(v) for v in got["values"]], dtype=np.float64).reshape(ref.shape)
        row["err"] = float(np.abs(val - ref).max() / max(float(ref.max() - ref.min()), 1e-12))
        row["cos"] = float(np.dot(val.ravel(), ref.ravel()) / max(np.linalg.norm(val) * np.linalg.norm(ref), 1e-30))
    return row


def bench_args(doc, models, batches, work):
    """The arguments the kiln-alone precision benches share (fp8_bench, int8_bench)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--peers", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default=models)
    ap.add_argument("--batches", default=batches)
    ap.add_argument("--work", default=work)
    ap.add_argument("--profile", action="store_true", help="also each engine's time per (op, tactic, precision)")
    return ap


def main():
    a = bench_args(__doc__, "bert_base_s128,gpt2_s512", "1,32", "/tmp/kiln_fp8_bench").parse_args()
    os.makedirs(a.work, exist_ok=True)
    e = sh([sys.executable, a.peers, "--modes", "none", "--export", a.work, "--models", a.models, "--batches", a.batches], timeout=1800)
    if e.returncode != 0:
        print(e.stderr[-3000:], file=sys.stderr)
    rows = []
    for name in a.models.split(","):
        amax = None
        for batch in [int(b) for b in a.batches.split(",")]:
            d = os.path.join(a.work, f"{name}_b{batch}")
            src = os.path.join(d, "model.onnx")
            if not os.path.exists(src):
                rows.append({"model": name, "batch": batch, "error": "no export"})
                continue
            ref_dir = os.path.join(d, "test_data_set_0")
            ref_dir = ref_dir if os.path.isdir(ref_dir) else None
            m = onnx.load(src)
            if amax is None:  # calibration: the batch-1 input (the first batch listed)
                calib = ref_dir or os.path.join(a.work, f"{name}_b1", "test_data_set_0")
                x = numpy_helper.to_array(onnx.load_tensor(os.path.join(calib, "input_0.pb")))
                amax = fp8_qdq.activation_amax(onnx.load(os.path.join(os.path.dirname(calib), "model.onnx")), {"input": x})
            fp8_path = os.path.join(d, "model_fp8.onnx")
            onnx.save(fp8_qdq.quantize_fp8(m, amax), fp8_path)
            row = {"model": name, "batch": batch}
            fp16 = engine_row(a.kiln, src, "fp16", d, ref_dir, a.profile)
            fp8 = engine_row(a.kiln, fp8_path, "fp8", d, ref_dir, a.profile)
            row.update({f"fp16_{k}": v for k, v in fp16.items()})
            row.update({f"fp8_{k}": v for k, v in fp8.items()})
            if "ms" in fp16 and "ms" in fp8:
                row["speedup"] = fp16["ms"] / fp8["ms"]
            print(json.dumps(row), flush=True)
            rows.append(row)
    gpu = sh(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]).stdout.strip()
    with open(a.out, "w") as f:
        f.write("# FP8 (explicit Q/DQ, ModelOpt-style per-tensor) vs FP16, kiln alone\n\n")
        f.write(f"- Date: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}\n")
        f.write(f"- Machine: {gpu}; {platform.node()}\n")
        f.write(f"- Command: `python3 bench/fp8_bench.py --kiln {a.kiln} --peers {a.peers} --models {a.models} --batches {a.batches}{' --profile' if a.profile else ''}`\n")
        f.write("- Both engines `kiln --fp16`; the FP8 one from bench/fp8_qdq.py's Q/DQ export (calibrated on the batch-1 input). "
                "CUDA graph, no transfers, median of 100. err = max |out - PyTorch FP32| / range, batch 1.\n\n")
        f.write("| model | batch | FP16 ms | FP8 ms | FP8 speed-up | Fp8MatMul layers | FP16 err | FP8 err | note |\n")
        f.write("|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
        for r in rows:
            note = "; ".join(str(r[k]) for k in ("error", "fp16_error", "fp8_error") if k in r)
            err = lambda k: f"{r[k]:.2e}" if k in r else "-"  # noqa: E731
            f.write(f"| {r['model']} | {r['batch']} | {fmt(r.get('fp16_ms'), 3)} | {fmt(r.get('fp8_ms'), 3)} | "
                    f"{fmt(r.get('speedup'), 2)}x | {r.get('fp8_quant_layers', '-')} | {err('fp16_err')} | {err('fp8_err')} | {note} |\n")
        write_profiles(f, rows, ("fp16", "fp8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
