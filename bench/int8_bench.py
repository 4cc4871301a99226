#!/usr/bin/env python3
"""INT8 against FP16, kiln alone (issue 15's INT8 rows): for each model of the peer script (random
informative weights, `randomize()`), the `kiln --fp16` engine of its ONNX export and the
`kiln --fp16 --int8` engine calibrated from the export's own input (implicit INT8, entropy; the
first batch listed calibrates, the larger ones reuse its cache with `--calib`), timed alike (CUDA
graph, no transfers, median of 100), each with its error and cosine similarity against the FP32
output (PyTorch's at batch 1, ONNX Runtime's on the CPU at other batches, where the peer script
writes none) and the number of layers running integer kernels.
Usage (on the GPU machine):
  python3 bench/int8_bench.py --kiln /tmp/kb/bin/kiln --peers .device_deps/peers.py --out int8.md \
      [--models resnet50] [--batches 32,256] [--profile]"""
import datetime
import json
import os
import platform
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fp8_bench import bench_args, engine_row, fmt, sh, write_profiles  # noqa: E402

INT8_OPS = ("QLinearConv", "QLinearMatMul")


def make_reference(src, ref_dir, seed):
    """The peer script writes PyTorch's FP32 output at batch 1 only: other batches get an input of
    normal values and ONNX Runtime's FP32 output (CPU) as the reference, in the same layout."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper
    m = onnx.load(src)
    inp = m.graph.input[0]
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    y = ort.InferenceSession(src, providers=["CPUExecutionProvider"]).run(None, {inp.name: x})[0]
    os.makedirs(ref_dir, exist_ok=True)
    for fn, t, n in (("input_0.pb", x, inp.name), ("output_0.pb", y, m.graph.output[0].name)):
        with open(os.path.join(ref_dir, fn), "wb") as f:
            f.write(numpy_helper.from_array(t, n).SerializeToString())


def main():
    ap = bench_args(__doc__, "resnet50", "32,256", "/tmp/kiln_int8_bench")
    ap.add_argument("--int8-args", default="", help="extra build flags of the INT8 engine, comma-separated "
                    "(e.g. --layerPrecisions=*:int8: on the GPU, convs run INT8 only where asked)")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    e = sh([sys.executable, a.peers, "--modes", "none", "--export", a.work, "--models", a.models, "--batches", a.batches], timeout=1800)
    if e.returncode != 0:
        print(e.stderr[-3000:], file=sys.stderr)
    rows = []
    for name in a.models.split(","):
        cache = os.path.join(a.work, f"{name}.calib")
        if os.path.exists(cache):
            os.remove(cache)
        for batch in [int(b) for b in a.batches.split(",")]:
            d = os.path.join(a.work, f"{name}_b{batch}")
            src = os.path.join(d, "model.onnx")
            ref_dir = os.path.join(d, "test_data_set_0")
            if not os.path.exists(src):
                rows.append({"model": name, "batch": batch, "error": "no export"})
                continue
            if not os.path.isdir(ref_dir):
                make_reference(src, ref_dir, batch)
            calib = os.path.join(d, "calib")
            os.makedirs(calib, exist_ok=True)
            shutil.copy(os.path.join(ref_dir, "input_0.pb"), os.path.join(calib, "input.pb"))
            row = {"model": name, "batch": batch}
            fp16 = engine_row(a.kiln, src, "fp16", d, ref_dir, a.profile, ("--fp16",), INT8_OPS)
            args = ["--fp16", "--int8", f"--calib={cache}"] + [x for x in a.int8_args.split(",") if x]
            if not os.path.exists(cache):
                args.append(f"--calibData={calib}")
            int8 = engine_row(a.kiln, src, "int8", d, ref_dir, a.profile, tuple(args), INT8_OPS)
            row.update({f"fp16_{k}": v for k, v in fp16.items()})
            row.update({f"int8_{k}": v for k, v in int8.items()})
            if "ms" in fp16 and "ms" in int8:
                row["speedup"] = fp16["ms"] / int8["ms"]
                row["int8_img_s"] = batch / int8["ms"] * 1000.0
            print(json.dumps(row), flush=True)
            rows.append(row)
    gpu = sh(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]).stdout.strip()
    with open(a.out, "w") as f:
        f.write("# INT8 (implicit, calibrated) vs FP16, kiln alone\n\n")
        f.write(f"- Date: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}\n")
        f.write(f"- Machine: {gpu}; {platform.node()}\n")
        f.write(f"- Command: `python3 bench/int8_bench.py --kiln {a.kiln} --peers {a.peers} --models {a.models} --batches {a.batches}"
                f"{' --profile' if a.profile else ''}{' --int8-args=' + a.int8_args if a.int8_args else ''}`\n")
        f.write("- FP16: `kiln --fp16`; INT8: `kiln --fp16 --int8 --calibData=` the export's input (entropy), the larger batches "
                "from the first one's cache (`--calib`). Random informative weights. CUDA graph, no transfers, median of 100. "
                "err = max |out - FP32| / range; cos = cosine similarity to FP32 (PyTorch at batch 1, else ONNX Runtime CPU).\n\n")
        f.write("| model | batch | FP16 ms | INT8 ms | INT8 speed-up | INT8 img/s | int8 layers | FP16 err / cos | INT8 err / cos | note |\n")
        f.write("|---|---:|---:|---:|---:|---:|---:|---|---|---|\n")
        acc = lambda r, t: (f"{r[t + '_err']:.2e} / {r[t + '_cos']:.5f}" if f"{t}_cos" in r else "-")  # noqa: E731
        for r in rows:
            note = "; ".join(str(r[k]) for k in ("error", "fp16_error", "int8_error") if k in r)
            f.write(f"| {r['model']} | {r['batch']} | {fmt(r.get('fp16_ms'), 3)} | {fmt(r.get('int8_ms'), 3)} | "
                    f"{fmt(r.get('speedup'), 2)}x | {fmt(r.get('int8_img_s'), 0)} | {r.get('int8_quant_layers', '-')} | "
                    f"{acc(r, 'fp16')} | {acc(r, 'int8')} | {note} |\n")
        write_profiles(f, rows, ("fp16", "int8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
