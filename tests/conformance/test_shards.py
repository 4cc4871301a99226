#!/usr/bin/env python3
"""kiln_conformance --shard I/N: N shards cover the selected tests exactly once, in about equal
shares, and a bad --shard is a usage error (exit 2). Writes its own small ONNX node tests (Relu,
one with a wrong expected output so that a FAIL is carried through a shard too)."""
import argparse, os, re, subprocess, sys, tempfile

import numpy as np
from onnx import TensorProto, helper, numpy_helper


def write_case(root, name, wrong):
    d = os.path.join(root, name)
    os.makedirs(os.path.join(d, "test_data_set_0"))
    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph([node], name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(model.SerializeToString())
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    y = np.maximum(x, 0) + (1.0 if wrong else 0.0)
    for kind, t, n in (("input", x, "x"), ("output", y.astype(np.float32), "y")):
        with open(os.path.join(d, "test_data_set_0", f"{kind}_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(t, n).SerializeToString())


def verdicts(runner, root, *extra):
    p = subprocess.run([runner, root, "--device", "cpu", *extra], capture_output=True, text=True)
    got = {name: verdict for verdict, name in re.findall(r"^(PASS|FAIL|SKIP) ([^:\s]+)", p.stdout, re.M)}
    return p.returncode, got, p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runner", required=True)
    a = ap.parse_args()
    problems = []
    with tempfile.TemporaryDirectory(prefix="kiln_shards_") as root:
        names = [f"test_relu_{i}" for i in range(7)]
        for i, n in enumerate(names):
            write_case(root, n, wrong=(i == 4))
        rc, full, _ = verdicts(a.runner, root)
        if sorted(full) != names or full["test_relu_4"] != "FAIL" or rc != 1:
            problems.append(f"unsharded run: rc {rc}, verdicts {full}")
        seen = {}
        for i in range(3):
            rc, part, p = verdicts(a.runner, root, "--shard", f"{i}/3")
            if rc not in (0, 1) or not (2 <= len(part) <= 3):
                problems.append(f"shard {i}/3: rc {rc}, {len(part)} tests\n{p.stdout}{p.stderr}")
            for k, v in part.items():
                if k in seen:
                    problems.append(f"{k} ran in two shards")
                seen[k] = v
        if seen != full:
            problems.append(f"shards {seen} != unsharded {full}")
        for bad in ("3/3", "1", "x/2", "0/0"):
            rc, _, p = verdicts(a.runner, root, "--shard", bad)
            if rc != 2 or "--shard" not in p.stderr:
                problems.append(f"--shard {bad}: rc {rc}, stderr {p.stderr.strip()[:200]}")
    for pr in problems:
        print("FAIL", pr)
    print("conformance shards:", "ok" if not problems else f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
