#!/usr/bin/env python3
"""timm architectures (random weights, each model's own input size, batch 1), exported with
torch.onnx.export (opset 17) and run by kiln's CPU engine and ONNX Runtime; prints ok / FAIL per model
(max |kiln - ORT| / max |ORT| <= 1e-3) and SKIP where timm, PyTorch or ORT cannot make the reference.
Not in CI (downloads nothing, but takes ~1-15 s per model); results: bench/results/timm-sweep-cpu.log.

  timm_sweep.py MODULE_DIR name1,name2,...
"""
import sys, time, warnings
warnings.filterwarnings("ignore")
import numpy as np, torch, timm, onnx, onnxruntime as ort  # noqa: E401
sys.path.insert(0, sys.argv[1])
import kiln  # noqa: E402
names = sys.argv[2].split(",")
for name in names:
    t0 = time.time()
    try:
        torch.manual_seed(0)
        m = timm.create_model(name, pretrained=False).eval()
        cfg = m.pretrained_cfg.get("input_size", (3, 224, 224))
        x = torch.randn(1, *cfg)
        path = f"/tmp/timm_sweep_{name}.onnx"
        with torch.no_grad():
            torch.onnx.export(m, (x,), path, dynamo=False, opset_version=17, input_names=["x"])
        ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x.numpy()})[0]
    except Exception as e:
        print(f"SKIP {name}: {str(e).splitlines()[0][:120]}", flush=True); continue
    try:
        out = kiln.build_engine(path, kiln.BuilderConfig(tf32=False, device="cpu", optimization_level=1)).create_execution_context().infer({"x": x.numpy()})
        got = list(out.values())[0]
        e = float(np.abs(got - ref).max() / max(1e-6, np.abs(ref).max()))
        print(("FAIL " if e > 1e-3 else "ok   ") + f"{name} rel err {e:.1e} ({time.time()-t0:.0f}s)", flush=True)
    except Exception as e:
        print(f"FAIL {name}: kiln: {' '.join(str(e).split())[:250]}", flush=True)
