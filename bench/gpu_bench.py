"""GPU benchmark, side by side with the peer in one run (BENCHMARKS.md): exports the model set with
the peer script, times torch.compile (--peer-mode, default compile_half_frozen) there, builds kiln FP16 engines for the same ONNX
files and times them (CUDA graphs, no data transfers, median of >= 50 runs), checks kiln's batch-1
outputs against PyTorch's FP32 reference output, and writes a markdown table.
Usage (on the GPU machine):
  python3 bench/gpu_bench.py --kiln build-dev/bin/kiln --peers .device_deps/peers.py --out OUT.md \
      [--models resnet50,bert_base_s128] [--batches 1,32] [--work /tmp/kiln_gpu_bench]"""
import argparse, datetime, glob, json, os, platform, re, statistics, subprocess, sys, time

import numpy as np
import onnx
from onnx import numpy_helper


def run(cmd, **kw):
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def peer_rows(args):
    cmd = [sys.executable, args.peers, "--modes", args.peer_mode, "--export", args.work]
    if args.models: cmd += ["--models", args.models]
    if args.batches: cmd += ["--batches", args.batches]
    p = run(cmd)
    rows = {}
    for line in p.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            r = json.loads(line)
            if r.get("mode") == args.peer_mode and "ms" in r:
                rows[(r.get("model"), int(r.get("batch", 0)))] = r
    if p.returncode != 0:
        print(p.stderr[-4000:], file=sys.stderr)
    return rows


def kiln_row(args, model_dir, name, batch):
    onnx_path = os.path.join(model_dir, "model.onnx")
    plan = os.path.join(model_dir, "kiln_fp16.plan")
    build = [args.kiln, f"--onnx={onnx_path}", "--fp16", f"--saveEngine={plan}", "--skipInference"]
    if args.timing_cache:
        cache = os.path.join(model_dir, "timing.cache")
        if os.path.exists(cache):
            os.remove(cache)  # the first build is a cold one
        build.append(f"--timingCacheFile={cache}")
    t0 = time.time()
    b = run(build)
    build_s = time.time() - t0
    row = {"model": name, "batch": batch, "build_s": build_s}
    if b.returncode != 0:
        row["error"] = (b.stderr.strip().splitlines() or ["build failed"])[-1][:300]
        return row
    if args.timing_cache:  # the same build again, every timing now in the cache
        t0 = time.time()
        b = run(build)
        row["rebuild_s"] = time.time() - t0
        # Where the rebuild's time goes: ONNX parsing and the builder's phases (kiln's INFO lines).
        out = b.stdout + b.stderr
        parse = re.search(r"Parsed '.*?': \d+ layers in ([0-9.]+) sec", out)
        phases = re.search(r"passes ([0-9.]+) s, tactic selection ([0-9.]+) s, kernel creation ([0-9.]+) s", out)
        if parse and phases:
            row["rebuild_phases"] = "rebuild: parse %.1f, passes %.1f, tactics %.1f, kernels %.1f s" % (
                float(parse.group(1)), *(float(v) for v in phases.groups()))
    times = os.path.join(model_dir, "times.json")
    r = run([args.kiln, f"--loadEngine={plan}", "--useCudaGraph", "--noDataTransfers", "--iterations=100",
             "--warmUp=300", "--duration=0", "--avgRuns=1", f"--exportTimes={times}"])
    if r.returncode != 0:
        row["error"] = (r.stderr.strip().splitlines() or ["run failed"])[-1][:300]
        return row
    with open(times) as f:
        t = json.load(f)
    samples = [x["computeMs"] for x in (t["iterations"] if isinstance(t, dict) else t) if "computeMs" in x]
    row["kiln_ms"] = statistics.median(samples)
    row["graph"] = "graph capture is not possible" not in r.stderr
    # Correctness at batch 1: PyTorch's fp32 output in the ONNX test layout.
    ref_dir = os.path.join(model_dir, "test_data_set_0")
    if os.path.isdir(ref_dir):
        m = onnx.load(onnx_path, load_external_data=False)
        inits = {i.name for i in m.graph.initializer}
        ins = [i.name for i in m.graph.input if i.name not in inits]
        loads = ",".join(f"{n}:{os.path.join(ref_dir, f'input_{k}.pb')}" for k, n in enumerate(ins))
        out_json = os.path.join(model_dir, "kiln_out.json")
        c = run([args.kiln, f"--loadEngine={plan}", f"--loadInputs={loads}", f"--exportOutput={out_json}",
                 "--iterations=1", "--warmUp=0", "--duration=0"])
        if c.returncode == 0:
            with open(out_json) as f:
                got = json.load(f)[0]
            ref = numpy_helper.to_array(onnx.load_tensor(os.path.join(ref_dir, "output_0.pb"))).astype(np.float64)
            val = np.array(got["values"], dtype=np.float64).reshape(ref.shape)
            err = np.abs(val - ref)
            row["max_abs_err"] = float(err.max())
            row["ref_absmax"] = float(np.abs(ref).max())
            # FP16 against PyTorch's FP32: a few percent of the output's range is rounding; more
            # means the engine computes something else (flagged in the table's note).
            if row["max_abs_err"] > 0.05 * max(row["ref_absmax"], 1e-6):
                row["check_error"] = "OUTPUT MISMATCH: max abs err %.3g vs output range %.3g" % (row["max_abs_err"], row["ref_absmax"])
        else:
            row["check_error"] = (c.stderr.strip().splitlines() or ["check failed"])[-1][:300]
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--peers", required=True)
    ap.add_argument("--peer-mode", default="compile_half_frozen",
                    help="the peers.py mode to compare with (BENCHMARKS.md: compile_half_frozen is the peer to beat)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default="")
    ap.add_argument("--batches", default="")
    ap.add_argument("--work", default="/tmp/kiln_gpu_bench")
    ap.add_argument("--timing-cache", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    peers = peer_rows(args)
    rows = []
    for d in sorted(glob.glob(os.path.join(args.work, "*_b*"))):
        m = re.match(r"(.+)_b(\d+)$", os.path.basename(d))
        if not m or not os.path.exists(os.path.join(d, "model.onnx")):
            continue
        name, batch = m.group(1), int(m.group(2))
        row = kiln_row(args, d, name, batch)
        p = peers.get((name, batch), {})
        row["peer_ms"] = p.get("ms")
        rows.append(row)
        print(json.dumps(row), flush=True)
        write_table(args, rows)  # after every row: a run cut short still leaves its rows
    write_table(args, rows)
    print(open(args.out).read())


def write_table(args, rows):
    gpu = run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]).stdout.strip()
    with open(args.out, "w") as f:
        f.write(f"# GPU: kiln FP16 vs torch.compile ({args.peer_mode})\n\n")
        f.write(f"- Date: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}\n")
        f.write(f"- Machine: {gpu}; {platform.node()}\n")
        f.write(f"- Command: `python3 {' '.join(sys.argv)}`\n")
        f.write("- kiln: FP16 engine, CUDA graph, no data transfers, median of 100 runs (GPU compute time).\n")
        f.write(f"- Peer: `peers.py --modes {args.peer_mode}` in the same run (median of 50).\n\n")
        f.write("| model | batch | kiln ms | kiln items/s | torch.compile ms | speed-up | build s | rebuild s (timing cache) | max abs err | ref absmax | note |\n")
        f.write("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
        for r in rows:
            k, p = r.get("kiln_ms"), r.get("peer_ms")
            f.write(f"| {r['model']} | {r['batch']} | {k:.3f} | {r['batch'] * 1000 / k:.0f} | " if k else f"| {r['model']} | {r['batch']} | - | - | ")
            f.write(f"{p:.3f} | " if p else "- | ")
            f.write(f"{p / k:.2f}x | " if (k and p) else "- | ")
            f.write(f"{r['build_s']:.1f} | ")
            f.write(f"{r['rebuild_s']:.1f} | " if "rebuild_s" in r else "- | ")
            f.write(f"{r['max_abs_err']:.3g} | {r['ref_absmax']:.3g} | " if "max_abs_err" in r else "- | - | ")
            note = r.get("error") or r.get("check_error") or ("" if r.get("graph", True) else "no CUDA graph")
            f.write("; ".join(x for x in (note, r.get("rebuild_phases", "")) if x) + " |\n")


if __name__ == "__main__":
    main()
