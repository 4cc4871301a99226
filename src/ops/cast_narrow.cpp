// Casts involving the narrow types (cast_narrow.h). Everything goes through a standard type, so
// the other 13x13 conversions stay in one place (elementwise_cast.cpp's castBuffer): int4/int2
// are stored as int8 and uint4/uint2 as uint8, which are exactly their values as sources; narrow
// floats decode exactly to float32; and every standard source reaches a narrow target through
// double (exact for every type but int64 beyond 2^53). Chunks on the stack keep it allocation-free.
#include "ops/cast_narrow.h"

#include <algorithm>
#include <cmath>

#include "core/narrow_types.h"

namespace kiln {

namespace {

constexpr int64_t kChunk = 256;

bool isNarrow(DataType t) { return isNarrowFloat(t) || isSubByteInt(t); }

TensorView slice(const TensorView& v, int64_t start, int64_t n) {
  TensorView s;
  s.type = v.type;
  s.data = static_cast<char*>(v.data) + start * static_cast<int64_t>(elementSize(v.type));
  s.count = n;
  return s;
}

//! A standard-type chunk -> narrow target.
void toNarrow(const TensorView& in, const TensorView& out, bool saturate, E8M0Rounding rounding) {
  uint8_t* y = out.as<uint8_t>();
  const bool fromFloat = isFloat(in.type) || isNarrowFloat(in.type);
  if (isSubByteInt(out.type) && !fromFloat) {
    int64_t tmp[kChunk];
    TensorView t{tmp, DataType::kINT64, {}, in.count};
    castStandard(in, t);
    for (int64_t i = 0; i < in.count; ++i) y[i] = subByteFromInt(packedBits(out.type), isSignedSubByte(out.type), tmp[i]);
    return;
  }
  double tmp[kChunk];
  TensorView t{tmp, DataType::kDOUBLE, {}, in.count};
  castStandard(in, t);
  if (out.type == DataType::kFP8E8M0) {  // from the float32 value's bits, as ONNX's reference
    for (int64_t i = 0; i < in.count; ++i) y[i] = e8m0FromFloat(static_cast<float>(tmp[i]), saturate, rounding);
    return;
  }
  for (int64_t i = 0; i < in.count; ++i)
    y[i] = isSubByteInt(out.type) ? subByteFromDouble(packedBits(out.type), isSignedSubByte(out.type), tmp[i]) : floatToNarrow(out.type, tmp[i], saturate);
}

}  // namespace

bool isNarrowCast(DataType from, DataType to) { return isNarrow(from) || isNarrow(to); }

void castNarrow(const TensorView& in, const TensorView& out, bool saturate, E8M0Rounding rounding) {
  for (int64_t start = 0; start < in.count; start += kChunk) {
    const int64_t n = std::min(kChunk, in.count - start);
    TensorView x = slice(in, start, n), y = slice(out, start, n);
    // A narrow source becomes a standard one: relabelled bytes or decoded floats.
    float decoded[kChunk];
    if (isSubByteInt(x.type)) {
      x.type = subByteStorageType(x.type);
    } else if (isNarrowFloat(x.type)) {
      for (int64_t i = 0; i < n; ++i) decoded[i] = narrowToFloat(in.type, x.as<uint8_t>()[i]);
      x = TensorView{decoded, DataType::kFLOAT, {}, n};
    }
    if (isNarrow(y.type)) toNarrow(x, y, saturate, rounding);
    else castStandard(x, y);
  }
}

}  // namespace kiln
