#!/usr/bin/env bash
# Runs the ONNX node tests on the GPU in parallel shards (by the letter after "test_").
# Usage: scripts/gpu/run_conformance.sh BUILD_DIR DATA_DIR OUT_FILE
set -uo pipefail
B=$1; D=$2; OUT=$3
pids=()
for shard in "a,b,c" "d,e,f,g" "h,i,j,k,l" "m,n,o" "p,q,r" "s" "t,u,v,w,x,y,z"; do
  filt=$(echo "$shard" | sed 's/\([a-z]\)/test_\1/g')
  "$B/bin/kiln_conformance" "$D" --device gpu --filter "$filt" > "$OUT.shard_${shard//,/}" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
cat "$OUT".shard_* | grep -v " passed, " > "$OUT"
awk '/ passed, /{p+=$1; f+=$3; s+=$5} END {printf "%d passed, %d failed, %d skipped\n", p, f, s}' "$OUT".shard_* | tee -a "$OUT"
rm -f "$OUT".shard_*
