#!/usr/bin/env python3
"""Feeds every malformed model of make_bad_models.py to the kiln CLI.

Each run must exit with a non-zero status (not a signal: no crash), finish within the timeout
(no hang), fail with a kiln error type (status 1 and "[E] Error:" for kiln::Error, 3 and
"[E] Unsupported:" for kiln::UnsupportedError; not a usage error, a std::exception or out of
memory) and print an "[E]" error on stderr that matches the case's expected patterns. Random
mutants of valid models may be accepted, but a rejection must be such a clean error too.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def check_case(kiln, case, timeout):
    cmd = [kiln, f"--onnx={case['model']}", "--iterations=1", "--warmUp=0", "--duration=0", "--device=cpu",
           *case.get("args", [])]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, errors="replace")
    except subprocess.TimeoutExpired:
        return f"hung: no exit within {timeout} s"
    if proc.returncode < 0:
        return f"killed by signal {-proc.returncode} (crash)\nstderr:\n{proc.stderr[-2000:]}"
    if proc.returncode == 0:
        return "exited 0 on a bad model"
    lines = proc.stderr.splitlines()
    first = next((i for i, line in enumerate(lines) if line.startswith("[E]")), None)
    if first is None:
        return f"exit {proc.returncode} without an [E] message\nstderr:\n{proc.stderr[-2000:]}"
    message = "\n".join(lines[first:])
    unclean = clean_error(proc)
    if unclean:
        return unclean
    missing = [p for p in case["expect"] if not re.search(p, message, re.IGNORECASE)]
    if missing:
        return f"message does not match {missing}: {message}"
    return None


def mutation_round(kiln, model_bytes, count, timeout, seed0):
    """Random byte changes (and truncations) of a valid model: kiln may accept a mutant that is
    still valid, but must never crash, hang or let a non-kiln exception escape."""
    import random
    problems = []
    with tempfile.TemporaryDirectory(prefix="kiln_mutants_") as tmp:
        path = os.path.join(tmp, "mutant.onnx")
        for i in range(count):
            rng = random.Random(seed0 + i)
            b = bytearray(model_bytes)
            for _ in range(rng.randint(1, 8)):
                b[rng.randrange(len(b))] = rng.randrange(256)
            if rng.random() < 0.2:
                b = b[: rng.randrange(len(b))]
            with open(path, "wb") as f:
                f.write(b)
            cmd = [kiln, f"--onnx={path}", "--iterations=1", "--warmUp=0", "--duration=0", "--device=cpu"]
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, errors="replace")
            except subprocess.TimeoutExpired:
                problems.append(f"mutant {seed0 + i}: hung")
                continue
            if proc.returncode < 0:
                problems.append(f"mutant {seed0 + i}: killed by signal {-proc.returncode}")
                continue
            unclean = clean_error(proc)
            if unclean:
                problems.append(f"mutant {seed0 + i}: {unclean}")
    return problems


# The CLI's exit status by error type (tools/kiln/main.cpp): kiln::Error 1, kiln::UnsupportedError 3.
ERROR_KINDS = {1: "[E] Error: ", 3: "[E] Unsupported: "}


def clean_error(proc):
    """None when the run succeeded or failed with a kiln error type (status 1 or 3 and its [E]
    line), else what is wrong: a usage error, a non-kiln exception, out of memory, no message."""
    if proc.returncode == 0:
        return None
    tag = ERROR_KINDS.get(proc.returncode)
    if tag is None:
        return f"exit status {proc.returncode} is not a kiln error type (1 or 3): {proc.stderr[-300:]}"
    errors = [line for line in proc.stderr.splitlines() if line.startswith("[E]")]
    if not errors or not errors[0].startswith(tag):
        return f"exit status {proc.returncode} without a '{tag.strip()}' line: {proc.stderr[-300:]}"
    if "internal error" in errors[0] or "out of memory" in errors[0]:
        return f"not a kiln error (a std::exception escaped): {errors[0][:300]}"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--kiln", required=True, help="path of the kiln CLI")
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--filter", default="", help="run only cases whose name contains this")
    args = ap.parse_args()
    failures = 0
    with tempfile.TemporaryDirectory(prefix="kiln_bad_input_") as tmp:
        subprocess.run([sys.executable, os.path.join(HERE, "make_bad_models.py"), "--out", tmp], check=True)
        with open(os.path.join(tmp, "cases.json")) as f:
            cases = [c for c in json.load(f) if args.filter in c["name"]]
        for case in cases:
            problem = check_case(args.kiln, case, args.timeout)
            print(f"{'FAIL' if problem else 'ok  '} {case['name']}" + (f": {problem}" if problem else ""))
            failures += problem is not None
    # Mutants of valid models (seeded: a failure names its seed).
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "models"))
    import model_zoo  # noqa: E402
    for name, model in (("legacy_cnn_opset7", model_zoo.make_legacy_cnn_opset7()), ("local_functions", model_zoo.make_local_functions())):
        problems = mutation_round(args.kiln, model.SerializeToString(), 100, args.timeout, 0)
        print(f"{'FAIL' if problems else 'ok  '} 100 random mutants of {name}" + ("".join("\n  " + p for p in problems)))
        failures += bool(problems)
        cases.append({"name": f"mutants_{name}"})
    print(f"{len(cases) - failures}/{len(cases)} bad-input cases passed")
    return 1 if failures or not cases else 0


if __name__ == "__main__":
    sys.exit(main())
