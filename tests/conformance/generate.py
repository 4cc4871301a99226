#!/usr/bin/env python3
"""Writes every ONNX backend *node* test of the installed onnx package to disk.

Layout (the same as onnx's own test data, plus meta.json):
  DIR/<test_name>/model.onnx
  DIR/<test_name>/test_data_set_N/input_K.pb, output_K.pb
  DIR/<test_name>/meta.json  {rtol, atol, op_type, domain, expanded, inputs, outputs}

`inputs`/`outputs` list, in graph order, each value's name and kind ("tensor", "sequence",
"optional", "map") so the runner can bind data by name and skip non-tensor values without
guessing from the .pb bytes.

Idempotent: NumPy's global RNG is seeded before the cases are created (many onnx cases draw
random data), files are only rewritten when their bytes change, and stale entries are removed.
A stamp file records the onnx version and this script's hash so an unchanged rerun returns at once.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import warnings

import numpy as np

STAMP_NAME = ".kiln_conformance_stamp"
DEFAULT_RTOL = 1e-3  # onnx's defaults when a TestCase states none
DEFAULT_ATOL = 1e-7


def value_kind(value_info) -> str:
    kind = value_info.type.WhichOneof("value")
    return {
        "tensor_type": "tensor",
        "sparse_tensor_type": "sparse_tensor",
        "sequence_type": "sequence",
        "optional_type": "optional",
        "map_type": "map",
    }.get(kind, kind or "unknown")


def serialize_value(value, value_info) -> bytes:
    """Serializes one data-set value as the proto matching its graph value's kind."""
    from onnx import TensorProto, numpy_helper

    kind = value_kind(value_info)
    name = value_info.name
    if kind == "map":
        return numpy_helper.from_dict(value, name).SerializeToString()
    if kind == "sequence":
        return numpy_helper.from_list(value, name).SerializeToString()
    if kind == "optional":
        return numpy_helper.from_optional(value, name).SerializeToString()
    if isinstance(value, TensorProto):
        return value.SerializeToString()
    # Cases sometimes hand NumPy scalars (np.float32(...)) rather than arrays.
    return numpy_helper.from_array(np.asarray(value), name).SerializeToString()


def write_if_changed(path: str, data: bytes) -> bool:
    """Writes `data` unless the file already holds exactly these bytes. Returns True if written."""
    try:
        with open(path, "rb") as f:
            if f.read() == data:
                return False
    except FileNotFoundError:
        pass
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    return True


def copy_tree_if_changed(src: str, dst: str) -> None:
    """Mirrors an on-disk case (model_dir) into dst, file by file."""
    for root, _dirs, files in os.walk(src):
        rel = os.path.relpath(root, src)
        out_root = os.path.normpath(os.path.join(dst, rel))
        os.makedirs(out_root, exist_ok=True)
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                write_if_changed(os.path.join(out_root, name), f.read())


def tested_op(case, by_name) -> tuple[str, str, bool]:
    """(op_type, domain, expanded) of the operator a case tests.

    A function-expanded case ("<base>_expanded[_verN]") tests the op of its base case; its own
    graph holds the function body's primitive ops."""
    name = case.name
    if "_expanded" in name:
        base = by_name.get(name[: name.index("_expanded")])
        if base is not None and len(base.model.graph.node) >= 1:
            node = base.model.graph.node[0]
            return node.op_type, node.domain, True
    nodes = case.model.graph.node
    if len(nodes) == 0:
        return "", "", False
    # Multi-node cases without an expanded base: the last node produces the tested output.
    node = nodes[-1] if len(nodes) > 1 else nodes[0]
    return node.op_type, node.domain, False


def model_case_files(case, by_name) -> dict[str, bytes]:
    """All files of one generated case, relative path -> bytes."""
    model = case.model
    files: dict[str, bytes] = {"model.onnx": model.SerializeToString()}
    graph_inputs = list(model.graph.input)
    graph_outputs = list(model.graph.output)
    for i, (inputs, outputs) in enumerate(case.data_sets):
        ds = f"test_data_set_{i}"
        for j, value in enumerate(inputs):
            files[f"{ds}/input_{j}.pb"] = serialize_value(value, graph_inputs[j])
        for j, value in enumerate(outputs):
            files[f"{ds}/output_{j}.pb"] = serialize_value(value, graph_outputs[j])
    op_type, domain, expanded = tested_op(case, by_name)
    meta = {
        "rtol": case.rtol if case.rtol is not None else DEFAULT_RTOL,
        "atol": case.atol if case.atol is not None else DEFAULT_ATOL,
        "op_type": op_type,
        "domain": domain,
        "expanded": expanded,
        "inputs": [{"name": v.name, "kind": value_kind(v)} for v in graph_inputs],
        "outputs": [{"name": v.name, "kind": value_kind(v)} for v in graph_outputs],
    }
    files["meta.json"] = (json.dumps(meta, indent=1, sort_keys=True) + "\n").encode()
    return files


def on_disk_meta(case) -> dict:
    """meta.json for a case whose model and data already live in the onnx package."""
    import onnx

    model = onnx.load(os.path.join(case.model_dir, "model.onnx"), load_external_data=False)
    nodes = model.graph.node
    return {
        "rtol": case.rtol if case.rtol is not None else DEFAULT_RTOL,
        "atol": case.atol if case.atol is not None else DEFAULT_ATOL,
        "op_type": nodes[-1].op_type if nodes else "",
        "domain": nodes[-1].domain if nodes else "",
        "expanded": "_expanded" in case.name,
        "inputs": [{"name": v.name, "kind": value_kind(v)} for v in model.graph.input],
        "outputs": [{"name": v.name, "kind": value_kind(v)} for v in model.graph.output],
    }


def sync_case_dir(case_dir: str, files: dict[str, bytes]) -> None:
    """Writes `files` under case_dir and removes anything else there (stale data sets)."""
    os.makedirs(case_dir, exist_ok=True)
    for rel, data in files.items():
        path = os.path.join(case_dir, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_if_changed(path, data)
    wanted_dirs = {os.path.dirname(rel) for rel in files if os.path.dirname(rel)}
    for entry in os.listdir(case_dir):
        path = os.path.join(case_dir, entry)
        if os.path.isdir(path):
            if entry not in wanted_dirs:
                shutil.rmtree(path)
                continue
            for sub in os.listdir(path):
                if f"{entry}/{sub}" not in files:
                    os.remove(os.path.join(path, sub))
        elif entry not in files:
            os.remove(path)


def stamp_text() -> str:
    import onnx

    with open(os.path.abspath(__file__), "rb") as f:
        script_hash = hashlib.sha256(f.read()).hexdigest()
    return f"onnx={onnx.__version__} numpy={np.__version__} script={script_hash}\n"


def load_cases():
    from onnx.backend.test.loader import load_model_tests

    # Many onnx node cases draw np.random data at collection time: seed for reproducible files.
    np.random.seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # cast/reduce cases overflow or divide by zero on purpose
        with np.errstate(all="ignore"):
            return load_model_tests(kind="node")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--force", action="store_true", help="ignore the stamp and regenerate")
    args = parser.parse_args()

    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    stamp_path = os.path.join(out, STAMP_NAME)
    stamp = stamp_text()
    if not args.force and os.path.exists(stamp_path):
        with open(stamp_path) as f:
            if f.read() == stamp:
                count = sum(1 for e in os.scandir(out) if e.is_dir())
                print(f"{out}: up to date ({count} node tests)")
                return 0

    cases = load_cases()
    by_name = {c.name: c for c in cases}
    if len(by_name) != len(cases):
        print("error: duplicate test names in onnx's node tests", file=sys.stderr)
        return 1

    for case in cases:
        case_dir = os.path.join(out, case.name)
        if case.model_dir is not None:
            # On-disk case: mirror the package's directory, then add our meta.json.
            copy_tree_if_changed(case.model_dir, case_dir)
            meta = (json.dumps(on_disk_meta(case), indent=1, sort_keys=True) + "\n").encode()
            write_if_changed(os.path.join(case_dir, "meta.json"), meta)
        else:
            sync_case_dir(case_dir, model_case_files(case, by_name))

    # Remove dirs of tests that the installed onnx no longer has.
    for entry in os.scandir(out):
        if entry.is_dir() and entry.name not in by_name:
            shutil.rmtree(entry.path)

    write_if_changed(stamp_path, stamp.encode())
    print(f"{out}: {len(cases)} node tests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
