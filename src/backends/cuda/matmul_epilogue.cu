// The matmul family's own epilogue kernel (see matmul_epilogue.h).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backends/cuda/activation_math.cuh"
#include "backends/cuda/cuda_util.h"
#include "backends/cuda/matmul_epilogue.h"
#include "ops/op_util.h"

namespace kiln::cuda {

void setPostAddend(MatMulPost& p, const Dims& cDims, const Dims& outDims, float scale) {
  std::vector<int64_t> cs = broadcastStrides(cDims, outDims);
  int64_t dims[64], strides[64];
  int rank = 0;
  for (size_t d = 0; d < outDims.size(); ++d) {
    if (outDims[d] == 1) continue;
    // Merge into the previous dim when one stride walks both (contiguous, or both broadcast).
    if (rank > 0 && strides[rank - 1] == cs[d] * outDims[d]) {
      dims[rank - 1] *= outDims[d];
      strides[rank - 1] = cs[d];
      continue;
    }
    if (rank == 64) throw UnsupportedError("matmul epilogue: too many dims");
    dims[rank] = outDims[d];
    strides[rank] = cs[d];
    ++rank;
  }
  if (rank > kPostMaxRank)
    throw UnsupportedError("matmul epilogue: the addend's broadcast pattern " + toString(cDims) + " -> " + toString(outDims) +
                           " needs more than " + std::to_string(kPostMaxRank) + " dims");
  p.hasC = true;
  p.cScale = scale;
  p.rank = rank;
  for (int d = 0; d < rank; ++d) p.dims[d] = dims[d], p.cStrides[d] = strides[d];
}

namespace {

struct PostArgs {
  int act;
  float actAlpha, actBeta;
  bool zeroFirst;
  float cScale;
  int rank;
  int64_t dims[kPostMaxRank];
  int64_t cStrides[kPostMaxRank];
};

__device__ __forceinline__ float toF(float v) { return v; }
__device__ __forceinline__ float toF(__half v) { return __half2float(v); }
__device__ __forceinline__ float toF(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T fromF(float v);
template <> __device__ __forceinline__ float fromF<float>(float v) { return v; }
template <> __device__ __forceinline__ __half fromF<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 fromF<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

//! Each thread handles V consecutive elements (one 16-byte access when V > 1). When C is present
//! the V elements lie in one innermost run of C's broadcast (dims[rank-1] % V == 0).
template <typename T, int V>
__global__ void matmulPostKernel(T* __restrict__ y, int64_t nPacks, const T* __restrict__ c, const T* __restrict__ gate, PostArgs p) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < nPacks; k += step) {
    float acc[V];
    if (p.zeroFirst) {
#pragma unroll
      for (int j = 0; j < V; ++j) acc[j] = 0.f;
    } else {
      Pack<T, V> in = reinterpret_cast<const Pack<T, V>*>(y)[k];
#pragma unroll
      for (int j = 0; j < V; ++j) acc[j] = toF(in.v[j]);
    }
    if (c) {
      int64_t rem = k * V, off = 0;
      for (int d = p.rank - 1; d >= 0; --d) {
        off += (rem % p.dims[d]) * p.cStrides[d];
        rem /= p.dims[d];
      }
      const int64_t inner = p.rank > 0 ? p.cStrides[p.rank - 1] : 0;
#pragma unroll
      for (int j = 0; j < V; ++j) acc[j] += p.cScale * toF(c[off + j * inner]);
    }
#pragma unroll
    for (int j = 0; j < V; ++j) acc[j] = applyActivation(static_cast<ActKind>(p.act), p.actAlpha, p.actBeta, acc[j]);
    if (gate) {
      Pack<T, V> g = reinterpret_cast<const Pack<T, V>*>(gate)[k];
#pragma unroll
      for (int j = 0; j < V; ++j) acc[j] *= toF(g.v[j]);
    }
    Pack<T, V> out;
#pragma unroll
    for (int j = 0; j < V; ++j) out.v[j] = fromF<T>(acc[j]);
    reinterpret_cast<Pack<T, V>*>(y)[k] = out;
  }
}

template <typename T>
void launchTyped(void* yv, int64_t n, const void* cv, const void* gv, const MatMulPost& mp, cudaStream_t s) {
  PostArgs a{};
  a.act = static_cast<int>(mp.act.kind);
  a.actAlpha = mp.act.alpha;
  a.actBeta = mp.act.beta;
  a.zeroFirst = mp.zeroFirst;
  a.cScale = mp.cScale;
  a.rank = mp.rank;
  for (int d = 0; d < mp.rank; ++d) a.dims[d] = mp.dims[d], a.cStrides[d] = mp.cStrides[d];
  T* y = static_cast<T*>(yv);
  const T* c = mp.hasC ? static_cast<const T*>(cv) : nullptr;
  const T* g = mp.hasGate ? static_cast<const T*>(gv) : nullptr;
  if (mp.hasGate && !g) throw Error("matmul epilogue: the multiplier's buffer is missing");
  constexpr int V = 16 / sizeof(T);
  bool vec = reinterpret_cast<uintptr_t>(y) % 16 == 0 && n % V == 0 && (!g || reinterpret_cast<uintptr_t>(g) % 16 == 0);
  if (c && mp.rank > 0) vec = vec && mp.dims[mp.rank - 1] % V == 0;
  const unsigned block = 256;
  if (vec) {
    matmulPostKernel<T, V><<<gridFor(n / V, block), block, 0, s>>>(y, n / V, c, g, a);
  } else {
    matmulPostKernel<T, 1><<<gridFor(n, block), block, 0, s>>>(y, n, c, g, a);
  }
  KILN_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launchMatMulPost(DataType t, void* y, int64_t n, const void* c, const MatMulPost& p, cudaStream_t s, const void* gate) {
  if (n <= 0 || !p.needed()) return;
  dispatchCudaType<kFloatTypes>(t, [&](auto tag) { launchTyped<decltype(tag)>(y, n, c, gate, p, s); }, "matmul epilogue");
}

}  // namespace kiln::cuda
