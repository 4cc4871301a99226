#!/usr/bin/env python3
"""CPU zoo (issue 22): kiln vs ONNX Runtime (CPU EP) at batch 1 on the architectures of
bench/zoo_models.py (the GPU perf zoo's models: EfficientNet, MobileNetV3, RegNetY, ConvNeXt, Swin,
DeiT, BERT, T5, ...), beyond the three of cpu_bench.py.

  cpu_zoo.py --kiln build/bin/kiln --threads 2 --out bench/results/cpu-zoo.md [--models a,b] [--iterations 20]

Per model: export to ONNX as the GPU zoo does (opset 17, fixed shapes, batch 1, seeded random
informative weights), then cpu_bench.bench_model: kiln builds once, kiln and ORT (every graph
optimization on, intra_op_num_threads = --threads) are timed in alternating rounds on the same
inputs, medians reported. kiln's output is checked against ORT's (max |diff| / range). The table ends
with the geometric mean of kiln / ORT (lower is better). Rows are kept as JSON lines beside the report,
so a zoo too slow for one run is run in parts (a model run again replaces its row)."""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import shlex
import sys
import tempfile

import numpy as np
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cpu_bench  # noqa: E402
import zoo_models  # noqa: E402

# The zoo's models that run at a sensible CPU latency at batch 1 (the LLaMA/Qwen decoders at
# sequence 512-1024 and the Whisper encoder take seconds per call on two cores).
DEFAULT = ("efficientnet_b0,mobilenet_v3_large,resnet26_mish,convnext_tiny,regnet_y_800mf,resnext50_32x4d,"
           "resnet50_gn,densenet121,shufflenet_v2,inception_v3,hrnet_w18_small,poolformer_s12,mobilevit_s,"
           "segformer_b0,swin_t,deit_small,bert_padded_s128,deberta_v2_s256")


def export(torch, peers, name, spec, path):
    torch.manual_seed(0)
    model = peers.randomize(spec.make().eval()) if peers else spec.make().eval()
    inputs = spec.inputs(1)
    names = [f"input_{i}" for i in range(len(inputs))]
    torch.onnx.export(model, inputs, path, dynamo=False, opset_version=17, input_names=names, output_names=["output"])


def check(args, timed, work):
    """max |kiln - ORT| / range(ORT) on the first output: the engine and inputs bench_model timed."""
    out = os.path.join(work, "check.json")
    cpu_bench.run([args.kiln, f"--loadEngine={timed['engine']}", "--device=cpu", f"--threads={args.threads}",
                   f"--loadInputs={','.join(timed['input_spec'])}", f"--exportOutput={out}", "--iterations=1", "--warmUp=0",
                   "--duration=0"])
    with open(out) as f:
        got = np.array([float(v) for v in json.load(f)[0]["values"]], dtype=np.float64)
    ref = timed["outputs"][0].astype(np.float64).ravel()
    if got.size != ref.size:
        return float("inf")
    return float(np.abs(got - ref).max() / ((ref.max() - ref.min()) or 1.0))


def write_report(args, rows, path):
    ratios = [r["ratio"] for r in rows if r.get("ratio")]
    geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios)) if ratios else float("nan")
    lines = ["# CPU zoo: kiln vs ONNX Runtime at batch 1", "",
             f"- Updated: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
             f"- Machine: {cpu_bench.machine_description()}",
             f"- Threads: {args.threads} (kiln --threads, ORT intra_op_num_threads)",
             f"- Command (last part run): `{shlex.join([sys.executable] + sys.argv)}`",
             f"- Versions: {cpu_bench.kiln_version(args.kiln)} (commit {cpu_bench.git_commit()}), onnxruntime "
             f"{ort.__version__}; models exported by bench/zoo_models.py (opset 17, seeded random weights)",
             f"- Method: {args.rounds} alternating rounds of kiln then ORT, median over all timed iterations "
             "(cpu_bench.py's method); error = max |kiln - ORT| / range(ORT).", "",
             "Rows of earlier runs are kept (a zoo too slow for one run is run in parts): `measured` gives each "
             "row's date and kiln commit.", "",
             "| model | tags | ORT ms | kiln ms | kiln / ORT | error | build s | measured | note |",
             "|---|---|---:|---:|---:|---:|---:|---|---|"]
    for r in rows:
        when = r.get("date", "?")[:10] + (f" {r['commit']}" if r.get("commit") else "")
        lines.append(f"| {r['model']} | {' '.join(r.get('tags', [])[1:])} | "
                     + (f"{r['ort']:.2f} | {r['kiln']:.2f} | {r['ratio']:.2f} | {r['err']:.1e} | {r['build_s']:.1f} | {when} | |"
                        if r.get("ratio") else f"- | - | - | - | - | {when} | {r.get('error', '')[:150]} |"))
    worst = max(rows, key=lambda r: r.get("ratio", 0), default=None)
    loads = [r["load"] for r in rows if "load" in r]
    if loads:  # other work on the machine slows both sides, ORT's spinning threads far more than kiln
        lines += ["", f"Machine load (1-minute load average when each model started): {min(loads)} to {max(loads)} "
                  f"on {os.cpu_count()} CPUs."]
    lines += ["", f"Geometric mean of kiln / ORT over {len(ratios)} models: **{geo:.2f}**"
              + (f" (worst: {worst['model']} {worst['ratio']:.2f})" if worst and worst.get("ratio") else ""), ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default="bench/results/cpu-zoo.md")
    ap.add_argument("--models", default=DEFAULT)
    ap.add_argument("--peers", default="", help="peers.py (for randomize(); plain PyTorch init without it)")
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--warmup-ms", type=int, default=300)
    ap.add_argument("--ort-warmup", type=int, default=2)
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "kiln_cpu_zoo"))
    args = ap.parse_args()
    import importlib.util
    import torch
    peers = None
    if args.peers:
        s = importlib.util.spec_from_file_location("peers", args.peers)
        peers = importlib.util.module_from_spec(s)
        s.loader.exec_module(peers)
    table = zoo_models.zoo()
    wanted = [m for m in args.models.split(",") if m]
    unknown = [m for m in wanted if m not in table]
    if unknown:
        sys.exit(f"unknown zoo models: {', '.join(unknown)}")
    results = os.path.splitext(args.out)[0] + ".jsonl"
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    rows = []
    if os.path.exists(results):
        with open(results) as f:
            rows = [json.loads(line) for line in f if line.strip()]
    rows = [r for r in rows if r["model"] not in wanted]
    torch.set_num_threads(args.threads)
    for name in wanted:
        work = os.path.join(args.work, name)
        os.makedirs(work, exist_ok=True)
        path = os.path.join(work, "model.onnx")
        row = {"model": name, "tags": table[name].tags, "load": round(os.getloadavg()[0], 1)}
        try:
            export(torch, peers, name, table[name], path)
            timed = cpu_bench.bench_model(args, name, path, work)
            row["err"] = check(args, timed, work)
            row.update({k: v for k, v in timed.items() if k not in ("engine", "input_spec", "outputs")})
        except Exception as ex:  # one model's failure is a row, not the end of the run
            row["error"] = str(ex).strip().splitlines()[-1][:300] if str(ex).strip() else type(ex).__name__
        row["date"] = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
        row["commit"] = cpu_bench.git_commit()
        print(json.dumps(row), flush=True)
        rows.append(row)
        order = list(table)
        rows.sort(key=lambda r: order.index(r["model"]) if r["model"] in order else 99)
        with open(results, "w") as f:
            f.write("".join(json.dumps(r) + "\n" for r in rows))
        write_report(args, rows, args.out)


if __name__ == "__main__":
    main()
