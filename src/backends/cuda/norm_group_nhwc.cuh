// Device helpers of the channels-last GroupNormalization / InstanceNormalization kernels
// (norm_group_nhwc.cu: statistics + apply passes and the cooperative one-pass kernel;
// norm_group_nhwc_cluster.cu: the thread-block-cluster kernel). A thread holds the same VEC
// channels of every pixel it visits; per-group sums meet in shared memory.
#pragma once
#include "backends/cuda/norm_common.cuh"
#include "backends/cuda/norm_group_nhwc.h"

namespace kiln::cuda::gn_nhwc {

constexpr int kThreads = 256;
constexpr int kMaxGroups = 2048;  // per-group sums in shared memory (InstanceNorm: one per channel)

template <typename T, int VEC, bool kVector>
__device__ __forceinline__ void loadVec(const T* p, float (&v)[VEC]) {
  if constexpr (kVector) {
    loadFloats<T, VEC>(p, v);
  } else {
#pragma unroll
    for (int e = 0; e < VEC; ++e) v[e] = toFloat(p[e]);
  }
}

template <typename T, int VEC, bool kVector>
__device__ __forceinline__ void storeVec(T* p, const float (&v)[VEC]) {
  if constexpr (kVector) {
    storeFloats<T, VEC>(p, v);
  } else {
#pragma unroll
    for (int e = 0; e < VEC; ++e) p[e] = fromFloat<T>(v[e]);
  }
}

//! Adds a thread's per-channel sums (s, ss over its pixels, channels c0..c0+VEC-1) into the
//! block's per-group shared sums. Runs of channels of one group add up in registers first; lanes
//! that hold the same group add up by warp shuffles, so one lane per group and warp does the two
//! shared-memory adds. Many threads adding into one shared word serialize: PoolFormer's
//! GroupNorm(1) at 320 channels (240 threads, a partial last warp) took 29 us a layer at batch 1 on
//! the H200 with every thread adding, against ~10 us for the other stages that reduced by warp.
template <int VEC>
__device__ __forceinline__ void addThreadSums(const float (&s)[VEC], const float (&ss)[VEC], int64_t c0, int64_t cpg,
                                              int64_t groups, int tid, int nthreads, float* sSum, float* sSq) {
  int64_t g = c0 / cpg;
  float rs = 0.f, rss = 0.f;
#pragma unroll
  for (int e = 0; e < VEC; ++e) {
    const int64_t ge = (c0 + e) / cpg;
    if (ge != g) {
      atomicAdd(&sSum[g], rs);
      atomicAdd(&sSq[g], rss);
      g = ge, rs = 0.f, rss = 0.f;
    }
    rs += s[e];
    rss += ss[e];
  }
  // The warp's existing lanes (a block of 40 x 6 threads ends in a warp of 16).
  const int lane = tid % 32, live = min(32, nthreads - (tid - lane));
  const unsigned mask = live == 32 ? 0xffffffffu : (1u << live) - 1u;
  if (groups == 1) {  // every lane the same group: a tree over the live lanes
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float a = __shfl_down_sync(mask, rs, o), b = __shfl_down_sync(mask, rss, o);
      if (lane + o < live) rs += a, rss += b;
    }
    if (lane == 0) {
      atomicAdd(&sSum[0], rs);
      atomicAdd(&sSq[0], rss);
    }
    return;
  }
  // A group spans `run` consecutive lanes (cpg a multiple of VEC, a power of two up to 32 that
  // divides the lanes per pixel): aligned runs, all live, reduce by xor shuffles.
  const int64_t run = cpg % VEC == 0 ? cpg / VEC : 0;
  if (run > 1 && run <= 32 && (run & (run - 1)) == 0 && int64_t(blockDim.x) % run == 0) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      if (o >= run) continue;
      rs += __shfl_xor_sync(mask, rs, o);
      rss += __shfl_xor_sync(mask, rss, o);
    }
    if (lane % run != 0) return;
  }
  atomicAdd(&sSum[g], rs);
  atomicAdd(&sSq[g], rss);
}

//! s += v - shift, ss += (v - shift)^2 per channel.
template <int VEC>
__device__ __forceinline__ void addShifted(const float (&v)[VEC], const float (&shift)[VEC], float (&s)[VEC], float (&ss)[VEC]) {
#pragma unroll
  for (int e = 0; e < VEC; ++e) {
    const float d = v[e] - shift[e];
    s[e] += d;
    ss[e] = fmaf(d, d, ss[e]);
  }
}

//! Channels c0..c0+VEC-1's y = (x - mean) * a + b.
template <typename T, int VEC>
__device__ __forceinline__ void channelAffine(const GroupNormNhwcParams& p, int64_t c0, const float* sMean,
                                              const float* sInv, float (&mean)[VEC], float (&a)[VEC], float (&b)[VEC]) {
  const int64_t cpg = p.c / p.groups;
  const T* scale = static_cast<const T*>(p.scale);
  const T* bias = static_cast<const T*>(p.bias);
#pragma unroll
  for (int e = 0; e < VEC; ++e) {
    const int64_t c = c0 + e, g = c / cpg, param = p.perGroupAffine ? g : c;
    mean[e] = sMean[g];
    a[e] = toFloat(scale[param]) * sInv[g];
    b[e] = bias ? toFloat(bias[param]) : 0.f;
  }
}

}  // namespace kiln::cuda::gn_nhwc
