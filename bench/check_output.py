#!/usr/bin/env python3
"""Builds a kiln engine for an exported model directory (model.onnx + test_data_set_0 in the ONNX
test layout, as bench/gpu_bench.py and peers.py export them), runs it on the recorded inputs and
prints the largest absolute and relative error against the recorded output.
  check_output.py --kiln build/bin/kiln DIR [kiln build flags...]   (e.g. --fp16 --device=gpu)
For bisecting, pass build flags such as --skipPasses=word,... or --noChannelsLast."""
import json, os, subprocess, sys

import numpy as np
import onnx
from onnx import numpy_helper


def main():
    if len(sys.argv) < 4 or sys.argv[1] != "--kiln":
        sys.exit(__doc__)
    kiln, d, extra = sys.argv[2], sys.argv[3], sys.argv[4:]
    m = onnx.load(os.path.join(d, "model.onnx"), load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    names = [i.name for i in m.graph.input if i.name not in inits]
    ref_dir = os.path.join(d, "test_data_set_0")
    loads = ",".join(f"{n}:{os.path.join(ref_dir, f'input_{k}.pb')}" for k, n in enumerate(names))
    out = os.path.join(d, "check_out.json")
    p = subprocess.run([kiln, f"--onnx={os.path.join(d, 'model.onnx')}", f"--loadInputs={loads}", f"--exportOutput={out}",
                        "--iterations=1", "--warmUp=0", "--duration=0", *extra], capture_output=True, text=True)
    if p.returncode != 0:
        print(f"{' '.join(extra)}: kiln failed: {p.stderr.strip().splitlines()[-1:]}")
        return 1
    got = json.load(open(out))[0]
    ref = numpy_helper.to_array(onnx.load_tensor(os.path.join(ref_dir, "output_0.pb"))).astype(np.float64)
    val = np.array(got["values"], dtype=np.float64).reshape(ref.shape)
    err = np.abs(val - ref)
    worst = np.unravel_index(int(err.argmax()), err.shape)
    print(f"{' '.join(extra)}: max abs err {err.max():.4g} at {tuple(int(i) for i in worst)} "
          f"(ref max {np.abs(ref).max():.4g}), rows with err > 0.1: {int((err.reshape(-1, ref.shape[-1]).max(-1) > 0.1).sum())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
