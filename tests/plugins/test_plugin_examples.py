#!/usr/bin/env python3
"""End-to-end tests of the example plugins (plugins/examples/*): for each, write the ONNX model
with its script, build an engine with the plugin library, save it, reload the plan in a fresh
process with the library, run, and compare with a NumPy reference. Also: the plan names its
missing plugin when loaded without the library; the import lists the node without it; the
two-tactic plugin was timed; the dynamic-shape plugin runs two shapes from one plan; and a
plugin compiled outside CMake with the command from plugins/README.md loads and runs.

Exit status 77 (ctest: skipped) for --device=gpu on a machine without a GPU."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EX = os.path.join(ROOT, "plugins", "examples")
FAILS = []
SKIPS = []


def run(cmd, expect_ok=True):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if expect_ok and p.returncode != 0:
        raise AssertionError(f"command failed ({p.returncode}): {' '.join(cmd)}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


def skip(name, why):
    """A test that does not run here says so (and is counted in the last line)."""
    SKIPS.append(name)
    print(f"SKIPPED {name}: {why}")


def check(name, cond, detail=""):
    print(f"{'PASS' if cond else 'FAIL'} {name}{'' if cond else ': ' + detail}")
    if not cond:
        FAILS.append(name)


def outputs(path):
    with open(path) as f:
        return {o["name"]: np.array(o["values"], dtype=np.float64).reshape(o["dims"]) for o in json.load(f)}


def compare(name, got, want, tol):
    err = float(np.max(np.abs(got - want))) if want.size else 0.0
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    ok = got.shape == want.shape and err <= tol * max(1.0, scale)
    check(name, ok, f"shape {got.shape} vs {want.shape}, max abs err {err:.3g} (tol {tol})")


def conv3x3_pad1(x, w):
    n, c, h, wd = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((n, w.shape[0], h, wd))
    for i in range(3):
        for j in range(3):
            out += np.einsum("nchw,oc->nohw", xp[:, :, i:i + h, j:j + wd], w[:, :, i, j])
    return out


def example(a, work, name, lib_name):
    """Writes the example's model with its script; returns (library path, model path)."""
    model = os.path.join(work, f"{name}.onnx")
    run([sys.executable, os.path.join(EX, name, "make_model.py"), "--out", model])
    return os.path.join(a.libdir, lib_name), model


def first_initializer(model):
    import onnx
    from onnx import numpy_helper
    return numpy_helper.to_array(onnx.load(model).graph.initializer[0]).astype(np.float64)


def kiln_run(a, plan, lib, inputs, out_json, shapes=None, extra=()):
    cmd = [a.kiln, f"--loadEngine={plan}", "--iterations=1", "--warmUp=0", "--duration=0", f"--exportOutput={out_json}"]
    if lib:
        cmd.append(f"--plugins={lib}")
    cmd += [f"--loadInputs={k}:{v}" for k, v in inputs.items()]
    if shapes:
        cmd.append(f"--shapes={shapes}")
    return run(cmd + list(extra))


def test_swish(a, work):
    lib, model = example(a, work, "swish", "libkiln_swish_plugin.so")  # beta = 1.7 by default
    w = first_initializer(model)
    x = np.random.default_rng(5).standard_normal((2, 3, 16, 16)).astype(np.float32)
    np.save(os.path.join(work, "x.npy"), x)
    c = conv3x3_pad1(x.astype(np.float64), w)
    want = np.maximum(c / (1 + np.exp(-1.7 * c)), 0)

    # Without the library: the import lists the node and says to register a plugin.
    p = run([a.kiln, f"--onnx={model}", f"--device={a.device}", "--skipInference"], expect_ok=False)
    check("swish: import without plugin fails", p.returncode != 0 and "'swish'" in p.stderr and "plugin" in p.stderr, p.stderr)
    p = run([a.kiln, f"--plugins={lib}", "--listPlugins"])
    check("swish: --listPlugins lists it", "com.kiln.examples::Swish version 1" in p.stdout, p.stdout)

    precisions = [("fp32", [], 1e-4)] + ([("fp16", ["--fp16"], 2e-2)] if a.device == "gpu" else [])
    for tag, flags, tol in precisions:
        plan = os.path.join(work, f"swish_{tag}.plan")
        info = os.path.join(work, f"swish_{tag}_layers.json")
        run([a.kiln, f"--onnx={model}", f"--plugins={lib}", f"--device={a.device}", f"--saveEngine={plan}",
             f"--exportLayerInfo={info}", "--skipInference"] + flags)
        layers = {l["name"]: l for l in json.load(open(info))["layers"]}
        sw = layers.get("swish", {})
        check(f"swish {tag}: plugin layer in the engine", sw.get("op") == "Plugin" and
              sw.get("plugin", {}).get("library") == "libkiln_swish_plugin.so", json.dumps(sw))
        out = os.path.join(work, f"swish_{tag}.json")
        kiln_run(a, plan, lib, {"x": os.path.join(work, "x.npy")}, out)  # a fresh process reloads the plan
        compare(f"swish {tag}: reloaded plan matches NumPy", outputs(out)["y"], want, tol)
        p = run([a.kiln, f"--loadEngine={plan}", "--iterations=1", "--duration=0"], expect_ok=False)
        check(f"swish {tag}: plan without library names the plugin",
              p.returncode != 0 and "com.kiln.examples::Swish" in p.stderr and "libkiln_swish_plugin.so" in p.stderr, p.stderr)


def test_rownorm(a, work):
    if a.device == "gpu":
        return skip("rownorm", "CPU-only example")
    lib, model = example(a, work, "rownorm", "libkiln_rownorm_plugin.so")
    w = first_initializer(model)
    plan, info = os.path.join(work, "rownorm.plan"), os.path.join(work, "rownorm_layers.json")
    run([a.kiln, f"--onnx={model}", f"--plugins={lib}", "--device=cpu", f"--saveEngine={plan}", f"--exportLayerInfo={info}",
         "--minShapes=x:1x64", "--optShapes=x:64x64", "--maxShapes=x:256x64", "--skipInference"])
    layer = {l["name"]: l for l in json.load(open(info))["layers"]}.get("rownorm", {})
    check("rownorm: both tactics were timed", layer.get("tacticsConsidered") == 2 and layer.get("tacticTimeMs", 0) > 0 and
          layer.get("tactic") in ("plugin:scalar", "plugin:lanes8"), json.dumps(layer))
    for batch in (5, 200):
        x = np.random.default_rng(batch).standard_normal((batch, 64)).astype(np.float32)
        xp = os.path.join(work, f"rx{batch}.npy")
        np.save(xp, x)
        h = x.astype(np.float64) @ w
        want = h / np.sqrt((h * h).sum(-1, keepdims=True) + 1e-5)
        out = os.path.join(work, f"rownorm{batch}.json")
        kiln_run(a, plan, lib, {"x": xp}, out, shapes=f"x:{batch}x64")
        compare(f"rownorm: batch {batch} matches NumPy", outputs(out)["y"], want, 1e-4)


def test_repeat(a, work):
    if a.device == "gpu":
        return skip("repeat", "CPU-only example")
    lib, model = example(a, work, "repeat", "libkiln_repeat_plugin.so")
    plan = os.path.join(work, "repeat.plan")
    run([a.kiln, f"--onnx={model}", f"--plugins={lib}", "--device=cpu", f"--saveEngine={plan}",
         "--minShapes=x:1x1x4", "--optShapes=x:2x5x4", "--maxShapes=x:4x8x4", "--skipInference"])
    for shape in ((2, 5, 4), (3, 7, 4)):
        x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
        xp = os.path.join(work, "rp_x.npy")
        np.save(xp, x)
        out = os.path.join(work, "repeat.json")
        kiln_run(a, plan, lib, {"x": xp}, out, shapes="x:" + "x".join(map(str, shape)))
        compare(f"repeat: shape {shape} matches NumPy", outputs(out)["y"], 2 * np.repeat(x.astype(np.float64), 3, axis=1), 0)
    p = run([a.kiln, f"--loadEngine={plan}", f"--plugins={lib}", "--shapes=x:5x1x4", "--iterations=1", "--duration=0"],
            expect_ok=False)
    check("repeat: shape outside the profile is an error", p.returncode != 0 and "profile" in p.stderr, p.stderr)


def test_out_of_tree(a, work):
    """The README's command for building a plugin outside the repository."""
    cxx = shutil.which("g++")
    if a.device == "gpu":
        return skip("out-of-tree build", "the README command builds a CPU plugin")
    if not cxx:
        return skip("out-of-tree build", "no g++ on PATH")
    lib = os.path.join(work, "libmy_swish.so")
    src = os.path.join(EX, "swish", "swish_plugin.cpp")
    kiln_lib = os.path.dirname(os.path.realpath(os.path.join(a.libdir, "libkiln.so")))
    run([cxx, "-std=c++20", "-O2", "-shared", "-fPIC", "-fvisibility=hidden", src, "-I", os.path.join(ROOT, "include"),
         "-L", kiln_lib, "-lkiln", "-o", lib])
    model = os.path.join(work, "swish.onnx")
    out = os.path.join(work, "oot.json")
    plan = os.path.join(work, "oot.plan")
    run([a.kiln, f"--onnx={model}", f"--plugins={lib}", "--device=cpu", f"--saveEngine={plan}", "--skipInference"])
    kiln_run(a, plan, lib, {"x": os.path.join(work, "x.npy")}, out)
    ref = outputs(os.path.join(work, "swish_fp32.json"))["y"]
    compare("out-of-tree plugin build (README command) runs", outputs(out)["y"], ref, 1e-6)


def test_import_fields(a, work):
    """Every ONNX attribute kind becomes a plugin field and survives the plan (test library
    libkiln_test_fields.so, plugin test.fields::FieldSum version 2); misuse is a clear error."""
    if a.device == "gpu":
        return skip("fields", "the test library is CPU-only")
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    lib = os.path.join(a.libdir, "libkiln_test_fields.so")
    t = np.array([0.5, 1.5, -0.25], dtype=np.float32)

    def model(path, **overrides):
        attrs = dict(i=3, f=0.75, s="abcd", ints=[1, 2, 3], floats=[0.5, 0.25], strings=["x", "y"],
                     t=numpy_helper.from_array(t), plugin_version=2)
        attrs.update(overrides)
        attrs = {k: v for k, v in attrs.items() if v is not None}
        node = helper.make_node("FieldSum", ["x"], ["y"], domain="test.fields", name="fs", **attrs)
        g = helper.make_graph([node], "fields", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("test.fields", 1)]), path)

    m = os.path.join(work, "fields.onnx")
    model(m)
    plan = os.path.join(work, "fields.plan")
    run([a.kiln, f"--onnx={m}", f"--plugins={lib}", "--device=cpu", f"--saveEngine={plan}", "--skipInference"])
    x = np.array([1.0, -2.0, 0.5, 4.0], dtype=np.float32)
    np.save(os.path.join(work, "fx.npy"), x)
    out = os.path.join(work, "fields.json")
    kiln_run(a, plan, lib, {"x": os.path.join(work, "fx.npy")}, out)
    scale = 3 + 0.75 + 4 + 6 + 0.75 + 2 + float(t.sum())
    compare("fields: every attribute kind reaches the plugin through the plan", outputs(out)["y"], x * scale, 1e-6)

    cases = [("wrong field type", dict(i=2.5), "field 'i' must be INT but is FLOAT"),
             ("missing required field", dict(s=None), "required field 's'"),
             ("unknown field", dict(colour="red"), "unknown field 'colour'"),
             ("enqueue failure", dict(fail=7), "enqueue failed with status 7"),
             ("wrong plugin_version", dict(plugin_version=3), "plugin_version '3'")]
    for name, over, needle in cases:
        bad = os.path.join(work, "bad_fields.onnx")
        model(bad, **over)
        p = run([a.kiln, f"--onnx={bad}", f"--plugins={lib}", "--device=cpu", "--iterations=1", "--duration=0", "--warmUp=0"],
                expect_ok=False)
        check(f"fields: {name} is a clear error", p.returncode not in (0, -11, -6) and needle in p.stderr and
              "Traceback" not in p.stderr, f"rc {p.returncode}: {p.stderr[-600:]}")

    # --enablePluginOverride: the test library registers "Relu" (namespace "") computing -x.
    rm = os.path.join(work, "relu.onnx")
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "relu",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), rm)
    for flag, want in (([], np.maximum(x, 0)), (["--enablePluginOverride"], -x)):
        out = os.path.join(work, "relu.json")
        run([a.kiln, f"--onnx={rm}", f"--plugins={lib}", "--device=cpu", "--iterations=1", "--duration=0", "--warmUp=0",
             "--loadInputs=x:" + os.path.join(work, "fx.npy"), f"--exportOutput={out}"] + flag)
        compare(f"override: Relu {'replaced by the plugin' if flag else 'stays built in'}", outputs(out)["y"],
                want.astype(np.float64), 0)
    p = run([a.kiln, "--plugins=" + os.path.join(a.libdir, "libkiln_test_noentry.so"), "--listPlugins"], expect_ok=False)
    check("a library without entry points is refused", p.returncode != 0 and "not a kiln plugin library" in p.stderr, p.stderr)
    p = run([a.kiln, "--plugins=/nonexistent/libx.so", "--listPlugins"], expect_ok=False)
    check("a missing library is refused", p.returncode != 0 and "does not exist" in p.stderr, p.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--libdir", required=True, help="folder holding libkiln.so and the example plugin libraries")
    ap.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    a = ap.parse_args()
    if a.device == "gpu":
        p = subprocess.run([a.kiln, "--onnx=/nonexistent.onnx", "--device=gpu"], capture_output=True, text=True)
        if "no usable CUDA device" in p.stderr:
            print("SKIPPED: no GPU on this machine (GPU plugin tests run on the GPU machine)")
            return 77
    work = tempfile.mkdtemp(prefix="kiln_plugins_")
    try:
        for t in (test_swish, test_rownorm, test_repeat, test_out_of_tree, test_import_fields):
            try:
                t(a, work)
            except AssertionError as e:
                check(t.__name__, False, str(e))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    skipped = f"; {len(SKIPS)} skipped: {', '.join(SKIPS)}" if SKIPS else ""
    print(f"plugin examples ({a.device}): {'all passed' if not FAILS else str(len(FAILS)) + ' failed: ' + ', '.join(FAILS)}{skipped}")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
