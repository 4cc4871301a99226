// CUDA kernels: GroupNormalization / InstanceNormalization split over many blocks per group
// (tactic *_fp_cuda_split). The row kernel (norm_rows.cu) gives a group one block: PoolFormer's
// one group over [64, 56, 56] ran on one SM at 4 GB/s, ResNet-50-GN at batch 64 (2048 groups of
// 25,088 elements) at ~250 GB/s (H100, 12-06 zoo profile). Here a group is cut into chunks, one
// block each, in two passes over the same grid:
//   1. statistics: each block sums (x - K) and (x - K)^2 over its chunk in float32, K = the group's
//      first element (a shift that keeps the one-pass variance from cancelling when the mean is
//      large against the spread), into partials[group][chunk];
//   2. apply: each block adds up its group's partials (mean = K + S/n, var = SS/n - (S/n)^2), then
//      normalizes its chunk with the channel's scale and bias, the fused residual and activation. It reads
//      K from the workspace and each element before writing it, so Y may be written over X.
// Vectors of 16 bytes when a channel's spatial extent allows them (one channel per vector: one
// division per vector, scale and bias read once per vector).
// The one-pass variant (tactic *_fp_cuda_split_onepass, for tensors whose grid fits on the GPU at
// once): one cooperative launch; each thread holds its chunk's elements in registers, the blocks'
// partials meet at a grid barrier, then each block normalizes what it holds. X is read once and Y
// written once, in one launch instead of two latency-bound ones (ResNet-50-GN at batch 1 keeps
// NCHW GroupNorms of 32 groups x 25,088 elements: 53 layers, ~11 us each as two kernels in the
// H100 profile). Every read of X precedes the barrier, so Y may be written over X.
#include <cooperative_groups.h>

#include "backends/cuda/activation_math.cuh"
#include "backends/cuda/cuda_util.h"
#include "backends/cuda/norm_common.cuh"
#include "backends/cuda/norm_launch.cuh"
#include "core/type_dispatch.h"

namespace kiln::cuda {

namespace {

constexpr int kSplitThreads = 256;

//! The first vector of `chunk` of a row and the vector count of the chunk.
__device__ __forceinline__ void chunkRange(int64_t nvec, int64_t chunkVecs, int64_t chunk, int64_t& first, int64_t& count) {
  first = chunk * chunkVecs;
  count = first < nvec ? min(chunkVecs, nvec - first) : 0;
}

//! A group's mean and 1/stddev from its chunks' partial sums (of x - shift); every thread of the
//! block calls it and gets them.
__device__ __forceinline__ void groupMeanInv(const float2* partials, int64_t chunks, float shift, int64_t cols, float eps, float* smem,
                                             float& mean, float& inv) {
  float s = 0.f, ss = 0.f;
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    const float2 q = partials[c];
    s += q.x;
    ss += q.y;
  }
  s = rowReduce(s, SumOp{}, 0.f, smem);
  ss = rowReduce(ss, SumOp{}, 0.f, smem);
  const float invN = 1.f / static_cast<float>(cols);
  const float dm = s * invN;
  mean = shift + dm;
  inv = rsqrtf(fmaxf(ss * invN - dm * dm, 0.f) + eps);
}

template <typename T, int VEC>
__global__ void __launch_bounds__(kSplitThreads) groupStatsKernel(const RowNormParams p, int64_t chunks, int64_t chunkVecs,
                                                                  float2* partials) {
  __shared__ float smem[32];
  const int64_t row = blockIdx.x / chunks, chunk = blockIdx.x % chunks;
  const T* x = static_cast<const T*>(p.x) + row * p.cols;
  const float shift = toFloat(x[0]);
  int64_t first, count;
  chunkRange(p.cols / VEC, chunkVecs, chunk, first, count);
  float s = 0.f, ss = 0.f;
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
    float v[VEC];
    loadFloats<T, VEC>(x + (first + j) * VEC, v);
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      const float d = v[e] - shift;
      s += d;
      ss = fmaf(d, d, ss);
    }
  }
  s = rowReduce(s, SumOp{}, 0.f, smem);
  ss = rowReduce(ss, SumOp{}, 0.f, smem);
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = make_float2(s, ss);
    if (chunk == 0) reinterpret_cast<float*>(partials + gridDim.x)[row] = shift;
  }
}

template <typename T, int VEC>
__global__ void __launch_bounds__(kSplitThreads) groupApplyKernel(const RowNormParams p, int64_t chunks, int64_t chunkVecs,
                                                                  const float2* partials) {
  __shared__ float smem[32];
  const int64_t row = blockIdx.x / chunks, chunk = blockIdx.x % chunks;
  const T* x = static_cast<const T*>(p.x) + row * p.cols;
  T* y = static_cast<T*>(p.y) + row * p.cols;
  // The statistics pass's shift: X's first element may already hold Y here (Y over X in place).
  const float shift = reinterpret_cast<const float*>(partials + gridDim.x)[row];
  float mean, inv;
  groupMeanInv(partials + row * chunks, chunks, shift, p.cols, p.eps, smem, mean, inv);
  int64_t first, count;
  chunkRange(p.cols / VEC, chunkVecs, chunk, first, count);
  const T* scale = static_cast<const T*>(p.scale);
  const T* bias = static_cast<const T*>(p.bias);
  const T* res = p.residual ? static_cast<const T*>(p.residual) + row * p.cols : nullptr;
  const int64_t group = row % p.groups;
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
    const int64_t k0 = (first + j) * VEC;
    float v[VEC], out[VEC], r[VEC];
    loadFloats<T, VEC>(x + k0, v);
    if (res) loadFloats<T, VEC>(res + k0, r);
    // One channel for the whole vector (VEC > 1 only when spatial % VEC == 0).
    const int64_t param = p.mode == RowNormParams::kPerGroup ? group : group * p.perGroup + k0 / p.spatial;
    const float a = toFloat(scale[param]) * inv, b = bias ? toFloat(bias[param]) : 0.f;
#pragma unroll
    for (int e = 0; e < VEC; ++e)
      out[e] = applyActivation(static_cast<ActKind>(p.act), p.actAlpha, p.actBeta, (v[e] - mean) * a + b + (res ? r[e] : 0.f));
    storeFloats<T, VEC>(y + k0, out);
  }
}

//! The one-pass kernel: ITEMS vectors of VEC elements per thread (chunkVecs = blockDim.x * ITEMS),
//! launched cooperatively (every block resident, for the grid barrier).
template <typename T, int VEC, int ITEMS>
__global__ void __launch_bounds__(kSplitThreads) groupOnePassKernel(const RowNormParams p, int64_t chunks, int64_t chunkVecs,
                                                                    float2* partials) {
  __shared__ float smem[32];
  const int64_t row = blockIdx.x / chunks, chunk = blockIdx.x % chunks;
  const T* x = static_cast<const T*>(p.x) + row * p.cols;
  const T* res = p.residual ? static_cast<const T*>(p.residual) + row * p.cols : nullptr;
  int64_t first, count;
  chunkRange(p.cols / VEC, chunkVecs, chunk, first, count);
  float v[ITEMS][VEC], r[ITEMS][VEC];
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {  // every load issued before the first use
    const int64_t j = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
    if (j < count) {
      loadFloats<T, VEC>(x + (first + j) * VEC, v[i]);
      if (res) loadFloats<T, VEC>(res + (first + j) * VEC, r[i]);
    }
  }
  const float shift = toFloat(x[0]);  // as the two passes: the group's first element
  float s = 0.f, ss = 0.f;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    if (threadIdx.x + static_cast<int64_t>(i) * blockDim.x >= count) break;
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      const float d = v[i][e] - shift;
      s += d;
      ss = fmaf(d, d, ss);
    }
  }
  s = rowReduce(s, SumOp{}, 0.f, smem);
  ss = rowReduce(ss, SumOp{}, 0.f, smem);
  if (threadIdx.x == 0) partials[blockIdx.x] = make_float2(s, ss);
  cooperative_groups::this_grid().sync();  // every block's partials written (and visible)
  float mean, inv;
  groupMeanInv(partials + row * chunks, chunks, shift, p.cols, p.eps, smem, mean, inv);
  const T* scale = static_cast<const T*>(p.scale);
  const T* bias = static_cast<const T*>(p.bias);
  const int64_t group = row % p.groups;
  const ActKind act = static_cast<ActKind>(p.act);
  T* y = static_cast<T*>(p.y) + row * p.cols;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int64_t j = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
    if (j >= count) break;
    const int64_t k0 = (first + j) * VEC;
    float out[VEC];
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      // VEC > 1 only when spatial % VEC == 0: one channel for the whole vector.
      const int64_t param = p.mode == RowNormParams::kPerGroup ? group : group * p.perGroup + (VEC > 1 ? k0 : k0 + e) / p.spatial;
      const float a = toFloat(scale[param]) * inv, b = bias ? toFloat(bias[param]) : 0.f;
      out[e] = applyActivation(act, p.actAlpha, p.actBeta, (v[i][e] - mean) * a + b + (res ? r[i][e] : 0.f));
    }
    storeFloats<T, VEC>(y + k0, out);
  }
}

template <typename T, int VEC, int ITEMS>
void launchOnePass(const RowNormParams& p, const GroupSplitPlan& plan, float2* partials, cudaStream_t stream) {
  launchCooperative(groupOnePassKernel<T, VEC, ITEMS>, dim3(static_cast<unsigned>(p.rows * plan.chunks)), dim3(kSplitThreads), stream,
                    p, plan.chunks, plan.chunkElems / VEC, partials);
}

//! The one-pass kernel for plan.perThread elements per thread, in vectors of VEC (1 or 16 bytes:
//! each divides every kOnePassPerThread).
template <typename T, int VEC>
void launchOnePassVec(const RowNormParams& p, const GroupSplitPlan& plan, float2* partials, cudaStream_t stream) {
  switch (plan.perThread) {
    case 8: return launchOnePass<T, VEC, 8 / VEC>(p, plan, partials, stream);
    case 16: return launchOnePass<T, VEC, 16 / VEC>(p, plan, partials, stream);
    case 32: return launchOnePass<T, VEC, 32 / VEC>(p, plan, partials, stream);
    default: throw Error("GroupNormalization (one pass): no kernel for " + std::to_string(plan.perThread) + " elements per thread");
  }
}

//! Both passes over one grid: rows x chunks blocks, chunkVecs vectors of VEC elements each.
template <typename T, int VEC>
void launchSplitPasses(const RowNormParams& p, const GroupSplitPlan& plan, float2* partials, cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>(p.rows * plan.chunks);
  const int64_t chunkVecs = plan.chunkElems / VEC;
  groupStatsKernel<T, VEC><<<blocks, kSplitThreads, 0, stream>>>(p, plan.chunks, chunkVecs, partials);
  KILN_CUDA_CHECK_LAUNCH();
  groupApplyKernel<T, VEC><<<blocks, kSplitThreads, 0, stream>>>(p, plan.chunks, chunkVecs, partials);
  KILN_CUDA_CHECK_LAUNCH();
}

template <typename T>
void groupSplitTyped(const RowNormParams& p, const GroupSplitPlan& plan, float2* partials, cudaStream_t stream) {
  constexpr int kWide = 16 / sizeof(T);
  const bool wide = plan.vec == kWide && aligned(p.x, 16) && aligned(p.y, 16) && (!p.residual || aligned(p.residual, 16));
  if (plan.perThread > 0) {  // the same elements per thread in vectors or one by one
    if (wide) launchOnePassVec<T, kWide>(p, plan, partials, stream);
    else launchOnePassVec<T, 1>(p, plan, partials, stream);
  } else if (wide) {
    launchSplitPasses<T, kWide>(p, plan, partials, stream);
  } else {
    launchSplitPasses<T, 1>(p, plan, partials, stream);
  }
}

//! Elements per thread the one-pass kernel is built for (8 to 32: the row in registers).
constexpr int kOnePassPerThread[] = {8, 16, 32};

//! Blocks of the one-pass kernel for `perThread` elements one SM holds at once (the lower of the
//! vector and scalar variants).
template <typename T>
int onePassBlocksPerSm(int perThread) {
  constexpr int kWide = 16 / sizeof(T);
  int a = 0, b = 0;
  auto occupancy = [](auto kernel) {
    int n = 0;
    KILN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kSplitThreads, 0));
    return n;
  };
  switch (perThread) {
    case 8: a = occupancy(groupOnePassKernel<T, kWide, 8 / kWide>), b = occupancy(groupOnePassKernel<T, 1, 8>); break;
    case 16: a = occupancy(groupOnePassKernel<T, kWide, 16 / kWide>), b = occupancy(groupOnePassKernel<T, 1, 16>); break;
    default: a = occupancy(groupOnePassKernel<T, kWide, 32 / kWide>), b = occupancy(groupOnePassKernel<T, 1, 32>); break;
  }
  return std::min(a, b);
}

}  // namespace

GroupSplitPlan planGroupSplit(int64_t rows, int64_t cols, int64_t spatial, size_t elemSize) {
  GroupSplitPlan g;
  const int64_t wide = static_cast<int64_t>(16 / elemSize);
  g.vec = (wide > 1 && spatial % wide == 0) ? static_cast<int>(wide) : 1;
  // Enough blocks to fill the GPU four times over, each chunk at least 2 vectors per thread's
  // worth (fewer, larger chunks when there are many groups), at most 1024 chunks per group. (With
  // 16 vectors per thread, PoolFormer's single group at batch 1, 200,704 elements, ran as 7 blocks.)
  const int64_t minChunk = int64_t(kSplitThreads) * 2 * g.vec;
  const int64_t target = std::max<int64_t>(1, (int64_t(cuda::smCount()) * 4 + rows - 1) / std::max<int64_t>(rows, 1));
  int64_t chunk = std::max(minChunk, (cols + target - 1) / target);
  chunk = std::max(chunk, (cols + 1023) / 1024);
  chunk = (chunk + g.vec - 1) / g.vec * g.vec;  // whole vectors
  g.chunkElems = chunk;
  g.chunks = std::max<int64_t>(1, (cols + chunk - 1) / chunk);
  return g;
}

GroupSplitPlan planGroupSplitOnePass(int64_t rows, int64_t cols, int64_t spatial, DataType type) {
  const GroupSplitPlan twoPass = planGroupSplit(rows, cols, spatial, elementSize(type));
  if (rows <= 0 || cols <= 0) return twoPass;
  int device = 0, coop = 0;
  KILN_CUDA_CHECK(cudaGetDevice(&device));
  KILN_CUDA_CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, device));
  if (!coop) return twoPass;
  const int sms = smCount();
  // As the channels-last one-pass plan: the fewest elements per thread that keep the grid within
  // two blocks per SM, else within half of what the SMs hold (so that two such layers on two
  // streams can be resident together); none: the two passes.
  for (const bool relaxed : {false, true}) {
    for (int per : kOnePassPerThread) {
      int64_t resident = 0;
      dispatchCudaType<kFloatTypes>(type, [&](auto t) { resident = int64_t(onePassBlocksPerSm<decltype(t)>(per)) * sms / 2; },
                                    "planGroupSplitOnePass");
      const int64_t chunkElems = int64_t(kSplitThreads) * per;
      const int64_t chunks = (cols + chunkElems - 1) / chunkElems;
      const int64_t limit = relaxed ? resident : std::min<int64_t>(2 * int64_t(sms), resident);
      if (rows * chunks <= limit) {
        GroupSplitPlan g = twoPass;
        g.perThread = per;
        g.chunkElems = chunkElems;  // a multiple of every vector width
        g.chunks = chunks;
        return g;
      }
    }
  }
  return twoPass;
}

void launchGroupNormSplit(const RowNormParams& p, const GroupSplitPlan& plan, void* workspace, cudaStream_t stream) {
  if (p.rows <= 0 || p.cols <= 0) return;
  auto* partials = static_cast<float2*>(workspace);
  dispatchCudaType<kFloatTypes>(p.type, [&](auto t) { groupSplitTyped<decltype(t)>(p, plan, partials, stream); },
                                "launchGroupNormSplit");
}

}  // namespace kiln::cuda
