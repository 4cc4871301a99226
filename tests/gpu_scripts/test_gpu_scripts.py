#!/usr/bin/env python3
"""The GPU machine's scripts fail when a step fails or runs nothing (simulated here: fake
kiln_conformance and kiln_unit_tests binaries in a fake bundle, no GPU needed).

scripts/gpu/run_conformance.sh must exit non-zero when a shard breaks, when no test runs, when a
test fails (no baseline) or a pinned PASS becomes a SKIP (baseline), and 0 on a clean run;
scripts/gpu/validate_and_bench.sh must print one `step NAME: ok|FAIL` line per step and exit
non-zero when any step failed, ran nothing, or is unknown."""
import os
import stat
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN_CONF = os.path.join(ROOT, "scripts", "gpu", "run_conformance.sh")
VALIDATE = os.path.join(ROOT, "scripts", "gpu", "validate_and_bench.sh")

# Prints DATA/shard_I.out and exits with DATA/shard_I.rc for --shard I/N.
FAKE_RUNNER = """#!/usr/bin/env bash
D=$1; shard=""
while [ $# -gt 0 ]; do [ "$1" = --shard ] && shard=${2%%/*}; shift; done
cat "$D/shard_$shard.out"; exit "$(cat "$D/shard_$shard.rc")"
"""
# gtest-like: lists two suites; FAKE_UNIT=fail makes the second fail, =skip makes both skip,
# =abort makes the second abort in the middle of its test (as std::terminate does), =nogpu makes the
# second skip for want of a GPU while the others pass.
FAKE_UNIT = """#!/usr/bin/env bash
case "$1" in
  --gtest_list_tests) printf 'CudaA.\\n  one\\nCudaB.\\n  two\\nOther.\\n  x\\n'; exit 0;;
esac
if [ "${FAKE_UNIT:-}" = skip ]; then echo "[  SKIPPED ] 1 test, listed below:"; echo "[  PASSED  ] 0 tests."; exit 0; fi
if [ "${FAKE_UNIT:-}" = fail ] && [ "$1" = "--gtest_filter=CudaB.*" ]; then echo "[  FAILED  ] CudaB.two"; exit 1; fi
if [ "${FAKE_UNIT:-}" = nogpu ] && [ "$1" = "--gtest_filter=CudaB.*" ]; then echo "no GPU on this machine: CUDA test skipped"; echo "[  SKIPPED ] 1 test, listed below:"; echo "[  PASSED  ] 0 tests."; exit 0; fi
if [ "${FAKE_UNIT:-}" = abort ] && [ "$1" = "--gtest_filter=CudaB.*" ]; then echo "[ RUN      ] CudaB.two"; echo "terminate called"; exit 134; fi
echo "[  PASSED  ] 1 test."
"""


def executable(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)


def shards(data, outputs):
    """outputs: per shard (stdout text, exit status)."""
    os.makedirs(data, exist_ok=True)
    for i, (text, rc) in enumerate(outputs):
        with open(os.path.join(data, f"shard_{i}.out"), "w") as f:
            f.write(text)
        with open(os.path.join(data, f"shard_{i}.rc"), "w") as f:
            f.write(str(rc))


def run(cmd, env):
    p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env}, cwd=ROOT)
    return p.returncode, p.stdout + p.stderr


def main():
    problems = []

    def expect(cond, what, out):
        if not cond:
            problems.append(f"{what}\n{out[-2000:]}")

    with tempfile.TemporaryDirectory(prefix="kiln_gpu_scripts_") as tmp:
        bundle = os.path.join(tmp, "kb")
        os.makedirs(os.path.join(bundle, "bin"))
        os.makedirs(os.path.join(bundle, "lib"))
        executable(os.path.join(bundle, "bin", "kiln_conformance"), FAKE_RUNNER)
        executable(os.path.join(bundle, "bin", "kiln_unit_tests"), FAKE_UNIT)
        data, log = os.path.join(tmp, "conf"), os.path.join(tmp, "conf.log")
        good = [("PASS test_a\nSKIP test_b: unsupported: x\n1 passed, 0 failed, 1 skipped\n", 0),
                ("PASS test_c\n1 passed, 0 failed, 0 skipped\n", 0)]
        no_baseline = {"CONF_SHARDS": "2", "CONF_BASELINE": os.path.join(tmp, "none.txt")}

        def conformance(outputs, env):
            shards(data, outputs)
            return run(["bash", RUN_CONF, bundle, data, log], env)

        rc, out = conformance(good, no_baseline)
        expect(rc == 0 and "2 passed, 0 failed, 1 skipped: ok" in out, f"clean run: exit {rc}", out)
        cases = [
            ("a test failed", [good[0], ("FAIL test_c: wrong\n0 passed, 1 failed, 0 skipped\n", 1)]),
            ("a shard crashed (no summary line)", [good[0], ("PASS test_c\nSegmentation fault\n", 139)]),
            ("a shard had no GPU (exit 2)", [good[0], ("kiln_conformance: --device gpu, but no usable CUDA device\n", 2)]),
            ("nothing ran", [("0 passed, 0 failed, 0 skipped\n", 1), ("0 passed, 0 failed, 0 skipped\n", 1)]),
        ]
        for what, outputs in cases:
            rc, out = conformance(outputs, no_baseline)
            expect(rc != 0 and "FAIL" in out.splitlines()[-1], f"run_conformance.sh: {what}: exit {rc}", out)

        baseline = os.path.join(tmp, "baseline_gpu.txt")
        with open(baseline, "w") as f:
            f.write("test_a PASS\ntest_b SKIP\ntest_c PASS\n")
        pinned = {"CONF_SHARDS": "2", "CONF_BASELINE": baseline}
        rc, out = conformance(good, pinned)
        expect(rc == 0, f"run matching the baseline: exit {rc}", out)
        rc, out = conformance([good[0], ("SKIP test_c: unsupported: y\n0 passed, 0 failed, 1 skipped\n", 0)], pinned)
        expect(rc != 0 and "REGRESSION: PASS -> SKIP" in out, f"a pinned PASS became a SKIP: exit {rc}", out)

        # validate_and_bench.sh with the fake bundle.
        outdir = os.path.join(tmp, "out")
        env = {"KILN_BUNDLE_DIR": bundle, "OUT": outdir, "CONF_DATA": data, **no_baseline}
        shards(data, good)
        rc, out = run(["bash", VALIDATE, "unit,conformance"], env)
        expect(rc == 0 and "step unit: ok" in out and "step conformance: ok" in out, f"clean steps: exit {rc}", out)
        rc, out = run(["bash", VALIDATE, "unit,conformance"], {**env, "FAKE_UNIT": "fail"})
        expect(rc != 0 and "step unit: FAIL" in out and "step conformance: ok" in out, f"a failing unit suite: exit {rc}", out)
        rc, out = run(["bash", VALIDATE, "unit"], {**env, "FAKE_UNIT": "abort"})
        expect(rc != 0 and "step unit: FAIL" in out and "last test started: [ RUN      ] CudaB.two" in out,
               f"an aborting unit suite names its test: exit {rc}", out)
        rc, out = run(["bash", VALIDATE, "unit"], {**env, "FAKE_UNIT": "nogpu"})
        expect(rc != 0 and "step unit: FAIL" in out and "1 for want of a GPU" in out,
               f"a suite skipped for want of a GPU while others passed: exit {rc}", out)
        rc, out = run(["bash", VALIDATE, "unit"], {**env, "FAKE_UNIT": "skip"})
        expect(rc != 0 and "step unit: FAIL" in out, f"unit tests that all skipped: exit {rc}", out)
        shards(data, cases[0][1])
        rc, out = run(["bash", VALIDATE, "unit,conformance"], env)
        expect(rc != 0 and "step conformance: FAIL" in out, f"a failing conformance step: exit {rc}", out)
        rc, out = run(["bash", VALIDATE, "unit,conformanse"], env)
        expect(rc != 0 and "unknown step" in out, f"a misspelt step: exit {rc}", out)
        rc, out = run(["bash", VALIDATE, "plugins"], env)  # the fake bundle has no kiln CLI
        expect(rc != 0 and "step plugins: FAIL" in out, f"plugins without a CLI: exit {rc}", out)

    for p in problems:
        print("FAIL", p)
    print("GPU scripts:", "ok" if not problems else f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
