// CUDA kernels: Softmax / LogSoftmax. Along the last axis (inner == 1) a row is spread over
// blockDim.x threads, held in registers when it fits (one read, one write), with 16-byte vectors;
// along another axis each thread owns one (outer, inner) line (coalesced over inner).
#include <cmath>

#include "core/type_dispatch.h"
#include "backends/cuda/cuda_util.h"
#include "backends/cuda/norm_common.cuh"
#include "backends/cuda/norm_launch.cuh"

namespace kiln::cuda {

namespace {

template <typename T, int VEC, bool CACHED>
__global__ void __launch_bounds__(1024) softmaxRowKernel(const SoftmaxParams p) {
  __shared__ float smem[32 * 32];
  const int64_t rows = p.outer, cols = p.length;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  const bool valid = row < rows;
  const T* x = static_cast<const T*>(p.x) + (valid ? row : 0) * cols;
  T* y = static_cast<T*>(p.y) + (valid ? row : 0) * cols;
  const int64_t nvec = cols / VEC;
  const float kNegInf = -INFINITY;
  constexpr int kItems = CACHED ? kRowItems : 1;
  float v[kItems][VEC];
  float mx = kNegInf;
  if constexpr (CACHED) {
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const int64_t j = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
      if (valid && j < nvec) {
        loadFloats<T, VEC>(x + j * VEC, v[i]);
#pragma unroll
        for (int e = 0; e < VEC; ++e) mx = fmaxf(mx, v[i][e]);
      }
    }
  } else if (valid) {
    for (int64_t j = threadIdx.x; j < nvec; j += blockDim.x) {
      loadFloats<T, VEC>(x + j * VEC, v[0]);
#pragma unroll
      for (int e = 0; e < VEC; ++e) mx = fmaxf(mx, v[0][e]);
    }
  }
  mx = rowReduce(mx, MaxOp{}, kNegInf, smem);
  float sum = 0.f;
  if constexpr (CACHED) {
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const int64_t j = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
      if (valid && j < nvec) {
#pragma unroll
        for (int e = 0; e < VEC; ++e) sum += expf(v[i][e] - mx);
      }
    }
  } else if (valid) {
    for (int64_t j = threadIdx.x; j < nvec; j += blockDim.x) {
      loadFloats<T, VEC>(x + j * VEC, v[0]);
#pragma unroll
      for (int e = 0; e < VEC; ++e) sum += expf(v[0][e] - mx);
    }
  }
  sum = rowReduce(sum, SumOp{}, 0.f, smem);
  if (!valid) return;  // after the last synchronization
  const float logSum = logf(sum), invSum = 1.f / sum;
  auto finish = [&](const float (&in)[VEC], int64_t k0) {
    float out[VEC];
#pragma unroll
    for (int e = 0; e < VEC; ++e) out[e] = p.log ? (in[e] - mx) - logSum : expf(in[e] - mx) * invSum;
    storeFloats<T, VEC>(y + k0, out);
  };
  if constexpr (CACHED) {
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const int64_t j = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
      if (j < nvec) finish(v[i], j * VEC);
    }
  } else {
    for (int64_t j = threadIdx.x; j < nvec; j += blockDim.x) {
      loadFloats<T, VEC>(x + j * VEC, v[0]);
      finish(v[0], j * VEC);
    }
  }
}

//! Softmax along a non-last axis: one thread per (outer, inner) line, three passes over it.
template <typename T>
__global__ void softmaxColumnKernel(const SoftmaxParams p) {
  const T* x = static_cast<const T*>(p.x);
  T* y = static_cast<T*>(p.y);
  const int64_t lines = p.outer * p.inner;
  const float kNegInf = -INFINITY;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < lines;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = t / p.inner, i = t % p.inner;
    const int64_t base = o * p.length * p.inner + i;
    float mx = kNegInf;
    for (int64_t k = 0; k < p.length; ++k) mx = fmaxf(mx, toFloat(x[base + k * p.inner]));
    float sum = 0.f;
    for (int64_t k = 0; k < p.length; ++k) sum += expf(toFloat(x[base + k * p.inner]) - mx);
    const float logSum = logf(sum), invSum = 1.f / sum;
    for (int64_t k = 0; k < p.length; ++k) {
      const float s = toFloat(x[base + k * p.inner]) - mx;
      y[base + k * p.inner] = fromFloat<T>(p.log ? s - logSum : expf(s) * invSum);
    }
  }
}

template <typename T>
void softmaxTyped(const SoftmaxParams& p, cudaStream_t stream) {
  if (p.inner != 1) {
    softmaxColumnKernel<T><<<gridFor(p.outer * p.inner), 256, 0, stream>>>(p);
    KILN_CUDA_CHECK_LAUNCH();
    return;
  }
  constexpr int kWide = 16 / sizeof(T);
  const RowGeometry& g = p.geo;
  const bool wide = g.vec == kWide && aligned(p.x, 16) && aligned(p.y, 16);
  const dim3 block(g.threads, g.rowsPerBlock);
  const dim3 grid(static_cast<unsigned>((p.outer + g.rowsPerBlock - 1) / g.rowsPerBlock));
  if (wide) {
    if (g.cached) softmaxRowKernel<T, kWide, true><<<grid, block, 0, stream>>>(p);
    else softmaxRowKernel<T, kWide, false><<<grid, block, 0, stream>>>(p);
  } else {
    if (g.cached && g.vec == 1) softmaxRowKernel<T, 1, true><<<grid, block, 0, stream>>>(p);
    else softmaxRowKernel<T, 1, false><<<grid, block, 0, stream>>>(p);
  }
  KILN_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launchSoftmax(const SoftmaxParams& p, cudaStream_t stream) {
  if (p.outer <= 0 || p.length <= 0 || p.inner <= 0) return;
  dispatchCudaType<kFloatTypes>(p.type, [&](auto t) { softmaxTyped<decltype(t)>(p, stream); }, "launchSoftmax");
}

}  // namespace kiln::cuda
