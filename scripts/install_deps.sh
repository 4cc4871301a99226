#!/usr/bin/env bash
# Installs what kiln needs to build and test, from Debian packages and PyPI. Idempotent: only
# missing pieces are installed. See README.md ("Dependencies") for why each one is used.
set -euo pipefail

DEBS=(cmake make g++ pkg-config protobuf-compiler libprotobuf-dev libdnnl-dev libcli11-dev
      nlohmann-json3-dev libgtest-dev ccache libxxhash-dev)
PY=(onnx==1.23.0 onnxruntime numpy nvidia-cudnn-frontend pybind11)

# --fuzz: clang and its libFuzzer/sanitizer runtimes, for `make fuzz` only (not needed by CI).
if [ "${1:-}" = "--fuzz" ]; then DEBS+=(clang libclang-rt-14-dev); fi

missing=()
for p in "${DEBS[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "[deps] installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c "import onnx, onnxruntime, numpy, cudnn, pybind11; assert onnx.__version__ == '1.23.0'" 2>/dev/null; then
  echo "[deps] installing Python packages: ${PY[*]}"
  "$PYTHON" -m pip install -q "${PY[@]}"
fi
echo "[deps] ok"
