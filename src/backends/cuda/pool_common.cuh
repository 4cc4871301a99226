// Device pieces shared by the CUDA pooling files (pool_cuda.cu: windowed pools and LRN,
// pool_global.cu: global pools): the accumulation type, loads and stores through it, the max rule
// of the reference, and the element types the pool kernels are built for.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <limits>
#include <type_traits>

#include "backends/cuda/conv_act.cuh"
#include "backends/cuda/cuda_util.h"

namespace kiln::cuda::pool {

// Arithmetic/compare type: float for the 2-byte floats, the type itself otherwise.
template <typename T> struct AccOf { using type = T; };
template <> struct AccOf<__half> { using type = float; };
template <> struct AccOf<__nv_bfloat16> { using type = float; };
template <typename T> using Acc = typename AccOf<T>::type;

template <typename T> constexpr bool kIsHalf = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

template <typename T> __device__ __forceinline__ Acc<T> widen(T v) {
  if constexpr (kIsHalf<T>) return toF(v);
  else return v;
}
template <typename T> __device__ __forceinline__ Acc<T> load(const T* p) { return widen(__ldg(p)); }
template <typename T> __device__ __forceinline__ T store(Acc<T> v) {
  if constexpr (kIsHalf<T>) return fromF<T>(v);
  else return v;
}

//! The max rule of the reference: larger wins, a NaN beats a number (v != v is false for ints).
template <typename A> __device__ __forceinline__ bool beats(A v, A best) { return v > best || (v != v && best == best); }

//! Combines two partial results of a pool (sum, or max with NaN winning).
template <bool kMax, typename A> __device__ __forceinline__ A combine(A a, A b) {
  if constexpr (kMax) return beats(b, a) ? b : a;
  else return a + b;
}

//! The value that changes no partial result: 0 for sums, -inf (the lowest integer) for maxima.
template <bool kMax, typename A> __device__ __forceinline__ A neutral() {
  if constexpr (!kMax) return A(0);
  else if constexpr (std::is_floating_point_v<A>) return -INFINITY;
  else return std::numeric_limits<A>::lowest();
}

//! V consecutive elements, loaded / stored as one access.
template <typename T, int V> struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

inline bool isPoolInt(DataType t) {
  return t == DataType::kINT8 || t == DataType::kUINT8 || t == DataType::kINT32 || t == DataType::kINT64;
}

//! Calls f(T{}) for the element types the pool kernels are built for (integers for max pools only).
template <typename F>
void dispatchPoolType(DataType t, bool allowInt, F&& f) {
  constexpr uint32_t kPoolInts = typeBit(DataType::kINT8) | typeBit(DataType::kUINT8) | typeBit(DataType::kINT32) |
                                 typeBit(DataType::kINT64);
  if (allowInt) dispatchCudaType<kFloatTypes | kPoolInts>(t, f, "CUDA pooling");
  else dispatchCudaType<kFloatTypes>(t, f, "CUDA pooling");
}

}  // namespace kiln::cuda::pool
