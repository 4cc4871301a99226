// Narrow float codes <-> float, and ONNX's sub-byte packing (narrow_types.h).
// One generic minifloat description covers four float8 kinds and float4e2m1; they differ in
// exponent bias, whether infinity exists and where NaN lives (FNUZ: the negative-zero code 0x80).
// float8e8m0 (an exponent alone, with its own rounding modes) is converted on its own.
#include "core/narrow_types.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace kiln {
namespace {

enum class NanKind { kNone, kAllOnes /* S.1111.111 */, kIeee /* exp all ones, mantissa != 0 */, kNegZero /* 0x80 */ };

struct MiniFloat {
  int expBits, manBits, bias;
  bool hasInf;    // E5M2 only: S.11111.00
  NanKind nan;
  uint8_t maxCode;  // the largest finite positive code
};

MiniFloat formatOf(DataType t) {
  switch (t) {
    case DataType::kFP8E4M3FN: return {4, 3, 7, false, NanKind::kAllOnes, 0x7E};      // max 448
    case DataType::kFP8E4M3FNUZ: return {4, 3, 8, false, NanKind::kNegZero, 0x7F};    // max 240
    case DataType::kFP8E5M2: return {5, 2, 15, true, NanKind::kIeee, 0x7B};           // max 57344
    case DataType::kFP8E5M2FNUZ: return {5, 2, 16, false, NanKind::kNegZero, 0x7F};   // max 57344
    case DataType::kFP4E2M1: return {2, 1, 1, false, NanKind::kNone, 0x7};            // max 6
    default: throw Error(std::string("not a narrow float type: ") + toString(t));
  }
}

// Value of a code's magnitude bits, ignoring NaN/inf (callers check those first).
double magnitude(const MiniFloat& f, uint32_t bits) {
  uint32_t e = bits >> f.manBits, m = bits & ((1u << f.manBits) - 1);
  if (e == 0) return std::ldexp(static_cast<double>(m), 1 - f.bias - f.manBits);
  return std::ldexp(static_cast<double>(m | (1u << f.manBits)), static_cast<int>(e) - f.bias - f.manBits);
}

uint8_t nanCode(const MiniFloat& f, bool negative) {
  uint8_t sign = static_cast<uint8_t>(1u << (f.expBits + f.manBits));
  switch (f.nan) {
    case NanKind::kAllOnes: case NanKind::kIeee: return static_cast<uint8_t>((sign - 1) | (negative ? sign : 0));
    case NanKind::kNegZero: return 0x80;
    case NanKind::kNone: break;
  }
  // float4e2m1 has no NaN. As ml_dtypes (the ONNX reference's converter), NaN becomes a zero
  // whose sign is the opposite of the NaN's.
  return negative ? 0 : sign;
}

}  // namespace

bool isNarrowFloat(DataType t) {
  return t == DataType::kFP8E4M3FN || t == DataType::kFP8E4M3FNUZ || t == DataType::kFP8E5M2 ||
         t == DataType::kFP8E5M2FNUZ || t == DataType::kFP4E2M1 || t == DataType::kFP8E8M0;
}

int packedBits(DataType t) {
  switch (t) {
    case DataType::kINT4: case DataType::kUINT4: case DataType::kFP4E2M1: return 4;
    case DataType::kINT2: case DataType::kUINT2: return 2;
    default: return static_cast<int>(8 * elementSize(t));
  }
}

float narrowToFloat(DataType t, uint8_t code) {
  if (t == DataType::kFP8E8M0) return code == 0xFF ? NAN : std::ldexp(1.0f, static_cast<int>(code) - 127);
  const MiniFloat f = formatOf(t);
  const int width = 1 + f.expBits + f.manBits;
  code &= static_cast<uint8_t>((1u << width) - 1);
  const uint32_t sign = code >> (width - 1), bits = code & ((1u << (width - 1)) - 1);
  const uint32_t expMax = (1u << f.expBits) - 1;
  if (f.nan == NanKind::kNegZero && code == 0x80) return NAN;
  if (f.nan == NanKind::kAllOnes && bits == (1u << (width - 1)) - 1) return sign ? -NAN : NAN;
  if (f.nan == NanKind::kIeee && (bits >> f.manBits) == expMax) {
    if ((bits & ((1u << f.manBits) - 1)) == 0) return sign ? -INFINITY : INFINITY;
    return sign ? -NAN : NAN;
  }
  const double v = magnitude(f, bits);
  return static_cast<float>(sign ? -v : v);
}

uint8_t floatToE8M0(float x, bool saturate, E8M0Rounding rounding) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
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

uint8_t floatToNarrow(DataType t, double x, bool saturate) {
  if (t == DataType::kFP8E8M0) return floatToE8M0(static_cast<float>(x), saturate, E8M0Rounding::kUp);
  const MiniFloat f = formatOf(t);
  const bool negative = std::signbit(x);
  const bool noNegZero = f.nan == NanKind::kNegZero;
  const uint8_t sign = negative ? static_cast<uint8_t>(1u << (f.expBits + f.manBits)) : 0;
  if (std::isnan(x)) return nanCode(f, negative);
  const double maxVal = magnitude(f, f.maxCode);
  auto overflow = [&]() -> uint8_t {
    if (saturate || f.nan == NanKind::kNone) return static_cast<uint8_t>(f.maxCode | sign);
    if (f.hasInf) return static_cast<uint8_t>(((1u << f.expBits) - 1) << f.manBits | sign);
    return nanCode(f, negative);
  };
  double a = std::fabs(x);
  if (std::isinf(a)) return overflow();
  // Round |x| to a multiple of the spacing of its binade (subnormal spacing below the smallest
  // normal); nearbyint rounds half to even. The result may reach the next binade, which is exact.
  const int minExp = 1 - f.bias;
  int e2;
  std::frexp(a, &e2);  // a = m * 2^e2, m in [0.5, 1)
  const int quantumExp = std::max(e2 - 1, minExp) - f.manBits;
  const double r = std::nearbyint(std::ldexp(a, -quantumExp));
  const double v = std::ldexp(r, quantumExp);
  if (v > maxVal) return overflow();
  if (v == 0) return noNegZero ? 0 : sign;
  uint32_t bits;
  if (v < std::ldexp(1.0, minExp)) {
    bits = static_cast<uint32_t>(std::ldexp(v, f.manBits - minExp));  // subnormal: exponent field 0
  } else {
    std::frexp(v, &e2);
    const int e = e2 - 1;
    const uint32_t m = static_cast<uint32_t>(std::ldexp(v, f.manBits - e)) - (1u << f.manBits);
    bits = static_cast<uint32_t>(e + f.bias) << f.manBits | m;
  }
  return static_cast<uint8_t>(bits | sign);
}

size_t packedBytes(DataType t, int64_t count) {
  const int bits = packedBits(t);
  return static_cast<size_t>((count * bits + 7) / 8);
}

void unpackSubByte(DataType t, const uint8_t* packed, int64_t count, uint8_t* out) {
  const int bits = packedBits(t);
  const int perByte = 8 / bits;
  const uint32_t mask = (1u << bits) - 1;
  const bool isSigned = t == DataType::kINT4 || t == DataType::kINT2;
  for (int64_t i = 0; i < count; ++i) {
    uint32_t v = (packed[i / perByte] >> ((i % perByte) * bits)) & mask;
    if (isSigned && (v >> (bits - 1))) v |= ~mask;  // sign-extend
    out[i] = static_cast<uint8_t>(v);
  }
  if (count % perByte) {
    const uint32_t used = (1u << ((count % perByte) * bits)) - 1;
    if (packed[count / perByte] & ~used)
      throw Error(std::string("packed ") + toString(t) + " tensor of " + std::to_string(count) +
                  " elements: the unused bits of its last byte are not zero (wrong size or corrupt data)");
  }
}

void packSubByte(DataType t, const uint8_t* in, int64_t count, uint8_t* packed) {
  const int bits = packedBits(t);
  const int perByte = 8 / bits;
  const uint32_t mask = (1u << bits) - 1;
  const size_t n = packedBytes(t, count);
  for (size_t b = 0; b < n; ++b) packed[b] = 0;
  for (int64_t i = 0; i < count; ++i)
    packed[i / perByte] |= static_cast<uint8_t>((in[i] & mask) << ((i % perByte) * bits));
}

bool validNarrowCode(DataType t, uint8_t code) {
  const int8_t s = static_cast<int8_t>(code);
  switch (t) {
    case DataType::kINT4: return s >= -8 && s <= 7;
    case DataType::kUINT4: case DataType::kFP4E2M1: return code <= 15;
    case DataType::kINT2: return s >= -2 && s <= 1;
    case DataType::kUINT2: return code <= 3;
    default: return true;
  }
}

}  // namespace kiln
