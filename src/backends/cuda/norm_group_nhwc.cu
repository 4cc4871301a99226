// CUDA kernels: GroupNormalization / InstanceNormalization of channels-last tensors [N, H, W, C]
// (norm_group_nhwc.h). A group is a run of C/G channels in every pixel, so the NCHW kernels'
// rows do not exist here; instead a block takes a chunk of one image's pixels, all channels, with
// tx threads across a pixel's channel vectors and ty pixels at a time, so each thread always
// holds the same channels (their scale, bias, group). Two passes over the same grid:
//   1. statistics: each thread sums (x - K) and (x - K)^2 of its channels over its pixels in
//      float32, K = the group's first element (the shift that keeps the one-pass variance from
//      cancelling when the mean is large against the spread, as norm_group_split.cu), then the
//      block adds its threads' sums per group in shared memory into partials[image][chunk][group];
//   2. apply: each block adds up its image's partials per group (mean = K + S/n,
//      var = SS/n - (S/n)^2), then normalizes its pixels with the channels' scale and bias, the
//      fused residual (laid out like Y) and activation. It reads K from the workspace and each element before writing it, so Y
//      may be written over X.
#include <algorithm>

#include <cooperative_groups.h>

#include "backends/cuda/activation_math.cuh"
#include "backends/cuda/cuda_util.h"
#include "backends/cuda/norm_common.cuh"
#include "backends/cuda/norm_group_nhwc.h"
#include "backends/cuda/norm_group_nhwc.cuh"
#include "core/type_dispatch.h"

namespace kiln::cuda {

namespace {

using namespace gn_nhwc;

//! The block's per-group sums (from every thread's s, ss) to partials[img][chunk][group].
template <int VEC>
__device__ __forceinline__ void storeBlockSums(const GroupNormNhwcParams& p, const float (&s)[VEC], const float (&ss)[VEC],
                                               int64_t c0, int tid, int nthreads, float* sSum, float* sSq, float2* partials) {
  addThreadSums<VEC>(s, ss, c0, p.c / p.groups, p.groups, tid, nthreads, sSum, sSq);
  __syncthreads();
  float2* out = partials + (blockIdx.y * p.chunks + blockIdx.x) * p.groups;
  for (int64_t k = tid; k < p.groups; k += nthreads) out[k] = make_float2(sSum[k], sSq[k]);
}

//! mean and 1/stddev per group of one image into sMean / sInv from its `chunks` blocks' partial
//! (sum, sum of squares) of x - shift, laid out [chunk][group]. All threads call it.
__device__ __forceinline__ void finishGroupStats(const float2* part, const float* shifts, int64_t chunks, int64_t groups,
                                                 float invN, float eps, int tid, int nthreads, float* sMean, float* sInv) {
  auto finish = [&](int64_t g, float s, float ss) {
    const float dm = s * invN;
    sMean[g] = shifts[g] + dm;
    sInv[g] = rsqrtf(fmaxf(ss * invN - dm * dm, 0.f) + eps);
  };
  if (chunks > 8) {
    // Many chunks (small batches: 98 per image for ResNet-50-GN's 56x56 stage at batch 1): a warp
    // per group, its lanes over the chunks. A thread walking 98 partials one dependent load after
    // another kept every block waiting ~20 us before its first pixel.
    const int lane = tid % 32, warp = tid / 32, warps = nthreads / 32;  // a partial last warp sits out
    for (int64_t g = warp; warp < warps && g < groups; g += warps) {
      float s = 0.f, ss = 0.f;
      for (int64_t k = lane; k < chunks; k += 32) {
        const float2 q = part[k * groups + g];
        s += q.x;
        ss += q.y;
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) {
        s += __shfl_xor_sync(0xffffffffu, s, o);
        ss += __shfl_xor_sync(0xffffffffu, ss, o);
      }
      if (lane == 0) finish(g, s, ss);
    }
  } else {
    for (int64_t g = tid; g < groups; g += nthreads) {
      float s = 0.f, ss = 0.f;
      for (int64_t k = 0; k < chunks; ++k) {
        const float2 q = part[k * groups + g];
        s += q.x;
        ss += q.y;
      }
      finish(g, s, ss);
    }
  }
}

template <typename T, int VEC, bool kVector>
__global__ void __launch_bounds__(kThreads) nhwcStatsKernel(const GroupNormNhwcParams p, float2* partials) {
  __shared__ float sSum[kMaxGroups], sSq[kMaxGroups];
  const int tid = threadIdx.y * blockDim.x + threadIdx.x, nthreads = blockDim.x * blockDim.y;
  for (int64_t g = tid; g < p.groups; g += nthreads) sSum[g] = sSq[g] = 0.f;
  __syncthreads();
  const int64_t img = blockIdx.y, chunk = blockIdx.x, cpg = p.c / p.groups;
  const T* x = static_cast<const T*>(p.x) + img * p.hw * p.c;
  const int64_t c0 = static_cast<int64_t>(threadIdx.x) * VEC;
  float shift[VEC], s[VEC], ss[VEC];
#pragma unroll
  for (int e = 0; e < VEC; ++e) {
    shift[e] = toFloat(x[(c0 + e) / cpg * cpg]);  // the group's first element (pixel 0)
    s[e] = ss[e] = 0.f;
  }
  const int64_t first = chunk * p.pixels, last = min(first + p.pixels, p.hw);
  for (int64_t px = first + threadIdx.y; px < last; px += blockDim.y) {
    float v[VEC];
    loadVec<T, VEC, kVector>(x + px * p.c + c0, v);
    addShifted<VEC>(v, shift, s, ss);
  }
  storeBlockSums<VEC>(p, s, ss, c0, tid, nthreads, sSum, sSq, partials);
  if (chunk == 0) {
    float* shifts = reinterpret_cast<float*>(partials + p.n * p.chunks * p.groups) + img * p.groups;
    for (int64_t k = tid; k < p.groups; k += nthreads) shifts[k] = toFloat(x[k * cpg]);
  }
}

template <typename T, int VEC, bool kVector>
__global__ void __launch_bounds__(kThreads) nhwcApplyKernel(const GroupNormNhwcParams p, const float2* partials) {
  __shared__ float sMean[kMaxGroups], sInv[kMaxGroups];
  const int tid = threadIdx.y * blockDim.x + threadIdx.x, nthreads = blockDim.x * blockDim.y;
  const int64_t img = blockIdx.y, chunk = blockIdx.x, cpg = p.c / p.groups;
  const T* x = static_cast<const T*>(p.x) + img * p.hw * p.c;
  T* y = static_cast<T*>(p.y) + img * p.hw * p.c;
  const float invN = 1.f / static_cast<float>(p.hw * cpg);
  const float2* part = partials + img * p.chunks * p.groups;
  // The statistics pass's shifts: X's first pixel may already hold Y here (Y over X in place).
  const float* shifts = reinterpret_cast<const float*>(partials + p.n * p.chunks * p.groups) + img * p.groups;
  finishGroupStats(part, shifts, p.chunks, p.groups, invN, p.eps, tid, nthreads, sMean, sInv);
  __syncthreads();
  const int64_t c0 = static_cast<int64_t>(threadIdx.x) * VEC;
  float mean[VEC], a[VEC], b[VEC];
  channelAffine<T, VEC>(p, c0, sMean, sInv, mean, a, b);
  const ActKind act = static_cast<ActKind>(p.act);
  const T* res = p.residual ? static_cast<const T*>(p.residual) + img * p.hw * p.c : nullptr;
  const int64_t first = chunk * p.pixels, last = min(first + p.pixels, p.hw);
  for (int64_t px = first + threadIdx.y; px < last; px += blockDim.y) {
    float v[VEC], r[VEC];
    loadVec<T, VEC, kVector>(x + px * p.c + c0, v);
    if (res) loadVec<T, VEC, kVector>(res + px * p.c + c0, r);
#pragma unroll
    for (int e = 0; e < VEC; ++e) v[e] = (v[e] - mean[e]) * a[e] + b[e] + (res ? r[e] : 0.f);
    applyActivations<VEC>(act, p.actAlpha, p.actBeta, v);
    storeVec<T, VEC, kVector>(y + px * p.c + c0, v);
  }
}

// One launch for small tensors: a cooperative grid, every block resident at once. Each thread
// loads its P pixel vectors (and the residual's) into registers once; the blocks' sums go to the
// workspace; the grid synchronizes; each block adds up its image's partials and normalizes the
// values it holds. X is read once and Y written once, in one launch instead of two latency-bound
// ones (ResNet-50-GN at batch 1: ~1.6 MB activations, two kernels of 8-18 us each under ncu). Every
// read of X (the shifts too) precedes the grid barrier, so Y may be written over X.
template <typename T, int VEC, int P, bool kVector>
__global__ void __launch_bounds__(kThreads) nhwcOnePassKernel(const GroupNormNhwcParams p, float2* partials) {
  __shared__ float sSum[kMaxGroups], sSq[kMaxGroups], sShift[kMaxGroups];
  const int tid = threadIdx.y * blockDim.x + threadIdx.x, nthreads = blockDim.x * blockDim.y;
  const int64_t img = blockIdx.y, chunk = blockIdx.x, cpg = p.c / p.groups;
  const T* x = static_cast<const T*>(p.x) + img * p.hw * p.c;
  const T* res = p.residual ? static_cast<const T*>(p.residual) + img * p.hw * p.c : nullptr;
  const int64_t c0 = static_cast<int64_t>(threadIdx.x) * VEC, first = chunk * p.pixels + threadIdx.y;
  float v[P][VEC], r[P][VEC];
#pragma unroll
  for (int k = 0; k < P; ++k) {  // every load issued before the first use
    const int64_t px = first + k * static_cast<int64_t>(blockDim.y);
    if (px < p.hw) {
      loadVec<T, VEC, kVector>(x + px * p.c + c0, v[k]);
      if (res) loadVec<T, VEC, kVector>(res + px * p.c + c0, r[k]);
    }
  }
  for (int64_t g = tid; g < p.groups; g += nthreads) {
    sSum[g] = sSq[g] = 0.f;
    sShift[g] = toFloat(x[g * cpg]);  // the group's first element (pixel 0)
  }
  __syncthreads();
  float shift[VEC], s[VEC], ss[VEC];
#pragma unroll
  for (int e = 0; e < VEC; ++e) {
    shift[e] = sShift[(c0 + e) / cpg];
    s[e] = ss[e] = 0.f;
  }
#pragma unroll
  for (int k = 0; k < P; ++k) {
    if (first + k * static_cast<int64_t>(blockDim.y) >= p.hw) break;
    addShifted<VEC>(v[k], shift, s, ss);
  }
  storeBlockSums<VEC>(p, s, ss, c0, tid, nthreads, sSum, sSq, partials);
  cooperative_groups::this_grid().sync();  // every block's partials written (and visible)
  // sSum / sSq now take each group's mean and 1/stddev.
  finishGroupStats(partials + img * p.chunks * p.groups, sShift, p.chunks, p.groups, 1.f / static_cast<float>(p.hw * cpg),
                   p.eps, tid, nthreads, sSum, sSq);
  __syncthreads();
  float mean[VEC], a[VEC], b[VEC];
  channelAffine<T, VEC>(p, c0, sSum, sSq, mean, a, b);
  const ActKind act = static_cast<ActKind>(p.act);
  T* y = static_cast<T*>(p.y) + img * p.hw * p.c;
#pragma unroll
  for (int k = 0; k < P; ++k) {
    const int64_t px = first + k * static_cast<int64_t>(blockDim.y);
    if (px >= p.hw) break;
#pragma unroll
    for (int e = 0; e < VEC; ++e) v[k][e] = (v[k][e] - mean[e]) * a[e] + b[e] + (res ? r[k][e] : 0.f);
    applyActivations<VEC>(act, p.actAlpha, p.actBeta, v[k]);
    storeVec<T, VEC, kVector>(y + px * p.c + c0, v[k]);
  }
}

template <typename T, int VEC, int P, bool kVector>
void launchOnePass(const GroupNormNhwcParams& p, float2* partials, cudaStream_t stream) {
  launchCooperative(nhwcOnePassKernel<T, VEC, P, kVector>, dim3(static_cast<unsigned>(p.chunks), static_cast<unsigned>(p.n)),
                    dim3(p.tx, p.ty), stream, p, partials);
}

template <typename T, int VEC, bool kVector>
void launchPasses(const GroupNormNhwcParams& p, float2* partials, cudaStream_t stream) {
  switch (p.perThread) {
    case 1: return launchOnePass<T, VEC, 1, kVector>(p, partials, stream);
    case 2: return launchOnePass<T, VEC, 2, kVector>(p, partials, stream);
    case 4: return launchOnePass<T, VEC, 4, kVector>(p, partials, stream);
    default: break;
  }
  const dim3 grid(static_cast<unsigned>(p.chunks), static_cast<unsigned>(p.n)), block(p.tx, p.ty);
  nhwcStatsKernel<T, VEC, kVector><<<grid, block, 0, stream>>>(p, partials);
  KILN_CUDA_CHECK_LAUNCH();
  nhwcApplyKernel<T, VEC, kVector><<<grid, block, 0, stream>>>(p, partials);
  KILN_CUDA_CHECK_LAUNCH();
}

template <typename T>
void launchTyped(const GroupNormNhwcParams& p, float2* partials, cudaStream_t stream) {
  constexpr int kWide = 16 / sizeof(T);
  if (p.vec != kWide) throw Error("GroupNormalization (nhwc): the plan's vector width does not match the type");
  if (aligned(p.x, 16) && aligned(p.y, 16) && (!p.residual || aligned(p.residual, 16))) launchPasses<T, kWide, true>(p, partials, stream);
  else launchPasses<T, kWide, false>(p, partials, stream);
}

}  // namespace

bool groupNormNhwcFits(int64_t c, int64_t groups, size_t elemSize) {
  const int64_t vec = static_cast<int64_t>(16 / elemSize);
  return c > 0 && groups > 0 && groups <= kMaxGroups && c % groups == 0 && c % vec == 0 && c / vec <= kThreads;
}

void planGroupNormNhwc(GroupNormNhwcParams& p) {
  p.vec = static_cast<int>(16 / elementSize(p.type));
  p.tx = static_cast<int>(p.c / p.vec);
  p.ty = std::max(1, kThreads / std::max(p.tx, 1));
  // Blocks to fill the GPU four times over, each thread at least 4 pixels, at most 256 chunks per
  // image (the apply pass adds every chunk's partials).
  const int64_t wanted = std::max<int64_t>(1, (int64_t(smCount()) * 4 + p.n - 1) / std::max<int64_t>(p.n, 1));
  int64_t pixels = std::max<int64_t>(int64_t(p.ty) * 4, (p.hw + wanted - 1) / wanted);
  pixels = std::max(pixels, (p.hw + 255) / 256);
  pixels = (pixels + p.ty - 1) / p.ty * p.ty;
  p.pixels = pixels;
  p.chunks = std::max<int64_t>(1, (p.hw + pixels - 1) / pixels);
}

namespace {
//! Blocks of nhwcOnePassKernel<T, .., P, ..> one SM holds at once (the lower of the two variants).
template <typename T, int P>
int onePassBlocksPerSm(int threads) {
  constexpr int kWide = 16 / sizeof(T);
  int a = 0, b = 0;
  KILN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&a, nhwcOnePassKernel<T, kWide, P, true>, threads, 0));
  KILN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, nhwcOnePassKernel<T, kWide, P, false>, threads, 0));
  return std::min(a, b);
}
}  // namespace

bool planGroupNormNhwcOnePass(GroupNormNhwcParams& p) {
  planGroupNormNhwc(p);
  p.perThread = 0;
  if (p.n <= 0 || p.hw <= 0) return false;
  const int threads = p.tx * p.ty, sms = smCount();
  int device = 0, coop = 0;
  KILN_CUDA_CHECK(cudaGetDevice(&device));
  KILN_CUDA_CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, device));
  if (!coop) return false;
  // The fewest pixels per thread that keep the grid within two blocks per SM (enough to cover the
  // GPU; more blocks only add partials each block must add up), else within half of what the SMs
  // hold: two such GroupNorms on two streams (aux streams, contexts) can then be resident together.
  constexpr int kPer[] = {1, 2, 4};
  int64_t resident[3];  // blocks of each variant that half the SMs' capacity holds
  dispatchCudaType<kFloatTypes>(p.type, [&](auto t) {
    using T = decltype(t);
    resident[0] = int64_t(onePassBlocksPerSm<T, 1>(threads)) * sms / 2;
    resident[1] = int64_t(onePassBlocksPerSm<T, 2>(threads)) * sms / 2;
    resident[2] = int64_t(onePassBlocksPerSm<T, 4>(threads)) * sms / 2;
  }, "planGroupNormNhwcOnePass");
  int chosen = 0;
  int64_t chosenChunks = 0;
  for (const bool relaxed : {false, true}) {
    for (int i = 0; i < 3 && !chosen; ++i) {
      const int64_t chunks = (p.hw + int64_t(p.ty) * kPer[i] - 1) / (int64_t(p.ty) * kPer[i]);
      const int64_t limit = relaxed ? resident[i] : std::min<int64_t>(2 * int64_t(sms), resident[i]);
      if (chunks <= 65535 && p.n <= 65535 && p.n * chunks <= limit) {
        chosen = kPer[i];
        chosenChunks = chunks;
      }
    }
    if (chosen) break;
  }
  if (!chosen) return false;
  p.perThread = chosen;
  p.pixels = int64_t(p.ty) * chosen;
  p.chunks = chosenChunks;
  return true;
}

void launchGroupNormNhwc(const GroupNormNhwcParams& p, void* workspace, cudaStream_t stream) {
  if (p.n <= 0 || p.hw <= 0 || p.c <= 0) return;
  if (p.cluster) return launchGroupNormNhwcCluster(p, stream);
  auto* partials = static_cast<float2*>(workspace);
  dispatchCudaType<kFloatTypes>(p.type, [&](auto t) { launchTyped<decltype(t)>(p, partials, stream); }, "launchGroupNormNhwc");
}

}  // namespace kiln::cuda
