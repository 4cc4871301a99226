// CUDA kernel: GroupNormalization / InstanceNormalization of a small channels-last image in one
// thread-block cluster (tactic *_fp_cuda_nhwc_cluster; Hopper and later). The blocks of one
// image's cluster each copy a chunk of its pixels (all channels) from global memory into their
// shared memory while summing (x - K) and (x - K)^2 per group (K = the group's first element,
// as the other channels-last kernels), meet at a cluster barrier, add up the cluster's sums
// through distributed shared memory, and normalize the pixels they hold (8 blocks: the portable
// cluster size, so no occupancy query: the first version's cudaOccupancyMaxActiveClusters call, for
// clusters of 16 and 8, killed the process with SIGFPE on the H100). Why: at batch 1 a
// CNN's GroupNorm is latency-bound: the two-kernel plan pays two launches, the cooperative one a
// grid-wide barrier and every block adding up ~100 blocks' partials from global memory (ResNet-50-GN
// at batch 1 ran at 0.80x torch.compile on the H100, its 53 GroupNorms ~8 us each against
// Inductor's ~4 us). A cluster barrier is a hardware barrier over 8 SMs, and the partials are 8
// shared-memory arrays. X is read once and Y written once; every read of X comes before
// the first barrier, so Y may be written over X.
#include <cooperative_groups.h>

#include "backends/cuda/activation_math.cuh"
#include "backends/cuda/cuda_util.h"
#include "backends/cuda/norm_common.cuh"
#include "backends/cuda/norm_group_nhwc.cuh"
#include "core/type_dispatch.h"

namespace kiln::cuda {

namespace {

using namespace gn_nhwc;
namespace cg = cooperative_groups;

constexpr int kClusterThreads = 512;
constexpr int kCluster = 8;  // blocks per image: the portable cluster size
constexpr int kUnroll = 8;  // pixel vectors a thread loads before using them

//! Shared memory: sum, sum of squares, mean, 1/stddev per group, then the block's pixels
//! [pixels][C] in X's type (16 * groups bytes first: the pixel rows stay 16-byte aligned).
size_t clusterSmemBytes(int64_t groups, int64_t pixels, int64_t c, size_t elemSize) {
  return static_cast<size_t>(4 * groups) * sizeof(float) + static_cast<size_t>(pixels * c) * elemSize;
}

//! Pixels px0, px0 + step, ... (kUnroll of them, those below `last`) of `src` at channels c0..:
//! every load issued before any is used (one block per SM has only its own threads to cover the
//! memory latency: its shared memory holds ~100-200 KB of pixels).
template <typename T, int VEC, bool kVector>
__device__ __forceinline__ void loadPixels(const T* src, int64_t px0, int64_t step, int64_t last, int64_t c, int64_t c0,
                                           float (&v)[kUnroll][VEC]) {
#pragma unroll
  for (int u = 0; u < kUnroll; ++u)
    if (px0 + u * step < last) loadVec<T, VEC, kVector>(src + (px0 + u * step) * c + c0, v[u]);
}

template <typename T, int VEC, bool kVector>
__global__ void __launch_bounds__(kClusterThreads) nhwcClusterKernel(const GroupNormNhwcParams p) {
  extern __shared__ __align__(16) unsigned char smem[];
  cg::cluster_group cluster = cg::this_cluster();
  const int64_t groups = p.groups, cpg = p.c / groups;
  float* sSum = reinterpret_cast<float*>(smem);
  float* sSq = sSum + groups;
  float* sMean = sSq + groups;
  float* sInv = sMean + groups;
  T* held = reinterpret_cast<T*>(sInv + groups);
  const int tid = threadIdx.y * blockDim.x + threadIdx.x, nthreads = blockDim.x * blockDim.y;
  const int64_t img = blockIdx.y, c0 = static_cast<int64_t>(threadIdx.x) * VEC;
  const T* x = static_cast<const T*>(p.x) + img * p.hw * p.c;
  for (int64_t g = tid; g < groups; g += nthreads) sSum[g] = sSq[g] = 0.f;
  float shift[VEC], s[VEC], ss[VEC];
#pragma unroll
  for (int e = 0; e < VEC; ++e) {
    shift[e] = toFloat(x[(c0 + e) / cpg * cpg]);  // the group's first element (pixel 0)
    s[e] = ss[e] = 0.f;
  }
  __syncthreads();  // the sums are zero before any thread adds
  const int64_t first = static_cast<int64_t>(cluster.block_rank()) * p.pixels, last = min(first + p.pixels, p.hw);
  const int64_t step = blockDim.y;
  for (int64_t px0 = first + threadIdx.y; px0 < last; px0 += kUnroll * step) {
    float v[kUnroll][VEC];
    loadPixels<T, VEC, kVector>(x, px0, step, last, p.c, c0, v);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t px = px0 + u * step;
      if (px >= last) break;
      storeVec<T, VEC, true>(held + (px - first) * p.c + c0, v[u]);  // exact: v came from T
      addShifted<VEC>(v[u], shift, s, ss);
    }
  }
  addThreadSums<VEC>(s, ss, c0, cpg, groups, tid, nthreads, sSum, sSq);
  cluster.sync();  // every block's group sums are complete and readable cluster-wide
  const unsigned blocks = cluster.num_blocks();
  const float invN = 1.f / static_cast<float>(p.hw * cpg);
  for (int64_t g = tid; g < groups; g += nthreads) {
    float a = 0.f, b = 0.f;
    for (unsigned r = 0; r < blocks; ++r) {
      a += cluster.map_shared_rank(sSum, r)[g];
      b += cluster.map_shared_rank(sSq, r)[g];
    }
    const float dm = a * invN;
    sMean[g] = toFloat(x[g * cpg]) + dm;
    sInv[g] = rsqrtf(fmaxf(b * invN - dm * dm, 0.f) + p.eps);
  }
  // Every block's remote reads are done before any block goes on (its shared memory must outlive
  // them, and pixel 0 of X, read above, may be overwritten below); sMean / sInv are visible.
  cluster.sync();
  float mean[VEC], a[VEC], b[VEC];
  channelAffine<T, VEC>(p, c0, sMean, sInv, mean, a, b);
  const ActKind act = static_cast<ActKind>(p.act);
  const T* res = p.residual ? static_cast<const T*>(p.residual) + img * p.hw * p.c : nullptr;
  T* y = static_cast<T*>(p.y) + img * p.hw * p.c;
  for (int64_t px0 = first + threadIdx.y; px0 < last; px0 += kUnroll * step) {
    float r[kUnroll][VEC];
    if (res) loadPixels<T, VEC, kVector>(res, px0, step, last, p.c, c0, r);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t px = px0 + u * step;
      if (px >= last) break;
      float v[VEC];
      loadVec<T, VEC, true>(held + (px - first) * p.c + c0, v);
#pragma unroll
      for (int e = 0; e < VEC; ++e) v[e] = (v[e] - mean[e]) * a[e] + b[e] + (res ? r[u][e] : 0.f);
      applyActivations<VEC>(act, p.actAlpha, p.actBeta, v);
      storeVec<T, VEC, kVector>(y + px * p.c + c0, v);
    }
  }
}

template <typename T, bool kVector>
auto clusterKernel() {
  return nhwcClusterKernel<T, 16 / sizeof(T), kVector>;
}

cudaLaunchConfig_t clusterConfig(const GroupNormNhwcParams& p, int cluster, size_t smemBytes, cudaStream_t stream,
                                 cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(cluster), static_cast<unsigned>(p.n));
  cfg.blockDim = dim3(static_cast<unsigned>(p.tx), static_cast<unsigned>(p.ty));
  cfg.dynamicSmemBytes = smemBytes;
  cfg.stream = stream;
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = static_cast<unsigned>(cluster);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

//! Opts the kernel in to `optin` bytes of dynamic shared memory (false where the device refuses).
template <typename T, bool kVector>
bool optIn(int optin) {
  if (cudaFuncSetAttribute(clusterKernel<T, kVector>(), cudaFuncAttributeMaxDynamicSharedMemorySize, optin) == cudaSuccess) return true;
  (void)cudaGetLastError();
  return false;
}

}  // namespace

bool planGroupNormNhwcCluster(GroupNormNhwcParams& p) {
  planGroupNormNhwc(p);  // the two-pass plan, kept where no cluster plan fits
  p.cluster = 0;
  p.clusterSmem = 0;
  if (p.n <= 0 || p.hw <= 0 || p.n > 65535 || p.groups > kMaxGroups) return false;
  int device = 0, major = 0, clusters = 0, optin = 0;
  if (cudaGetDevice(&device) != cudaSuccess || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&clusters, cudaDevAttrClusterLaunch, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  if (major < 9 || !clusters) return false;
  // A cluster of 8 (the portable size: every sm_90 GPC holds one of blocks that each need a
  // whole SM) over the image's pixels; one image per cluster.
  const int64_t pixels = (p.hw + kCluster - 1) / kCluster;
  const size_t bytes = clusterSmemBytes(p.groups, pixels, p.c, elementSize(p.type));
  if (bytes > static_cast<size_t>(optin)) return false;
  bool ok = false;
  dispatchCudaType<kFloatTypes>(p.type, [&](auto t) {
    using T = decltype(t);
    ok = optIn<T, true>(optin) && optIn<T, false>(optin);
  }, "planGroupNormNhwcCluster");
  if (!ok) return false;
  p.ty = std::max(1, kClusterThreads / std::max(p.tx, 1));
  p.cluster = kCluster;
  p.clusterSmem = bytes;
  p.pixels = pixels;
  p.chunks = kCluster;
  return true;
}

void launchGroupNormNhwcCluster(const GroupNormNhwcParams& p, cudaStream_t stream) {
  dispatchCudaType<kFloatTypes>(p.type, [&](auto t) {
    using T = decltype(t);
    if (p.vec != static_cast<int>(16 / sizeof(T))) throw Error("GroupNormalization (nhwc cluster): the plan's vector width does not match the type");
    const bool vector = aligned(p.x, 16) && aligned(p.y, 16) && (!p.residual || aligned(p.residual, 16));
    auto kernel = vector ? clusterKernel<T, true>() : clusterKernel<T, false>();
    cudaLaunchAttribute attr[1];
    const cudaLaunchConfig_t cfg = clusterConfig(p, p.cluster, p.clusterSmem, stream, attr);
    KILN_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, p));
  }, "launchGroupNormNhwcCluster");
}

}  // namespace kiln::cuda
