// Device steps of the FP8 family (fp8_matmul_cuda.cpp): float32 / float16 / bfloat16 values ->
// float8e4m3fn codes as ONNX's QuantizeLinear with saturation computes them: act(v) / scale (one
// IEEE float division, the reference's) rounded once to the nearest even E4M3 value, beyond +-448
// clamped to it, NaN kept (the hardware conversion with __NV_SATFINITE does exactly that). The
// activation is a matmul's fused one when its product is quantized here (kNone otherwise).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backends/cuda/activation_math.cuh"
#include "backends/cuda/cuda_util.h"
#include "backends/cuda/fp8_codes.cuh"
#include "backends/cuda/fp8_matmul_kernels.h"

namespace kiln::cuda {

namespace {

__device__ __forceinline__ float toFloat(float v) { return v; }
__device__ __forceinline__ float toFloat(__half v) { return __half2float(v); }
__device__ __forceinline__ float toFloat(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
struct alignas(sizeof(T) * 4) Quad {
  T v[4];
};

struct QuantArgs {
  float scale;
  ActKind act;
  float alpha, beta;
};

//! Four elements per thread: one aligned load of four values, one 32-bit store of four codes.
template <typename T>
__global__ void quantizeE4M3Quads(const Quad<T>* __restrict__ x, int64_t quads, QuantArgs a, uint32_t* __restrict__ out) {
  for (int64_t q = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; q < quads; q += int64_t(gridDim.x) * blockDim.x) {
    const Quad<T> in = x[q];
    float v[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) v[e] = toFloat(in.v[e]);
    applyActivations<4>(a.act, a.alpha, a.beta, v);
    uint32_t packed = 0;
#pragma unroll
    for (int e = 0; e < 4; ++e) packed |= uint32_t(deviceFp8Code(v[e], a.scale)) << (8 * e);
    out[q] = packed;
  }
}

//! Any count and alignment: one element per thread.
template <typename T>
__global__ void quantizeE4M3Scalar(const T* __restrict__ x, int64_t count, QuantArgs a, uint8_t* __restrict__ out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = deviceFp8Code(applyActivation(a.act, a.alpha, a.beta, toFloat(x[i])), a.scale);
}

template <typename T>
void launchTyped(const void* x, int64_t count, const QuantArgs& a, void* out, cudaStream_t s) {
  const T* in = static_cast<const T*>(x);
  const bool quads = count % 4 == 0 && reinterpret_cast<uintptr_t>(x) % (4 * sizeof(T)) == 0 && reinterpret_cast<uintptr_t>(out) % 4 == 0;
  if (quads) {
    const int64_t n = count / 4;
    quantizeE4M3Quads<T><<<gridFor(n), 256, 0, s>>>(reinterpret_cast<const Quad<T>*>(in), n, a, static_cast<uint32_t*>(out));
  } else {
    quantizeE4M3Scalar<T><<<gridFor(count), 256, 0, s>>>(in, count, a, static_cast<uint8_t*>(out));
  }
  KILN_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launchQuantizeE4M3(DataType type, const void* x, int64_t count, float scale, void* out, cudaStream_t s, const Activation& act) {
  if (count <= 0) return;
  const QuantArgs a{scale, act.kind, act.alpha, act.beta};
  switch (type) {
    case DataType::kFLOAT: launchTyped<float>(x, count, a, out, s); break;
    case DataType::kHALF: launchTyped<__half>(x, count, a, out, s); break;
    case DataType::kBF16: launchTyped<__nv_bfloat16>(x, count, a, out, s); break;
    default: throw UnsupportedError(std::string("quantize to float8e4m3fn: unsupported input type ") + toString(type));
  }
}

}  // namespace kiln::cuda
