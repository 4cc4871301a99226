// Device step of the FP8 matmul tactic (fp8_matmul_cuda.cpp): X (float32 / float16 / bfloat16) ->
// float8e4m3fn codes as ONNX's QuantizeLinear with saturation computes them: X / x_scale (one IEEE
// float division, the reference's) rounded once to the nearest even E4M3 value, beyond +-448
// clamped to it, NaN kept (the hardware conversion with __NV_SATFINITE does exactly that).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "backends/cuda/cuda_util.h"
#include "backends/cuda/fp8_matmul_kernels.h"

namespace kiln::cuda {

namespace {

__device__ __forceinline__ float loadAsFloat(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float loadAsFloat(const __half* p, int64_t i) { return __half2float(p[i]); }
__device__ __forceinline__ float loadAsFloat(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }

__device__ __forceinline__ uint8_t toE4M3(float v) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
}

//! Four elements per thread (one 32-bit store of codes); `count` a multiple of 4 (K % 16 == 0).
template <typename T>
__global__ void quantizeE4M3Kernel(const T* __restrict__ x, int64_t quads, float scale, uint32_t* __restrict__ out) {
  for (int64_t q = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; q < quads; q += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = q * 4;
    uint32_t packed = 0;
#pragma unroll
    for (int e = 0; e < 4; ++e) packed |= uint32_t(toE4M3(__fdiv_rn(loadAsFloat(x, i + e), scale))) << (8 * e);
    out[q] = packed;
  }
}

}  // namespace

void launchQuantizeE4M3(DataType type, const void* x, int64_t count, float scale, void* out, cudaStream_t s) {
  if (count <= 0) return;
  if (count % 4 != 0) throw Error("quantize to float8e4m3fn: the element count must be a multiple of 4");
  const int64_t quads = count / 4;
  auto* o = static_cast<uint32_t*>(out);
  switch (type) {
    case DataType::kFLOAT: quantizeE4M3Kernel<<<gridFor(quads), 256, 0, s>>>(static_cast<const float*>(x), quads, scale, o); break;
    case DataType::kHALF: quantizeE4M3Kernel<<<gridFor(quads), 256, 0, s>>>(static_cast<const __half*>(x), quads, scale, o); break;
    case DataType::kBF16:
      quantizeE4M3Kernel<<<gridFor(quads), 256, 0, s>>>(static_cast<const __nv_bfloat16*>(x), quads, scale, o);
      break;
    default: throw UnsupportedError(std::string("quantize to float8e4m3fn: unsupported input type ") + toString(type));
  }
  KILN_CUDA_CHECK_LAUNCH();
}

}  // namespace kiln::cuda
