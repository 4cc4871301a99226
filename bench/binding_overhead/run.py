#!/usr/bin/env python3
"""pybind11 (kiln's binding) against nanobind for the calls kiln's infer makes: builds ext.cpp both
ways (needs `pip install nanobind`, a C++ compiler and kiln's headers) and times a no-op call, one
tensor's pointer and a {name: tensor} dict in and out with two tensors, for NumPy arrays and torch
CPU tensors. Usage: bench/binding_overhead/run.py [--calls 200000]"""
import argparse
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import timeit

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def build(tmp):
    import nanobind
    import pybind11
    ext = sysconfig.get_config_var("EXT_SUFFIX")
    py = sysconfig.get_paths()["include"]
    common = ["g++", "-O2", "-std=c++20", "-shared", "-fPIC", "-DNDEBUG", f"-I{py}", f"-I{ROOT}/include", f"-I{ROOT}/python"]
    nb = os.path.dirname(nanobind.include_dir())
    subprocess.run(common + [f"-I{nanobind.include_dir()}", f"-I{nb}/ext/robin_map/include", "-DUSE_NANOBIND",
                             f"{HERE}/ext.cpp", f"{nb}/src/nb_combined.cpp", "-o", f"{tmp}/overhead_nb{ext}"], check=True)
    # kiln's tensor import is part of the pybind11 side (its errors need libkiln's types)
    subprocess.run(common + ["-fvisibility=hidden", f"-I{pybind11.get_include()}", f"{HERE}/ext.cpp", f"{ROOT}/python/py_tensor.cpp",
                             f"-L{ROOT}/build/lib", "-lkiln", f"-Wl,-rpath,{ROOT}/build/lib", "-o", f"{tmp}/overhead_pb{ext}"],
                   check=True)


def per_call(fn, calls):
    return statistics.median(timeit.timeit(fn, number=calls) / calls * 1e6 for _ in range(7))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=200000)
    args = ap.parse_args()
    import numpy as np
    import torch
    with tempfile.TemporaryDirectory() as tmp:
        build(tmp)
        sys.path.insert(0, tmp)
        import overhead_nb
        import overhead_pb
        arrays = {"numpy": (np.ones((1, 16), np.float32), np.empty((1, 16), np.float32)),
                  "torch": (torch.ones(1, 16), torch.empty(1, 16))}
        print(f"{'call':40s} {'pybind11':>10s} {'nanobind':>10s}   (us per call)")
        row = lambda name, f: print(f"{name:40s} {per_call(lambda: f(overhead_pb), args.calls):10.3f} "
                                    f"{per_call(lambda: f(overhead_nb), args.calls):10.3f}", flush=True)
        row("noop()", lambda m: m.noop())
        for kind, (x, y) in arrays.items():
            row(f"pointer({kind})", lambda m: m.pointer(x))
            row(f"bind({{x: {kind}}}, {{y: {kind}}})", lambda m: m.bind({"x": x}, {"y": y}))


if __name__ == "__main__":
    main()
