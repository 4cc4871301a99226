#!/usr/bin/env python3
"""`cmake --install` into a temporary prefix, then build against it from outside the tree: a C++
program with find_package(kiln) and with pkg-config, and a plugin library with find_package(kiln)
that the installed CLI loads (--plugins). Also checks the SONAME and `kiln --version`.

Usage: test_packaging.py --build build --source .
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile


def sh(cmd, env=None, cwd=None):
    print("+", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    if p.returncode != 0:
        sys.exit(f"FAILED ({p.returncode}): {' '.join(cmd)}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    a = ap.parse_args()
    src = os.path.abspath(a.source)
    here = os.path.join(src, "tests", "packaging")
    tmp = tempfile.mkdtemp(prefix="kiln_pkg_")
    prefix = os.path.join(tmp, "prefix")
    sh(["cmake", "--install", a.build, "--prefix", prefix])
    libdir = os.path.join(prefix, "lib")

    # The library carries its version in its SONAME; the CLI finds it through its RPATH.
    sonames = re.findall(r"Library soname: \[(libkiln\.so[\d.]*)\]", sh(["readelf", "-d", os.path.join(libdir, "libkiln.so")]))
    assert sonames and re.fullmatch(r"libkiln\.so\.\d+(\.\d+)?", sonames[0]), sonames
    version = sh([os.path.join(prefix, "bin", "kiln"), "--version"]).strip()
    assert re.fullmatch(r"kiln \d+\.\d+\.\d+", version), version

    gen = ["-DCMAKE_BUILD_TYPE=Release", f"-DCMAKE_PREFIX_PATH={prefix}"]
    # 1. A program with find_package(kiln).
    app = os.path.join(tmp, "app")
    sh(["cmake", "-S", os.path.join(here, "app"), "-B", app, *gen])
    sh(["cmake", "--build", app])
    print(sh([os.path.join(app, "consumer")]).strip())

    # 2. The same program with pkg-config.
    env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(libdir, "pkgconfig"))
    flags = sh(["pkg-config", "--cflags", "--libs", "kiln"], env=env).split()
    pc_libdir = sh(["pkg-config", "--variable=libdir", "kiln"], env=env).strip()
    assert os.path.samefile(pc_libdir, libdir), (pc_libdir, libdir)
    exe = os.path.join(tmp, "consumer_pc")
    sh(["g++", "-O1", os.path.join(here, "app", "main.cpp"), *flags, f"-Wl,-rpath,{pc_libdir}", "-o", exe])
    print(sh([exe]).strip())

    # 3. A plugin with find_package(kiln) + kiln_add_plugin, loaded by the installed CLI.
    plug = os.path.join(tmp, "plugin")
    sh(["cmake", "-S", os.path.join(here, "plugin"), "-B", plug, *gen,
        f"-DPLUGIN_SOURCE={os.path.join(src, 'plugins', 'examples', 'rownorm', 'rownorm_plugin.cpp')}"])
    sh(["cmake", "--build", plug])
    out = sh([os.path.join(prefix, "bin", "kiln"), f"--plugins={os.path.join(plug, 'libmy_plugin.so')}", "--listPlugins"])
    assert "com.kiln.examples::RowNorm version 1" in out, out
    shutil.rmtree(tmp)
    print("packaging: install, find_package (program and plugin) and pkg-config ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
