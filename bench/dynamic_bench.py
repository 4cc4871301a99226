#!/usr/bin/env python3
"""Dynamic-shape engines against fixed-shape engines on the GPU (issue 23's measurement).

BERT-base (Hugging Face BertModel, random weights, eager attention, padding mask) is exported once
with dynamic batch and sequence axes and once per measured shape with fixed shapes. kiln builds one
FP16 engine from the dynamic export with the profile min 1x16, opt 16x128, max 32x512 and one FP16
engine per fixed export; each engine is timed with CUDA graphs and no transfers (median of the
iterations' GPU compute times), the dynamic one at each shape through --shapes. Writes a markdown
table (dynamic / fixed per shape) and a JSON line per shape.
Usage (GPU machine): python3 bench/dynamic_bench.py --kiln BIN --out OUT.md [--shapes 1x128,16x128]
                     [--layers 12] [--work DIR]"""
import argparse, datetime, json, os, platform, statistics, subprocess, sys, time

DEFAULT_SHAPES = "1x128,8x128,16x128,32x128,32x512,4x37"
PROFILE = {"min": (1, 16), "opt": (16, 128), "max": (32, 512)}
INPUTS = ["input_ids", "attention_mask"]


def run(cmd, timeout=1800):
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def export(module, path, b, s, dynamic):
    import torch
    ids = torch.randint(0, 1000, (b, s))
    mask = torch.ones(b, s, dtype=torch.int64)
    axes = {n: {0: "batch", 1: "seq"} for n in INPUTS + ["output"]} if dynamic else None
    torch.onnx.export(module, (ids, mask), path, dynamo=False, opset_version=17, input_names=INPUTS,
                      output_names=["output"], dynamic_axes=axes)


def shape_arg(b, s):
    return ",".join(f"{n}:{b}x{s}" for n in INPUTS)


def time_engine(kiln, plan, work, tag, shape=None):
    times = os.path.join(work, f"times_{tag}.json")
    cmd = [kiln, f"--loadEngine={plan}", "--useCudaGraph", "--noDataTransfers", "--iterations=200",
           "--warmUp=300", "--duration=0", "--avgRuns=1", f"--exportTimes={times}"]
    if shape:
        cmd.append(f"--shapes={shape_arg(*shape)}")
    r = run(cmd)
    if r.returncode != 0:
        return None, (r.stderr.strip().splitlines() or ["run failed"])[-1][:300]
    t = json.load(open(times))
    samples = [x["computeMs"] for x in (t["iterations"] if isinstance(t, dict) else t) if "computeMs" in x]
    graph = "graph capture is not possible" not in r.stderr
    return statistics.median(samples), None if graph else "no CUDA graph"


def build(kiln, onnx_path, plan, extra):
    t0 = time.time()
    r = run([kiln, f"--onnx={onnx_path}", "--fp16", f"--saveEngine={plan}", "--skipInference", *extra])
    if r.returncode != 0:
        raise RuntimeError(f"build of {onnx_path} failed: {r.stderr.strip()[-1500:]}")
    return time.time() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--shapes", default=DEFAULT_SHAPES)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--work", default="/tmp/kiln_dynamic_bench")
    args = ap.parse_args()
    import torch
    from transformers import BertConfig, BertModel
    os.makedirs(args.work, exist_ok=True)
    cfg = BertConfig(num_hidden_layers=args.layers, attn_implementation="eager")
    torch.manual_seed(0)
    bert = BertModel(cfg).eval()

    class Hidden(torch.nn.Module):
        def __init__(self, m):
            super().__init__(); self.m = m
        def forward(self, input_ids, attention_mask):
            return self.m(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    module = Hidden(bert)
    shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    dyn_onnx = os.path.join(args.work, "bert_dynamic.onnx")
    export(module, dyn_onnx, *PROFILE["opt"], dynamic=True)
    dyn_plan = os.path.join(args.work, "bert_dynamic.plan")
    prof = [f"--{k}Shapes={shape_arg(*v)}" for k, v in PROFILE.items()]
    dyn_build_s = build(args.kiln, dyn_onnx, dyn_plan, prof)
    rows = []
    for b, s in shapes:
        row = {"shape": f"{b}x{s}", "opt": (b, s) == PROFILE["opt"]}
        row["dynamic_ms"], err = time_engine(args.kiln, dyn_plan, args.work, f"dyn_{b}x{s}", (b, s))
        if err: row["dynamic_note"] = err
        fixed_onnx = os.path.join(args.work, f"bert_{b}x{s}.onnx")
        fixed_plan = os.path.join(args.work, f"bert_{b}x{s}.plan")
        try:
            export(module, fixed_onnx, b, s, dynamic=False)
            row["fixed_build_s"] = build(args.kiln, fixed_onnx, fixed_plan, [])
            row["fixed_ms"], err = time_engine(args.kiln, fixed_plan, args.work, f"fixed_{b}x{s}")
            if err: row["fixed_note"] = err
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            row["fixed_note"] = str(e)[-300:]
        if row.get("dynamic_ms") and row.get("fixed_ms"):
            row["ratio"] = row["dynamic_ms"] / row["fixed_ms"]
        print(json.dumps(row), flush=True)
        rows.append(row)
    with open(args.out, "w") as f:
        f.write("# Dynamic-shape engine vs fixed-shape engines (BERT-base, FP16)\n\n")
        f.write(f"- Date: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}\n")
        f.write(f"- Machine: {platform.node()}\n- Command: `{' '.join(sys.argv)}`\n")
        f.write(f"- Profile: min {PROFILE['min']}, opt {PROFILE['opt']}, max {PROFILE['max']} (batch, seq); "
                f"dynamic build {dyn_build_s:.1f} s; {args.layers} layers, random weights, all-ones mask\n")
        f.write("- Timing: CUDA graphs, no transfers, median GPU compute time of 200 iterations after 300 warm-up\n\n")
        f.write("| batch x seq | dynamic engine ms | fixed engine ms | dynamic / fixed | note |\n|---|---:|---:|---:|---|\n")
        for r in rows:
            fmt = lambda v: f"{v:.3f}" if isinstance(v, float) else "-"
            ratio = f"{r['ratio']:.2f}" if "ratio" in r else "-"
            if r["opt"]: ratio = f"**{ratio}** (opt)"
            note = "; ".join(v for k, v in r.items() if k.endswith("_note"))
            f.write(f"| {r['shape']} | {fmt(r.get('dynamic_ms'))} | {fmt(r.get('fixed_ms'))} | {ratio} | {note} |\n")
    with open(os.path.splitext(args.out)[0] + ".jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    return 0 if all("ratio" in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
