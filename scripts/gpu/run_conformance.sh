#!/usr/bin/env bash
# Runs the ONNX node tests on the GPU in parallel shards.
# Usage: scripts/gpu/run_conformance.sh BUILD_DIR DATA_DIR OUT_FILE
set -uo pipefail
B=$1; D=$2; OUT=$3
# One shard per core (round-robin over the sorted tests: equal shares). Every test is a forked
# child that starts CUDA, so the step is bound by process starts, not by the GPU.
N=${CONF_SHARDS:-$(nproc)}
pids=()
for ((i = 0; i < N; i++)); do
  "$B/bin/kiln_conformance" "$D" --device gpu --timeout 120 --shard "$i/$N" > "$OUT.shard_$i" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
cat "$OUT".shard_* | grep -v " passed, " > "$OUT"
awk '/ passed, /{p+=$1; f+=$3; s+=$5} END {printf "%d passed, %d failed, %d skipped\n", p, f, s}' "$OUT".shard_* | tee -a "$OUT"
rm -f "$OUT".shard_*
