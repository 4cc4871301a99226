"""The GPU perf zoo's models (bench/zoo_models.py) checked on the CPU, with and without the GPU-only
fusions (`kiln --gpuFusions`: attention, skip LayerNorm / RMSNorm, FP8 quantization fusions run on
the reference and CPU kernels), against ONNX Runtime. A machine without a GPU can so check what the
fusion passes do to every zoo architecture before a GPU run times them.

Per model: export at --batch (opset 17, TorchScript exporter, peers.randomize weights, as zoo.py),
run ONNX Runtime (CPU, FP32), build and run kiln on the CPU twice; error = max |kiln - ort| /
range(ort), bar 1e-4. Also prints the fused layer counts (Attention, Transpose, Gather) of each.
Needs torch, torchvision, timm, transformers, onnx, onnxruntime.
Usage: zoo_cpu_fusions.py --kiln build/bin/kiln --peers PEERS.py [--models a,b] [--batch N] [--work DIR]
Exit status: 0 when every model passed both builds."""
import argparse, collections, importlib.util, json, os, subprocess, sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo  # noqa: E402
import zoo_models  # noqa: E402


def run_kiln(kiln, path, loads, extra, work):
    out, info = os.path.join(work, "out.json"), os.path.join(work, "info.json")
    p = subprocess.run([kiln, f"--onnx={path}", *extra, "--loadInputs=" + ",".join(loads), f"--exportOutput={out}",
                        f"--exportLayerInfo={info}", "--iterations=1", "--warmUp=0", "--duration=0"],
                       capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        return None, (p.stderr or p.stdout).strip().splitlines()[-1][:200]
    with open(out) as f:
        got = np.array(json.load(f)[0]["values"], dtype=np.float64)
    with open(info) as f:
        ops = collections.Counter(l["op"] for l in json.load(f)["layers"])
    return got, ops


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--peers", required=True, help="peers.py (../shared/bench/peers.py)")
    ap.add_argument("--models", default="")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--work", default="/tmp/kiln_zoo_cpu")
    a = ap.parse_args()
    import torch
    import onnxruntime as ort
    spec = importlib.util.spec_from_file_location("peers", a.peers)
    peers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(peers)
    os.makedirs(a.work, exist_ok=True)
    table = zoo_models.zoo()
    failed = 0
    for name in a.models.split(",") if a.models else list(table):
        try:
            s = table[name]
            torch.manual_seed(0)
            m = s.make().eval()
            peers.randomize(m)
            inputs = s.inputs(a.batch)
            path = os.path.join(a.work, f"{name}_b{a.batch}.onnx")
            zoo.export(torch, m, inputs, path)
            feeds, loads = {}, []
            for i, x in enumerate(inputs):
                arr = x.numpy()
                f = os.path.join(a.work, f"input_{i}.npy")
                np.save(f, arr)
                feeds[f"input_{i}"] = arr
                loads.append(f"input_{i}:{f}")
            ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)[0].astype(np.float64)
            cols = []
            for label, extra in (("plain", []), ("gpuFusions", ["--gpuFusions"])):
                got, ops = run_kiln(a.kiln, path, loads, extra, a.work)
                if got is None:
                    failed += 1
                    cols.append(f"{label} FAIL ({ops})")
                    continue
                err = float(np.abs(got.reshape(ref.shape) - ref).max()) / max(float(ref.max() - ref.min()), 1e-30)
                ok = err < 1e-4
                failed += not ok
                cols.append(f"{label} err {err:.1e} {'ok' if ok else 'BAD'} layers {sum(ops.values())} attention {ops.get('Attention', 0)} "
                            f"transpose {ops.get('Transpose', 0)} gather {ops.get('Gather', 0)}")
            print(f"{name} b{a.batch}: " + " | ".join(cols), flush=True)
        except Exception as e:  # an export or reference failure is reported, not a kiln failure
            print(f"{name} b{a.batch}: not comparable: {type(e).__name__}: {str(e)[:200]}", flush=True)
    print(f"{failed} failure(s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
