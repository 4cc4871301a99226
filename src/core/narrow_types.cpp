// Narrow float codes <-> float (the conversions themselves are core/minifloat.h's, shared with the
// CUDA kernels), and ONNX's sub-byte packing (narrow_types.h).
#include "core/narrow_types.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace kiln {

MiniFloat miniFloatOf(DataType t) {
  switch (t) {
    case DataType::kFP8E4M3FN: return {4, 3, 7, false, NanKind::kAllOnes, 0x7E};      // max 448
    case DataType::kFP8E4M3FNUZ: return {4, 3, 8, false, NanKind::kNegZero, 0x7F};    // max 240
    case DataType::kFP8E5M2: return {5, 2, 15, true, NanKind::kIeee, 0x7B};           // max 57344
    case DataType::kFP8E5M2FNUZ: return {5, 2, 16, false, NanKind::kNegZero, 0x7F};   // max 57344
    case DataType::kFP4E2M1: return {2, 1, 1, false, NanKind::kNone, 0x7};            // max 6
    default: throw Error(std::string("not a narrow float type: ") + toString(t));
  }
}

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
  return t == DataType::kFP8E8M0 ? e8m0ToFloat(code) : miniToFloat(miniFloatOf(t), code);
}

uint8_t floatToE8M0(float x, bool saturate, E8M0Rounding rounding) { return e8m0FromFloat(x, saturate, rounding); }

uint8_t floatToNarrow(DataType t, double x, bool saturate) {
  if (t == DataType::kFP8E8M0) return e8m0FromFloat(static_cast<float>(x), saturate, E8M0Rounding::kUp);
  return miniFromDouble(miniFloatOf(t), x, saturate);
}

size_t packedBytes(DataType t, int64_t count) {
  const int bits = packedBits(t);
  return static_cast<size_t>((count * bits + 7) / 8);
}

void unpackSubByte(DataType t, const uint8_t* packed, int64_t count, uint8_t* out) {
  const int bits = packedBits(t);
  const int perByte = 8 / bits;
  const uint32_t mask = (1u << bits) - 1;
  const bool isSigned = isSignedSubByte(t);
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
