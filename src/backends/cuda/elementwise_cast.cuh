// CUDA elementwise family: Cast element conversion, as the CPU reference (elementwise_cast.cpp):
// numpy astype rules; float -> int truncates, NaN -> 0, out-of-range saturates to int64 then wraps;
// to half/bf16 by one correct rounding (round-to-odd to float first for wider sources).
#pragma once
#include "backends/cuda/elementwise_device.cuh"

namespace kiln::cuda::ew {

template <class T> constexpr bool kIsHalfLike = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

__device__ __forceinline__ float setOddIfInexact(float f, bool inexact) {
  return inexact ? __uint_as_float(__float_as_uint(f) | 1u) : f;
}

//! S rounded to float with round-to-odd (truncate, then set the last bit if inexact): a later
//! round-to-nearest-even to half/bf16 then equals one correct rounding of the source value.
template <class S> __device__ __forceinline__ float roundToOddFloat(S s) {
  if constexpr (std::is_same_v<S, double>) {
    if (s != s) return static_cast<float>(s);
    const float f = __double2float_rz(s);
    return setOddIfInexact(f, static_cast<double>(f) != s);
  } else if constexpr (std::is_same_v<S, int64_t>) {
    const float f = __ll2float_rz(s);
    return setOddIfInexact(f, __float2ll_rz(f) != s);
  } else if constexpr (std::is_same_v<S, uint64_t>) {
    const float f = __ull2float_rz(s);
    return setOddIfInexact(f, __float2ull_rz(f) != s);
  } else if constexpr (std::is_same_v<S, int32_t>) {
    const float f = __int2float_rz(s);
    return setOddIfInexact(f, __float2int_rz(f) != s);
  } else if constexpr (std::is_same_v<S, uint32_t>) {
    const float f = __uint2float_rz(s);
    return setOddIfInexact(f, __float2uint_rz(f) != s);
  } else {
    return static_cast<float>(s);  // 8/16-bit integers are exact in float
  }
}

//! Float -> integer: truncation; NaN -> 0; beyond int64 saturates (uint64 keeps its range), then
//! wraps to the target width.
template <class D> __device__ __forceinline__ D floatToInt(double v) {
  if (v != v) return D(0);
  v = ::trunc(v);
  if constexpr (std::is_same_v<D, uint64_t>) {
    if (v >= 0x1p63) return v >= 0x1p64 ? ~uint64_t(0) : static_cast<uint64_t>(v);
  }
  if (v >= 0x1p63) return static_cast<D>(INT64_MAX);
  if (v < -0x1p63) return static_cast<D>(INT64_MIN);
  return static_cast<D>(static_cast<int64_t>(v));
}

template <class D, class S> __device__ __forceinline__ D castOne(S s) {
  if constexpr (kIsHalfLike<S>) {
    return castOne<D>(widen(s));
  } else if constexpr (kIsHalfLike<D>) {
    float f;
    if constexpr (std::is_same_v<S, bool>) f = s ? 1.f : 0.f;
    else if constexpr (std::is_same_v<S, float>) f = s;
    else f = roundToOddFloat(s);
    return narrow<D>(f);
  } else if constexpr (std::is_same_v<D, bool>) {
    return s != S(0);  // NaN -> true
  } else if constexpr (std::is_same_v<S, bool>) {
    return D(s ? 1 : 0);
  } else if constexpr (std::is_floating_point_v<D>) {
    return static_cast<D>(s);
  } else if constexpr (std::is_floating_point_v<S>) {
    return floatToInt<D>(static_cast<double>(s));
  } else {
    return static_cast<D>(s);  // integer -> integer keeps the low bits
  }
}

template <class S, class D> struct CastOp {
  __device__ __forceinline__ void prepare() {}
  __device__ __forceinline__ D operator()(S s) const { return castOne<D>(s); }
};

//! Casts from a source type S to any destination type.
template <class S> void castFrom(DataType to, const void* x, void* y, int64_t n, cudaStream_t s) {
  dispatchCudaType<kAllTypes>(to, [&](auto dtag) {
    using D = decltype(dtag);
    launchFlat(static_cast<const S*>(x), static_cast<D*>(y), n, CastOp<S, D>{}, s);
  }, "CUDA elementwise");
}

//! Source types compiled in elementwise_cast_wide.cu.
constexpr uint32_t kCastWideSources = bit(DataType::kINT16) | bit(DataType::kINT32) | bit(DataType::kINT64) |
                                      bit(DataType::kUINT16) | bit(DataType::kUINT32) | bit(DataType::kUINT64);
void launchCastWide(DataType from, DataType to, const void* x, void* y, int64_t n, cudaStream_t s);

}  // namespace kiln::cuda::ew
