#!/usr/bin/env python3
"""Draws kiln's include structure folder -> folder and checks the floor plan (docs/internals.md).

Floors, lowest first; an include may go down or stay on its floor, never up:
  core -> ir -> ops -> backends -> builder/plan/runtime -> faces
Four checks, each printed with every offender:
  1. upward imports (folder -> folder edges that climb a floor): at most ALLOWED_UPWARD;
  2. no file outside src/backends/cpu/ includes backends/cpu/... (tests may: they test it);
  3. the faces (CLI, Python, conformance tool, example plugins, Triton backend) include the public API only;
  4. the library reads no environment variable (getenv in src/): knobs are BuilderConfig fields.
Exit status 1 when a check fails. `--edges` also prints every folder edge; `--dot` prints Graphviz.
"""
import argparse
import os
import re
import sys
from collections import defaultdict

# Floor -> folders (relative to the repository root). A file belongs to its longest folder prefix.
FLOORS = [
    ("core", ["include/kiln", "src/core"]),  # public API declarations and basic types
    ("ir", ["src/ir"]),
    ("ops", ["src/ops"]),
    ("backends", ["src/backends", "src/backends/cpu", "src/backends/cuda", "src/plugin"]),
    ("builder/plan/runtime", ["src/builder", "src/builder/passes", "src/plan", "src/runtime", "src/onnx"]),
    ("faces", ["tools/kiln", "tools/conformance", "python", "plugins", "serving/triton"]),
]
FACES = {"tools/kiln", "tools/conformance", "python", "plugins", "serving/triton"}
ALLOWED_UPWARD = 2

# Known exceptions, file -> included file: why each is there and when it goes (docs/internals.md,
# "Floor plan"). They still count as upward imports.
PENDING: dict = {}

GETENV_RE = re.compile(r"\bgetenv\s*\(")
SOURCE_EXT = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh", ".inc")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SEARCH_ROOTS = ["src", "include"]  # the -I directories of the library and its faces


def floor_of():
    return {folder: i for i, (_, folders) in enumerate(FLOORS) for folder in folders}


def folder_of(path, floors):
    best = None
    for folder in floors:
        if path == folder or path.startswith(folder + "/"):
            if best is None or len(folder) > len(best):
                best = folder
    return best


def resolve(root, including, name):
    for base in [os.path.dirname(including)] + SEARCH_ROOTS:
        candidate = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(os.path.join(root, candidate)):
            return candidate
    return None  # generated (onnx.pb.h) or a system header


def includes(root, floors):
    """Yields (file, included file) for every quoted include that resolves inside the tree."""
    for folder in floors:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, folder)):
            dirnames[:] = [d for d in dirnames if os.path.relpath(os.path.join(dirpath, d), root) not in floors]
            for f in sorted(filenames):
                if not f.endswith(SOURCE_EXT):
                    continue
                path = os.path.relpath(os.path.join(dirpath, f), root)
                with open(os.path.join(root, path), encoding="utf-8", errors="replace") as src:
                    for line in src:
                        m = INCLUDE_RE.match(line)
                        if m:
                            target = resolve(root, path, m.group(1))
                            if target:
                                yield path, target


def getenv_calls(root):
    """Yields "file:line" for every getenv call in src/."""
    for dirpath, _, filenames in os.walk(os.path.join(root, "src")):
        for f in sorted(filenames):
            if f.endswith(SOURCE_EXT):
                path = os.path.join(dirpath, f)
                with open(path, encoding="utf-8", errors="replace") as src:
                    for n, line in enumerate(src, 1):
                        if GETENV_RE.search(line):
                            yield f"{os.path.relpath(path, root)}:{n}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--edges", action="store_true", help="print every folder -> folder edge")
    ap.add_argument("--dot", action="store_true", help="print the folder graph as Graphviz")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    floors = floor_of()

    edges = defaultdict(list)  # (from folder, to folder) -> [(file, included)]
    outside_cpu, faces_internal = [], []
    for path, target in includes(root, floors):
        src, dst = folder_of(path, floors), folder_of(target, floors)
        if dst is None or src == dst:
            continue
        edges[(src, dst)].append((path, target))
        if dst == "src/backends/cpu" and (path, target) not in PENDING:
            outside_cpu.append((path, target))
        if src in FACES and dst not in FACES and dst != "include/kiln":
            faces_internal.append((path, target))

    upward = sorted(e for e in edges if floors[e[1]] > floors[e[0]])
    if args.dot:
        print("digraph floors {\n  rankdir=BT;")
        for (a, b), files in sorted(edges.items()):
            style = ' [color=red, label="up"]' if (a, b) in upward else ""
            print(f'  "{a}" -> "{b}"{style};  // {len(files)} includes')
        print("}")
        return 0
    if args.edges:
        for (a, b), files in sorted(edges.items(), key=lambda e: (floors[e[0][0]], e[0])):
            print(f"{a} ({FLOORS[floors[a]][0]}) -> {b} ({FLOORS[floors[b]][0]}): {len(files)}")

    print(f"upward imports: {len(upward)} (allowed {ALLOWED_UPWARD})")
    for a, b in upward:
        print(f"  {a} ({FLOORS[floors[a]][0]}) -> {b} ({FLOORS[floors[b]][0]})")
        for path, target in edges[(a, b)]:
            why = PENDING.get((path, target))
            print(f"    {path}: {target}" + (f"  [pending: {why}]" if why else ""))
    print(f"includes of backends/cpu/ from outside it: {len(outside_cpu)}")
    for path, target in outside_cpu:
        print(f"  {path}: {target}")
    print(f"faces including internals (public API only): {len(faces_internal)}")
    for path, target in faces_internal:
        print(f"  {path}: {target}")
    env = list(getenv_calls(root))
    print(f"getenv in src/: {len(env)}")
    for where in env:
        print(f"  {where}")
    ok = len(upward) <= ALLOWED_UPWARD and not outside_cpu and not faces_internal and not env
    print("floor plan: " + ("ok" if ok else "VIOLATED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
