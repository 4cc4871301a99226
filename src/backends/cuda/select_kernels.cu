// CUDA kernels: ArgMax / ArgMin, TopK and CumSum / CumProd, each along one axis of X viewed as
// [outer, len, inner]. Values are compared in float32 (exact for float/half/bf16) or int64.
//  - ArgMax/ArgMin: along the last axis a row per blockDim.x threads; else a thread per line.
//  - TopK: a block per line selects the k best one after the other (k passes over the line, the
//    line stays in L1/L2): fast for small k, correct for any k.
//  - CumSum: along the last axis a block scans a row in chunks; else a thread per line.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/type_dispatch.h"
#include "backends/cuda/cuda_util.h"
#include "backends/cuda/norm_common.cuh"
#include "backends/cuda/norm_launch.cuh"

namespace kiln::cuda {

namespace {

template <typename T>
using KeyOf = std::conditional_t<std::is_integral_v<T>, long long, float>;

template <typename T>
__device__ __forceinline__ KeyOf<T> keyOf(T v) {
  if constexpr (std::is_integral_v<T>) return static_cast<long long>(v);
  else return toFloat(v);
}

template <typename K>
__device__ __forceinline__ bool isNanKey(K v) {
  if constexpr (std::is_floating_point_v<K>) return v != v;
  else return false;
}

// ---- ArgMax / ArgMin -------------------------------------------------------------------------

//! Whether candidate a (value, index) wins over b. NaN wins over numbers; ties (and NaN vs NaN)
//! go to the lower index, or the higher one with select_last_index. Index -1: no candidate.
template <typename K>
__device__ __forceinline__ bool argBetter(K av, long long ai, K bv, long long bi, bool isMax, bool last) {
  if (bi < 0) return ai >= 0;
  if (ai < 0) return false;
  const bool an = isNanKey(av), bn = isNanKey(bv);
  if (an || bn) {
    if (an && bn) return last ? ai > bi : ai < bi;
    return an;
  }
  if (av != bv) return isMax ? av > bv : av < bv;
  return last ? ai > bi : ai < bi;
}

template <typename T>
__global__ void __launch_bounds__(1024) argRowKernel(const ArgParams p) {
  using K = KeyOf<T>;
  __shared__ K sv[32 * 32];
  __shared__ long long si[32 * 32];
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  const bool valid = row < p.outer;
  K best = K(0);
  long long bi = -1;
  if (valid) {
    const T* x = static_cast<const T*>(p.x) + row * p.len;
    for (int64_t j = threadIdx.x; j < p.len; j += blockDim.x) {
      const K v = keyOf(x[j]);
      if (argBetter(v, j, best, bi, p.isMax, p.last)) best = v, bi = j;
    }
  }
  auto warpArg = [&](K& v, long long& i) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const K ov = __shfl_xor_sync(0xffffffffu, v, o);
      const long long oi = __shfl_xor_sync(0xffffffffu, i, o);
      if (argBetter(ov, oi, v, i, p.isMax, p.last)) v = ov, i = oi;
    }
  };
  warpArg(best, bi);
  if (blockDim.x > 32) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) sv[threadIdx.y * 32 + warp] = best, si[threadIdx.y * 32 + warp] = bi;
    __syncthreads();
    const bool has = lane < static_cast<int>(blockDim.x >> 5);
    best = has ? sv[threadIdx.y * 32 + lane] : K(0);
    bi = has ? si[threadIdx.y * 32 + lane] : -1;
    warpArg(best, bi);
  }
  if (valid && threadIdx.x == 0) p.y[row] = bi;
}

template <typename T>
__global__ void argColumnKernel(const ArgParams p) {
  using K = KeyOf<T>;
  const T* x = static_cast<const T*>(p.x);
  const int64_t lines = p.outer * p.inner;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < lines;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = t / p.inner, i = t % p.inner;
    const T* line = x + o * p.len * p.inner + i;
    K best = keyOf(line[0]);
    long long bi = 0;
    for (int64_t j = 1; j < p.len; ++j) {
      const K v = keyOf(line[j * p.inner]);
      if (argBetter(v, j, best, bi, p.isMax, p.last)) best = v, bi = j;
    }
    p.y[t] = bi;
  }
}

template <typename T>
void argTyped(const ArgParams& p, cudaStream_t stream) {
  if (p.inner == 1) {
    const RowGeometry g = planRows(p.outer, p.len, sizeof(T), false);
    const dim3 block(g.threads, g.rowsPerBlock);
    argRowKernel<T><<<static_cast<unsigned>((p.outer + g.rowsPerBlock - 1) / g.rowsPerBlock), block, 0, stream>>>(p);
  } else {
    argColumnKernel<T><<<gridFor(p.outer * p.inner), 256, 0, stream>>>(p);
  }
  KILN_CUDA_CHECK_LAUNCH();
}

// ---- TopK -------------------------------------------------------------------------------------

//! Whether (av, ai) comes before (bv, bi) in TopK's output order: the selected extreme first,
//! NaN larger than every number, ties by lower index. Index -1: no candidate (last).
template <typename K>
__device__ __forceinline__ bool topkBefore(K av, long long ai, K bv, long long bi, bool largest) {
  if (bi < 0) return ai >= 0;
  if (ai < 0) return false;
  const bool an = isNanKey(av), bn = isNanKey(bv);
  const bool aGreater = (an && !bn) || (!an && !bn && av > bv);
  const bool bGreater = (bn && !an) || (!an && !bn && bv > av);
  if (aGreater != bGreater) return largest ? aGreater : bGreater;
  return ai < bi;
}

template <typename T>
__global__ void topkKernel(const TopKParams p) {
  using K = KeyOf<T>;
  __shared__ K sv[32];
  __shared__ long long si[32];
  const int64_t line = blockIdx.x;
  const int64_t o = line / p.inner, i = line % p.inner;
  const T* x = static_cast<const T*>(p.x) + o * p.len * p.inner + i;
  T* values = static_cast<T*>(p.values) + o * p.k * p.inner + i;
  int64_t* indices = p.indices + o * p.k * p.inner + i;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nWarps = blockDim.x >> 5;
  K prev = K(0);
  long long prevIdx = -1;  // none selected yet
  for (int64_t sel = 0; sel < p.k; ++sel) {
    K best = K(0);
    long long bi = -1;
    for (int64_t j = threadIdx.x; j < p.len; j += blockDim.x) {
      const K v = keyOf(x[j * p.inner]);
      if (prevIdx >= 0 && !topkBefore(prev, prevIdx, v, j, p.largest)) continue;  // already selected
      if (topkBefore(v, j, best, bi, p.largest)) best = v, bi = j;
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      const K ov = __shfl_xor_sync(0xffffffffu, best, off);
      const long long oi = __shfl_xor_sync(0xffffffffu, bi, off);
      if (topkBefore(ov, oi, best, bi, p.largest)) best = ov, bi = oi;
    }
    if (lane == 0) sv[warp] = best, si[warp] = bi;
    __syncthreads();
    if (warp == 0) {
      best = lane < nWarps ? sv[lane] : K(0);
      bi = lane < nWarps ? si[lane] : -1;
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) {
        const K ov = __shfl_xor_sync(0xffffffffu, best, off);
        const long long oi = __shfl_xor_sync(0xffffffffu, bi, off);
        if (topkBefore(ov, oi, best, bi, p.largest)) best = ov, bi = oi;
      }
      if (lane == 0) {
        sv[0] = best, si[0] = bi;
        values[sel * p.inner] = x[bi * p.inner];
        indices[sel * p.inner] = bi;
      }
    }
    __syncthreads();
    prev = sv[0];
    prevIdx = si[0];
    __syncthreads();  // sv/si are rewritten by the next selection
  }
}

template <typename T>
void topkTyped(const TopKParams& p, cudaStream_t stream) {
  const int threads = p.len <= 64 ? 32 : p.len <= 2048 ? 128 : 512;
  const int64_t lines = p.outer * p.inner;
  if (lines > 0x7fffffff) throw UnsupportedError("TopK: too many lines for one launch");
  topkKernel<T><<<static_cast<unsigned>(lines), threads, 0, stream>>>(p);
  KILN_CUDA_CHECK_LAUNCH();
}

// ---- CumSum -----------------------------------------------------------------------------------

//! Accumulator: float32 for float types; for integers the unsigned type of the same size (sums
//! wrap around as two's complement, like the reference).
template <typename T, bool = std::is_integral_v<T>>
struct ScanAccOf {
  using type = float;
};
template <typename T>
struct ScanAccOf<T, true> {
  using type = std::make_unsigned_t<T>;
};
template <typename T>
using ScanAcc = typename ScanAccOf<T>::type;

template <typename T>
__device__ __forceinline__ ScanAcc<T> scanValue(T v) {
  if constexpr (std::is_integral_v<T>) return static_cast<ScanAcc<T>>(v);
  else return toFloat(v);
}

template <typename T>
__device__ __forceinline__ T scanResult(ScanAcc<T> a) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(a);
  else return fromFloat<T>(a);
}

constexpr int kScanThreads = 256, kScanItems = 4;

//! Scans rows of `len` (inner == 1), a block per row, in chunks of kScanThreads * kScanItems.
template <typename T>
__global__ void __launch_bounds__(kScanThreads) cumsumRowKernel(const CumSumParams p) {
  using A = ScanAcc<T>;
  __shared__ A warpTotals[kScanThreads / 32];
  __shared__ A chunkTotal;
  const T* x = static_cast<const T*>(p.x) + blockIdx.x * p.len;
  T* y = static_cast<T*>(p.y) + blockIdx.x * p.len;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  A carry = A(0);
  for (int64_t chunk = 0; chunk < p.len; chunk += kScanThreads * kScanItems) {
    // Scan-order positions s of this thread: chunk + threadIdx.x * kScanItems + q.
    A v[kScanItems];
    A total = A(0);
#pragma unroll
    for (int q = 0; q < kScanItems; ++q) {
      const int64_t s = chunk + threadIdx.x * kScanItems + q;
      v[q] = A(0);
      if (s < p.len) v[q] = scanValue(x[p.reverse ? p.len - 1 - s : s]);
      total += v[q];
    }
    // Inclusive scan of the thread totals within the warp, then across warps.
    A inc = total;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const A t = __shfl_up_sync(0xffffffffu, inc, o);
      if (lane >= o) inc += t;
    }
    if (lane == 31) warpTotals[warp] = inc;
    __syncthreads();
    if (warp == 0) {
      A w = lane < kScanThreads / 32 ? warpTotals[lane] : A(0);
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const A t = __shfl_up_sync(0xffffffffu, w, o);
        if (lane >= o) w += t;
      }
      if (lane < kScanThreads / 32) warpTotals[lane] = w;  // inclusive over warps
      if (lane == kScanThreads / 32 - 1) chunkTotal = w;
    }
    __syncthreads();
    A excl = __shfl_up_sync(0xffffffffu, inc, 1);  // exclusive prefix within the warp
    if (lane == 0) excl = A(0);
    A run = carry + (warp > 0 ? warpTotals[warp - 1] : A(0)) + excl;
#pragma unroll
    for (int q = 0; q < kScanItems; ++q) {
      const int64_t s = chunk + threadIdx.x * kScanItems + q;
      if (s >= p.len) break;
      const int64_t j = p.reverse ? p.len - 1 - s : s;
      if (p.exclusive) {
        y[j] = scanResult<T>(run);
        run += v[q];
      } else {
        run += v[q];
        y[j] = scanResult<T>(run);
      }
    }
    carry += chunkTotal;
    __syncthreads();  // warpTotals / chunkTotal are rewritten by the next chunk
  }
}

//! One thread per (outer, inner) line, sequential along the axis.
template <typename T>
__global__ void cumsumColumnKernel(const CumSumParams p) {
  using A = ScanAcc<T>;
  const T* x = static_cast<const T*>(p.x);
  T* y = static_cast<T*>(p.y);
  const int64_t lines = p.outer * p.inner;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < lines;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = t / p.inner, i = t % p.inner;
    const int64_t base = o * p.len * p.inner + i;
    A run = p.product ? A(1) : A(0);
    for (int64_t s = 0; s < p.len; ++s) {
      const int64_t off = base + (p.reverse ? p.len - 1 - s : s) * p.inner;
      const A v = scanValue(x[off]);
      if (p.exclusive) y[off] = scanResult<T>(run);
      run = p.product ? run * v : run + v;
      if (!p.exclusive) y[off] = scanResult<T>(run);
    }
  }
}

template <typename T>
void cumsumTyped(const CumSumParams& p, cudaStream_t stream) {
  if (p.inner == 1 && p.len > 64 && !p.product) {  // products scan line by line
    if (p.outer > 0x7fffffff) throw UnsupportedError("CumSum: too many rows for one launch");
    cumsumRowKernel<T><<<static_cast<unsigned>(p.outer), kScanThreads, 0, stream>>>(p);
  } else {
    cumsumColumnKernel<T><<<gridFor(p.outer * p.inner), 256, 0, stream>>>(p);
  }
  KILN_CUDA_CHECK_LAUNCH();
}

template <typename F>
void dispatchSelectType(DataType t, const char* what, F&& f) {
  dispatchCudaType<kFloatTypes | typeBit(DataType::kINT32) | typeBit(DataType::kINT64)>(t, f, what);
}

}  // namespace

void launchArg(const ArgParams& p, cudaStream_t stream) {
  if (p.outer * p.inner <= 0 || p.len <= 0) return;
  dispatchSelectType(p.type, "launchArg", [&](auto t) { argTyped<decltype(t)>(p, stream); });
}

void launchTopK(const TopKParams& p, cudaStream_t stream) {
  if (p.outer * p.inner <= 0 || p.k <= 0) return;
  dispatchSelectType(p.type, "launchTopK", [&](auto t) { topkTyped<decltype(t)>(p, stream); });
}

void launchCumSum(const CumSumParams& p, cudaStream_t stream) {
  if (p.outer * p.inner <= 0 || p.len <= 0) return;
  dispatchSelectType(p.type, "launchCumSum", [&](auto t) { cumsumTyped<decltype(t)>(p, stream); });
}

}  // namespace kiln::cuda
