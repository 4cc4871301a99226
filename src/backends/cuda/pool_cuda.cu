// "*_pool_*_direct", "lrn_fp_direct": MaxPool (with the optional Indices output), AveragePool,
// LpPool and LRN on NCHW tensors with 1..3 spatial axes (window geometry from ops/conv_geometry.h:
// pads, auto_pad, ceil_mode, dilations, count_include_pad); the global pools are in pool_global.cu.
// Float types compute in float32; MaxPool also takes int8/uint8/int32/int64. NaN wins a max
// (as the reference). 2-D MaxPool / AveragePool without Indices take one of three fast paths:
// - float16 / bfloat16 with channels-last X and Y, C % 8 == 0 and 16-byte aligned data: one
//   thread per 8 consecutive channels of one output pixel (one 16-byte load per window tap, one
//   16-byte store, one index decomposition);
// - plain X and Y: one thread per output, 32-bit indices and multiply-shift divisions;
// - any other pair of layouts: 32 x 32 (channel x column) tiles turned through shared memory.
// Each exists because the generic kernel's 2-byte accesses and per-output 64-bit div/mod made the
// stem MaxPools of ResNet-50 / ResNet-26 20-25x slower than their memory traffic. The generic
// kernels (one thread per output, 64-bit indices) run everything else: 1-D and 3-D pools, Indices,
// LpPool, tensors past 2^31 elements.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "core/type_dispatch.h"
#include "backends/cuda/cuda_tactics.h"
#include "backends/cuda/conv_act.cuh"
#include "backends/cuda/cuda_util.h"
#include "backends/cuda/pool_common.cuh"
#include "backends/cuda/shape_cuda.cuh"
#include "ops/conv_geometry.h"
#include "ops/conv_layout.h"
#include "ops/fused_attrs.h"

namespace kiln {

namespace {

using namespace cuda::pool;
using cuda::fromF;
using cuda::toF;

struct PoolGeom {
  int64_t in[3], out[3], kernel[3], stride[3], dil[3], padBegin[3], padEnd[3];
  int64_t inSize, outSize;
  // Channels-last X / Y ("nhwc", 2-D pools of the GPU layout pass); channels = C then.
  bool inLast = false, outLast = false;
  int64_t channels = 1;
};

PoolGeom toGeom(const Window3& w) {
  PoolGeom g{};
  for (int a = 0; a < 3; ++a) {
    g.in[a] = w.in[a], g.out[a] = w.out[a], g.kernel[a] = w.kernel[a], g.stride[a] = w.stride[a];
    g.dil[a] = w.dilation[a], g.padBegin[a] = w.padBegin[a], g.padEnd[a] = w.padEnd[a];
  }
  g.inSize = w.inSize();
  g.outSize = w.outSize();
  return g;
}

//! Output i (in the output's memory order) -> plane (n * C + c), its memory offset, the window
//! start per axis, and where the plane's input begins and how far apart its elements are.
struct WindowPos {
  int64_t plane, start[3], outOffset, inBase, inStep;
};
__device__ __forceinline__ WindowPos windowOf(const PoolGeom& g, int64_t i) {
  WindowPos p;
  int64_t sp;
  if (g.outLast) {  // [N][spatial][C]: consecutive threads take consecutive channels
    const int64_t c = i % g.channels;
    sp = (i / g.channels) % g.outSize;
    p.plane = (i / (g.channels * g.outSize)) * g.channels + c;
  } else {
    sp = i % g.outSize;
    p.plane = i / g.outSize;
  }
  p.outOffset = i;
  const int64_t ow = sp % g.out[2], oh = (sp / g.out[2]) % g.out[1], od = sp / (g.out[2] * g.out[1]);
  p.start[0] = od * g.stride[0] - g.padBegin[0];
  p.start[1] = oh * g.stride[1] - g.padBegin[1];
  p.start[2] = ow * g.stride[2] - g.padBegin[2];
  if (g.inLast) {
    const int64_t n = p.plane / g.channels, c = p.plane % g.channels;
    p.inBase = n * g.inSize * g.channels + c;
    p.inStep = g.channels;
  } else {
    p.inBase = p.plane * g.inSize;
    p.inStep = 1;
  }
  return p;
}

//! Calls f(id, ih, iw) for every window tap inside the input (padding taps skipped).
template <typename F>
__device__ __forceinline__ void forTaps(const PoolGeom& g, const WindowPos& p, F&& f) {
  for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
    const int64_t id = p.start[0] + kd * g.dil[0];
    if (id < 0 || id >= g.in[0]) continue;
    for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
      const int64_t ih = p.start[1] + kh * g.dil[1];
      if (ih < 0 || ih >= g.in[1]) continue;
      for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
        const int64_t iw = p.start[2] + kw * g.dil[2];
        if (iw >= 0 && iw < g.in[2]) f(id, ih, iw);
      }
    }
  }
}

template <typename T>
__global__ void maxPoolKernel(const T* __restrict__ x, T* __restrict__ y, int64_t* __restrict__ indices, int64_t total,
                              PoolGeom g, bool colMajor) {
  using A = typename AccOf<T>::type;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const WindowPos p = windowOf(g, i);
    const T* xp = x + p.inBase;
    A best = A(0);
    int64_t bestIndex = -1;
    forTaps(g, p, [&](int64_t id, int64_t ih, int64_t iw) {
      const int64_t off = (id * g.in[1] + ih) * g.in[2] + iw;
      const A v = load(xp + off * p.inStep);
      if (bestIndex < 0 || beats(v, best)) {
        best = v;
        bestIndex = colMajor ? id + (ih + iw * g.in[1]) * g.in[0] : off;
      }
    });
    y[p.outOffset] = store<T>(best);
    if (indices) indices[i] = bestIndex < 0 ? -1 : p.plane * g.inSize + bestIndex;  // plain layouts only
  }
}

template <typename T>
__global__ void averagePoolKernel(const T* __restrict__ x, T* __restrict__ y, int64_t total, PoolGeom g, bool includePad) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const WindowPos p = windowOf(g, i);
    const T* xp = x + p.inBase;
    float sum = 0.f;
    int64_t inside = 0, padded = 1;
    for (int a = 0; a < 3; ++a) {  // taps inside [-padBegin, in + padEnd) per axis
      int64_t n = 0;
      for (int64_t k = 0; k < g.kernel[a]; ++k) {
        const int64_t at = p.start[a] + k * g.dil[a];
        n += at >= -g.padBegin[a] && at < g.in[a] + g.padEnd[a];
      }
      padded *= n;
    }
    forTaps(g, p, [&](int64_t id, int64_t ih, int64_t iw) {
      sum += toF(__ldg(xp + ((id * g.in[1] + ih) * g.in[2] + iw) * p.inStep));
      ++inside;
    });
    const int64_t count = includePad ? padded : inside;
    y[p.outOffset] = fromF<T>(count > 0 ? sum / static_cast<float>(count) : 0.f);
  }
}

//! Geometry of the vectorized channels-last 2-D pool (H, W axes; c8 = C / 8) in `Index`.
template <typename Index>
struct VecPoolGeom {
  Index inH, inW, outH, outW, kH, kW, strideH, strideW, dilH, dilW, padH, padW, padEndH, padEndW, c8;
};

//! Two packed 16-bit floats; kNegInf: two -inf (the max's neutral value) as one word.
template <typename T> struct Vec2Of;
template <> struct Vec2Of<__half> {
  using type = __half2;
  static constexpr uint32_t kNegInf = 0xFC00FC00u;
};
template <> struct Vec2Of<__nv_bfloat16> {
  using type = __nv_bfloat162;
  static constexpr uint32_t kNegInf = 0xFF80FF80u;
};
template <typename V2> __device__ __forceinline__ V2 asV2(uint32_t w) {
  V2 v;
  memcpy(&v, &w, sizeof v);
  return v;
}
template <typename V2> __device__ __forceinline__ uint32_t asWord(V2 v) {
  uint32_t w;
  memcpy(&w, &v, sizeof w);
  return w;
}
__device__ __forceinline__ uint32_t wordOf(const uint4& u, int j) { return j == 0 ? u.x : j == 1 ? u.y : j == 2 ? u.z : u.w; }
__device__ __forceinline__ float2 toF2(__half2 v) { return __half22float2(v); }
__device__ __forceinline__ float2 toF2(__nv_bfloat162 v) { return __bfloat1622float2(v); }
template <typename V2> __device__ __forceinline__ V2 fromF2(float a, float b);
template <> __device__ __forceinline__ __half2 fromF2<__half2>(float a, float b) { return __floats2half2_rn(a, b); }
template <> __device__ __forceinline__ __nv_bfloat162 fromF2<__nv_bfloat162>(float a, float b) {
  return __floats2bfloat162_rn(a, b);
}

//! The running max (NaN wins, as canonical NaN; of +0 / -0 the max keeps +0) or float sums of
//! 8 packed channels. A padding tap adds the neutral value (-inf / +0: adding +0 to a sum that
//! starts at +0 changes no bit).
template <bool kMax, typename T>
struct VecAcc {
  using V2 = typename Vec2Of<T>::type;
  static constexpr uint32_t kNeutral = kMax ? Vec2Of<T>::kNegInf : 0u;
  V2 best[4];
  float sum[8];
  __device__ __forceinline__ VecAcc() {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      best[j] = asV2<V2>(Vec2Of<T>::kNegInf);
      sum[2 * j] = sum[2 * j + 1] = 0.f;
    }
  }
  __device__ __forceinline__ void add(const uint4& raw) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const V2 v = asV2<V2>(wordOf(raw, j));
      if constexpr (kMax) {
        best[j] = __hmax2_nan(best[j], v);
      } else {
        const float2 f = toF2(v);
        sum[2 * j] += f.x;
        sum[2 * j + 1] += f.y;
      }
    }
  }
  //! The 8 outputs: the max (0 without a tap), or the sums / count (0 for count 0).
  template <typename Index> __device__ __forceinline__ uint4 result(Index taps, Index count) const {
    uint32_t w[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if constexpr (kMax) w[j] = taps > 0 ? asWord(best[j]) : 0u;
      else w[j] = asWord(count > 0 ? fromF2<V2>(sum[2 * j] / static_cast<float>(count), sum[2 * j + 1] / static_cast<float>(count))
                                   : fromF2<V2>(0.f, 0.f));
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
  }
};

//! MaxPool / AveragePool of a channels-last float16 / bfloat16 X into a channels-last Y, 2-D,
//! C % 8 == 0: thread i makes the 8 channels [8 * (i % c8), +8) of output pixel i / c8, so X and
//! Y are read / written as uint4 (X's uint4 index ((n * inH + ih) * inW + iw) * c8 + i % c8, Y's
//! is i). `kK` > 0: a kK x kK window known at compile time, its taps' loads (predicated) all
//! issued before they are reduced; 0: any window, tap by tap. Same results as maxPoolKernel /
//! averagePoolKernel: taps in the padding left out, dilations, NaN wins a max, a window without a
//! tap gives 0, averages sum in float in the same tap order and divide by the same count (taps
//! inside X, or inside [-padBegin, in + padEnd) with count_include_pad).
template <bool kMax, int kK, typename T, typename Index>
__global__ void poolChannelsLast8Kernel(const uint4* __restrict__ x, uint4* __restrict__ y, Index total, VecPoolGeom<Index> g,
                                        bool includePad) {
  for (Index i = blockIdx.x * Index(blockDim.x) + threadIdx.x; i < total; i += Index(gridDim.x) * blockDim.x) {
    const Index c = i % g.c8;
    Index pix = i / g.c8;
    const Index ow = pix % g.outW;
    pix /= g.outW;
    const Index oh = pix % g.outH, n = pix / g.outH;
    const Index ih0 = oh * g.strideH - g.padH, iw0 = ow * g.strideW - g.padW;
    const uint4* xn = x + n * g.inH * g.inW * g.c8 + c;
    // Taps per axis inside X (their product: the taps inside) and inside the padded extent.
    Index insideH = 0, insideW = 0, paddedH = 0, paddedW = 0;
    for (Index k = 0; k < (kK > 0 ? Index(kK) : g.kH); ++k) {
      const Index ih = ih0 + k * g.dilH;
      insideH += ih >= 0 && ih < g.inH;
      paddedH += ih >= -g.padH && ih < g.inH + g.padEndH;
    }
    for (Index k = 0; k < (kK > 0 ? Index(kK) : g.kW); ++k) {
      const Index iw = iw0 + k * g.dilW;
      insideW += iw >= 0 && iw < g.inW;
      paddedW += iw >= -g.padW && iw < g.inW + g.padEndW;
    }
    VecAcc<kMax, T> acc;
    if constexpr (kK > 0) {
      uint4 taps[kK * kK];
      constexpr uint32_t kFill = VecAcc<kMax, T>::kNeutral;
#pragma unroll
      for (int kh = 0; kh < kK; ++kh) {
        const Index ih = ih0 + kh * g.dilH;
        const bool rowOk = ih >= 0 && ih < g.inH;
#pragma unroll
        for (int kw = 0; kw < kK; ++kw) {
          const Index iw = iw0 + kw * g.dilW;
          taps[kh * kK + kw] = rowOk && iw >= 0 && iw < g.inW ? __ldg(xn + (ih * g.inW + iw) * g.c8)
                                                               : make_uint4(kFill, kFill, kFill, kFill);
        }
      }
#pragma unroll
      for (int t = 0; t < kK * kK; ++t) acc.add(taps[t]);
    } else {
      for (Index kh = 0; kh < g.kH; ++kh) {
        const Index ih = ih0 + kh * g.dilH;
        if (ih < 0 || ih >= g.inH) continue;
        for (Index kw = 0; kw < g.kW; ++kw) {
          const Index iw = iw0 + kw * g.dilW;
          if (iw >= 0 && iw < g.inW) acc.add(__ldg(xn + (ih * g.inW + iw) * g.c8));
        }
      }
    }
    const Index inside = insideH * insideW;
    y[i] = acc.result(inside, includePad ? paddedH * paddedW : inside);
  }
}

//! 2-D window geometry in 32 bits (pool2dPlainKernel, pool2dTileKernel: every index of X and Y fits).
struct Pool2d {
  int inH, inW, outH, outW, kH, kW, strideH, strideW, dilH, dilW, padH, padW, padEndH, padEndW, channels;
  bool includePad;
};

//! The pool of one window of one (n, c) plane of X: element (ih, iw) at x[ih * rowStride + iw *
//! colStride], window origin (ih0, iw0); nothing is read unless `valid` (then the result is
//! unused). kK > 0: a kK x kK window known at compile time, every tap's load predicated rather
//! than branched over, so that a thread's outputs can have all their loads in flight at once;
//! 0: any window. Same results as maxPoolKernel /
//! averagePoolKernel: taps in the padding left out, NaN wins a max, a window without a tap gives
//! 0, averages sum in the same tap order and divide by the taps inside X (or inside
//! [-padBegin, in + padEnd) with count_include_pad).
template <bool kMax, int kK, typename T>
__device__ __forceinline__ Acc<T> poolWindow(const T* __restrict__ x, int rowStride, int colStride, int ih0, int iw0,
                                             const Pool2d& g, bool valid = true) {
  using A = Acc<T>;
  const int kH = kK > 0 ? kK : g.kH, kW = kK > 0 ? kK : g.kW;
  A best = A(0), sum = A(0);
  bool any = false;
  auto take = [&](A v) {
    if constexpr (kMax) {
      if (!any || beats(v, best)) best = v;
      any = true;
    } else {
      sum += v;
    }
  };
  if constexpr (kK > 0) {
    A v[kK * kK];
    bool ok[kK * kK];
#pragma unroll
    for (int kh = 0; kh < kK; ++kh) {
      const int ih = ih0 + kh * g.dilH;
      const bool rowOk = valid && ih >= 0 && ih < g.inH;
#pragma unroll
      for (int kw = 0; kw < kK; ++kw) {
        const int iw = iw0 + kw * g.dilW, t = kh * kK + kw;
        ok[t] = rowOk && iw >= 0 && iw < g.inW;
        v[t] = ok[t] ? load(x + ih * rowStride + iw * colStride) : A(0);
      }
    }
#pragma unroll
    for (int t = 0; t < kK * kK; ++t)
      if (ok[t]) take(v[t]);
  } else {
    if (!valid) return A(0);
    for (int kh = 0; kh < kH; ++kh) {
      const int ih = ih0 + kh * g.dilH;
      if (ih < 0 || ih >= g.inH) continue;
      for (int kw = 0; kw < kW; ++kw) {
        const int iw = iw0 + kw * g.dilW;
        if (iw >= 0 && iw < g.inW) take(load(x + ih * rowStride + iw * colStride));
      }
    }
  }
  if constexpr (kMax || std::is_integral_v<A>) {
    return best;  // 0 without a tap
  } else {
    int insideH = 0, insideW = 0, paddedH = 0, paddedW = 0;  // taps per axis inside X / the padded extent
    for (int k = 0; k < kH; ++k) {
      const int ih = ih0 + k * g.dilH;
      insideH += ih >= 0 && ih < g.inH;
      paddedH += ih >= -g.padH && ih < g.inH + g.padEndH;
    }
    for (int k = 0; k < kW; ++k) {
      const int iw = iw0 + k * g.dilW;
      insideW += iw >= 0 && iw < g.inW;
      paddedW += iw >= -g.padW && iw < g.inW + g.padEndW;
    }
    const int count = g.includePad ? paddedH * paddedW : insideH * insideW;
    return count > 0 ? sum / static_cast<A>(count) : A(0);
  }
}

constexpr int kPlainOutputs = 4;  //!< outputs per thread of pool2dPlainKernel (256 apart)

//! Plain X and Y, 2-D: a block makes 4 x 256 consecutive outputs in Y's order, 4 per thread, 256
//! apart (consecutive threads along W, so loads coalesce), their taps' loads issued together;
//! 32-bit indices and multiply-shift divisions. The generic kernel's 64-bit div/mod per output
//! made ResNet-26's stem MaxPool (batch 128) ~6x slower than its memory traffic.
template <bool kMax, int kK, typename T>
__global__ void __launch_bounds__(256, 4) pool2dPlainKernel(const T* __restrict__ x, T* __restrict__ y, uint32_t total, Pool2d g,
                                                         cuda::FastDiv divW, cuda::FastDiv divH) {
  constexpr uint32_t kSpan = 256 * kPlainOutputs;
  for (uint32_t base = blockIdx.x * kSpan; base < total; base += gridDim.x * kSpan) {
    Acc<T> r[kPlainOutputs];
#pragma unroll
    for (int u = 0; u < kPlainOutputs; ++u) {
      const uint32_t i = base + u * 256 + threadIdx.x, q = divW.div(i), plane = divH.div(q);
      const int ow = static_cast<int>(i - q * divW.d), oh = static_cast<int>(q - plane * divH.d);
      const T* xp = x + int64_t(plane) * g.inH * g.inW;
      r[u] = poolWindow<kMax, kK>(xp, g.inW, 1, oh * g.strideH - g.padH, ow * g.strideW - g.padW, g, i < total);
    }
#pragma unroll
    for (int u = 0; u < kPlainOutputs; ++u) {
      const uint32_t i = base + u * 256 + threadIdx.x;
      if (i < total) y[i] = store<T>(r[u]);
    }
  }
}

//! 2-D pool between any of the plain and channels-last layouts: a block makes a tile of 32
//! channels x 32 output columns of one output row (n, oh). Threads run along W for a plain X and
//! along C for a channels-last X (so that loads coalesce); when Y's layout differs, the tile
//! turns through shared memory so that stores coalesce too (a plain X into a channels-last Y,
//! ResNet-26's stem MaxPool after its Mish, wrote 2-byte elements C apart before).
template <bool kMax, int kK, typename T>
__global__ void __launch_bounds__(256, 4) pool2dTileKernel(const T* __restrict__ x, T* __restrict__ y, Pool2d g, int owTiles,
                                                        int cTiles, bool inLast, bool outLast) {
  using A = Acc<T>;
  __shared__ A tile[32][33];  // [channel][column]
  int b = blockIdx.x;
  const int tileC = b % cTiles;
  b /= cTiles;
  const int tileW = b % owTiles;
  b /= owTiles;
  const int oh = b % g.outH, n = b / g.outH, c0 = tileC * 32, ow0 = tileW * 32;
  const int tx = threadIdx.x, ty = threadIdx.y, C = g.channels;
  const int64_t plane = int64_t(g.inH) * g.inW;
  A v[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int lc = inLast ? tx : ty + 8 * k, lw = inLast ? ty + 8 * k : tx;  // within the tile
    const int c = c0 + lc, ow = ow0 + lw;
    const T* xp = inLast ? x + n * plane * C + c : x + (int64_t(n) * C + c) * plane;
    v[k] = poolWindow<kMax, kK>(xp, inLast ? g.inW * C : g.inW, inLast ? C : 1, oh * g.strideH - g.padH, ow * g.strideW - g.padW, g,
                                c < C && ow < g.outW);
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int lc = inLast ? tx : ty + 8 * k, lw = inLast ? ty + 8 * k : tx;
    if (inLast != outLast) tile[lc][lw] = v[k];
  }
  if (inLast != outLast) __syncthreads();
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int lc = outLast ? tx : ty + 8 * k, lw = outLast ? ty + 8 * k : tx;
    const int c = c0 + lc, ow = ow0 + lw;
    if (c >= C || ow >= g.outW) continue;
    const int64_t at = outLast ? ((int64_t(n) * g.outH + oh) * g.outW + ow) * C + c : ((int64_t(n) * C + c) * g.outH + oh) * g.outW + ow;
    y[at] = store<T>(inLast != outLast ? tile[lc][lw] : v[k]);
  }
}

//! LpPool: (sum over the window of |x|^p)^(1/p), padding taps left out (as the reference).
template <typename T>
__global__ void lpPoolKernel(const T* __restrict__ x, T* __restrict__ y, int64_t total, PoolGeom g, float p) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const WindowPos w = windowOf(g, i);  // plain layouts (LpPool never takes part in the layout pass)
    const T* xp = x + w.inBase;
    float sum = 0.f;
    forTaps(g, w, [&](int64_t id, int64_t ih, int64_t iw) {
      sum += powf(fabsf(toF(__ldg(xp + (id * g.in[1] + ih) * g.in[2] + iw))), p);
    });
    y[i] = fromF<T>(powf(sum, 1.f / p));
  }
}

//! LRN across channels: y = x / (bias + alpha / size * sum of x^2 over the channel window)^beta.
struct LrnParams {
  int64_t total, channels, inner, before, after;
  float alphaOverSize, beta, bias;
};

template <typename T>
__global__ void lrnKernel(const T* __restrict__ x, T* __restrict__ y, LrnParams p) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < p.total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t s = i % p.inner, c = (i / p.inner) % p.channels, n = i / (p.inner * p.channels);
    const int64_t lo = c - p.before < 0 ? 0 : c - p.before;
    const int64_t hi = c + p.after > p.channels - 1 ? p.channels - 1 : c + p.after;
    float sq = 0.f;
    for (int64_t k = lo; k <= hi; ++k) {
      const float v = toF(__ldg(x + (n * p.channels + k) * p.inner + s));
      sq += v * v;
    }
    y[i] = fromF<T>(toF(__ldg(x + i)) / powf(p.bias + p.alphaOverSize * sq, p.beta));
  }
}

// ---- host side ----

struct PoolState : KernelState {
  PoolGeom g{};
  int64_t total = 0;  // outputs
  // Vectorized channels-last path (poolChannelsLast8Kernel): 0 = not taken, else its index width
  // (32 or 64); vecTotal = threads = N * outH * outW * C / 8.
  int vecBits = 0;
  int64_t vecTotal = 0;
  // 2-D MaxPool / AveragePool in 32 bits (pool2dPlainKernel, pool2dTileKernel), when `fits`.
  bool fits2d = false;
  Pool2d g2{};
  int owTiles = 0, cTiles = 0;
  int64_t tileBlocks = 0;
};

//! Whether the 2-D window pool of X `x` (geometry `g`) fits pool2dPlainKernel / pool2dTileKernel:
//! X, Y, every window coordinate and the tile count in 32 bits.
bool fits2d(const LayerDesc& l, const PoolGeom& g, const Dims& x, int64_t total, int64_t tileBlocks) {
  if ((l.op != "MaxPool" && l.op != "AveragePool") || x.size() != 4) return false;
  const int64_t limit = int64_t(INT32_MAX) - int64_t(cuda::gridFor(total)) * 256;
  bool fits = total <= limit && volume(x) <= limit && tileBlocks <= limit;
  for (int a = 1; a < 3; ++a)
    fits = fits && g.out[a] * g.stride[a] + g.kernel[a] * g.dil[a] + g.padBegin[a] + g.padEnd[a] + g.in[a] <= limit;
  return fits;
}

//! Whether the windowed pool `l` (geometry `g`) can take poolChannelsLast8Kernel (alignment is
//! checked at execute), and with which index width: 0 (no), 32 or 64.
int vecPoolBits(const LayerDesc& l, const PoolGeom& g, int64_t batch) {
  const DataType t = l.inputs[0].type;
  if ((l.op != "MaxPool" && l.op != "AveragePool") || l.outputs.size() != 1) return 0;
  if (!g.inLast || !g.outLast || (t != DataType::kHALF && t != DataType::kBF16) || g.channels % 8 != 0) return 0;
  if (g.in[0] != 1 || g.out[0] != 1 || g.kernel[0] != 1) return 0;  // 2-D pools only
  // 32-bit: the thread count plus a grid stride, X's uint4 count and every window coordinate fit.
  const int64_t c8 = g.channels / 8, total = batch * g.outSize * c8;
  const int64_t limit = int64_t(INT32_MAX) - int64_t(cuda::gridFor(total)) * 256;
  bool fits = total <= limit && batch * g.inSize * c8 <= limit;
  for (int a = 1; a < 3; ++a)
    fits = fits && g.out[a] * g.stride[a] + g.kernel[a] * g.dil[a] + g.padBegin[a] + g.padEnd[a] + g.in[a] <= limit;
  return fits ? 32 : 64;
}

template <typename Index>
VecPoolGeom<Index> toVecGeom(const PoolGeom& g) {
  return VecPoolGeom<Index>{Index(g.in[1]),     Index(g.in[2]),     Index(g.out[1]),     Index(g.out[2]),
                            Index(g.kernel[1]), Index(g.kernel[2]), Index(g.stride[1]),  Index(g.stride[2]),
                            Index(g.dil[1]),    Index(g.dil[2]),    Index(g.padBegin[1]), Index(g.padBegin[2]),
                            Index(g.padEnd[1]), Index(g.padEnd[2]), Index(g.channels / 8)};
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

class WindowPoolKernel : public Kernel {
 public:
  explicit WindowPoolKernel(const LayerDesc& l)
      : max_(l.op == "MaxPool"), lp_(l.op == "LpPool"), colMajor_(l.attrs->getInt("storage_order", 0) == 1),
        includePad_(l.attrs->getInt("count_include_pad", 0) == 1), p_(static_cast<float>(l.attrs->getInt("p", 2))) {}

  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const Dims& x = l.inputs[0].dims;
    auto s = std::make_unique<PoolState>();
    s->g = toGeom(toWindow3(poolWindow(l, x, l.attrs->getInts("kernel_shape"))));
    s->g.inLast = inLayoutBlock(l) == kNhwcBlock;
    s->g.outLast = outLayoutBlock(l) == kNhwcBlock;
    s->g.channels = x[1];
    s->total = x[0] * x[1] * s->g.outSize;
    s->vecBits = vecPoolBits(l, s->g, x[0]);
    s->vecTotal = s->total / 8;
    const PoolGeom& g = s->g;
    s->owTiles = static_cast<int>(std::min<int64_t>((g.out[2] + 31) / 32, INT32_MAX));
    s->cTiles = static_cast<int>(std::min<int64_t>((x[1] + 31) / 32, INT32_MAX));
    s->tileBlocks = x[0] * g.out[1] * s->owTiles * s->cTiles;
    s->fits2d = fits2d(l, g, x, s->total, s->tileBlocks);
    if (s->fits2d)
      s->g2 = Pool2d{int(g.in[1]),     int(g.in[2]),     int(g.out[1]),    int(g.out[2]),      int(g.kernel[1]),
                     int(g.kernel[2]), int(g.stride[1]), int(g.stride[2]), int(g.dil[1]),      int(g.dil[2]),
                     int(g.padBegin[1]), int(g.padBegin[2]), int(g.padEnd[1]), int(g.padEnd[2]), int(x[1]), includePad_};
    state = std::move(s);
    return 0;
  }

  void execute(const KernelIO& io, KernelState* state) const override {
    const auto* s = static_cast<const PoolState*>(state);
    if (s->total == 0) return;
    cudaStream_t stream = cuda::streamOf(io);
    const bool noIndices = io.out.size() < 2 || io.out[1].data == nullptr;
    if (s->vecBits != 0 && noIndices && aligned16(io.in[0].data) && aligned16(io.out[0].data)) {
      // vecBits != 0 only for the 2-byte floats (reshape)
      cuda::dispatchCudaType<typeBit(DataType::kHALF) | typeBit(DataType::kBF16)>(
          io.in[0].type, [&](auto tag) { launchVec<decltype(tag)>(io, *s, stream); }, "CUDA pooling (channels-last)");
      KILN_CUDA_CHECK_LAUNCH();
      return;
    }
    if (s->fits2d && noIndices) {
      dispatchPoolType(io.in[0].type, max_, [&](auto tag) {
        using T = decltype(tag);
        if (max_) launch2d<true, T>(io, *s, stream);
        else if constexpr (!std::is_integral_v<T>) launch2d<false, T>(io, *s, stream);
      });
      KILN_CUDA_CHECK_LAUNCH();
      return;
    }
    const unsigned grid = cuda::gridFor(s->total);
    dispatchPoolType(io.in[0].type, max_, [&](auto tag) {
      using T = decltype(tag);
      if (max_) {
        int64_t* indices = io.out.size() > 1 ? io.out[1].as<int64_t>() : nullptr;
        maxPoolKernel<T><<<grid, 256, 0, stream>>>(io.in[0].as<T>(), io.out[0].as<T>(), indices, s->total, s->g, colMajor_);
      } else if constexpr (!std::is_integral_v<T>) {
        if (lp_) lpPoolKernel<T><<<grid, 256, 0, stream>>>(io.in[0].as<T>(), io.out[0].as<T>(), s->total, s->g, p_);
        else averagePoolKernel<T><<<grid, 256, 0, stream>>>(io.in[0].as<T>(), io.out[0].as<T>(), s->total, s->g, includePad_);
      }
    });
    KILN_CUDA_CHECK_LAUNCH();
  }

 private:
  //! pool2dPlainKernel (plain X and Y) or pool2dTileKernel (any other layouts); a 3x3 window takes
  //! the unrolled instances.
  template <bool kMax, typename T>
  void launch2d(const KernelIO& io, const PoolState& s, cudaStream_t stream) const {
    const T* x = io.in[0].as<T>();
    T* y = io.out[0].as<T>();
    const bool k3 = s.g2.kH == 3 && s.g2.kW == 3;
    if (!s.g.inLast && !s.g.outLast) {
      const unsigned grid = cuda::gridFor((s.total + kPlainOutputs - 1) / kPlainOutputs);
      const auto total = static_cast<uint32_t>(s.total);
      const cuda::FastDiv divW(static_cast<uint32_t>(s.g2.outW)), divH(static_cast<uint32_t>(s.g2.outH));
      if (k3) pool2dPlainKernel<kMax, 3, T><<<grid, 256, 0, stream>>>(x, y, total, s.g2, divW, divH);
      else pool2dPlainKernel<kMax, 0, T><<<grid, 256, 0, stream>>>(x, y, total, s.g2, divW, divH);
      return;
    }
    const auto blocks = static_cast<unsigned>(s.tileBlocks);
    const dim3 block(32, 8);
    if (k3) pool2dTileKernel<kMax, 3, T><<<blocks, block, 0, stream>>>(x, y, s.g2, s.owTiles, s.cTiles, s.g.inLast, s.g.outLast);
    else pool2dTileKernel<kMax, 0, T><<<blocks, block, 0, stream>>>(x, y, s.g2, s.owTiles, s.cTiles, s.g.inLast, s.g.outLast);
  }

  //! poolChannelsLast8Kernel for element type T (vecBits picks the index width, a 3x3 window the
  //! unrolled instance).
  template <typename T>
  void launchVec(const KernelIO& io, const PoolState& s, cudaStream_t stream) const {
    const auto* x = static_cast<const uint4*>(io.in[0].data);
    auto* y = static_cast<uint4*>(io.out[0].data);
    const unsigned grid = cuda::gridFor(s.vecTotal);
    const bool k3 = s.g.kernel[1] == 3 && s.g.kernel[2] == 3;
    auto launch = [&](auto indexTag) {
      using Index = decltype(indexTag);
      const VecPoolGeom<Index> g = toVecGeom<Index>(s.g);
      const Index total = static_cast<Index>(s.vecTotal);
      if (max_) {
        if (k3) poolChannelsLast8Kernel<true, 3, T, Index><<<grid, 256, 0, stream>>>(x, y, total, g, false);
        else poolChannelsLast8Kernel<true, 0, T, Index><<<grid, 256, 0, stream>>>(x, y, total, g, false);
      } else {
        if (k3) poolChannelsLast8Kernel<false, 3, T, Index><<<grid, 256, 0, stream>>>(x, y, total, g, includePad_);
        else poolChannelsLast8Kernel<false, 0, T, Index><<<grid, 256, 0, stream>>>(x, y, total, g, includePad_);
      }
    };
    if (s.vecBits == 32) launch(int32_t{});
    else launch(int64_t{});
  }

  bool max_, lp_, colMajor_, includePad_;
  float p_;
};

class LrnKernel : public Kernel {
 public:
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const Dims& x = l.inputs[0].dims;
    LrnParams& p = cuda::makeState<LrnParams>(state);
    const int64_t size = l.attrs->getInt("size", 1);
    p.total = volume(x);
    p.channels = x[1];
    p.inner = x[0] * x[1] == 0 ? 0 : p.total / (x[0] * x[1]);
    p.before = (size - 1) / 2;
    p.after = size - 1 - p.before;
    p.alphaOverSize = l.attrs->getFloat("alpha", 1e-4f) / static_cast<float>(size);
    p.beta = l.attrs->getFloat("beta", 0.75f);
    p.bias = l.attrs->getFloat("bias", 1.0f);
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    const LrnParams& p = cuda::paramsOf<LrnParams>(state);
    if (p.total == 0) return;
    dispatchPoolType(io.in[0].type, false, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (!std::is_integral_v<T>)
        lrnKernel<T><<<cuda::gridFor(p.total), 256, 0, cuda::streamOf(io)>>>(io.in[0].as<T>(), io.out[0].as<T>(), p);
    });
    KILN_CUDA_CHECK_LAUNCH();
  }
};

bool poolTypeOk(const LayerDesc& l, bool isMax) {
  if (l.inputs.size() != 1 || !l.present(0)) return false;
  const DataType t = l.inputs[0].type;
  if (!(isFloatType(t) || (isMax && isPoolInt(t)))) return false;
  const Dims& x = l.inputs[0].dims;
  return x.size() >= 3 && x.size() <= 5;
}

//! Layout attributes: plain, or (MaxPool / AveragePool / global pools with one output, 4-D) nhwc
//! X and, for window pools, nhwc Y. Global pools always write plain [N, C, 1, 1].
bool layoutsOk(const LayerDesc& l, bool windowed) {
  if (hasPlainLayouts(l)) return true;
  if (l.inputs[0].dims.size() != 4 || l.outputs.size() != 1 || l.op == "LpPool" || l.op == "GlobalLpPool") return false;
  for (const int64_t b : {inLayoutBlock(l), outLayoutBlock(l)}) {
    if (b != 1 && b != kNhwcBlock) return false;
  }
  return windowed || outLayoutBlock(l) == 1;
}

bool supportsWindowPool(const LayerDesc& l) {
  const bool isMax = l.op == "MaxPool";
  if (!poolTypeOk(l, isMax) || !l.attrs->has("kernel_shape")) return false;
  if (l.outputs.size() > (isMax ? 2u : 1u)) return false;
  return layoutsOk(l, true);
}

bool supportsLrn(const LayerDesc& l) { return poolTypeOk(l, false); }
std::unique_ptr<Kernel> createLrn(const LayerDesc&) { return std::make_unique<LrnKernel>(); }

std::unique_ptr<Kernel> createWindowPool(const LayerDesc& l) { return std::make_unique<WindowPoolKernel>(l); }

}  // namespace

namespace cuda {
KernelFactory windowPoolCuda() { return {supportsWindowPool, createWindowPool}; }  // Max/Average/LpPool
KernelFactory lrnCuda() { return {supportsLrn, createLrn}; }
}  // namespace cuda

}  // namespace kiln
