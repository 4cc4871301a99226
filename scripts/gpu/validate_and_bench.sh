#!/usr/bin/env bash
# One GPU-machine session: unpack the bundle (scripts/gpu/make_bundle.sh), run the GPU unit tests,
# the ONNX conformance suite on the GPU, the model tests against ONNX Runtime on the GPU, and the
# side-by-side benchmark against torch.compile. Results go to $OUT.
# Usage: scripts/gpu/validate_and_bench.sh [MODELS] [BATCHES]
set -uo pipefail
MODELS=${1:-resnet50,bert_base_s128}
BATCHES=${2:-1,32}
K=/tmp/kb
mkdir -p $K && tar -C $K -xJf .device_deps/bundle.tar.xz
export LD_LIBRARY_PATH=$K/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
timeout 150 $K/bin/kiln_unit_tests --gtest_filter='Cuda*:PassAttention*' --gtest_brief=1 > $OUT/unit_gpu.log 2>&1
grep -E "tests ran|PASSED|FAILED" $OUT/unit_gpu.log | tail -25
python3 tests/conformance/generate.py --out /tmp/conf >/dev/null 2>&1
timeout 150 scripts/gpu/run_conformance.sh $K /tmp/conf $OUT/conf_gpu.log; tail -1 $OUT/conf_gpu.log
python3 tests/models/gen_models.py --out /tmp/models >/dev/null 2>&1
timeout 100 python3 tests/models/run_model_tests.py --kiln $K/bin/kiln --models /tmp/models --device gpu > $OUT/models_gpu.log 2>&1
grep -E "^(PASS|FAIL)|passed" $OUT/models_gpu.log | cut -c1-200
timeout 300 python3 bench/gpu_bench.py --kiln $K/bin/kiln --peers .device_deps/peers.py --out $OUT/gpu-h200.md \
  --models "$MODELS" --batches "$BATCHES" > $OUT/bench.log 2>&1
tail -12 $OUT/gpu-h200.md
