"""What the Python test files share: argument parsing, importing the module under test, checks, and
running every test_* function of a file (each reported; exit 1 when one fails, 77 when the GPU run
has no GPU, which ctest reports as skipped)."""
import argparse
import sys
import tempfile


class Env:
    kiln = None      # the module under test
    device = "cpu"   # "cpu" or "gpu": where the engines of this run are built
    tmp = ""         # a temporary directory for the run


class Skip(Exception):
    """Raised by a test that cannot run here (no GPU, no torch); reported, not counted as a failure."""


def check(cond, msg=""):
    """assert that `python -O` does not remove."""
    if not cond:
        raise AssertionError(msg)


def expect_error(fn, text, kind=None):
    """fn() raises `kind` (kiln.Error by default) with `text` in its message."""
    kind = kind or Env.kiln.Error
    try:
        fn()
    except kind as e:
        check(text in str(e), f"{text!r} not in {str(e)!r}")
        return
    raise AssertionError(f"no {kind.__name__} with {text!r}")


def main(tests, description, setup=None):
    """Parses --module-dir/--device, imports kiln, calls setup() once Env is filled in, and runs
    the test_* functions of `tests` (name -> function) in name order."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--module-dir", required=True)
    ap.add_argument("--device", default="cpu", choices=["cpu", "gpu"])
    ap.add_argument("-k", default="", help="run only the tests whose name contains this")
    args = ap.parse_args()
    sys.path.insert(0, args.module_dir)
    import kiln
    Env.kiln = kiln
    if args.device == "gpu" and not kiln.gpu_available():
        print("SKIPPED: no GPU here (the GPU checks run on the GPU machine)")
        return 77  # ctest: skipped
    Env.device = args.device
    selected = [(name, fn) for name, fn in sorted(tests.items()) if name.startswith("test_") and args.k in name]
    failed = skipped = 0
    with tempfile.TemporaryDirectory() as tmp:
        Env.tmp = tmp
        if setup:
            setup()
        for name, fn in selected:
            try:
                fn()
                print(f"ok   {name}")
            except Skip as e:
                skipped += 1
                print(f"skip {name}: {e}")
            except Exception as e:  # report every test, then fail
                failed += 1
                print(f"FAIL {name}: {type(e).__name__}: {e}")
    ran = len(selected) - skipped
    print(f"{ran - failed}/{ran} {description} passed ({Env.device}; {skipped} skipped)")
    return 1 if failed else 0
