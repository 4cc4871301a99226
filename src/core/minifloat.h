// Narrow element conversions with one definition for the host (core/narrow_types.cpp,
// ops/cast_narrow.cpp) and the CUDA kernels (Cast, QuantizeLinear, DequantizeLinear), so that both
// give the same bytes:
// - one minifloat description for the four float8 kinds and float4e2m1: they differ in exponent
//   bias, whether infinity exists and where NaN lives (FNUZ: the negative-zero code 0x80);
// - float8e8m0 (an exponent alone, with its own rounding modes);
// - Cast's float / integer -> int4, uint4, int2, uint2 rules.
// Only the C math functions that CUDA also provides, and no exceptions (callers check types).
#pragma once
#include <math.h>

#include <cstdint>
#include <cstring>

#include "core/host_device.h"
#include "kiln/types.h"

namespace kiln {

enum class NanKind : uint8_t { kNone, kAllOnes /* S.1111.111 */, kIeee /* exp all ones, mantissa != 0 */, kNegZero /* 0x80 */ };

struct MiniFloat {
  int expBits = 4, manBits = 3, bias = 7;
  bool hasInf = false;  // E5M2 only: S.11111.00
  NanKind nan = NanKind::kAllOnes;
  uint8_t maxCode = 0x7E;  // the largest finite positive code
};

namespace minifloat_detail {

KILN_HOST_DEVICE inline bool signBit(double x) {
#ifdef __CUDA_ARCH__
  return __double_as_longlong(x) < 0;
#else
  int64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b < 0;
#endif
}

KILN_HOST_DEVICE inline uint32_t floatBits(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(x);
#else
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
#endif
}

KILN_HOST_DEVICE inline float floatFromBits(uint32_t b) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(b);
#else
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
#endif
}

KILN_HOST_DEVICE inline float quietNan(bool negative) { return floatFromBits(negative ? 0xFFC00000u : 0x7FC00000u); }

//! Value of a code's magnitude bits, ignoring NaN/inf (callers check those first).
KILN_HOST_DEVICE inline double magnitude(const MiniFloat& f, uint32_t bits) {
  const uint32_t e = bits >> f.manBits, m = bits & ((1u << f.manBits) - 1);
  if (e == 0) return ldexp(static_cast<double>(m), 1 - f.bias - f.manBits);
  return ldexp(static_cast<double>(m | (1u << f.manBits)), static_cast<int>(e) - f.bias - f.manBits);
}

KILN_HOST_DEVICE inline uint8_t nanCode(const MiniFloat& f, bool negative) {
  const uint8_t sign = static_cast<uint8_t>(1u << (f.expBits + f.manBits));
  switch (f.nan) {
    case NanKind::kAllOnes: case NanKind::kIeee: return static_cast<uint8_t>((sign - 1) | (negative ? sign : 0));
    case NanKind::kNegZero: return 0x80;
    case NanKind::kNone: break;
  }
  // float4e2m1 has no NaN. As ml_dtypes (the ONNX reference's converter), NaN becomes a zero
  // whose sign is the opposite of the NaN's.
  return negative ? 0 : sign;
}

}  // namespace minifloat_detail

//! A minifloat code as float (exact).
KILN_HOST_DEVICE inline float miniToFloat(const MiniFloat& f, uint8_t code) {
  const int width = 1 + f.expBits + f.manBits;
  code &= static_cast<uint8_t>((1u << width) - 1);
  const uint32_t sign = code >> (width - 1), bits = code & ((1u << (width - 1)) - 1);
  const uint32_t expMax = (1u << f.expBits) - 1;
  if (f.nan == NanKind::kNegZero && code == 0x80) return minifloat_detail::quietNan(false);
  if (f.nan == NanKind::kAllOnes && bits == (1u << (width - 1)) - 1) return minifloat_detail::quietNan(sign != 0);
  if (f.nan == NanKind::kIeee && (bits >> f.manBits) == expMax) {
    if ((bits & ((1u << f.manBits) - 1)) == 0) return minifloat_detail::floatFromBits(sign ? 0xFF800000u : 0x7F800000u);
    return minifloat_detail::quietNan(sign != 0);
  }
  const double v = minifloat_detail::magnitude(f, bits);
  return static_cast<float>(sign ? -v : v);
}

//! x rounded to nearest even into the minifloat; beyond the largest finite value: that value when
//! `saturate` (or the type has no NaN), else infinity where the type has it, else NaN.
KILN_HOST_DEVICE inline uint8_t miniFromDouble(const MiniFloat& f, double x, bool saturate) {
  using namespace minifloat_detail;
  const bool negative = signBit(x);
  const bool noNegZero = f.nan == NanKind::kNegZero;
  const uint8_t sign = negative ? static_cast<uint8_t>(1u << (f.expBits + f.manBits)) : 0;
  if (x != x) return nanCode(f, negative);
  const double maxVal = magnitude(f, f.maxCode);
  const bool overflowSaturates = saturate || f.nan == NanKind::kNone;
  const uint8_t overflow = overflowSaturates ? static_cast<uint8_t>(f.maxCode | sign)
                           : f.hasInf        ? static_cast<uint8_t>(((1u << f.expBits) - 1) << f.manBits | sign)
                                             : nanCode(f, negative);
  const double a = fabs(x);
  if (a > 1.7976931348623157e308) return overflow;  // infinity
  // Round |x| to a multiple of the spacing of its binade (subnormal spacing below the smallest
  // normal); nearbyint rounds half to even. The result may reach the next binade, which is exact.
  const int minExp = 1 - f.bias;
  int e2;
  frexp(a, &e2);  // a = m * 2^e2, m in [0.5, 1)
  const int quantumExp = (e2 - 1 > minExp ? e2 - 1 : minExp) - f.manBits;
  const double r = nearbyint(ldexp(a, -quantumExp));
  const double v = ldexp(r, quantumExp);
  if (v > maxVal) return overflow;
  if (v == 0) return noNegZero ? 0 : sign;
  uint32_t bits;
  if (v < ldexp(1.0, minExp)) {
    bits = static_cast<uint32_t>(ldexp(v, f.manBits - minExp));  // subnormal: exponent field 0
  } else {
    frexp(v, &e2);
    const int e = e2 - 1;
    const uint32_t m = static_cast<uint32_t>(ldexp(v, f.manBits - e)) - (1u << f.manBits);
    bits = static_cast<uint32_t>(e + f.bias) << f.manBits | m;
  }
  return static_cast<uint8_t>(bits | sign);
}

//! float8e8m0 code -> float: 2^(code - 127), 0xFF = NaN.
KILN_HOST_DEVICE inline float e8m0ToFloat(uint8_t code) {
  if (code == 0xFF) return minifloat_detail::quietNan(false);
  return ldexpf(1.0f, static_cast<int>(code) - 127);
}

//! float -> float8e8m0 by the float32 value's bits (as ONNX's reference): the exponent field,
//! rounded by the mantissa per `rounding`; infinity and NaN -> 0xFF.
KILN_HOST_DEVICE inline uint8_t e8m0FromFloat(float x, bool saturate, E8M0Rounding rounding) {
  const uint32_t bits = minifloat_detail::floatBits(x);
  uint32_t exponent = (bits >> 23) & 0xFF;
  if (exponent == 0xFF) return 0xFF;  // infinity and NaN
  const uint32_t mantissa = bits & 0x7FFFFF;
  bool up = false;
  switch (rounding) {
    case E8M0Rounding::kUp: up = mantissa != 0; break;
    case E8M0Rounding::kDown: break;
    case E8M0Rounding::kNearest: {
      // Guard bit (the mantissa's top), then round, sticky and the exponent's parity as the last
      // kept bit (the reference treats every exponent but 0 as odd).
      const bool guard = mantissa & 0x400000, round = mantissa & 0x200000, sticky = mantissa & 0x1FFFFF;
      up = guard && (round || sticky || exponent > 0);
      break;
    }
  }
  if (up && !(saturate && exponent == 0xFE)) ++exponent;
  return static_cast<uint8_t>(exponent);
}

//! Float -> int4/uint4/int2/uint2 (`bits` wide): truncation; NaN, infinity and out-of-range
//! values give 0 (as ml_dtypes, the ONNX reference's converter).
KILN_HOST_DEVICE inline uint8_t subByteFromDouble(int bits, bool isSigned, double v) {
  const double lo = isSigned ? -ldexp(1.0, bits - 1) : 0.0;
  const double hi = isSigned ? ldexp(1.0, bits - 1) - 1 : ldexp(1.0, bits) - 1;
  if (v != v || fabs(v) > 1.7976931348623157e308) return 0;
  const double r = trunc(v);
  if (r < lo || r > hi) return 0;
  return static_cast<uint8_t>(static_cast<int8_t>(r));
}

//! Integer -> int4/uint4/int2/uint2: the low bits, sign-extended for the signed ones.
KILN_HOST_DEVICE inline uint8_t subByteFromInt(int bits, bool isSigned, int64_t v) {
  uint32_t u = static_cast<uint32_t>(v) & ((1u << bits) - 1);
  if (isSigned && (u >> (bits - 1))) u |= ~((1u << bits) - 1);
  return static_cast<uint8_t>(u);
}

}  // namespace kiln
