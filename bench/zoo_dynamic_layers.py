#!/usr/bin/env python3
"""Dynamic-shape gaps without a GPU: for each perf-zoo model (bench/zoo_models.py), the op types of the
layers that run at the opt shape in the engine of a dynamic-axis export and in the engine of a
fixed-shape export, built here on the CPU with --gpuFusions (the GPU-only fusions run on the
reference kernels) and profiled for one iteration. A difference names the layers the dynamic
engine runs in addition (or lacks): what zoo_dynamic.py would measure as time on the GPU.
Exports as zoo_dynamic.py makes them (batch 2 as opt, profile 1 / 2 / 4, full sequence).
Usage: python3 bench/zoo_dynamic_layers.py --kiln build/bin/kiln --peers ../shared/bench/peers.py
       [--models a,b] [--work DIR]    (prints one line per model: SAME, or {op: (fixed, dynamic)})"""
import argparse, collections, importlib.util, json, os, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo_dynamic as zd  # noqa: E402
import zoo_models  # noqa: E402


def running_ops(cmd, prof):
    p = subprocess.run(cmd + ["--device=cpu", f"--exportProfile={prof}", "--iterations=1", "--warmUp=0", "--duration=0"],
                       capture_output=True, text=True, timeout=1800)
    if p.returncode:
        raise RuntimeError(p.stderr.strip()[-400:])
    return collections.Counter(l["op"] for l in json.load(open(prof))[1:])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--peers", required=True, help="peers.py (for randomize)")
    ap.add_argument("--models", default=",".join(zoo_models.zoo()))
    ap.add_argument("--work", default="/tmp/kiln_zoo_dynamic_layers")
    a = ap.parse_args()
    import torch
    spec = importlib.util.spec_from_file_location("peers", a.peers)
    peers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(peers)
    table = zoo_models.zoo()
    gaps = 0
    for name in a.models.split(","):
        s = table[name]
        torch.manual_seed(0)
        model = peers.randomize(s.make().eval())
        probe = s.inputs(1)
        tokens = [zd.is_tokens(x) for x in probe]
        seq = probe[tokens.index(True)].shape[1] if any(tokens) else 0
        work = os.path.join(a.work, name)
        os.makedirs(work, exist_ok=True)
        dyn, fix = os.path.join(work, "dynamic.onnx"), os.path.join(work, "fixed.onnx")
        try:
            names = zd.export(torch, model, zd.inputs_at(s, 2, seq), dyn, True)
            zd.export(torch, model, zd.inputs_at(s, 2, seq), fix, False)
            smin = min(16, seq) if any(tokens) else 0
            prof = [f"--minShapes={zd.shapes_arg(names, probe, 1, smin)}", f"--optShapes={zd.shapes_arg(names, probe, 2, seq)}",
                    f"--maxShapes={zd.shapes_arg(names, probe, 4, seq)}", f"--shapes={zd.shapes_arg(names, probe, 2, seq)}"]
            d = running_ops([a.kiln, f"--onnx={dyn}", "--gpuFusions", "--fp16", *prof], os.path.join(work, "profile_dynamic.json"))
            f = running_ops([a.kiln, f"--onnx={fix}", "--gpuFusions", "--fp16"], os.path.join(work, "profile_fixed.json"))
        except Exception as ex:  # one model's failure does not end the run
            print(f"{name}: ERROR {str(ex).splitlines()[-1][:300] if str(ex) else type(ex).__name__}", flush=True)
            gaps += 1
            continue
        diff = {op: (f[op], d[op]) for op in sorted(set(d) | set(f)) if d[op] != f[op]}
        gaps += bool(diff)
        print(f"{name}: fixed {sum(f.values())} layers, dynamic {sum(d.values())}: {diff or 'SAME'}", flush=True)
    return 1 if gaps else 0


if __name__ == "__main__":
    sys.exit(main())
