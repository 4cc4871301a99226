// GPU kernel of the Swish example plugin: one thread per element, float32 or float16 I/O with
// float32 math.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace {

template <typename T>
__global__ void swishKernel(const T* x, T* y, int64_t n, float beta) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    float v = static_cast<float>(x[i]);
    y[i] = static_cast<T>(v / (1.f + __expf(-beta * v)));
  }
}

}  // namespace

int32_t launchSwish(const void* x, void* y, int64_t n, float beta, bool half, void* stream) {
  if (n == 0) return 0;
  int threads = 256;
  int64_t blocks = (n + threads - 1) / threads;
  if (blocks > 65535 * 8) blocks = 65535 * 8;
  auto s = static_cast<cudaStream_t>(stream);
  if (half)
    swishKernel<<<static_cast<unsigned>(blocks), threads, 0, s>>>(static_cast<const __half*>(x), static_cast<__half*>(y), n, beta);
  else
    swishKernel<<<static_cast<unsigned>(blocks), threads, 0, s>>>(static_cast<const float*>(x), static_cast<float*>(y), n, beta);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
