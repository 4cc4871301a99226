// AVX2 float32 math shared by the elementwise tactics and by fused epilogues of other kernels
// (Conv/MatMul/Gemm `kiln_activation`). Accuracy: a few ulp for exp/log/tanh; erfc has
// ~1.2e-7 relative error (Numerical Recipes' Chebyshev fit), all against the libm reference.
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "ops/activation.h"

namespace kiln {
namespace simd {

inline __m256 set1(float v) { return _mm256_set1_ps(v); }

//! e^x. Overflows to +inf, underflows through denormals to 0, NaN propagates.
inline __m256 exp(__m256 x) {
  __m256 xc = _mm256_min_ps(_mm256_max_ps(x, set1(-104.f)), set1(89.f));
  __m256 fx = _mm256_floor_ps(_mm256_fmadd_ps(xc, set1(1.44269504088896341f), set1(0.5f)));
  // r = x - n*ln2 with ln2 split in two so the product is exact in the high part.
  __m256 r = _mm256_fnmadd_ps(fx, set1(0.693359375f), xc);
  r = _mm256_fnmadd_ps(fx, set1(-2.12194440e-4f), r);
  __m256 p = set1(1.9875691500E-4f);
  p = _mm256_fmadd_ps(p, r, set1(1.3981999507E-3f));
  p = _mm256_fmadd_ps(p, r, set1(8.3334519073E-3f));
  p = _mm256_fmadd_ps(p, r, set1(4.1665795894E-2f));
  p = _mm256_fmadd_ps(p, r, set1(1.6666665459E-1f));
  p = _mm256_fmadd_ps(p, r, set1(5.0000001201E-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, set1(1.f)));
  // Scale by 2^n as 2^(n/2) * 2^(n - n/2) so that n in [-150, 129] stays representable.
  __m256i n = _mm256_cvtps_epi32(fx);
  __m256i h = _mm256_srai_epi32(n, 1);
  __m256i g = _mm256_sub_epi32(n, h);
  auto pow2 = [](__m256i e) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23)); };
  p = _mm256_mul_ps(_mm256_mul_ps(p, pow2(h)), pow2(g));
  return _mm256_blendv_ps(p, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

//! e^x - 1, with a Taylor polynomial near 0 where exp(x) - 1 would cancel.
inline __m256 expm1(__m256 x) {
  __m256 p = set1(1.f / 5040.f);
  p = _mm256_fmadd_ps(p, x, set1(1.f / 720.f));
  p = _mm256_fmadd_ps(p, x, set1(1.f / 120.f));
  p = _mm256_fmadd_ps(p, x, set1(1.f / 24.f));
  p = _mm256_fmadd_ps(p, x, set1(1.f / 6.f));
  p = _mm256_fmadd_ps(p, x, set1(0.5f));
  __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, x), x, x);
  __m256 large = _mm256_sub_ps(exp(x), set1(1.f));
  __m256 ax = _mm256_andnot_ps(set1(-0.f), x);
  return _mm256_blendv_ps(large, small, _mm256_cmp_ps(ax, set1(0.25f), _CMP_LT_OQ));
}

//! Natural log for finite normal x > 0 (callers guarantee the domain).
inline __m256 log(__m256 x) {
  __m256i bits = _mm256_castps_si256(x);
  __m256 e = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(bits, 23), _mm256_set1_epi32(126)));
  // Mantissa in [0.5, 1).
  __m256 m = _mm256_castsi256_ps(_mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi32(0x007fffff)), _mm256_set1_epi32(0x3f000000)));
  __m256 small = _mm256_cmp_ps(m, set1(0.707106781186547524f), _CMP_LT_OQ);
  e = _mm256_sub_ps(e, _mm256_and_ps(small, set1(1.f)));
  m = _mm256_sub_ps(_mm256_add_ps(m, _mm256_and_ps(small, m)), set1(1.f));
  __m256 z = _mm256_mul_ps(m, m);
  __m256 p = set1(7.0376836292E-2f);
  p = _mm256_fmadd_ps(p, m, set1(-1.1514610310E-1f));
  p = _mm256_fmadd_ps(p, m, set1(1.1676998740E-1f));
  p = _mm256_fmadd_ps(p, m, set1(-1.2420140846E-1f));
  p = _mm256_fmadd_ps(p, m, set1(1.4249322787E-1f));
  p = _mm256_fmadd_ps(p, m, set1(-1.6668057665E-1f));
  p = _mm256_fmadd_ps(p, m, set1(2.0000714765E-1f));
  p = _mm256_fmadd_ps(p, m, set1(-2.4999993993E-1f));
  p = _mm256_fmadd_ps(p, m, set1(3.3333331174E-1f));
  p = _mm256_mul_ps(_mm256_mul_ps(p, m), z);
  p = _mm256_fmadd_ps(e, set1(-2.12194440e-4f), p);
  p = _mm256_fnmadd_ps(z, set1(0.5f), p);
  return _mm256_fmadd_ps(e, set1(0.693359375f), _mm256_add_ps(m, p));
}

//! log(1 + u) for u >= 0, accurate for tiny u (Goldberg's correction).
inline __m256 log1p(__m256 u) {
  __m256 w = _mm256_add_ps(u, set1(1.f));
  __m256 d = _mm256_sub_ps(w, set1(1.f));
  __m256 r = _mm256_mul_ps(log(w), _mm256_div_ps(u, d));
  return _mm256_blendv_ps(r, u, _mm256_cmp_ps(d, _mm256_setzero_ps(), _CMP_EQ_OQ));
}

inline __m256 abs(__m256 x) { return _mm256_andnot_ps(set1(-0.f), x); }

inline __m256 tanh(__m256 x) {
  __m256 ax = abs(x);
  // Small |x|: odd polynomial (Cephes tanhf), avoiding cancellation in 1 - 2/(e^2x + 1).
  __m256 s = _mm256_mul_ps(x, x);
  __m256 p = set1(-5.70498872745E-3f);
  p = _mm256_fmadd_ps(p, s, set1(2.06390887954E-2f));
  p = _mm256_fmadd_ps(p, s, set1(-5.37397155531E-2f));
  p = _mm256_fmadd_ps(p, s, set1(1.33314422036E-1f));
  p = _mm256_fmadd_ps(p, s, set1(-3.33332819422E-1f));
  __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, s), x, x);
  __m256 e = exp(_mm256_add_ps(ax, ax));
  __m256 large = _mm256_sub_ps(set1(1.f), _mm256_div_ps(set1(2.f), _mm256_add_ps(e, set1(1.f))));
  large = _mm256_or_ps(large, _mm256_and_ps(x, set1(-0.f)));  // sign of x
  return _mm256_blendv_ps(large, small, _mm256_cmp_ps(ax, set1(0.625f), _CMP_LT_OQ));
}

inline __m256 sigmoid(__m256 x) {
  return _mm256_div_ps(set1(1.f), _mm256_add_ps(set1(1.f), exp(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

//! log(1 + e^x) = max(x, 0) + log1p(e^-|x|).
inline __m256 softplus(__m256 x) {
  __m256 t = exp(_mm256_sub_ps(_mm256_setzero_ps(), abs(x)));
  return _mm256_add_ps(_mm256_max_ps(x, _mm256_setzero_ps()), log1p(t));
}

//! erfc(z) for z >= 0, relative error ~1.2e-7 (Chebyshev fit from Numerical Recipes).
inline __m256 erfcNonNegative(__m256 z) {
  __m256 t = _mm256_div_ps(set1(1.f), _mm256_fmadd_ps(set1(0.5f), z, set1(1.f)));
  __m256 p = set1(0.17087277f);
  p = _mm256_fmadd_ps(p, t, set1(-0.82215223f));
  p = _mm256_fmadd_ps(p, t, set1(1.48851587f));
  p = _mm256_fmadd_ps(p, t, set1(-1.13520398f));
  p = _mm256_fmadd_ps(p, t, set1(0.27886807f));
  p = _mm256_fmadd_ps(p, t, set1(-0.18628806f));
  p = _mm256_fmadd_ps(p, t, set1(0.09678418f));
  p = _mm256_fmadd_ps(p, t, set1(0.37409196f));
  p = _mm256_fmadd_ps(p, t, set1(1.00002368f));
  p = _mm256_fmadd_ps(p, t, set1(-1.26551223f));
  p = _mm256_fnmadd_ps(z, z, p);
  return _mm256_mul_ps(t, exp(p));
}

//! 0.5 x (1 + erf(x / sqrt2)), via erfc so the negative tail keeps its relative accuracy.
inline __m256 gelu(__m256 x) {
  __m256 c = erfcNonNegative(_mm256_mul_ps(abs(x), set1(float(kGeluErfScale))));
  __m256 onePlusErf = _mm256_blendv_ps(_mm256_sub_ps(set1(2.f), c), c, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
  return _mm256_mul_ps(_mm256_mul_ps(set1(0.5f), x), onePlusErf);
}

//! 0.5 x (1 + tanh(k (x + 0.044715 x^3))) == x * sigmoid(2 k (x + 0.044715 x^3)).
inline __m256 geluTanh(__m256 x) {
  __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
  __m256 inner = _mm256_mul_ps(set1(2.f * float(kGeluTanhScale)), _mm256_fmadd_ps(x3, set1(float(kGeluTanhCubic)), x));
  return _mm256_mul_ps(x, sigmoid(inner));
}

//! Fused activations a conv kernel applies in registers before its store (cheap, exact); the
//! others run on the stored values (applyActivationAvx2).
inline bool isRegisterActivation(ActKind k) {
  return k == ActKind::kNone || k == ActKind::kRelu || k == ActKind::kClip || k == ActKind::kLeakyRelu;
}
//! v with a register activation (isRegisterActivation) applied; other kinds pass v through.
inline __m256 activateInRegister(__m256 v, const Activation& act) {
  switch (act.kind) {
    case ActKind::kRelu: return _mm256_max_ps(v, _mm256_setzero_ps());
    case ActKind::kClip: return _mm256_min_ps(_mm256_max_ps(v, set1(act.alpha)), set1(act.beta));
    case ActKind::kLeakyRelu: {
      __m256 neg = _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_LT_OQ);
      return _mm256_blendv_ps(v, _mm256_mul_ps(v, set1(act.alpha)), neg);
    }
    default: return v;
  }
}

}  // namespace simd

//! Applies a fused activation to n floats in place (vectorized; n need not be a multiple of 8).
//! For Conv/MatMul/Gemm epilogues; matches applyActivation in ops/activation.h.
void applyActivationAvx2(const Activation& act, float* data, int64_t n);

}  // namespace kiln
