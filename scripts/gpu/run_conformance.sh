#!/usr/bin/env bash
# Runs the ONNX node tests on the GPU in parallel shards, and says whether the run is good.
# Usage: scripts/gpu/run_conformance.sh BUILD_DIR DATA_DIR OUT_FILE
#   OUT_FILE: every shard's PASS/FAIL/SKIP lines, then one summary line (also printed).
# Exits non-zero when a shard broke (crash, usage error, no GPU: any status but 0 or 1, or no
# summary line), when no test ran, and when the verdicts are wrong: against the pinned GPU baseline
# ($CONF_BASELINE, default tests/conformance/baseline_gpu.txt) where it exists (a PASS that became a
# SKIP or FAIL; see tests/conformance/README.md to create it), else when any test failed.
set -uo pipefail
B=$1; D=$2; OUT=$3
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BASELINE=${CONF_BASELINE:-$ROOT/tests/conformance/baseline_gpu.txt}
# One shard per core (round-robin over the sorted tests: equal shares). Every test is a forked
# child that starts CUDA, so the step is bound by process starts, not by the GPU.
N=${CONF_SHARDS:-$(nproc)}
pids=()
for ((i = 0; i < N; i++)); do
  "$B/bin/kiln_conformance" "$D" --device gpu --timeout 120 --shard "$i/$N" > "$OUT.shard_$i" 2>&1 &
  pids+=($!)
done
broken=()
for ((i = 0; i < N; i++)); do
  wait "${pids[$i]}"; rc=$?
  # 0: all passed or skipped; 1: some failed (judged below). Anything else, or no summary line
  # (killed, crashed), means the shard did not run its share.
  if { [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; } || ! grep -q " passed, .* failed, .* skipped" "$OUT.shard_$i"; then
    broken+=("shard $i/$N: exit $rc: $(grep -v '^\(PASS\|FAIL\|SKIP\) ' "$OUT.shard_$i" | tail -1)")
  fi
done
cat "$OUT".shard_* | grep -v " passed, .* failed, .* skipped" > "$OUT"
rm -f "$OUT".shard_*
pass=$(grep -c '^PASS ' "$OUT"); fail=$(grep -c '^FAIL ' "$OUT"); skip=$(grep -c '^SKIP ' "$OUT")
status=0; why=()
for b in "${broken[@]+"${broken[@]}"}"; do echo "conformance: broken $b" | tee -a "$OUT"; done
[ ${#broken[@]} -eq 0 ] || { status=1; why+=("${#broken[@]} of $N shards broke"); }
[ $((pass + fail + skip)) -gt 0 ] || { status=1; why+=("no test ran"); }
if [ -f "$BASELINE" ]; then
  python3 "$ROOT/tests/conformance/check_baseline.py" "$OUT" --baseline "$BASELINE" | tee -a "$OUT.baseline"
  [ "${PIPESTATUS[0]}" -eq 0 ] || { status=1; why+=("differs from $(basename "$BASELINE")"); }
  cat "$OUT.baseline" >> "$OUT"; rm -f "$OUT.baseline"
else
  echo "conformance: no GPU baseline ($BASELINE): any failure fails the step" | tee -a "$OUT"
  [ "$fail" -eq 0 ] || { status=1; why+=("$fail tests failed"); }
fi
verdict=ok; [ $status -eq 0 ] || verdict="FAIL ($(IFS=';'; echo "${why[*]}"))"
echo "$pass passed, $fail failed, $skip skipped: $verdict" | tee -a "$OUT"
exit $status
