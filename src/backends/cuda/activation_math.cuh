// The activation math of the CUDA kernels, in float (float16/bfloat16 kernels compute in float),
// constants from ops/activation.h. Two families, kept apart because they round differently and
// each backs a CPU reference exactly:
// - fused activations (applyActivation, keyed by ActKind): the epilogues of Conv / ConvTranspose /
//   Gemm / MatMul, the same formulas as Activation::operator() (ops/activation.h);
// - the elementwise ops' forms (ops/elementwise.cpp; PointwiseChain's steps): GELU through erfc
//   (exact for large negative x, where 1 + erf(x) cancels); the typed functors of
//   elementwise_functors.cuh spell the same forms for float64 too.
#pragma once
#include "ops/activation.h"

namespace kiln::cuda {

//! 0.5 x (1 + erf(x / sqrt 2)): the fused form.
__device__ __forceinline__ float geluErf(float x) { return 0.5f * x * (1.f + erff(x * float(kGeluErfScale))); }
//! 0.5 x erfc(-x / sqrt 2): the elementwise op's form.
__device__ __forceinline__ float geluErfc(float x) { return 0.5f * x * erfcf(-x * float(kGeluErfScale)); }
//! 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): both families.
__device__ __forceinline__ float geluTanh(float x) {
  return 0.5f * x * (1.f + tanhf(float(kGeluTanhScale) * (x + float(kGeluTanhCubic) * x * x * x)));
}
__device__ __forceinline__ float sigmoid(float x) { return 1.f / (1.f + expf(-x)); }

//! A fused activation (alpha/beta as ActivationInfo says; kNone passes x through).
__device__ __forceinline__ float applyActivation(ActKind kind, float alpha, float beta, float x) {
  switch (kind) {
    case ActKind::kNone: return x;
    case ActKind::kRelu: return x > 0.f ? x : 0.f;
    case ActKind::kLeakyRelu: return x >= 0.f ? x : alpha * x;
    case ActKind::kClip: return x < alpha ? alpha : (x > beta ? beta : x);
    case ActKind::kSigmoid: return sigmoid(x);
    case ActKind::kTanh: return tanhf(x);
    case ActKind::kHardSwish: { float t = x / 6.f + 0.5f; t = t < 0.f ? 0.f : (t > 1.f ? 1.f : t); return x * t; }
    case ActKind::kHardSigmoid: { float t = alpha * x + beta; return t < 0.f ? 0.f : (t > 1.f ? 1.f : t); }
    case ActKind::kGelu: return geluErf(x);
    case ActKind::kGeluTanh: return geluTanh(x);
    case ActKind::kElu: return x >= 0.f ? x : alpha * (expf(x) - 1.f);
    case ActKind::kSoftplus: return x > 20.f ? x : log1pf(expf(x));
    case ActKind::kSilu: return x / (1.f + expf(-x));
    case ActKind::kMish: return x * tanhf(x > 20.f ? x : log1pf(expf(x)));
  }
  return x;
}

}  // namespace kiln::cuda
