#!/usr/bin/env python3
"""Compares a kiln_conformance run with the pinned per-test statuses of a backend.

  check_baseline.py LOG --baseline tests/conformance/baseline_cpu.txt            # check
  check_baseline.py LOG --baseline tests/conformance/baseline_cpu.txt --update   # re-pin

LOG is the runner's stdout (`PASS name`, `FAIL name: why`, `SKIP name: why` lines; shard logs may be
concatenated). The baseline has one `name STATUS` line per test, sorted. The check fails (exit 1)
when nothing ran, when a pinned PASS is now a SKIP, a FAIL or missing, when a test fails that the
baseline does not list as a known failure, and when the baseline is stale (a test it does not
list, one it lists that did not run, a SKIP or known FAIL that now passes): the counts stay pinned,
and changing them is a deliberate commit of the file that --update rewrites.
--update refuses to pin failures unless --allow-failures is given (a GPU baseline may start with
known failures; a CPU one may not: no op kiln claims to support may fail).
"""
import argparse
import collections
import re
import sys

VERDICT = re.compile(r"^(PASS|FAIL|SKIP) ([^:\s]+)", re.M)
HEADER = ("# kiln conformance baseline: one `test_name STATUS` per line (PASS, SKIP, or FAIL = known failure).\n"
          "# Checked by tests/conformance/check_baseline.py (make conformance); rewrite it with --update,\n"
          "# and commit the change on purpose.\n")


def read_log(path):
    with open(path, errors="replace") as f:
        found = VERDICT.findall(f.read())
    run = {}
    for verdict, name in found:
        if name in run:
            raise SystemExit(f"check_baseline: {name} ran twice in {path} (overlapping shards?)")
        run[name] = verdict
    return run


def read_baseline(path):
    pinned = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split()
            if len(parts) != 2 or parts[1] not in ("PASS", "SKIP", "FAIL"):
                raise SystemExit(f"check_baseline: {path}:{n}: expected `name PASS|SKIP|FAIL`, got {line!r}")
            pinned[parts[0]] = parts[1]
    return pinned


def counts(statuses):
    c = collections.Counter(statuses.values())
    return f"{c['PASS']} passed, {c['FAIL']} failed, {c['SKIP']} skipped"


def compare(run, pinned):
    """Problems, one line each, grouped: regressions first, then stale entries."""
    groups = collections.defaultdict(list)
    for name, was in sorted(pinned.items()):
        now = run.get(name)
        if now is None:
            groups["pinned but not run" if was != "PASS" else "REGRESSION: pinned PASS, not run"].append(name)
        elif was == "PASS" and now != "PASS":
            groups[f"REGRESSION: PASS -> {now}"].append(name)
        elif was == "SKIP" and now == "FAIL":
            groups["REGRESSION: SKIP -> FAIL"].append(name)
        elif was != now:
            groups[f"stale: {was} -> {now} (pin it)"].append(name)
    for name, now in sorted(run.items()):
        if name not in pinned:
            groups[f"{'REGRESSION: new test FAILs' if now == 'FAIL' else 'stale: not in the baseline'} ({now})"].append(name)
    return groups


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log")
    ap.add_argument("--baseline", required=True)
    ap.add_argument("--update", action="store_true", help="rewrite the baseline from LOG")
    ap.add_argument("--allow-failures", action="store_true", help="with --update: pin FAILs as known failures")
    a = ap.parse_args()

    run = read_log(a.log)
    if not run:
        print(f"check_baseline: FAIL: no test ran (no PASS/FAIL/SKIP line in {a.log})")
        return 1
    if a.update:
        failed = sorted(n for n, v in run.items() if v == "FAIL")
        if failed and not a.allow_failures:
            print(f"check_baseline: refusing to pin {len(failed)} failures (e.g. {failed[0]}); fix them or pass --allow-failures")
            return 1
        with open(a.baseline, "w") as f:
            f.write(HEADER)
            f.writelines(f"{n} {run[n]}\n" for n in sorted(run))
        print(f"check_baseline: wrote {a.baseline}: {counts(run)}")
        return 0

    pinned = read_baseline(a.baseline)
    groups = compare(run, pinned)
    for what, names in groups.items():
        shown = ", ".join(names[:20]) + (f", ... ({len(names) - 20} more)" if len(names) > 20 else "")
        print(f"check_baseline: {what}: {len(names)}: {shown}")
    verdict = "FAIL" if groups else "ok"
    print(f"check_baseline: {verdict}: now {counts(run)}; pinned {counts(pinned)} ({a.baseline})")
    if groups:
        print(f"check_baseline: if the change is intended: {sys.argv[0]} {a.log} --baseline {a.baseline} --update, "
              "and commit the file")
    return 1 if groups else 0


if __name__ == "__main__":
    sys.exit(main())
