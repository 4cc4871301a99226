"""The GPU perf zoo (issue 14): kiln FP16 against the peer to beat, torch.compile `compile_half_frozen`
(half weights, Inductor freezing, CUDA graphs; BENCHMARKS.md), side by side in one run, on the models
of bench/zoo_models.py at batch 1 and a throughput batch.

Per (model, batch): export to ONNX (fixed shapes, opset 17, random informative weights via
peers.randomize), time the peer (median of 50, peers.bench), build a kiln FP16 engine (build time),
time it (CUDA graph, no transfers, median of 100), and check a graph replay's output against PyTorch
FP32 (TF32 off): error = max |kiln - ref| / range(ref), beside PyTorch's own FP16 error measured the
same way; the bar is max(2x PyTorch's, 1e-2).

Results are appended as JSON lines to --results (one line per row; rows of earlier runs are kept,
a model re-run replaces its rows), and the markdown table with geometric means is rewritten from all
rows: a zoo too large for one device session is run in parts.
Usage (on the GPU machine):
  python3 bench/zoo.py --kiln build-dev/bin/kiln --peers .device_deps/peers.py \\
      --results bench/results/gpu-zoo-h200.jsonl --out bench/results/gpu-zoo-h200.md [--models a,b] [--list]"""
import argparse, datetime, importlib.util, json, math, os, platform, re, statistics, subprocess, sys, time, shlex

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo_models  # noqa: E402


def sh(cmd, timeout=None):
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def last_line(p, what):
    return (p.stderr.strip().splitlines() or p.stdout.strip().splitlines() or [what])[-1][:300]


def rel_err(got, ref):
    ref = ref.astype(np.float64)
    rng = float(ref.max() - ref.min()) or 1.0
    return float(np.abs(got.astype(np.float64) - ref).max()) / rng


def export(torch, model, inputs, path):
    names = [f"input_{i}" for i in range(len(inputs))]
    torch.onnx.export(model, inputs, path, dynamo=False, opset_version=17, input_names=names,
                      output_names=["output"])
    return names


def peer_ms(torch, peers, model, inputs):
    """compile_half_frozen exactly as peers.py times it."""
    import copy
    import torch._inductor.config as ic
    torch._dynamo.reset()
    ic.freezing = True
    fh = torch.compile(copy.deepcopy(model).half(), mode="reduce-overhead")

    def run(*xs):
        with torch.inference_mode():
            return fh(*[x.half() if x.is_floating_point() else x for x in xs])
    return peers.bench(run, inputs)


def torch_activation_mib(torch, model, inputs, compiled):
    """Issue 19's measure: PyTorch's peak allocation during one inference minus what was resident
    before it (the half weights, frozen constants, inputs), in MiB; the half model eager or under
    torch.compile with Inductor freezing (mode "default": no CUDA graph pool, so the call's own
    allocations are what the caching allocator sees)."""
    import copy
    import torch._inductor.config as ic
    half = copy.deepcopy(model).half()
    xs = [x.half() if x.is_floating_point() else x for x in inputs]
    fn = half
    if compiled:
        torch._dynamo.reset()
        ic.freezing = True
        fn = torch.compile(half)
    with torch.inference_mode():
        for _ in range(2):  # compile, autotune and freeze first
            fn(*xs)
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        y = fn(*xs)
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
    del y, fn, half
    torch._dynamo.reset()
    torch.cuda.empty_cache()
    return peak / 2**20


def first_output(y):
    if isinstance(y, (tuple, list)):
        y = y[0]
    return y.float().cpu().numpy()


MAX_CHECKED_VALUES = 4_000_000  # outputs compared through kiln's JSON export (a batch-1 output always is)


def kiln_row(args, d, names, arrays, check_ref, build_args=None, tag=""):
    """Builds, times and checks kiln's FP16 engine (build_args: more build flags, default
    --build-args; tag: a suffix for its plan and output files)."""
    onnx_path = os.path.join(d, "model.onnx")
    plan = os.path.join(d, f"kiln_fp16{tag}.plan")
    loads = ",".join(f"{n}:{os.path.join(d, n + '.npy')}" for n in names)
    for n, a in zip(names, arrays):
        np.save(os.path.join(d, n + ".npy"), a)
    row = {}
    t0 = time.time()
    b = sh([args.kiln, f"--onnx={onnx_path}", "--fp16", f"--saveEngine={plan}", "--skipInference"]
           + shlex.split(args.build_args if build_args is None else build_args), timeout=600)
    row["build_s"] = round(time.time() - t0, 1)
    # The builder's own split of its time (where a slow build goes: passes, tactic timing, kernel creation).
    m = re.search(r"engine built in [\d.]+ s: \d+ layers \(passes ([\d.]+) s, tactic selection ([\d.]+) s, "
                  r"kernel creation ([\d.]+) s\)", b.stdout + b.stderr)
    if m:
        row["build_passes_s"], row["build_select_s"], row["build_create_s"] = (float(x) for x in m.groups())
    if b.returncode != 0:
        row["error"] = "build: " + last_line(b, "build failed")
        return row
    times = os.path.join(d, f"times{tag}.json")
    prof = os.path.join(d, f"profile{tag}.json")
    info = os.path.join(d, f"layers{tag}.json")
    r = sh([args.kiln, f"--loadEngine={plan}", f"--loadInputs={loads}", "--useCudaGraph", "--noDataTransfers",
            "--iterations=100", "--warmUp=300", "--duration=0", "--avgRuns=1", f"--exportTimes={times}"]
           + ([f"--exportProfile={prof}", f"--exportLayerInfo={info}"] if args.profile else []), timeout=600)
    if r.returncode != 0:
        row["error"] = "run: " + last_line(r, "run failed")
        return row
    with open(times) as f:
        t = json.load(f)
    row["kiln_ms"] = statistics.median(x["computeMs"] for x in t if "computeMs" in x)
    row["graph"] = "graph capture is not possible" not in r.stderr
    m = re.search(r"Memory per context: arena ([\d.]+) MiB \(lower bound ([\d.]+) MiB\), workspace ([\d.]+) MiB", r.stdout)
    if m:
        row["arena_mib"], row["arena_bound_mib"], row["workspace_mib"] = (float(x) for x in m.groups())
    if args.profile and os.path.exists(prof) and os.path.exists(info):
        row["profile"] = profile_summary(prof, info)
    if check_ref is not None:
        out_json = os.path.join(d, f"kiln_out{tag}.json")
        # The outputs of a CUDA graph replay, as timed (a kernel right only outside a graph would pass otherwise).
        c = sh([args.kiln, f"--loadEngine={plan}", f"--loadInputs={loads}", f"--exportOutput={out_json}", "--useCudaGraph",
                "--iterations=1", "--warmUp=0", "--duration=0"], timeout=600)
        if c.returncode != 0:
            row["error"] = "check: " + last_line(c, "check failed")
            return row
        with open(out_json) as f:
            got = json.load(f)[0]
        vals = np.array([float(v) for v in got["values"]], dtype=np.float64)
        if vals.size != check_ref.size:
            row["error"] = f"check: output has {vals.size} values, PyTorch {check_ref.size}"
            return row
        row["fp16_err"] = rel_err(vals.reshape(check_ref.shape), check_ref)
    return row


def judge_error(row):
    """The FP16 error bar: max(2x PyTorch FP16's own error, 1e-2) of the output's range."""
    if "fp16_err" in row:
        row["err_bar"] = max(2 * row.get("torch_fp16_err", 0), 1e-2)
        row["err_ok"] = row["fp16_err"] <= row["err_bar"]


def profile_summary(prof_path, info_path, groups=12, layers=10):
    """Where the engine's time goes: total ms per (op, tactic, precision) group and the slowest layers
    with their roofline (kiln's --exportProfile and --exportLayerInfo), compact enough to keep per row."""
    with open(prof_path) as f:
        prof = json.load(f)
    with open(info_path) as f:
        info = {l["name"]: l for l in json.load(f).get("layers", [])}
    head, rows = prof[0], [r for r in prof[1:] if "averageMs" in r]
    total = sum(r["averageMs"] for r in rows) or 1.0
    by = {}
    for r in rows:
        l = info.get(r["name"], {})
        key = f'{l.get("op", r.get("op", "?"))} {l.get("tactic", "?")} {l.get("precision", "?")}'
        n, ms = by.get(key, (0, 0.0))
        by[key] = (n + 1, ms + r["averageMs"])
    top = sorted(by.items(), key=lambda kv: -kv[1][1])[:groups]
    slow = sorted(rows, key=lambda r: -r["averageMs"])[:layers]
    return {"total_ms": round(total, 4), "device": head.get("device", {}).get("name", ""),
            "groups": [[k, n, round(ms, 4), round(100 * ms / total, 1)] for k, (n, ms) in top],
            "layers": [[r["name"][:80], info.get(r["name"], {}).get("tactic", "?"), round(r["averageMs"], 4),
                        round(r.get("tflops", 0), 2), round(r.get("gbs", 0), 1), round(r.get("peakPercent", 0), 1),
                        r.get("bound", "")] for r in slow]}


def drop_caches(m):
    """timm keeps per-device tensors made in eval forwards (EfficientViT's attention biases) in plain
    dicts that .half() does not convert, so a half copy made after an FP32 forward mixes types;
    train() drops them."""
    m.train()
    m.eval()


def run_model(args, torch, peers, name, spec, write):
    torch.manual_seed(0)
    try:
        model = peers.randomize(spec.make().eval())
    except Exception as ex:
        for b in spec.batches:
            write({"model": name, "batch": b, "error": "create: " + str(ex)[:200]})
        return
    batches = [int(x) for x in args.batches.split(",")] if args.batches else spec.batches
    for b in batches:
        row = {"model": name, "batch": b, "tags": spec.tags}
        inputs = spec.inputs(b)
        d = os.path.join(args.work, f"{name}_b{b}")
        os.makedirs(d, exist_ok=True)
        try:
            t0 = time.time()
            names = export(torch, model, inputs, os.path.join(d, "model.onnx"))
            row["export_s"] = round(time.time() - t0, 1)
        except Exception as ex:
            row["error"] = "export: " + str(ex).splitlines()[0][:200]
            write(row)
            continue
        ref = None
        gpu_inputs = tuple(x.cuda() for x in inputs)
        m = model.cuda()
        # The error is checked at every batch (at batch 1 only, EfficientNet-B0's wrong FP16 engine at
        # batch 128 went unseen), unless the output is too large to compare through JSON.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        try:
            with torch.inference_mode():
                ref = first_output(m(*gpu_inputs))
                drop_caches(m)
                if ref.size <= MAX_CHECKED_VALUES or b == batches[0]:
                    half = __import__("copy").deepcopy(m).half()
                    y16 = first_output(half(*[x.half() if x.is_floating_point() else x for x in gpu_inputs]))
                    del half
                    drop_caches(m)
                    row["torch_fp16_err"] = rel_err(y16, ref)
                else:
                    ref = None
        except Exception as ex:  # one model's failure is its row's error, not the end of the run
            row["error"] = "torch reference: " + (str(ex).splitlines() or [type(ex).__name__])[-1][:200]
            m.cpu()
            torch.cuda.empty_cache()
            write(row)
            continue
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        if args.kiln_only:  # a quick look at kiln alone (error checked): the peer's time from the stored rows
            m.cpu()
            torch.cuda.empty_cache()
            row.update(kiln_row(args, d, names, [x.numpy() for x in inputs], ref))
            if args.ab_build_args:  # the same export and reference, a second engine built with other flags
                other = kiln_row(args, d, names, [x.numpy() for x in inputs], ref, args.ab_build_args, "_b")
                row.update({k + "_b": v for k, v in other.items()})
                if row.get("kiln_ms") and row.get("kiln_ms_b"):
                    row["a_over_b"] = round(row["kiln_ms"] / row["kiln_ms_b"], 3)
            known = [r for r in args.old_rows if r["model"] == name and r["batch"] == b and r.get("peer_ms")]
            if known and row.get("kiln_ms"):
                row["peer_ms_stored"] = known[-1]["peer_ms"]
                row["speedup_vs_stored_peer"] = round(known[-1]["peer_ms"] / row["kiln_ms"], 3)
            judge_error(row)
            write(row)
            continue
        for attention in ("sdpa", "eager"):
            try:
                peer_model = zoo_models.set_peer_attention(m) if attention == "sdpa" else m
                row["peer_ms"] = peer_ms(torch, peers, peer_model, gpu_inputs)
                row["peer_attention"] = attention
                break
            except Exception as ex:
                row["peer_error"] = str(ex).splitlines()[0][:200] if str(ex) else type(ex).__name__
                for mod in m.modules():  # back to the exported attention before retrying
                    cfg = getattr(mod, "config", None)
                    if cfg is not None and getattr(cfg, "_attn_implementation", None) == "sdpa":
                        cfg._attn_implementation = "eager"
        if args.memory:
            for key, compiled in (("torch_eager_act_mib", False), ("torch_compiled_act_mib", True)):
                try:
                    row[key] = round(torch_activation_mib(torch, m, gpu_inputs, compiled), 2)
                except Exception as ex:
                    row["memory_error"] = str(ex).splitlines()[0][:200] if str(ex) else type(ex).__name__
        m.cpu()
        torch.cuda.empty_cache()
        row.update(kiln_row(args, d, names, [x.numpy() for x in inputs], ref))
        if row.get("kiln_ms") and row.get("peer_ms"):
            row["speedup"] = row["peer_ms"] / row["kiln_ms"]
        judge_error(row)
        write(row)


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def arena_ratio(r):
    """kiln's arena over PyTorch's compiled activation peak (None without both)."""
    a, t = r.get("arena_mib"), r.get("torch_compiled_act_mib")
    return a / t if a is not None and t else None


def write_table(path, rows, machine, command):
    order = list(zoo_models.zoo().keys())
    rows = sorted(rows, key=lambda r: (order.index(r["model"]) if r["model"] in order else 99, r["batch"]))
    with open(path, "w") as f:
        f.write("# GPU perf zoo: kiln FP16 vs torch.compile (compile_half_frozen)\n\n")
        f.write(f"- Updated: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}\n")
        f.write(f"- Machine: {machine}\n")
        f.write(f"- Command (last part run): `{command}`\n")
        f.write("- kiln: FP16 engine built with `kiln --onnx=... --fp16`, CUDA graph, no data transfers, median of 100 "
                "(GPU compute time). Peer: `compile_half_frozen` as in peers.py, same run, median of 50.\n")
        f.write("- Error: max |out - PyTorch FP32| / range(PyTorch FP32 output) at every batch whose output has at most "
                f"{MAX_CHECKED_VALUES:,} values (batch 1 only before 2026-12-06 17:30 UTC); bar max(2x PyTorch FP16's "
                "own error, 1e-2). Rows from several runs (each row's date in the JSON lines beside this file).\n\n")
        f.write("- Memory (`--memory`, issue 19): kiln's activation arena (its planner's lower bound) against PyTorch's peak "
                "allocation in one inference minus what was resident before it, the half model eager / compiled with freezing.\n\n")
        f.write("| model | batch | kiln ms | peer ms | speed-up | kiln err | torch fp16 err | err ok | build s | arena MiB (bound) "
                "| torch act MiB (eager / compiled) | arena / compiled | tags | run (UTC) | note |\n")
        f.write("|---|---:|---:|---:|---:|---:|---:|:-:|---:|---:|---:|---:|---|---|---|\n")
        for r in rows:
            k, p = r.get("kiln_ms"), r.get("peer_ms")
            cells = [r["model"], str(r["batch"]), f"{k:.3f}" if k else "-", f"{p:.3f}" if p else "-",
                     f"{p / k:.2f}x" if k and p else "-",
                     f"{r['fp16_err']:.2e}" if "fp16_err" in r else "-",
                     f"{r['torch_fp16_err']:.2e}" if "torch_fp16_err" in r else "-",
                     ("yes" if r["err_ok"] else "**NO**") if "err_ok" in r else "-",
                     f"{r['build_s']:.1f}" if "build_s" in r else "-",
                     f"{r['arena_mib']:.0f} ({r['arena_bound_mib']:.0f})" if "arena_mib" in r else "-",
                     f"{r['torch_eager_act_mib']:.0f} / {r['torch_compiled_act_mib']:.0f}" if "torch_compiled_act_mib" in r else "-",
                     f"{arena_ratio(r):.2f}" if arena_ratio(r) else "-",
                     " ".join(r.get("tags", [])[1:]),
                     r.get("date", "")[:16].replace("T", " "),  # rows of older runs measured an older kiln
                     "; ".join(x for x in (r.get("error", ""), "" if r.get("graph", True) else "no CUDA graph",
                                           "peer: eager attention" if r.get("peer_attention") == "eager" else "") if x)]
            f.write("| " + " | ".join(cells) + " |\n")
        f.write("\n## Geometric means of the speed-up\n\n| set | batch 1 | throughput batch | models | below 1.0x |\n|---|---:|---:|---:|---|\n")
        for tag in ("all", "cnn", "vit", "nlp", "audio"):
            sel = [r for r in rows if tag == "all" or tag in r.get("tags", [])]
            b1 = [r.get("speedup") for r in sel if r["batch"] == 1]
            bt = [r.get("speedup") for r in sel if r["batch"] != 1]
            below = sorted({f"{r['model']} b{r['batch']}" for r in sel if r.get("speedup") and r["speedup"] < 1.0})
            f.write(f"| {tag} | {geomean(b1):.2f}x | {geomean(bt):.2f}x | {len({r['model'] for r in sel})} | "
                    f"{', '.join(below) or '-'} |\n")
        mem = [r for r in rows if arena_ratio(r)]
        if mem:
            worst = max(mem, key=arena_ratio)
            f.write(f"\nArena / PyTorch compiled activation peak: geometric mean {geomean([arena_ratio(r) for r in mem]):.2f} over "
                    f"{len(mem)} rows, worst {arena_ratio(worst):.2f} ({worst['model']} b{worst['batch']}); bar (issue 19): "
                    "every row <= 1.0, geometric mean <= 0.7.\n")
        slow = [r for r in rows if r.get("profile") and r.get("speedup", 9) < 1.3]
        if slow:
            f.write("\n## Where the time goes in rows below 1.3x (per-layer profile and roofline, `--profile`)\n")
        for r in slow:
            pr = r["profile"]
            f.write(f"\n### {r['model']} b{r['batch']}: {r['speedup']:.2f}x, {pr['total_ms']:.3f} ms in layers\n\n"
                    "| op tactic precision | layers | ms | % |\n|---|---:|---:|---:|\n")
            for k, n, ms, pct in pr["groups"]:
                f.write(f"| {k} | {n} | {ms:.3f} | {pct:.1f} |\n")
            f.write("\n| slowest layer | tactic | ms | TFLOP/s | GB/s | % of peak | bound |\n|---|---|---:|---:|---:|---:|---|\n")
            for name, tactic, ms, tf, gbs, pct, bound in pr["layers"]:
                f.write(f"| {name} | {tactic} | {ms:.4f} | {tf:.2f} | {gbs:.0f} | {pct:.1f} | {bound} |\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln")
    ap.add_argument("--peers", help="peers.py (../shared/bench/peers.py; .device_deps/peers.py on the GPU machine)")
    ap.add_argument("--results", default="bench/results/gpu-zoo-h200.jsonl")
    ap.add_argument("--out", default="bench/results/gpu-zoo-h200.md")
    ap.add_argument("--models", default="")
    ap.add_argument("--batches", default="", help="override every model's batches")
    ap.add_argument("--work", default="/tmp/kiln_zoo")
    ap.add_argument("--profile", action="store_true", help="also write each engine's per-layer roofline (profile.json)")
    ap.add_argument("--kiln-only", action="store_true",
                    help="time kiln alone against the peer times stored in --results (a development look: "
                         "rows are printed, nothing is written, since the peer did not run in this run)")
    ap.add_argument("--memory", action="store_true",
                    help="also PyTorch's activation peak (half model, eager and compiled with freezing) beside kiln's arena (issue 19)")
    ap.add_argument("--build-args", default="", help="more kiln build flags, e.g. --channelsLastMinBatch=1 (with --kiln-only: an A/B of kiln alone)")
    ap.add_argument("--ab-build-args", default="",
                    help="with --kiln-only: also a second engine per row built with these flags instead of --build-args "
                         "(kiln_ms_b, fp16_err_b, a_over_b in the row), e.g. --ab-build-args=--channelsLastMinBatch=1")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    table = zoo_models.zoo()
    if args.list:
        for n, s in table.items():
            print(n, s.batches, " ".join(s.tags))
        return
    import torch
    spec = importlib.util.spec_from_file_location("peers", args.peers)
    peers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(peers)
    torch.backends.cudnn.benchmark = True
    os.makedirs(args.work, exist_ok=True)
    wanted = args.models.split(",") if args.models else list(table)
    unknown = [m for m in wanted if m not in table]
    if unknown:
        sys.exit(f"unknown zoo models: {', '.join(unknown)} (see --list)")
    old = []
    if os.path.exists(args.results):
        with open(args.results) as f:
            old = [json.loads(line) for line in f if line.strip()]
    args.old_rows = old
    rows = list(old)  # a row is replaced when its (model, batch) runs again: a run cut short loses nothing
    gpu = sh(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]).stdout.strip()
    machine = f"{gpu}; {platform.node()}; torch {torch.__version__}"
    command = "python3 " + " ".join(sys.argv)

    def write(row):
        row["date"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        if args.kiln_only:
            print(json.dumps(row), flush=True)
            return
        rows[:] = [r for r in rows if (r["model"], r["batch"]) != (row["model"], row["batch"])] + [row]
        print(json.dumps(row), flush=True)
        with open(args.results, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
        write_table(args.out, rows, machine, command)

    for name in wanted:
        run_model(args, torch, peers, name, table[name], write)
    if not args.kiln_only:
        print(open(args.out).read())


if __name__ == "__main__":
    main()
