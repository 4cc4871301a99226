// Fp8MatMul (kiln-internal): what an FP8 Q/DQ MatMul or Gemm lowers to
// (builder/passes/lower_qdq_fp8.cpp), the pattern NVIDIA ModelOpt-style FP8 exports write:
//   Y = DQ(Q(X, x_scale)) @ DQ(W, w_scale) [+ bias]
// with float8e4m3fn codes, per-tensor scales (attributes x_scale, w_scale) and a zero zero point.
// Inputs: X [..., M, K] (float32 / float16 / bfloat16), W [K, N] float8e4m3fn codes (constant),
// bias [N] of X's type (optional). Y [..., M, N] of X's type. Q is ONNX's QuantizeLinear to
// float8e4m3fn with saturation: X / x_scale rounded once to the nearest even E4M3 value, clamped
// to +-448. The reference computes exactly that in float32 and accumulates in double; the GPU
// tactic quantizes X once and multiplies the codes on the FP8 tensor cores (cuBLASLt, FP32
// accumulation, x_scale * w_scale as alpha).
#include <cmath>
#include <vector>

#include "ops/op_registry.h"
#include "ops/op_util.h"
#include "ops/quantize.h"

namespace kiln {

namespace {

void inferFp8MatMul(LayerDesc& l) {
  requireInputs(l, 2, 3);
  const TensorDesc &x = l.inputs[0], &w = l.inputs[1];
  const DataType t = x.type;
  if (t != DataType::kFLOAT && t != DataType::kHALF && t != DataType::kBF16)
    opError(l, std::string("X must be float32, float16 or bfloat16, got ") + toString(t));
  if (w.type != DataType::kFP8E4M3FN) opError(l, std::string("W must hold float8e4m3fn codes, got ") + toString(w.type));
  if (w.dims.size() != 2) opError(l, "W must be a [K, N] matrix, got " + toString(w.dims));
  if (x.dims.size() < 2) opError(l, "X must have rank >= 2, got " + toString(x.dims));
  const int64_t K = w.dims[0], N = w.dims[1];
  if (x.dims.back() >= 0 && K >= 0 && x.dims.back() != K)
    opError(l, "inner dimensions differ: X " + toString(x.dims) + ", W " + toString(w.dims));
  if (l.present(2)) {
    if (l.inputs[2].type != t) opError(l, "bias type differs from X's type");
    if (l.inputs[2].dims != Dims{N}) opError(l, "bias must be [N] = [" + std::to_string(N) + "], got " + toString(l.inputs[2].dims));
  }
  for (const char* s : {"x_scale", "w_scale"}) {
    const float v = l.attrs->getFloat(s, 0.f);
    if (!(v > 0.f) || !std::isfinite(v)) opError(l, std::string(s) + " must be positive and finite");
  }
  Dims out = x.dims;
  out.back() = N;
  setOutput(l, 0, t, out);
}

void refFp8MatMul(const LayerDesc& l, const KernelIO& io) {
  const TensorView &x = io.in[0], &w = io.in[1], &y = io.out[0];
  const float xs = l.attrs->getFloat("x_scale", 1.f), ws = l.attrs->getFloat("w_scale", 1.f);
  const int64_t K = w.dims[0], N = w.dims[1], rows = K > 0 ? x.count / K : volume(Dims(y.dims.begin(), y.dims.end() - 1));
  std::vector<float> wf(static_cast<size_t>(K * N));
  for (int64_t i = 0; i < K * N; ++i) wf[i] = narrowToFloat(DataType::kFP8E4M3FN, w.as<const uint8_t>()[i]) * ws;
  const bool bias = io.in.size() > 2 && io.in[2].data;
  std::vector<float> xq(static_cast<size_t>(K));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < K; ++k) {
      const float q = quantReadFloat(x, r * K + k) / xs;  // QuantizeLinear: one division, one rounding
      xq[k] = narrowToFloat(DataType::kFP8E4M3FN, floatToNarrow(DataType::kFP8E4M3FN, q, true)) * xs;
    }
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0.0;
      for (int64_t k = 0; k < K; ++k) acc += static_cast<double>(xq[k]) * wf[k * N + n];
      float v = static_cast<float>(acc);
      if (bias) v += quantReadFloat(io.in[2], n);
      quantWriteFloat(y, r * N + n, v);
    }
  }
}

}  // namespace

void registerFp8MatMulOps(OpRegistry& r) {
  OpDef d;
  d.name = "Fp8MatMul";
  d.infer = inferFp8MatMul;
  d.ref = refFp8MatMul;
  d.anyType = true;  // X float32/float16/bfloat16 and W's float8 codes read as they are
  d.onnx = false;
  r.add(d);
}

}  // namespace kiln
