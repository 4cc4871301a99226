// Device helpers shared by the normalization / softmax / reduction / selection kernels:
// float conversion of the element types, 16-byte vectors, and reductions over the threads of
// one row (blockDim.x threads per row: a multiple of 32, or a power of two below 32 with
// blockDim.x * blockDim.y a multiple of 32; blockDim.y rows per block).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/cuda_util.h"

namespace kiln::cuda {

template <typename T> __device__ __forceinline__ float toFloat(T v) { return static_cast<float>(v); }
template <> __device__ __forceinline__ float toFloat<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float toFloat<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ __forceinline__ T fromFloat(float v) { return static_cast<T>(v); }
template <> __device__ __forceinline__ __half fromFloat<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

//! VEC elements loaded/stored with one instruction (VEC * sizeof(T) is 16 bytes or less).
template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Vec {
  T v[VEC];
};

template <typename T, int VEC>
__device__ __forceinline__ void loadFloats(const T* p, float (&out)[VEC]) {
  Vec<T, VEC> v = *reinterpret_cast<const Vec<T, VEC>*>(p);
#pragma unroll
  for (int j = 0; j < VEC; ++j) out[j] = toFloat(v.v[j]);
}

template <typename T, int VEC>
__device__ __forceinline__ void storeFloats(T* p, const float (&in)[VEC]) {
  Vec<T, VEC> v;
#pragma unroll
  for (int j = 0; j < VEC; ++j) v.v[j] = fromFloat<T>(in[j]);
  *reinterpret_cast<Vec<T, VEC>*>(p) = v;
}

struct SumOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};
struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <typename Op>
__device__ __forceinline__ float warpReduce(float v, Op op) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

//! Reduces `v` over the blockDim.x threads of this row; every thread gets the result. Must be
//! called by all threads of the block (it synchronizes when a row spans several warps).
//! `smem` holds blockDim.y * 32 floats.
//! Rows narrower than a warp (blockDim.x a power of two below 32) are aligned lane groups of one
//! warp: the xor shuffles below blockDim.x stay inside the group.
template <typename Op>
__device__ __forceinline__ float rowReduce(float v, Op op, float identity, float* smem) {
  if (blockDim.x < 32) {
    for (unsigned o = blockDim.x >> 1; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
  }
  v = warpReduce(v, op);
  if (blockDim.x == 32) return v;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float* s = smem + threadIdx.y * 32;
  __syncthreads();  // earlier readers of smem are done
  if (lane == 0) s[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x >> 5) ? s[lane] : identity;
  return warpReduce(v, op);
}

//! Launches `kernel` cooperatively (every block resident at once, so it may synchronize the whole
//! grid; a graph capture keeps the attribute). Throws when the grid cannot be resident.
template <typename... Params, typename... Args>
void launchCooperative(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream, Args... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.stream = stream;
  cudaLaunchAttribute coop[1];
  coop[0].id = cudaLaunchAttributeCooperative;
  coop[0].val.cooperative = 1;
  cfg.attrs = coop;
  cfg.numAttrs = 1;
  KILN_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, args...));
}

//! Whether p is aligned to `bytes`.
__host__ __device__ inline bool aligned(const void* p, unsigned bytes) {
  return (reinterpret_cast<uintptr_t>(p) & (bytes - 1)) == 0;
}

}  // namespace kiln::cuda
