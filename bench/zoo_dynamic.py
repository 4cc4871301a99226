#!/usr/bin/env python3
"""Dynamic-axis exports of perf-zoo models against fixed-shape exports (issue 23), on the GPU.

Each model (bench/zoo_models.py, random informative weights as peers.randomize) is exported once
with a dynamic batch axis (and a dynamic sequence axis for token inputs) and once per measured
shape with fixed shapes. kiln builds one FP16 engine from the dynamic export with the profile
min = batch 1 (sequence 16), opt = half the model's throughput batch, max = the throughput batch
(full sequence), and one FP16 engine per fixed export. Every engine is timed with CUDA graphs and
no transfers (median GPU compute time); the dynamic one at each shape through --shapes. The bar:
dynamic / fixed <= 1.10 at the opt shape and <= 1.25 anywhere in the profile.
Usage (GPU machine): python3 bench/zoo_dynamic.py --kiln BIN --peers peers.py [--models a,b]
                     [--results R.jsonl] [--out R.md] [--work DIR]"""
import argparse, datetime, importlib.util, json, os, platform, statistics, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo_models  # noqa: E402

DEFAULT_MODELS = "bert_padded_s128,deit_small,llama_gqa_s1024,resnext50_32x4d,efficientnet_b0"


def run(cmd, timeout=1800):
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def is_tokens(x):
    return not x.is_floating_point() and x.dim() == 2


def export(torch, model, inputs, path, dynamic):
    names = [f"input_{i}" for i in range(len(inputs))]
    axes = None
    if dynamic:
        axes = {n: ({0: "batch", 1: "seq"} if is_tokens(x) else {0: "batch"}) for n, x in zip(names, inputs)}
    torch.onnx.export(model, inputs, path, dynamo=False, opset_version=17, input_names=names,
                      output_names=["output"], dynamic_axes=axes)
    return names


def dims_of(x, b, s):
    d = list(x.shape)
    d[0] = b
    if is_tokens(x):
        d[1] = s
    return d


def shapes_arg(names, inputs, b, s):
    return ",".join(f"{n}:" + "x".join(str(v) for v in dims_of(x, b, s)) for n, x in zip(names, inputs))


def inputs_at(spec, b, s):
    xs = spec.inputs(b)
    return tuple(x[:, :s].contiguous() if is_tokens(x) else x for x in xs)


def op_times(prof_path, info_path):
    """{op: [layers, ms]} of one profiled run (--exportProfile / --exportLayerInfo)."""
    prof = json.load(open(prof_path))
    ops = {l["name"]: l.get("op", "?") for l in json.load(open(info_path)).get("layers", [])}
    by = {}
    for r in prof[1:]:
        if "averageMs" in r:
            n, ms = by.get(ops.get(r["name"], "?"), (0, 0.0))
            by[ops.get(r["name"], "?")] = (n + 1, ms + r["averageMs"])
    return by


def op_diff(dyn, fixed, top=10):
    """Per op: layers and ms of the dynamic and the fixed engine, largest differences first."""
    rows = [[op, dyn.get(op, (0, 0.0))[0], round(dyn.get(op, (0, 0.0))[1], 4), fixed.get(op, (0, 0.0))[0],
             round(fixed.get(op, (0, 0.0))[1], 4)] for op in set(dyn) | set(fixed)]
    return sorted(rows, key=lambda r: -abs(r[2] - r[4]))[:top]


def time_engine(kiln, plan, work, tag, shapes=None, profile=False):
    times = os.path.join(work, f"times_{tag}.json")
    cmd = [kiln, f"--loadEngine={plan}", "--useCudaGraph", "--noDataTransfers", "--iterations=100",
           "--warmUp=300", "--duration=0", "--avgRuns=1", f"--exportTimes={times}"]
    if shapes:
        cmd.append(f"--shapes={shapes}")
    if profile:  # a separate run: per-layer timing disturbs the timed one
        p = run(cmd + [f"--exportProfile={os.path.join(work, f'profile_{tag}.json')}",
                       f"--exportLayerInfo={os.path.join(work, f'layers_{tag}.json')}"])
        if p.returncode != 0:
            print(f"profile of {tag} failed: {p.stderr.strip()[-300:]}", flush=True)
    r = run(cmd)
    if r.returncode != 0:
        return None, (r.stderr.strip().splitlines() or ["run failed"])[-1][:300]
    t = json.load(open(times))
    samples = [x["computeMs"] for x in (t["iterations"] if isinstance(t, dict) else t) if "computeMs" in x]
    return statistics.median(samples), None if "graph capture is not possible" not in r.stderr else "no CUDA graph"


def build(kiln, onnx_path, plan, extra=()):
    t0 = time.time()
    r = run([kiln, f"--onnx={onnx_path}", "--fp16", f"--saveEngine={plan}", "--skipInference", *extra])
    if r.returncode != 0:
        raise RuntimeError("build failed: " + ((r.stderr.strip().splitlines() or ["?"])[-1])[:300])
    return round(time.time() - t0, 1)


def run_model(args, torch, peers, name, spec, write):
    torch.manual_seed(0)
    model = peers.randomize(spec.make().eval())
    bt = max(spec.batches)
    probe = spec.inputs(1)
    tokens = any(is_tokens(x) for x in probe)
    seq = probe[[is_tokens(x) for x in probe].index(True)].shape[1] if tokens else 0
    bopt = max(1, bt // 2)
    # (batch, seq) shapes measured: min batch, opt, max; a ragged one for token models.
    shapes = [(1, seq), (bopt, seq), (bt, seq)] + ([(max(1, bt // 8), max(16, seq * 3 // 10))] if tokens else [])
    work = os.path.join(args.work, name)
    os.makedirs(work, exist_ok=True)
    dyn_onnx, dyn_plan = os.path.join(work, "dynamic.onnx"), os.path.join(work, "dynamic.plan")
    names = export(torch, model, inputs_at(spec, bopt, seq), dyn_onnx, True)
    smin = min(16, seq) if tokens else 0
    prof = [f"--minShapes={shapes_arg(names, probe, 1, smin)}", f"--optShapes={shapes_arg(names, probe, bopt, seq)}",
            f"--maxShapes={shapes_arg(names, probe, bt, seq)}"]
    try:
        dyn_build = build(args.kiln, dyn_onnx, dyn_plan, prof)
    except RuntimeError as ex:
        write({"model": name, "error": "dynamic " + str(ex)})
        return
    for b, s in shapes:
        row = {"model": name, "batch": b, "seq": s or None, "opt": (b, s) == (bopt, seq), "dynamic_build_s": dyn_build}
        sd = os.path.join(work, f"b{b}_s{s}")
        os.makedirs(sd, exist_ok=True)
        fixed_onnx, fixed_plan = os.path.join(sd, "fixed.onnx"), os.path.join(sd, "fixed.plan")
        try:
            export(torch, model, inputs_at(spec, b, s), fixed_onnx, False)
            row["fixed_build_s"] = build(args.kiln, fixed_onnx, fixed_plan)
        except Exception as ex:  # an export or build failure is a row, not the end of the run
            row["error"] = "fixed: " + str(ex).splitlines()[0][:300]
            write(row)
            continue
        prof = args.profile and row["opt"]
        row["dynamic_ms"], note_d = time_engine(args.kiln, dyn_plan, sd, "dynamic", shapes_arg(names, probe, b, s), prof)
        row["fixed_ms"], note_f = time_engine(args.kiln, fixed_plan, sd, "fixed", None, prof)
        if prof:
            try:
                row["op_diff"] = op_diff(op_times(os.path.join(sd, "profile_dynamic.json"), os.path.join(sd, "layers_dynamic.json")),
                                         op_times(os.path.join(sd, "profile_fixed.json"), os.path.join(sd, "layers_fixed.json")))
            except (OSError, ValueError, KeyError) as ex:
                row["op_diff_error"] = str(ex)[:200]
        notes = [n for n in (note_d and "dynamic: " + note_d, note_f and "fixed: " + note_f) if n]
        if notes:
            row["note"] = "; ".join(notes)
        if row["dynamic_ms"] and row["fixed_ms"]:
            row["ratio"] = row["dynamic_ms"] / row["fixed_ms"]
        write(row)


def write_table(path, rows, machine, command):
    with open(path, "w") as f:
        gpu = machine.split(",")[0].replace("NVIDIA ", "")
        f.write(f"# Dynamic-axis exports vs fixed-shape exports (kiln FP16, {gpu})\n\n")
        f.write(f"- Updated: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}\n")
        f.write(f"- Machine: {machine}\n- Command: `{command}`\n")
        f.write("- One engine per model from a dynamic export (profile min batch 1 / seq 16, opt half the throughput "
                "batch, max the throughput batch) against one engine per fixed-shape export; CUDA graphs, no "
                "transfers, median GPU compute time of 100 iterations. Bar: <= 1.10 at opt, <= 1.25 anywhere.\n\n")
        f.write("| model | batch | seq | opt | dynamic ms | fixed ms | dynamic / fixed | build s (dyn / fixed) | note |\n")
        f.write("|---|---:|---:|:-:|---:|---:|---:|---:|---|\n")
        for r in rows:
            if "batch" not in r:
                f.write(f"| {r['model']} | - | - | - | - | - | - | - | {r.get('error', '')} |\n")
                continue
            ms = lambda k: f"{r[k]:.3f}" if r.get(k) else "-"
            f.write(f"| {r['model']} | {r['batch']} | {r.get('seq') or '-'} | {'yes' if r.get('opt') else ''} | "
                    f"{ms('dynamic_ms')} | {ms('fixed_ms')} | {ms('ratio')} | {r.get('dynamic_build_s', '-')} / "
                    f"{r.get('fixed_build_s', '-')} | {r.get('error', r.get('note', ''))} |\n")
        diffs = [r for r in rows if r.get("op_diff")]
        for r in diffs:
            f.write(f"\n### {r['model']} at opt ({r['batch']} x {r.get('seq') or '-'}): per op, dynamic vs fixed engine\n\n")
            f.write("| op | layers (dyn) | ms (dyn) | layers (fixed) | ms (fixed) |\n|---|---:|---:|---:|---:|\n")
            for op, nd, md, nf, mf in r["op_diff"]:
                f.write(f"| {op} | {nd} | {md:.4f} | {nf} | {mf:.4f} |\n")
        ratios = [r["ratio"] for r in rows if r.get("ratio")]
        opt = [r["ratio"] for r in rows if r.get("ratio") and r.get("opt")]
        if ratios:
            f.write(f"\nWorst dynamic / fixed: {max(ratios):.3f} anywhere (bar 1.25), "
                    f"{max(opt) if opt else float('nan'):.3f} at opt (bar 1.10), over {len(ratios)} shapes.\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--peers", required=True, help="peers.py (for randomize)")
    ap.add_argument("--models", default=DEFAULT_MODELS)
    ap.add_argument("--results", default="bench/results/gpu-zoo-dynamic-h200.jsonl")
    ap.add_argument("--out", default="bench/results/gpu-zoo-dynamic-h200.md")
    ap.add_argument("--work", default="/tmp/kiln_zoo_dynamic")
    ap.add_argument("--profile", action="store_true", help="at the opt shape, per-op time of both engines (where dynamic loses)")
    args = ap.parse_args()
    import torch
    spec = importlib.util.spec_from_file_location("peers", args.peers)
    peers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(peers)
    table = zoo_models.zoo()
    wanted = args.models.split(",")
    unknown = [m for m in wanted if m not in table]
    if unknown:
        sys.exit(f"unknown zoo models: {', '.join(unknown)}")
    gpu = run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]).stdout.strip()
    machine = f"{gpu}; {platform.node()}; torch {torch.__version__}"
    command = "python3 " + " ".join(sys.argv)
    # Rows of earlier runs in --results are kept; a shape timed again replaces its row.
    rows = []
    if os.path.exists(args.results):
        with open(args.results) as f:
            rows = [json.loads(line) for line in f if line.strip()]
    key = lambda r: (r.get("model"), r.get("batch"), r.get("seq"))

    def write(row):
        row["date"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        rows[:] = [r for r in rows if key(r) != key(row)]
        rows.append(row)
        print(json.dumps(row), flush=True)
        with open(args.results, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
        write_table(args.out, rows, machine, command)

    for name in wanted:
        try:
            run_model(args, torch, peers, name, table[name], write)
        except Exception as ex:  # one model's failure does not end the run
            write({"model": name, "error": f"{type(ex).__name__}: {str(ex).splitlines()[0][:300] if str(ex) else ''}"})
    if rows:
        print(open(args.out).read())


if __name__ == "__main__":
    main()
