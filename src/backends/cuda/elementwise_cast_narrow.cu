// CUDA elementwise family: Cast to and from the narrow types (the float8 kinds, float8e8m0,
// float4e2m1, int4/uint4/int2/uint2; one element per byte, as everywhere in kiln). The
// conversions are core/minifloat.h's, which the CPU reference (ops/cast_narrow.cpp) also uses, and
// the route is the reference's: sub-byte integers are their int8/uint8 bytes, narrow floats decode
// exactly to float32, and a narrow target is reached from double (integers through int64 for the
// sub-byte targets, which keep the low bits).
#include "backends/cuda/elementwise_cast.cuh"
#include "core/minifloat.h"
#include "core/narrow_types.h"

namespace kiln::cuda::ew {

namespace {

//! How a narrow code is read (source) or written (target).
struct NarrowCode {
  enum Kind : uint8_t { kMini, kE8M0, kSubByte } kind = kMini;
  MiniFloat mini;
  int bits = 8;
  bool isSigned = false, saturate = true;
  E8M0Rounding rounding = E8M0Rounding::kUp;
};

NarrowCode codeOf(DataType t, bool saturate, E8M0Rounding rounding) {
  NarrowCode c;
  c.saturate = saturate;
  c.rounding = rounding;
  if (t == DataType::kFP8E8M0) {
    c.kind = NarrowCode::kE8M0;
  } else if (isSubByteInt(t)) {
    c.kind = NarrowCode::kSubByte;
    c.bits = packedBits(t);
    c.isSigned = isSignedSubByte(t);
  } else {
    c.mini = miniFloatOf(t);
  }
  return c;
}

__device__ __forceinline__ float decodeFloat(const NarrowCode& c, uint8_t v) {
  return c.kind == NarrowCode::kE8M0 ? e8m0ToFloat(v) : miniToFloat(c.mini, v);
}

//! Narrow float -> standard type: the exact float value, then Cast's float rules.
template <class D> struct DecodeOp {
  NarrowCode src;
  __device__ __forceinline__ void prepare() {}
  __device__ __forceinline__ D operator()(uint8_t v) const { return castOne<D>(decodeFloat(src, v)); }
};

//! Anything -> narrow type. S: a standard type, or uint8_t narrow-float codes (decodeSrc).
template <class S> struct EncodeOp {
  NarrowCode dst, src;
  bool decodeSrc = false;
  __device__ __forceinline__ void prepare() {}
  __device__ __forceinline__ uint8_t operator()(S s) const {
    constexpr bool kFloatSource = kIsHalfLike<S> || std::is_floating_point_v<S>;
    double v = 0;
    int64_t iv = 0;
    bool fromFloat = kFloatSource;
    bool decoded = false;
    if constexpr (std::is_same_v<S, uint8_t>) {
      if (decodeSrc) {  // codes of a narrow float: their value, not the code as a number
        v = decodeFloat(src, s);
        fromFloat = decoded = true;
      }
    }
    if (!decoded) {
      v = castOne<double>(s);
      if constexpr (!kFloatSource) iv = castOne<int64_t>(s);
    }
    switch (dst.kind) {
      case NarrowCode::kSubByte: return fromFloat ? subByteFromDouble(dst.bits, dst.isSigned, v) : subByteFromInt(dst.bits, dst.isSigned, iv);
      case NarrowCode::kE8M0: return e8m0FromFloat(static_cast<float>(v), dst.saturate, dst.rounding);
      default: return miniFromDouble(dst.mini, v, dst.saturate);
    }
  }
};

}  // namespace

void launchCastNarrow(DataType from, DataType to, const void* x, void* y, int64_t n, bool saturate, E8M0Rounding rounding,
                      cudaStream_t s) {
  if (n <= 0) return;
  if (from == to) return launchCast(DataType::kUINT8, DataType::kUINT8, x, y, n, s);  // a copy, as the reference
  // Sub-byte integer sources are their int8 / uint8 bytes.
  if (isSubByteInt(from)) from = subByteStorageType(from);
  const bool narrowFrom = isNarrowFloat(from), narrowTo = isNarrowFloat(to) || isSubByteInt(to);
  if (!narrowFrom && !narrowTo) return launchCast(from, to, x, y, n, s);
  const NarrowCode src = narrowFrom ? codeOf(from, saturate, rounding) : NarrowCode{};
  const auto* codes = static_cast<const uint8_t*>(x);
  if (!narrowTo) {
    dispatchCudaType<kAllTypes>(to, [&](auto dtag) {
      using D = decltype(dtag);
      launchFlat(codes, static_cast<D*>(y), n, DecodeOp<D>{src}, s);
    }, "CUDA Cast");
    return;
  }
  const NarrowCode dst = codeOf(to, saturate, rounding);
  auto* out = static_cast<uint8_t*>(y);
  if (narrowFrom) return launchFlat(codes, out, n, EncodeOp<uint8_t>{dst, src, true}, s);
  dispatchCudaType<kAllTypes>(from, [&](auto stag) {
    using S = decltype(stag);
    launchFlat(static_cast<const S*>(x), out, n, EncodeOp<S>{dst, src, false}, s);
  }, "CUDA Cast");
}

}  // namespace kiln::cuda::ew
