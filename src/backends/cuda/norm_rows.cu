// CUDA kernels: LayerNormalization / RMSNormalization / GroupNormalization / InstanceNormalization
// (one row of contiguous elements per normalization; statistics in float32, in registers when the
// row fits) and BatchNormalization in inference mode (elementwise with per-channel parameters).
#include "core/type_dispatch.h"
#include "backends/cuda/cuda_util.h"
#include "backends/cuda/activation_math.cuh"
#include "backends/cuda/norm_common.cuh"
#include "backends/cuda/norm_launch.cuh"

namespace kiln::cuda {

namespace {

//! Offset of the scale (or bias) element applied to element k of `row`, for the non-direct modes.
__device__ __forceinline__ int64_t paramOffset(const RowNormParams& p, int64_t row, int64_t k, const int64_t* strides) {
  switch (p.mode) {
    case RowNormParams::kPerChannel: return (row % p.groups) * p.perGroup + k / p.spatial;
    case RowNormParams::kPerGroup: return row % p.groups;
    default: {
      int64_t e = row * p.cols + k, off = 0;
      for (int d = p.rank - 1; d >= 0; --d) {
        off += (e % p.dims[d]) * strides[d];
        e /= p.dims[d];
      }
      return off;
    }
  }
}

//! VEC elements of X from `k0` as float; with a skip input, X + skip rounded to T first (what the
//! separate Add wrote before the fusion).
template <typename T, int VEC>
__device__ __forceinline__ void loadX(const T* x, const T* skip, int64_t k0, float (&v)[VEC]) {
  loadFloats<T, VEC>(x + k0, v);
  if (skip) {
    float r[VEC];
    loadFloats<T, VEC>(skip + k0, r);
#pragma unroll
    for (int e = 0; e < VEC; ++e) v[e] = toFloat(fromFloat<T>(v[e] + r[e]));
  }
}

//! Writes VEC normalized values of a row starting at element k0.
template <typename T, int VEC>
__device__ __forceinline__ void writeNormalized(const RowNormParams& p, int64_t row, int64_t k0, const float (&v)[VEC],
                                                float mean, float inv, T* y) {
  const T* scale = static_cast<const T*>(p.scale);
  const T* bias = static_cast<const T*>(p.bias);
  float s[VEC], b[VEC];
  if (p.mode == RowNormParams::kDirect) {
    loadFloats<T, VEC>(scale + k0, s);
    if (bias) loadFloats<T, VEC>(bias + k0, b);
  } else {
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      s[e] = toFloat(scale[paramOffset(p, row, k0 + e, p.scaleStrides)]);
      if (bias) b[e] = toFloat(bias[paramOffset(p, row, k0 + e, p.biasStrides)]);
    }
  }
  float out[VEC], r[VEC];
  if (p.residual) loadFloats<T, VEC>(static_cast<const T*>(p.residual) + row * p.cols + k0, r);
#pragma unroll
  for (int e = 0; e < VEC; ++e)
    out[e] = applyActivation(static_cast<ActKind>(p.act), p.actAlpha, p.actBeta,
                             (v[e] - mean) * inv * s[e] + (bias ? b[e] : 0.f) + (p.residual ? r[e] : 0.f));
  storeFloats<T, VEC>(y + k0, out);
  if (p.sum) storeFloats<T, VEC>(static_cast<T*>(p.sum) + row * p.cols + k0, v);  // exact: v holds T-rounded sums
}

//! One row per blockDim.x threads (blockDim.y rows per block). CACHED: the row is held in
//! registers (kRowItems vectors per thread); else it is read again for each pass.
template <typename T, int VEC, bool CACHED>
__global__ void __launch_bounds__(1024) rowNormKernel(const RowNormParams p) {
  __shared__ float smem[32 * 32];
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  const bool valid = row < p.rows;
  const T* x = static_cast<const T*>(p.x) + (valid ? row : 0) * p.cols;
  const T* skip = p.skip ? static_cast<const T*>(p.skip) + (valid ? row : 0) * p.cols : nullptr;
  T* y = static_cast<T*>(p.y) + (valid ? row : 0) * p.cols;
  const int64_t nvec = p.cols / VEC;
  const float invN = p.cols > 0 ? 1.f / static_cast<float>(p.cols) : 0.f;
  constexpr int kItems = CACHED ? kRowItems : 1;
  float v[kItems][VEC];
  float mean = 0.f, var = 0.f;
  if constexpr (CACHED) {
    float sum = 0.f, sq = 0.f;
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const int64_t j = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
      if (valid && j < nvec) {
        loadX<T, VEC>(x, skip, j * VEC, v[i]);
      } else {
#pragma unroll
        for (int e = 0; e < VEC; ++e) v[i][e] = 0.f;
      }
#pragma unroll
      for (int e = 0; e < VEC; ++e) sum += v[i][e], sq += v[i][e] * v[i][e];
    }
    if (p.rms) {
      var = rowReduce(sq, SumOp{}, 0.f, smem) * invN;
    } else {
      mean = rowReduce(sum, SumOp{}, 0.f, smem) * invN;
      float dev = 0.f;  // second pass over the registers: exact two-pass variance
#pragma unroll
      for (int i = 0; i < kItems; ++i) {
        const int64_t j = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
        if (valid && j < nvec) {
#pragma unroll
          for (int e = 0; e < VEC; ++e) dev += (v[i][e] - mean) * (v[i][e] - mean);
        }
      }
      var = rowReduce(dev, SumOp{}, 0.f, smem) * invN;
    }
  } else {
    float sum = 0.f;
    if (valid)
      for (int64_t j = threadIdx.x; j < nvec; j += blockDim.x) {
        loadX<T, VEC>(x, skip, j * VEC, v[0]);
#pragma unroll
        for (int e = 0; e < VEC; ++e) sum += p.rms ? v[0][e] * v[0][e] : v[0][e];
      }
    sum = rowReduce(sum, SumOp{}, 0.f, smem) * invN;
    if (p.rms) {
      var = sum;
    } else {
      mean = sum;
      float dev = 0.f;
      if (valid)
        for (int64_t j = threadIdx.x; j < nvec; j += blockDim.x) {
          loadX<T, VEC>(x, skip, j * VEC, v[0]);
#pragma unroll
          for (int e = 0; e < VEC; ++e) dev += (v[0][e] - mean) * (v[0][e] - mean);
        }
      var = rowReduce(dev, SumOp{}, 0.f, smem) * invN;
    }
  }
  const float inv = rsqrtf(var + p.eps);
  if (!valid) return;  // after the last synchronization
  if (threadIdx.x == 0) {
    if (p.mean) p.mean[row] = mean;
    if (p.invStd) p.invStd[row] = inv;
  }
  if constexpr (CACHED) {
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const int64_t j = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
      if (j < nvec) writeNormalized<T, VEC>(p, row, j * VEC, v[i], mean, inv, y);
    }
  } else {
    for (int64_t j = threadIdx.x; j < nvec; j += blockDim.x) {
      loadX<T, VEC>(x, skip, j * VEC, v[0]);
      writeNormalized<T, VEC>(p, row, j * VEC, v[0], mean, inv, y);
    }
  }
}

template <typename T>
void rowNormTyped(const RowNormParams& p, cudaStream_t stream) {
  constexpr int kWide = 16 / sizeof(T);
  const RowGeometry& g = p.geo;
  const bool wide = g.vec == kWide && aligned(p.x, 16) && aligned(p.y, 16) && (!p.skip || aligned(p.skip, 16)) &&
                    (!p.sum || aligned(p.sum, 16)) && (!p.residual || aligned(p.residual, 16)) &&
                    (p.mode != RowNormParams::kDirect || (aligned(p.scale, 16) && (!p.bias || aligned(p.bias, 16))));
  const dim3 block(g.threads, g.rowsPerBlock);
  const dim3 grid(static_cast<unsigned>((p.rows + g.rowsPerBlock - 1) / g.rowsPerBlock));
  if (wide) {
    if (g.cached) rowNormKernel<T, kWide, true><<<grid, block, 0, stream>>>(p);
    else rowNormKernel<T, kWide, false><<<grid, block, 0, stream>>>(p);
  } else {
    // Unvectorized: cached only when the geometry was planned for single elements.
    if (g.cached && g.vec == 1) rowNormKernel<T, 1, true><<<grid, block, 0, stream>>>(p);
    else rowNormKernel<T, 1, false><<<grid, block, 0, stream>>>(p);
  }
  KILN_CUDA_CHECK_LAUNCH();
}

template <typename T, int VEC>
__global__ void batchNormKernel(const BatchNormParams p) {
  const T* x = static_cast<const T*>(p.x);
  T* y = static_cast<T*>(p.y);
  const T* scale = static_cast<const T*>(p.scale);
  const T* bias = static_cast<const T*>(p.bias);
  const T* mean = static_cast<const T*>(p.mean);
  const T* var = static_cast<const T*>(p.var);
  const int64_t nvec = p.count / VEC;
  const int64_t perN = p.channels * p.spatial;
  for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < nvec;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i0 = j * VEC;
    float v[VEC], out[VEC];
    loadFloats<T, VEC>(x + i0, v);
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      // VEC > 1 only when spatial % VEC == 0 (per channel): one channel for the whole vector.
      const int64_t c = p.perActivation ? (i0 + e) % perN : ((VEC > 1 ? i0 : i0 + e) / p.spatial) % p.channels;
      const float a = toFloat(scale[c]) * rsqrtf(toFloat(var[c]) + p.eps);
      out[e] = (v[e] - toFloat(mean[c])) * a + toFloat(bias[c]);
    }
    storeFloats<T, VEC>(y + i0, out);
  }
}

template <typename T>
void batchNormTyped(const BatchNormParams& p, cudaStream_t stream) {
  constexpr int kWide = 16 / sizeof(T);
  const bool wide = !p.perActivation && p.spatial % kWide == 0 && aligned(p.x, 16) && aligned(p.y, 16);
  if (wide) batchNormKernel<T, kWide><<<gridFor(p.count / kWide), 256, 0, stream>>>(p);
  else batchNormKernel<T, 1><<<gridFor(p.count), 256, 0, stream>>>(p);
  KILN_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launchRowNorm(const RowNormParams& p, cudaStream_t stream) {
  if (p.rows <= 0) return;
  dispatchCudaType<kFloatTypes>(p.type, [&](auto t) { rowNormTyped<decltype(t)>(p, stream); }, "launchRowNorm");
}

void launchBatchNorm(const BatchNormParams& p, cudaStream_t stream) {
  if (p.count <= 0) return;
  dispatchCudaType<kFloatTypes>(p.type, [&](auto t) { batchNormTyped<decltype(t)>(p, stream); }, "launchBatchNorm");
}

}  // namespace kiln::cuda
