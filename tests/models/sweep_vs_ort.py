#!/usr/bin/env python3
"""torchvision or timm architectures (torchvision: classification, segmentation, video, optical flow;
timm: its model names; informative random weights, batch 1, each model's own input size), exported
with torch.onnx.export (TorchScript exporter, opset 17) and run by kiln's CPU engine, plain and with
the GPU-only fusions (what a GPU build rewrites, checked on the CPU). Reference: ONNX Runtime, or
PyTorch itself where ONNX Runtime cannot run the export. Prints ok / FAIL per model and mode
(max |kiln - ref| / max |ref| <= 1e-3 on every float output) and SKIP where PyTorch cannot export it.
Not in CI (1-120 s a model); results: bench/results/torchvision-sweep-cpu.log, timm-sweep-cpu.log.

  sweep_vs_ort.py MODULE_DIR torchvision|timm name1,name2,...
"""
import signal
import sys
import time
import warnings

warnings.filterwarnings("ignore")
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import torch  # noqa: E402

SOURCE = sys.argv[2]
if SOURCE not in ("torchvision", "timm"):
    sys.exit("usage: sweep_vs_ort.py MODULE_DIR torchvision|timm name1,name2,...")
if SOURCE == "timm":
    import timm  # noqa: E402
else:
    import torchvision  # noqa: E402
sys.path.insert(0, sys.argv[1])
import kiln  # noqa: E402

torch.backends.mha.set_fastpath_enabled(False)  # the fused MHA fast path has no ONNX export


class Timeout(Exception):
    pass


def on_alarm(*_):
    raise Timeout()


signal.signal(signal.SIGALRM, on_alarm)


def example_inputs(name, m):
    if SOURCE == "timm":
        return (torch.randn(1, *m.pretrained_cfg.get("input_size", (3, 224, 224))),)
    if name.startswith("raft"):
        return (torch.randn(1, 3, 128, 128), torch.randn(1, 3, 128, 128))
    if name.startswith(("r3d", "mc3", "r2plus1d")):
        return (torch.randn(1, 3, 16, 112, 112),)
    if name.startswith(("s3d", "mvit", "swin3d")):
        return (torch.randn(1, 3, 16, 224, 224),)
    return (torch.randn(1, 3, 299, 299) if name == "inception_v3" else torch.randn(1, 3, 224, 224),)


def randomize(m):
    """Informative weights: torchvision's init leaves some heads zero (ViT) or tiny, which would
    make every output equal. Fan-in scaled normal weights, small random biases and norm affines."""
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=g) / max(1.0, p[0].numel()) ** 0.5)
            elif name.endswith("weight"):
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
    return m


def flat(y):
    if isinstance(y, dict):
        return [v for v in y.values()]
    if isinstance(y, (list, tuple)):
        return [v for x in y for v in flat(x)]
    return [y]


def make_model(name):
    if SOURCE == "timm":
        return timm.create_model(name, pretrained=False)
    kw = {"weights_backbone": None} if name.startswith(("deeplab", "fcn", "lraspp")) else {}
    return torchvision.models.get_model(name, weights=None, **kw)


for name in sys.argv[3].split(","):
    t0 = time.time()
    torch.manual_seed(0)
    try:
        signal.alarm(300)
        m = randomize(make_model(name)).eval()
        xs = example_inputs(name, m)
        path = f"/tmp/sweep_vs_ort_{name}.onnx"
        names = [f"x{i}" for i in range(len(xs))]
        with torch.no_grad():
            torch_out = [t.numpy() for t in flat(m(*xs))]
            torch.onnx.export(m, xs, path, dynamo=False, opset_version=17, input_names=names)
        signal.alarm(0)
    except Exception as e:  # noqa: BLE001
        signal.alarm(0)
        print(f"SKIP {name}: {str(e).splitlines()[0][:120] if str(e) else type(e).__name__}", flush=True)
        continue
    feeds = {n: t.numpy() for n, t in zip(names, xs)}
    try:
        ref, ref_name = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds), "ORT"
    except Exception:  # noqa: BLE001
        ref, ref_name = torch_out, "PyTorch (ONNX Runtime cannot run the export)"
    outputs = [o.name for o in onnx.load(path, load_external_data=False).graph.output]
    for gpu_fusions in (False, True):
        mode = "gpu-fusions" if gpu_fusions else "plain"
        try:
            signal.alarm(300)
            cfg = kiln.BuilderConfig(tf32=False, device="cpu", gpu_fusions=gpu_fusions, optimization_level=5 if gpu_fusions else 3)
            got = kiln.build_engine(path, cfg).create_execution_context().infer(feeds)
            signal.alarm(0)
            errs = []
            for o, r in zip(outputs, ref):
                g = np.asarray(got[o])
                if g.shape != r.shape:
                    errs.append(f"{o}: shape {g.shape}, reference {r.shape}")
                elif r.dtype.kind == "f":
                    e = float(np.abs(g - r).max() / max(1e-6, np.abs(r).max())) if r.size else 0.0
                    if e > 1e-3:
                        errs.append(f"{o}: rel err {e:.1e}")
                elif not np.array_equal(g, r):
                    errs.append(f"{o}: {int((g != r).sum())} values differ")
            worst = max([float(np.abs(np.asarray(got[o]) - r).max() / max(1e-6, np.abs(r).max()))
                         for o, r in zip(outputs, ref) if r.dtype.kind == "f" and r.size and np.asarray(got[o]).shape == r.shape] or [0.0])
            print(("FAIL " if errs else "ok   ") + f"{name} [{mode}] vs {ref_name}: rel err {worst:.1e} "
                  f"({time.time() - t0:.0f}s){'; ' + '; '.join(errs) if errs else ''}", flush=True)
        except Exception as e:  # noqa: BLE001
            signal.alarm(0)
            print(f"FAIL {name} [{mode}]: kiln: {' '.join(str(e).split())[:250] or type(e).__name__}", flush=True)
