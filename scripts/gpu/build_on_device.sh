#!/usr/bin/env bash
# Builds kiln on the GPU machine (no oneDNN there; CLI11/json/cuDNN-frontend headers carried in
# .device_deps). Usage: scripts/gpu/build_on_device.sh [BUILD_DIR [TARGET...]]
# (default targets: the library, the CLI, the unit tests and the conformance runner; a profiling-only
# run names kiln_cli alone and saves a minute of device time)
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build-dev}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(kiln kiln_cli kiln_unit_tests kiln_conformance)
export PATH=/usr/local/cuda/bin:$PATH
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_WITH_ONEDNN=OFF \
  -DCMAKE_CXX_FLAGS="-I$PWD/.device_deps/include" \
  -DCUDNN_FRONTEND_INCLUDE_DIR="$PWD/.device_deps/cudnn_frontend/include" >/dev/null
ninja -C "$B" "${TARGETS[@]}"
