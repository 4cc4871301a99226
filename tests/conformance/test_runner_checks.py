#!/usr/bin/env python3
"""The conformance checks can fail: kiln_conformance compares integer and bool outputs exactly and
fails when no test is selected; check_baseline.py fails when a pinned PASS becomes a SKIP or FAIL,
when nothing ran, and when the baseline is stale. Writes its own small ONNX node tests."""
import argparse, os, subprocess, sys, tempfile

import numpy as np
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
CHECK = os.path.join(HERE, "check_baseline.py")


def write_case(root, name, op, x, y, dtype):
    """One node test: y = op(x) (the expected y given, possibly wrong on purpose)."""
    d = os.path.join(root, name)
    os.makedirs(os.path.join(d, "test_data_set_0"))
    node = helper.make_node(op, ["x"], ["y"])
    graph = helper.make_graph([node], name, [helper.make_tensor_value_info("x", dtype, list(x.shape))],
                              [helper.make_tensor_value_info("y", TensorProto.BOOL if y.dtype == bool else dtype, list(y.shape))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(model.SerializeToString())
    for kind, t, n in (("input", x, "x"), ("output", y, "y")):
        with open(os.path.join(d, "test_data_set_0", f"{kind}_0.pb"), "wb") as f:
            f.write(numpy_helper.from_array(t, n).SerializeToString())


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runner", required=True)
    a = ap.parse_args()
    problems = []

    def expect(cond, what, out=""):
        if not cond:
            problems.append(f"{what}\n{out[-1500:]}")

    with tempfile.TemporaryDirectory(prefix="kiln_checks_") as root:
        x = np.array([[1000001, -2000003, 7], [123456789, 0, -1]], dtype=np.int32)
        write_case(root, "test_abs_int_right", "Abs", x, np.abs(x), TensorProto.INT32)
        # One low bit off: within 1e-3 relative of 1000001, the old comparison passed it.
        wrong = np.abs(x)
        wrong[0, 0] ^= 1
        write_case(root, "test_abs_int_bit_flipped", "Abs", x, wrong, TensorProto.INT32)
        f = np.array([[-1.0, 2.0, -3.0]], dtype=np.float32)
        write_case(root, "test_isinf_bool_right", "IsInf", f, np.isinf(f), TensorProto.FLOAT)
        write_case(root, "test_isinf_bool_flipped", "IsInf", f, ~np.isinf(f), TensorProto.FLOAT)

        rc, out = run([a.runner, root])
        for name, verdict in (("test_abs_int_right", "PASS"), ("test_abs_int_bit_flipped", "FAIL"),
                              ("test_isinf_bool_right", "PASS"), ("test_isinf_bool_flipped", "FAIL")):
            expect(f"{verdict} {name}" in out, f"expected {verdict} {name}", out)
        expect(rc == 1, f"runner with failures exited {rc}", out)

        rc, out = run([a.runner, root, "--filter", "no_such_test"])
        expect(rc == 1 and "0 passed, 0 failed, 0 skipped" in out, f"no test selected: exit {rc}, want 1", out)

        # check_baseline.py on logs of the runner's format.
        log = os.path.join(root, "run.log")
        base = os.path.join(root, "baseline.txt")

        def check(lines, *extra):
            with open(log, "w") as fh:
                fh.write("\n".join(lines) + "\n")
            return run([sys.executable, CHECK, log, "--baseline", base, *extra])

        good = ["PASS test_a", "SKIP test_b: unsupported: x", "PASS test_c", "3 passed, 0 failed, 1 skipped"]
        rc, out = check(good, "--update")
        expect(rc == 0, "--update of a clean run", out)
        rc, out = check(good)
        expect(rc == 0, "unchanged run against its own baseline", out)
        for what, lines in (
                ("a PASS became a SKIP", ["PASS test_a", "SKIP test_b: u", "SKIP test_c: unsupported: y"]),
                ("a PASS became a FAIL", ["PASS test_a", "SKIP test_b: u", "FAIL test_c: wrong"]),
                ("a pinned PASS did not run", ["PASS test_a", "SKIP test_b: u"]),
                ("nothing ran", ["0 passed, 0 failed, 0 skipped"]),
                ("a SKIP now passes (stale baseline)", ["PASS test_a", "PASS test_b", "PASS test_c"]),
                ("a test the baseline lacks", good[:3] + ["PASS test_d"])):
            rc, out = check(lines)
            expect(rc == 1, f"check_baseline: {what}: exit {rc}, want 1", out)
        rc, out = check(["PASS test_a", "FAIL test_b: x"], "--update")
        expect(rc == 1, "--update pinned a failure without --allow-failures", out)
        rc, out = check(["PASS test_a", "FAIL test_b: x"], "--update", "--allow-failures")
        expect(rc == 0, "--update --allow-failures", out)
        rc, out = check(["PASS test_a", "FAIL test_b: x"])
        expect(rc == 0, "a known failure that still fails", out)

    for pr in problems:
        print("FAIL", pr)
    print("conformance runner checks:", "ok" if not problems else f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
