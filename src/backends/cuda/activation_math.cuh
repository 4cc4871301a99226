// The activation math of the CUDA kernels, in float (float16/bfloat16 kernels compute in float),
// constants from ops/activation.h. Two families, kept apart because they round differently and
// each backs a CPU reference exactly:
// - fused activations (applyActivation, keyed by ActKind): the epilogues of Conv / ConvTranspose /
//   Gemm / MatMul, the same formulas as Activation::operator() (ops/activation.h; Mish in an
//   equal one-exponential form, mish() below);
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
//! x tanh(softplus(x)) through one exponential: with n = e^x, tanh(log(1 + n)) = n (n + 2) /
//! (n (n + 2) + 2). expf + log1pf + tanhf made Mish the compute bound of the epilogue and chain
//! kernels on float16 tensors; this form is as accurate in float (max relative error 3.3e-7 vs
//! 3.1e-7 against float64 over [-30, 25]). Above 20 both give x; -inf gives NaN as the reference.
__device__ __forceinline__ float mish(float x) {
  if (x > 20.f) return x;
  const float n = expf(x), m = n * (n + 2.f);
  return x * __fdividef(m, m + 2.f);  // m + 2 < 2^126: __fdividef's range
}

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
    case ActKind::kMish: return mish(x);
  }
  return x;
}

//! applyActivation over V values, the kind switched on once (each case's loop runs the formula
//! with a compile-time kind): the vectorized epilogues' inner loops.
template <int V> __device__ __forceinline__ void applyActivations(ActKind kind, float alpha, float beta, float (&v)[V]) {
  switch (kind) {
#define KILN_ACT_CASE(K)                                                 \
  case K:                                                                \
    _Pragma("unroll") for (int j = 0; j < V; ++j) v[j] = applyActivation(K, alpha, beta, v[j]); \
    break;
    KILN_ACT_CASE(ActKind::kRelu)
    KILN_ACT_CASE(ActKind::kLeakyRelu)
    KILN_ACT_CASE(ActKind::kClip)
    KILN_ACT_CASE(ActKind::kSigmoid)
    KILN_ACT_CASE(ActKind::kTanh)
    KILN_ACT_CASE(ActKind::kHardSwish)
    KILN_ACT_CASE(ActKind::kHardSigmoid)
    KILN_ACT_CASE(ActKind::kGelu)
    KILN_ACT_CASE(ActKind::kGeluTanh)
    KILN_ACT_CASE(ActKind::kElu)
    KILN_ACT_CASE(ActKind::kSoftplus)
    KILN_ACT_CASE(ActKind::kSilu)
    KILN_ACT_CASE(ActKind::kMish)
#undef KILN_ACT_CASE
    case ActKind::kNone: break;
  }
}

}  // namespace kiln::cuda
