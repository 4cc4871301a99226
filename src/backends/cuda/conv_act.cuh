// Device code shared by the CUDA conv kernels: element loads/stores in float and the fused
// activations (activation_math.cuh).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backends/cuda/activation_math.cuh"
#include "backends/cuda/conv_cuda_common.h"

namespace kiln::cuda {

__device__ __forceinline__ float toF(float v) { return v; }
__device__ __forceinline__ float toF(__half v) { return __half2float(v); }
__device__ __forceinline__ float toF(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T fromF(float v);
template <> __device__ __forceinline__ float fromF<float>(float v) { return v; }
template <> __device__ __forceinline__ __half fromF<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 fromF<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

//! 16 bytes of elements moved as one uint4 (vectorized loads and stores of the conv kernels).
template <typename T>
union Pack16 {
  uint4 u;
  T e[16 / sizeof(T)];
  __device__ Pack16() {}
  __device__ explicit Pack16(uint4 v) : u(v) {}
};

__device__ __forceinline__ float applyAct(float x, const DevAct& a) {
  return applyActivation(static_cast<ActKind>(a.kind), a.alpha, a.beta, x);
}

}  // namespace kiln::cuda
