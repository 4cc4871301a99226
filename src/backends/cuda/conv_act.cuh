// Device code shared by the CUDA conv kernels: element loads/stores in float and the fused
// activations (same formulas as ops/activation.h, computed in float32).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

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
  switch (static_cast<ActKind>(a.kind)) {
    case ActKind::kNone: return x;
    case ActKind::kRelu: return x > 0.f ? x : 0.f;
    case ActKind::kLeakyRelu: return x >= 0.f ? x : a.alpha * x;
    case ActKind::kClip: return x < a.alpha ? a.alpha : (x > a.beta ? a.beta : x);
    case ActKind::kSigmoid: return 1.f / (1.f + expf(-x));
    case ActKind::kTanh: return tanhf(x);
    case ActKind::kHardSwish: { float t = x / 6.f + 0.5f; t = t < 0.f ? 0.f : (t > 1.f ? 1.f : t); return x * t; }
    case ActKind::kHardSigmoid: { float t = a.alpha * x + a.beta; return t < 0.f ? 0.f : (t > 1.f ? 1.f : t); }
    case ActKind::kGelu: return 0.5f * x * (1.f + erff(x * 0.70710678118654752f));
    case ActKind::kGeluTanh: return 0.5f * x * (1.f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    case ActKind::kElu: return x >= 0.f ? x : a.alpha * (expf(x) - 1.f);
    case ActKind::kSoftplus: return x > 20.f ? x : log1pf(expf(x));
  }
  return x;
}

}  // namespace kiln::cuda
