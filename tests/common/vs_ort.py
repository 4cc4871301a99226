"""Shared plumbing of the tests that compare kiln's CPU engines (Python API) with ONNX Runtime:
importing the module, running both sides, and the pass / fail / not-comparable tally that ends
every such test with one summary line and its exit status (1 when a case failed or none passed)."""
import sys


def import_kiln(module_dir):
    """The kiln package from `module_dir`, or None after printing the SKIP line (exit 77 follows)."""
    sys.path.insert(0, module_dir)
    try:
        import kiln
    except ImportError as e:
        print(f"SKIP: kiln module: {e}")
        return None
    return kiln


def ort_outputs(path, feeds, optimize=True):
    """ONNX Runtime's CPU outputs of the model at `path`, its warnings silenced (old opsets draw one).
    optimize=False: its graph optimizations off (the model's ops exactly as written)."""
    import onnxruntime as ort
    quiet = ort.SessionOptions()
    quiet.log_severity_level = 3
    if not optimize:
        quiet.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, quiet, providers=["CPUExecutionProvider"]).run(None, feeds)


def kiln_outputs(kiln, path, feeds, **config):
    """kiln's outputs (name -> array) of a CPU engine built from `path` (no TF32; BuilderConfig options)."""
    cfg = kiln.BuilderConfig(tf32=False, device="cpu", **config)
    return kiln.build_engine(path, cfg).create_execution_context().infer(feeds)


def kiln_error(e):
    return "kiln: " + " ".join(str(e).split())[:300]


class Tally:
    def __init__(self, title):
        self.title, self.passed, self.failed, self.notes = title, 0, [], []

    def ok(self, name=None):
        self.passed += 1
        if name:
            print(f"ok    {name}")

    def fail(self, name, why):
        self.failed.append(f"{name}: {why}")

    def not_comparable(self, name, why):
        self.notes.append(f"{name}: {why}")

    def finish(self):
        for n in self.notes:
            print(f"not comparable  {n}")
        for f in self.failed:
            print(f"FAIL  {f}")
        extra = f", {len(self.notes)} not comparable" if self.notes else ""
        print(f"{self.title}: {self.passed} passed, {len(self.failed)} failed{extra}")
        return 1 if self.failed or not self.passed else 0
