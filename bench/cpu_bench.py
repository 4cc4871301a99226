#!/usr/bin/env python3
"""CPU latency benchmark: kiln vs ONNX Runtime (CPU EP) on ResNet-50, MobileNetV2 and BERT-base.

  cpu_bench.py --kiln build/bin/kiln --threads 2 --out bench/results/cpu.md [--iterations 30]

For each model (generated with seeded random weights, or reused from --models): kiln builds the
engine once (--saveEngine), then kiln (--loadEngine, per-iteration times from --exportTimes) and ORT
(intra_op_num_threads = --threads, every graph optimization on) are timed in alternating rounds on
the same inputs; each side's median over all timed iterations of all rounds is reported.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "models"))
import model_zoo  # noqa: E402

MODELS = {
    "ResNet-50 (bs 1, 224x224)": ("resnet50_bs1", lambda: model_zoo.make_resnet50(batch=1)),
    "MobileNetV2 (bs 1, 224x224)": ("mobilenetv2_bs1", lambda: model_zoo.make_mobilenetv2(batch=1)),
    "BERT-base (12 layers, hidden 768, seq 128, bs 1)": ("bert_base_seq128_bs1", lambda: model_zoo.bert_base(seq=128)),
}
# trtexec-style summary line, the fallback when --exportTimes is unusable.
MEDIAN_RE = re.compile(r"Latency:.*?median = ([0-9.eE+-]+) ms")


def model_file(model_dir: str, stem: str, factory) -> str:
    path = os.path.join(model_dir, f"{stem}.onnx")
    if not os.path.exists(path):
        print(f"generating {path}", flush=True)
        data = factory().SerializeToString()
        with open(path + ".tmp", "wb") as f:
            f.write(data)
        os.replace(path + ".tmp", path)
    return path


def run(cmd: list[str], timeout: int = 3600) -> str:
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"{shlex.join(cmd)} failed ({p.returncode}):\n{(p.stdout + p.stderr)[-2000:]}")
    return p.stdout + p.stderr


def iteration_times(times_json: str, output: str) -> list[float]:
    """Per-iteration latencies (ms) from --exportTimes; else the summary median, repeated once."""
    try:
        with open(times_json) as f:
            doc = json.load(f)
        entries = doc.get("times", doc) if isinstance(doc, dict) else doc
        times = []
        for e in entries:
            if isinstance(e, (int, float)):
                times.append(float(e))
            elif isinstance(e, dict):
                for key in ("latencyMs", "computeMs", "timeMs", "ms"):
                    if key in e:
                        times.append(float(e[key]))
                        break
        if times:
            return times
    except (OSError, ValueError, TypeError, AttributeError):
        pass
    m = MEDIAN_RE.search(output)
    if not m:
        raise RuntimeError("kiln printed no 'Latency: ... median = X ms' summary and no usable --exportTimes file")
    return [float(m.group(1))]


def time_ort(sess: ort.InferenceSession, feeds, iterations: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        sess.run(None, feeds)
    times = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def bench_model(args, label: str, path: str, work: str) -> dict:
    model = onnx.load(path, load_external_data=False)
    feeds = model_zoo.make_inputs(model, None, seed=7)
    input_spec = []
    for name, arr in feeds.items():
        npy = os.path.join(work, f"{os.path.basename(path)}.{name}.npy")
        np.save(npy, arr)
        input_spec.append(f"{name}:{npy}")

    engine = os.path.join(work, os.path.basename(path) + ".engine")
    print(f"[{label}] building the kiln engine", flush=True)
    t0 = time.time()
    run([args.kiln, f"--onnx={path}", "--device=cpu", f"--threads={args.threads}", f"--saveEngine={engine}",
         "--skipInference"])
    build_s = time.time() - t0

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = args.threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])

    per_round = max(1, args.iterations // args.rounds)
    kiln_times, ort_times = [], []
    for r in range(args.rounds):
        times_json = os.path.join(work, "times.json")
        if os.path.exists(times_json):
            os.remove(times_json)
        out = run([args.kiln, f"--loadEngine={engine}", "--device=cpu", f"--threads={args.threads}",
                   f"--loadInputs={','.join(input_spec)}", f"--iterations={per_round}",
                   f"--warmUp={args.warmup_ms}", "--duration=0", f"--exportTimes={times_json}"])
        kiln_times += iteration_times(times_json, out)
        ort_times += time_ort(sess, feeds, per_round, warmup=args.ort_warmup)
        print(f"[{label}] round {r + 1}/{args.rounds}: kiln median {statistics.median(kiln_times):.2f} ms, "
              f"ORT median {statistics.median(ort_times):.2f} ms", flush=True)
    kiln_ms, ort_ms = statistics.median(kiln_times), statistics.median(ort_times)
    return {"label": label, "ort": ort_ms, "kiln": kiln_ms, "ratio": kiln_ms / ort_ms, "build_s": build_s,
            "n_kiln": len(kiln_times), "n_ort": len(ort_times), "engine": engine, "input_spec": input_spec,
            "outputs": sess.run(None, feeds)}


def machine_description() -> str:
    try:
        info = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        fields = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
        model = fields.get("Model name", platform.processor()).strip()
    except OSError:
        model = platform.processor()
    return f"{model}; {os.cpu_count()} logical CPUs visible"


def kiln_version(kiln: str) -> str:
    try:
        out = subprocess.run([kiln, "--version"], capture_output=True, text=True, timeout=30)
        text = (out.stdout + out.stderr).strip().splitlines()
        if out.returncode == 0 and text:
            return text[0]
    except (OSError, subprocess.TimeoutExpired):
        pass
    header = os.path.join(REPO, "include", "kiln", "version.h")
    m = re.search(r'KILN_VERSION_STRING "([^"]+)"', open(header).read()) if os.path.exists(header) else None
    return f"kiln {m.group(1)}" if m else "unknown"


def git_commit() -> str:
    try:
        return subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def write_report(args, rows: list[dict], path: str) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    lines = [
        "# CPU latency: kiln vs ONNX Runtime", "",
        f"- Date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"- Machine: {machine_description()}",
        f"- Threads: {args.threads} (kiln --threads, ORT intra_op_num_threads)",
        f"- Command: `{shlex.join([sys.executable] + sys.argv)}`",
        f"- Versions: {kiln_version(args.kiln)} (commit {git_commit()}), onnxruntime {ort.__version__}, "
        f"onnx {onnx.__version__}, numpy {np.__version__}, Python {platform.python_version()}",
        f"- Method: {args.rounds} alternating rounds of kiln then ORT, {max(1, args.iterations // args.rounds)} "
        f"timed iterations each per round; median over all timed iterations. Random weights (seeded), "
        f"same inputs for both.", "",
        "| Model | ORT median (ms) | kiln median (ms) | kiln / ORT |",
        "|---|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r['label']} | {r['ort']:.2f} | {r['kiln']:.2f} | {r['ratio']:.2f} |")
    lines += ["", "kiln engine build times: " + ", ".join(f"{r['label'].split(' (')[0]} {r['build_s']:.1f} s"
                                                          for r in rows), ""]
    # The other architectures (issue 22's zoo) are timed by cpu_zoo.py into cpu-zoo.md beside this file.
    zoo = os.path.join(os.path.dirname(os.path.abspath(path)), "cpu-zoo.md")
    if os.path.exists(zoo):
        with open(zoo) as f:
            means = [line.strip() for line in f if line.startswith("Geometric mean")]
        lines += ["Beyond these three: `cpu-zoo.md` (bench/cpu_zoo.py, the GPU zoo's architectures, same method). "
                  + (means[-1] if means else ""), ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kiln", required=True, help="path of the kiln CLI")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", required=True, help="markdown report to write")
    parser.add_argument("--iterations", type=int, default=30, help="timed iterations per side, over all rounds")
    parser.add_argument("--rounds", type=int, default=3, help="alternating kiln/ORT rounds")
    parser.add_argument("--warmup-ms", type=int, default=500, help="kiln --warmUp per round (ms)")
    parser.add_argument("--ort-warmup", type=int, default=3, help="ORT warm-up runs per round")
    parser.add_argument("--models", default=os.path.join(tempfile.gettempdir(), "kiln_bench_models"),
                        help="where the ONNX files are generated/reused")
    parser.add_argument("--only", default="", help="substring filter on the model labels")
    args = parser.parse_args()
    if args.threads < 1 or args.iterations < 1 or args.rounds < 1:
        parser.error("--threads, --iterations and --rounds must be positive")
    if not os.access(args.kiln, os.X_OK):
        parser.error(f"{args.kiln} is not an executable")

    os.makedirs(args.models, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="kiln_bench_") as work:
        for label, (stem, factory) in MODELS.items():
            if args.only and args.only.lower() not in label.lower():
                continue
            rows.append(bench_model(args, label, model_file(args.models, stem, factory), work))
    write_report(args, rows, args.out)
    print(open(args.out).read())
    return 0


if __name__ == "__main__":
    sys.exit(main())
