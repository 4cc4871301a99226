#!/usr/bin/env bash
# Builds kiln on the GPU machine (no oneDNN there; CLI11/json/cuDNN-frontend headers carried in
# .device_deps). Usage: scripts/gpu/build_on_device.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build-dev}
export PATH=/usr/local/cuda/bin:$PATH
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_WITH_ONEDNN=OFF \
  -DCMAKE_CXX_FLAGS="-I$PWD/.device_deps/include" \
  -DCUDNN_FRONTEND_INCLUDE_DIR="$PWD/.device_deps/cudnn_frontend/include" >/dev/null
ninja -C "$B" kiln kiln_cli kiln_unit_tests kiln_conformance
