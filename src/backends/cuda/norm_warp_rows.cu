// CUDA kernels: LayerNormalization / RMSNormalization (and skip LayerNorm) over rows that fit in
// registers, one row per group of `lanes` threads of one warp (tactics "layer_normalization_fp_warp_rows",
// "rms_normalization_fp_warp_rows"). Why: norm_rows.cu's kernel spreads a few rows over up to 1024
// threads (__launch_bounds__(1024): 64 registers), loads inside per-item branches and reduces twice
// through shared memory; ncu on the H200 saw BERT's [4096, 768] skip LayerNorm take 25 us at 12% of
// DRAM bandwidth, 50% occupancy, latency-bound. Here every thread issues all its loads (16-byte
// vectors, indices clamped into the row instead of branches, so none waits on another) before any
// arithmetic, the statistics are one shuffle reduction inside the warp (Chan's merge of per-thread
// count / mean / M2, exact like a two-pass variance; RMSNorm: the sum of squares), no shared memory
// and no block barrier, 256 threads a block. The register count is a template parameter (items per
// thread, kWarpRowItems), so BERT's 768, 384, 1024 and LLMs' 4096 rows are held without idle slots.
#include <string>

#include "core/type_dispatch.h"
#include "backends/cuda/activation_math.cuh"
#include "backends/cuda/cuda_util.h"
#include "backends/cuda/fp8_codes.cuh"
#include "backends/cuda/norm_common.cuh"
#include "backends/cuda/norm_launch.cuh"

namespace kiln::cuda {

namespace {

constexpr int kWarpRowThreads = 256;
constexpr unsigned kFullMask = 0xffffffffu;

template <typename T, int VEC>
__device__ __forceinline__ Vec<T, VEC> loadVec(const T* p) {
  return *reinterpret_cast<const Vec<T, VEC>*>(p);
}

//! Rows of p.cols elements, p.warp.lanes threads a row, ITEMS vectors of VEC elements per thread.
template <typename T, int VEC, int ITEMS>
__global__ void __launch_bounds__(kWarpRowThreads) rowNormWarpKernel(const RowNormParams p) {
  constexpr bool kPrefetch = ITEMS <= 4;  // scale / bias loaded with X while registers allow
  const int lanes = p.warp.lanes;
  const int lane = static_cast<int>(threadIdx.x) & (lanes - 1);
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (kWarpRowThreads / lanes) + threadIdx.x / lanes;
  const bool valid = row < p.rows;
  const int64_t base = (valid ? row : p.rows - 1) * p.cols;  // a spare group re-reads the last row
  const int nvec = static_cast<int>(p.cols / VEC);
  const int mine = min(ITEMS, (nvec - lane + lanes - 1) / lanes);  // this thread's vectors in the row
  auto at = [&](int i) { return min(lane + i * lanes, nvec - 1) * VEC; };

  const T* x = static_cast<const T*>(p.x) + base;
  Vec<T, VEC> v[ITEMS];
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) v[i] = loadVec<T, VEC>(x + at(i));
  const T* scale = static_cast<const T*>(p.scale);
  const T* bias = static_cast<const T*>(p.bias);
  Vec<T, VEC> s[kPrefetch ? ITEMS : 1], b[kPrefetch ? ITEMS : 1];
  if constexpr (kPrefetch) {
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) s[i] = loadVec<T, VEC>(scale + at(i));
    if (bias) {
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) b[i] = loadVec<T, VEC>(bias + at(i));
    }
  }
  if (p.skip) {  // X + skip rounded to T (what the separate Add wrote before the fusion)
    const T* skip = static_cast<const T*>(p.skip) + base;
    Vec<T, VEC> r[ITEMS];
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) r[i] = loadVec<T, VEC>(skip + at(i));
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
#pragma unroll
      for (int e = 0; e < VEC; ++e) v[i].v[e] = fromFloat<T>(toFloat(v[i].v[e]) + toFloat(r[i].v[e]));
    }
  }

  float mean = 0.f, var = 0.f;
  if (p.rms) {
    float sq = 0.f;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      if (i < mine) {
#pragma unroll
        for (int e = 0; e < VEC; ++e) sq += toFloat(v[i].v[e]) * toFloat(v[i].v[e]);
      }
    }
    for (int o = lanes >> 1; o > 0; o >>= 1) sq += __shfl_xor_sync(kFullMask, sq, o);  // same sum in every lane
    var = sq / static_cast<float>(p.cols);
  } else {
    // This thread's count, mean and M2 (two passes over its registers), then Chan's merge.
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      if (i < mine) {
#pragma unroll
        for (int e = 0; e < VEC; ++e) sum += toFloat(v[i].v[e]);
      }
    }
    float n = static_cast<float>(max(mine, 0) * VEC);
    mean = n > 0.f ? sum / n : 0.f;
    float m2 = 0.f;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      if (i < mine) {
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          const float d = toFloat(v[i].v[e]) - mean;
          m2 += d * d;
        }
      }
    }
    for (int o = lanes >> 1; o > 0; o >>= 1) {
      const float nB = __shfl_xor_sync(kFullMask, n, o), meanB = __shfl_xor_sync(kFullMask, mean, o);
      const float m2B = __shfl_xor_sync(kFullMask, m2, o);
      const float nAB = n + nB, d = meanB - mean, f = nAB > 0.f ? nB / nAB : 0.f;
      mean += d * f;
      m2 += m2B + d * d * n * f;
      n = nAB;
    }
    // The two partners of a merge round differently: every lane takes the group leader's result.
    const int leader = static_cast<int>(threadIdx.x & 31) & ~(lanes - 1);
    mean = __shfl_sync(kFullMask, mean, leader);
    var = __shfl_sync(kFullMask, m2, leader) / static_cast<float>(p.cols);
  }
  const float inv = rsqrtf(var + p.eps);
  if (!valid) return;  // after the last shuffle
  if (lane == 0) {
    if (p.mean) p.mean[row] = mean;
    if (p.invStd) p.invStd[row] = inv;
  }
  T* y = p.y ? static_cast<T*>(p.y) + base : nullptr;
  T* sumOut = p.sum ? static_cast<T*>(p.sum) + base : nullptr;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    if (i >= mine) break;
    const int k0 = at(i);
    Vec<T, VEC> sc, bi;
    if constexpr (kPrefetch) {
      sc = s[i];
      bi = b[i];
    } else {
      sc = loadVec<T, VEC>(scale + k0);
      if (bias) bi = loadVec<T, VEC>(bias + k0);
    }
    float z[VEC];
#pragma unroll
    for (int e = 0; e < VEC; ++e)
      z[e] = applyActivation(static_cast<ActKind>(p.act), p.actAlpha, p.actBeta,
                             (toFloat(v[i].v[e]) - mean) * inv * toFloat(sc.v[e]) + (bias ? toFloat(bi.v[e]) : 0.f));
    if (p.codes) {  // the next FP8 matmul's input codes (saturating, as QuantizeLinear)
      Vec<uint8_t, VEC> codes;
#pragma unroll
      for (int e = 0; e < VEC; ++e) codes.v[e] = deviceFp8Code(z[e], p.codeScale);
      *reinterpret_cast<Vec<uint8_t, VEC>*>(p.codes + base + k0) = codes;
    }
    if (p.y) {
      Vec<T, VEC> out;
#pragma unroll
      for (int e = 0; e < VEC; ++e) out.v[e] = fromFloat<T>(z[e]);
      *reinterpret_cast<Vec<T, VEC>*>(y + k0) = out;
    }
    if (sumOut) *reinterpret_cast<Vec<T, VEC>*>(sumOut + k0) = v[i];  // exact: v holds T-rounded sums
  }
}

template <typename T, int VEC>
void launchWarpRows(const RowNormParams& p, cudaStream_t stream) {
  const int rowsPerBlock = kWarpRowThreads / p.warp.lanes;
  const dim3 grid(static_cast<unsigned>((p.rows + rowsPerBlock - 1) / rowsPerBlock));
  switch (p.warp.items) {
#define KILN_WARP_ROWS_CASE(n) \
  case n: rowNormWarpKernel<T, VEC, n><<<grid, kWarpRowThreads, 0, stream>>>(p); break;
    KILN_WARP_ROWS_CASE(1)
    KILN_WARP_ROWS_CASE(2)
    KILN_WARP_ROWS_CASE(3)
    KILN_WARP_ROWS_CASE(4)
    KILN_WARP_ROWS_CASE(6)
    KILN_WARP_ROWS_CASE(8)
    KILN_WARP_ROWS_CASE(12)
    KILN_WARP_ROWS_CASE(16)
    KILN_WARP_ROWS_CASE(24)
    KILN_WARP_ROWS_CASE(32)
#undef KILN_WARP_ROWS_CASE
    default: throw Error("launchRowNormWarp: " + std::to_string(p.warp.items) + " items per thread is not compiled");
  }
  KILN_CUDA_CHECK_LAUNCH();
}

template <typename T>
void rowNormWarpTyped(RowNormParams p, cudaStream_t stream) {
  constexpr int kWide = 16 / sizeof(T);
  if (p.warp.vec == kWide) {
    const bool wide = aligned(p.x, 16) && (!p.y || aligned(p.y, 16)) && aligned(p.scale, 16) && (!p.bias || aligned(p.bias, 16)) &&
                      (!p.skip || aligned(p.skip, 16)) && (!p.sum || aligned(p.sum, 16)) && (!p.codes || aligned(p.codes, 16));
    if (!wide) p.warp = planWarpRows(p.cols, sizeof(T), false, p.skip ? 16 : 32);
  }
  if (p.warp.lanes == 0 || p.mode != RowNormParams::kDirect) {
    if (p.codes) throw Error("LayerNorm writing float8 codes: only rows in registers (warp rows) can");
    return launchRowNorm(p, stream);
  }
  if (p.warp.vec == kWide) launchWarpRows<T, kWide>(p, stream);
  else launchWarpRows<T, 1>(p, stream);
}

}  // namespace

void launchRowNormWarp(const RowNormParams& p, cudaStream_t stream) {
  if (p.rows <= 0) return;
  dispatchCudaType<kFloatTypes>(p.type, [&](auto t) { rowNormWarpTyped<decltype(t)>(p, stream); }, "launchRowNormWarp");
}

}  // namespace kiln::cuda
