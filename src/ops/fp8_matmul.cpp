// The FP8 family (kiln-internal ops; builder/passes/lower_qdq_fp8.cpp and fuse_fp8_quantize.cpp
// make them from the pattern NVIDIA ModelOpt-style FP8 exports write):
//
// Fp8MatMul:  Y = [Q(] act(DQ(Q(X, x_scale)) @ DQ(W, w_scale) [+ bias]) [, y_scale)]
//   with float8e4m3fn codes, per-tensor scales and zero zero points. Inputs: X [..., M, K], either
//   float32 / float16 / bfloat16 (quantized here) or float8e4m3fn codes already quantized with
//   x_scale (then the attribute `dtype` names the layer's float type); W [K, N] codes (constant);
//   bias [N] of the float type (optional). The fused activation (fuse_activation) follows the
//   bias. Y [..., M, N] is of the float type, or float8e4m3fn codes when `y_scale` is set (the
//   following QuantizeLinear, fused). Q is ONNX's QuantizeLinear to float8e4m3fn with saturation:
//   v / scale rounded once to the nearest even E4M3 value, clamped to +-448. The reference computes
//   exactly that in float32 and accumulates in double; the GPU tactic multiplies the codes on the
//   FP8 tensor cores (cuBLASLt, FP32 accumulation, x_scale * w_scale as alpha).
//
// Fp8Quantize: Y = Q(X, scale): X float32 / float16 / bfloat16, Y float8e4m3fn codes (one
//   quantization of a tensor that several Fp8MatMul layers read).
#include <cmath>
#include <vector>

#include "ops/fp8_matmul.h"
#include "ops/fused_attrs.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"
#include "ops/quantize.h"

namespace kiln {

namespace {

constexpr DataType kE4M3 = DataType::kFP8E4M3FN;

bool fp8FloatType(DataType t) { return t == DataType::kFLOAT || t == DataType::kHALF || t == DataType::kBF16; }

void inferFp8MatMul(LayerDesc& l) {
  requireInputs(l, 2, 3);
  const TensorDesc &x = l.inputs[0], &w = l.inputs[1];
  const DataType t = fp8MatMulFloatType(l);
  if (!fp8FloatType(t))
    opError(l, std::string("X must be float32, float16, bfloat16 or float8e4m3fn codes with a float dtype, got ") + toString(x.type) +
                   (x.type == kE4M3 ? std::string(" and dtype ") + toString(t) : std::string()));
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
  requireFp8Scale(l, "x_scale");
  requireFp8Scale(l, "w_scale");
  if (l.attrs->has("y_scale")) requireFp8Scale(l, "y_scale");
  Dims out = x.dims;
  out.back() = N;
  setOutput(l, 0, l.attrs->has("y_scale") ? kE4M3 : t, out);
}

void refFp8MatMul(const LayerDesc& l, const KernelIO& io) {
  const TensorView &x = io.in[0], &w = io.in[1], &y = io.out[0];
  const float xs = l.attrs->getFloat("x_scale", 1.f), ws = l.attrs->getFloat("w_scale", 1.f);
  const int64_t K = w.dims[0], N = w.dims[1], rows = K > 0 ? x.count / K : volume(Dims(y.dims.begin(), y.dims.end() - 1));
  std::vector<float> wf(static_cast<size_t>(K * N));
  for (int64_t i = 0; i < K * N; ++i) wf[i] = narrowToFloat(DataType::kFP8E4M3FN, w.as<const uint8_t>()[i]) * ws;
  const bool bias = io.in.size() > 2 && io.in[2].data;
  const bool codesIn = x.type == kE4M3;
  const Activation act = fusedActivation(*l.attrs);
  const bool codesOut = y.type == kE4M3;
  const float ys = l.attrs->getFloat("y_scale", 1.f);
  std::vector<float> xq(static_cast<size_t>(K));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < K; ++k) {
      // QuantizeLinear: one division, one rounding (or codes quantized before)
      const uint8_t code = codesIn ? x.as<const uint8_t>()[r * K + k] : fp8Code(quantReadFloat(x, r * K + k), xs);
      xq[k] = narrowToFloat(kE4M3, code) * xs;
    }
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0.0;
      for (int64_t k = 0; k < K; ++k) acc += static_cast<double>(xq[k]) * wf[k * N + n];
      float v = static_cast<float>(acc);
      if (bias) v += quantReadFloat(io.in[2], n);
      v = act(v);
      if (codesOut) y.as<uint8_t>()[r * N + n] = fp8Code(v, ys);
      else quantWriteFloat(y, r * N + n, v);
    }
  }
}

void inferFp8Quantize(LayerDesc& l) {
  requireInputs(l, 1, 1);
  if (!fp8FloatType(l.inputs[0].type)) opError(l, std::string("X must be float32, float16 or bfloat16, got ") + toString(l.inputs[0].type));
  requireFp8Scale(l, "scale");
  setOutput(l, 0, kE4M3, l.inputs[0].dims);
}

void refFp8Quantize(const LayerDesc& l, const KernelIO& io) {
  const float s = l.attrs->getFloat("scale", 1.f);
  for (int64_t i = 0; i < io.in[0].count; ++i) io.out[0].as<uint8_t>()[i] = fp8Code(quantReadFloat(io.in[0], i), s);
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
  OpDef q;
  q.name = "Fp8Quantize";
  q.infer = inferFp8Quantize;
  q.ref = refFp8Quantize;
  q.anyType = true;
  q.onnx = false;
  r.add(q);
}

void requireFp8Scale(const LayerDesc& l, const char* attr) {
  const float v = l.attrs->getFloat(attr, 0.f);
  if (!(v > 0.f) || !std::isfinite(v)) opError(l, std::string(attr) + " must be positive and finite");
}

uint8_t fp8Code(float v, float scale) { return static_cast<uint8_t>(floatToNarrow(kE4M3, v / scale, true)); }

int fp8CodesOutput(const Attributes& a) {
  return a.has(kFp8OutScaleAttr) ? static_cast<int>(a.getInt(kFp8CodesOutputAttr, 0)) : -1;
}

DataType fp8MatMulFloatType(const LayerDesc& l) {
  if (l.inputs.empty() || l.inputs[0].type != kE4M3) return l.inputs.empty() ? DataType::kFLOAT : l.inputs[0].type;
  return static_cast<DataType>(l.attrs->getInt("dtype", static_cast<int64_t>(DataType::kFLOAT)));
}

}  // namespace kiln
