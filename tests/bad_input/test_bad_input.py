#!/usr/bin/env python3
"""Feeds every malformed model of make_bad_models.py to the kiln CLI.

Each run must exit with a non-zero status (not a signal: no crash), finish within the timeout
(no hang), and print an "[E]" error on stderr that matches the case's expected patterns.
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
    if "internal error" in message:
        return f"error escaped as a non-kiln exception: {message}"
    missing = [p for p in case["expect"] if not re.search(p, message, re.IGNORECASE)]
    if missing:
        return f"message does not match {missing}: {message}"
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
    print(f"{len(cases) - failures}/{len(cases)} bad-input cases passed")
    return 1 if failures or not cases else 0


if __name__ == "__main__":
    sys.exit(main())
