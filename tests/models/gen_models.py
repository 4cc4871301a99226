#!/usr/bin/env python3
"""Writes the model-test ONNX files (see model_zoo.py) into --out: <name>.onnx for each model.

Existing files are kept when their bytes are unchanged (weights come from fixed seeds)."""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_zoo  # noqa: E402


def write_model(model, path: str) -> bool:
    """Writes `model` unless `path` already holds the same bytes; True when written."""
    data = model.SerializeToString()
    if os.path.exists(path):
        with open(path, "rb") as f:
            if f.read() == data:
                return False
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    return True


def generate(out_dir: str, names: list[str] | None = None) -> list[str]:
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for name, factory in model_zoo.TEST_MODELS.items():
        if names and name not in names:
            continue
        path = os.path.join(out_dir, f"{name}.onnx")
        written = write_model(factory(), path)
        print(f"{'wrote' if written else 'kept '} {path}")
        paths.append(path)
    return paths


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--only", default="", help="comma-separated model names (default: all)")
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n]
    unknown = [n for n in names if n not in model_zoo.TEST_MODELS]
    if unknown:
        print(f"unknown model(s): {', '.join(unknown)}; known: {', '.join(model_zoo.TEST_MODELS)}", file=sys.stderr)
        return 2
    generate(args.out, names)
    return 0


if __name__ == "__main__":
    sys.exit(main())
