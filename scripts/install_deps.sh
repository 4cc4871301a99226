#!/usr/bin/env bash
# Installs what kiln needs to build and test, from Debian packages and PyPI. Idempotent: only
# missing pieces are installed. See README.md ("Dependencies") for why each one is used.
set -euo pipefail

DEBS=(cmake make g++ pkg-config protobuf-compiler libprotobuf-dev libdnnl-dev libcli11-dev
      nlohmann-json3-dev libgtest-dev ccache libxxhash-dev python3-pip python3-venv)
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
# PEP 668 (stock Debian 12): pip refuses to install into the system interpreter. The Makefile
# and ctest run `python3`, so the test packages must be importable by it: inside a virtual
# environment (or pyenv/conda) pip installs normally; for an externally managed system Python
# we decide explicitly for --break-system-packages (pip installs into /usr/local and does not
# touch Debian's own files). To keep the system Python clean instead, create a venv, activate
# it and run `make` from it (PYTHON=... also selects the interpreter).
PIPFLAGS=(-q)
if "$PYTHON" -c 'import sys, sysconfig, os; sys.exit(0 if sys.prefix == sys.base_prefix and os.path.exists(os.path.join(sysconfig.get_paths()["stdlib"], "EXTERNALLY-MANAGED")) else 1)'; then
  PIPFLAGS+=(--break-system-packages)
fi
if ! "$PYTHON" -c "import onnx, onnxruntime, numpy, cudnn, pybind11; assert onnx.__version__ == '1.23.0'" 2>/dev/null; then
  echo "[deps] installing Python packages: ${PY[*]} (pip ${PIPFLAGS[*]})"
  "$PYTHON" -m pip install "${PIPFLAGS[@]}" "${PY[@]}"
fi
# kiln.torch's tests (tests/python/test_torch_compile.py), the torch-op and attention-mask checks
# against ONNX Runtime (tests/torch_ops, tests/models) and the detection models need PyTorch,
# torchvision and transformers (and onnxscript, for the torch.export-based exporter GPT-2's causal
# mask needs): PyTorch's CPU wheels from its own index where it is reachable, else
# the default index's wheels (they bring CUDA libraries, ~3 GB, unused here; ~1 min on this
# project's machines, where PyTorch's own index is not reachable). Best effort: where they cannot
# be installed those tests skip and say so.
if ! "$PYTHON" -c "import torch, torchvision, transformers, onnxscript" 2>/dev/null; then
  echo "[deps] installing torch, torchvision and transformers for the kiln.torch and torch-export tests"
  { "$PYTHON" -m pip install "${PIPFLAGS[@]}" --index-url https://download.pytorch.org/whl/cpu --retries 1 --timeout 15 torch torchvision ||
      "$PYTHON" -m pip install "${PIPFLAGS[@]}" torch torchvision; } &&
    "$PYTHON" -m pip install "${PIPFLAGS[@]}" transformers onnxscript ||
    echo "[deps] warning: torch/torchvision/transformers not installed; the kiln.torch tests will be skipped"
fi
# The Triton backend's test (tests/triton): the tritonserver binary that nvidia-pytriton ships
# (Triton 2.51, backend API 1.19 = the vendored headers) and the tritonclient library. Both
# --no-deps: pytriton pins numpy<2 for its own Python side and tritonclient pins ml-dtypes<=0.5.4
# and protobuf<7 for bfloat16 and its gRPC stubs' version check, none of which the test uses;
# what the clients need is listed in TRITON_PY (checked: HTTP and gRPC work with numpy 2,
# ml-dtypes 0.7 and protobuf 7).
TRITON_NODEPS=(nvidia-pytriton==0.7.0 tritonclient==2.73.0)
TRITON_PY=(python-rapidjson geventhttpclient grpcio urllib3)
if ! "$PYTHON" -c "import importlib.util as u, tritonclient.http, tritonclient.grpc; assert u.find_spec('pytriton')" 2>/dev/null; then
  echo "[deps] installing the Triton test packages: ${TRITON_NODEPS[*]} ${TRITON_PY[*]}"
  "$PYTHON" -m pip install "${PIPFLAGS[@]}" "${TRITON_PY[@]}"
  "$PYTHON" -m pip install "${PIPFLAGS[@]}" --no-deps "${TRITON_NODEPS[@]}"
fi
echo "[deps] ok"
