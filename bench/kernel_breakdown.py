"""Per-kernel GPU time of one zoo model, kiln's engine beside the peer's (compile_half_frozen), from
Nsight Compute: where the layer profile's events cannot say (launch gaps, several kernels per layer,
what Inductor fused), the kernels each side runs per inference and how long each takes.

On the GPU machine (ncu on PATH; the per-layer profile is `kiln --dumpProfile`):
  python3 bench/kernel_breakdown.py export --model resnet50_gn --batch 1 --dir /tmp/kb_m
  kiln --onnx=/tmp/kb_m/model.onnx --fp16 --saveEngine=/tmp/kb_m/kiln.plan
  ncu --csv --metrics gpu__time_duration.sum kiln --loadEngine=/tmp/kb_m/kiln.plan --noDataTransfers \\
      --iterations=2 --warmUp=0 --duration=0 > /tmp/kb_m/kiln.csv
  ncu --csv --metrics gpu__time_duration.sum --nvtx --nvtx-include "measure/" \\
      python3 bench/kernel_breakdown.py peer --model resnet50_gn --batch 1 --peers peers.py > /tmp/kb_m/peer.csv
  python3 bench/kernel_breakdown.py report --kiln-csv /tmp/kb_m/kiln.csv --peer-csv /tmp/kb_m/peer.csv --iters 2

kiln's run includes its build-free warm-up: `report` keeps the last `--kiln-kernels` launches (default:
the launches after the first of the N equal-length iterations, found as the longest repeated tail)."""
import argparse, collections, csv, io, os, re, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def load_model(name, batch, peers_path):
    import importlib.util
    import torch
    import zoo_models
    spec = zoo_models.zoo()[name]
    ps = importlib.util.spec_from_file_location("peers", peers_path)
    peers = importlib.util.module_from_spec(ps)
    ps.loader.exec_module(peers)
    torch.manual_seed(0)
    return torch, peers, peers.randomize(spec.make().eval()), spec.inputs(batch)


def cmd_export(a):
    import numpy as np
    torch, _, model, inputs = load_model(a.model, a.batch, a.peers)
    os.makedirs(a.dir, exist_ok=True)
    names = [f"input_{i}" for i in range(len(inputs))]
    torch.onnx.export(model, inputs, os.path.join(a.dir, "model.onnx"), dynamo=False, opset_version=17,
                      input_names=names, output_names=["output"])
    for n, x in zip(names, inputs):
        np.save(os.path.join(a.dir, n + ".npy"), x.numpy())
    print(",".join(f"{n}:{os.path.join(a.dir, n + '.npy')}" for n in names))


def cmd_peer(a):
    import copy
    torch, _, model, inputs = load_model(a.model, a.batch, a.peers)
    import torch._inductor.config as ic
    ic.freezing = True
    fh = torch.compile(copy.deepcopy(model).cuda().half(), mode="reduce-overhead")
    xs = [x.cuda().half() if x.is_floating_point() else x.cuda() for x in inputs]
    with torch.inference_mode():
        for _ in range(5):  # compile, autotune, record the CUDA graph
            fh(*xs)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push("measure")
        for _ in range(a.iters):
            fh(*xs)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()


def read_ncu(path):
    """(kernel name, ns) per launch, in launch order."""
    text = open(path, errors="replace").read()
    start = text.find('"ID"')
    if start < 0:
        raise SystemExit(f"{path}: no ncu CSV rows")
    rows = []
    for r in csv.DictReader(io.StringIO(text[start:])):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        v = float(r["Metric Value"].replace(",", ""))
        unit = r.get("Metric Unit", "ns")
        v *= {"ns": 1, "nsecond": 1, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6}.get(unit, 1)
        rows.append((r["Kernel Name"], v))
    return rows


def short(name):
    name = name.replace("(anonymous namespace)", "").replace("<unnamed>", "")
    name = re.sub(r"\(.*$", "", name)  # argument lists
    while True:  # template arguments, innermost first
        shorter = re.sub(r"<[^<>]*>", "", name)
        if shorter == name:
            break
        name = shorter
    return re.sub(r"^void |::+", lambda m: "" if m.group(0) == "void " else "::", name)[:70]


def table(title, launches, iters):
    by = collections.OrderedDict()
    for n, ns in launches:
        k = short(n)
        c, t = by.get(k, (0, 0.0))
        by[k] = (c + 1, t + ns)
    total = sum(ns for _, ns in launches) / iters
    print(f"## {title}: {len(launches) / iters:.0f} kernels and {total / 1e3:.1f} us of kernel time per inference")
    print("| kernel | launches | us | % |\n|---|---:|---:|---:|")
    for k, (c, t) in sorted(by.items(), key=lambda kv: -kv[1][1])[:25]:
        print(f"| `{k}` | {c / iters:.0f} | {t / iters / 1e3:.1f} | {100 * t / iters / total:.1f} |")
    print()


def cmd_report(a):
    kiln = read_ncu(a.kiln_csv)
    if a.kiln_kernels:
        kiln = kiln[-a.kiln_kernels * a.iters:]
    else:  # the last `iters` equal inferences: the longest period p with kiln[-p*iters:] repeating
        names = [n for n, _ in kiln]
        for p in range(len(names) // a.iters, 0, -1):
            tail = names[-p * a.iters:]
            if all(tail[i] == tail[i % p] for i in range(len(tail))):
                kiln = kiln[-p * a.iters:]
                break
    table("kiln", kiln, a.iters)
    if a.peer_csv:
        table("peer (compile_half_frozen)", read_ncu(a.peer_csv), a.iters)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for c in ("export", "peer"):
        s = sub.add_parser(c)
        s.add_argument("--model", required=True)
        s.add_argument("--batch", type=int, default=1)
        s.add_argument("--peers", default=".device_deps/peers.py")
        s.add_argument("--dir", default="/tmp/kb_model")
        s.add_argument("--iters", type=int, default=2)
    r = sub.add_parser("report")
    r.add_argument("--kiln-csv", required=True)
    r.add_argument("--peer-csv")
    r.add_argument("--iters", type=int, default=2)
    r.add_argument("--kiln-kernels", type=int, default=0, help="kernels per kiln inference (0: find the period)")
    a = ap.parse_args()
    {"export": cmd_export, "peer": cmd_peer, "report": cmd_report}[a.cmd](a)


if __name__ == "__main__":
    main()
