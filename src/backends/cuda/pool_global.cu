// "global_*_pool_*_direct": GlobalAveragePool, GlobalMaxPool and GlobalLpPool over every axis
// after N and C. X is plain NCHW, or (the GPU layout pass: 4-D, not Lp) channels-last; Y is always
// plain [N, C, 1, ...]. Float types accumulate in float32, max pools also take int8/uint8/int32/int64;
// NaN wins a max (as the reference).
// Plain X: each (n, c) plane is one contiguous row; a warp per row, 8 lanes per row for short
// rows (a whole warp on a 7x7 plane left most lanes idle), one for rows of a few elements, or a
// block per row for long rows when too few rows would fill the GPU; 16-byte loads where the rows
// are whole vectors (56x56 and 28x28 planes in float16).
// Channels-last X ([N][S][C]): threads across C (16-byte vectors of channels where C and the
// pointer allow), blocks across N, channel tiles and chunks of S; with more than one chunk the
// chunks' partial results go to the workspace and a second kernel combines them. One thread per
// (n, c) walking all of S (the kernel before) ran the squeeze-excitation pools of RegNetY and
// EfficientNet at batch 128 at 90-230 GB/s: too few threads for the H200.
#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

#include "backends/cuda/cuda_tactics.h"
#include "backends/cuda/cuda_util.h"
#include "backends/cuda/pool_common.cuh"
#include "ops/conv_layout.h"
#include "ops/fused_attrs.h"

namespace kiln {

namespace {

using namespace cuda::pool;

template <typename T, typename A> __device__ __forceinline__ T finish(A acc, int64_t size, bool isMax) {
  if constexpr (std::is_integral_v<A>) return store<T>(acc);  // max pools only
  else return store<T>(isMax ? acc : acc / static_cast<A>(size));
}

template <bool kMax, typename A> __device__ __forceinline__ A shuffleCombine(A v, int laneMask) {
  return combine<kMax>(v, static_cast<A>(__shfl_xor_sync(0xffffffffu, v, laneMask)));
}

//! Plain X: `rows` rows of `size` elements, kLanes lanes per row (a group never straddles a
//! warp), each lane reading V consecutive elements per access (V > 1: 16 bytes, the rows a whole
//! number of vectors and X aligned; one 2-byte load per element left the pools of 56x56 and 28x28
//! planes issue-bound). Every lane of a warp runs the same iterations, since the shuffles need the
//! whole warp.
template <bool kMax, int kLanes, int V, typename T>
__global__ void __launch_bounds__(256) globalPoolRowsKernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows,
                                                            int64_t size) {
  using A = Acc<T>;
  const int sub = threadIdx.x % kLanes;
  const int64_t tid = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int64_t step = int64_t(gridDim.x) * blockDim.x / kLanes;
  const int64_t warpRow = (tid & ~int64_t(31)) / kLanes;  // the row of the warp's first group
  for (int64_t r = tid / kLanes, w = warpRow; w < rows; r += step, w += step) {
    A acc = neutral<kMax, A>();
    if (r < rows) {
      const T* row = x + r * size;
      if constexpr (V == 1) {
        for (int64_t j = sub; j < size; j += kLanes) acc = combine<kMax>(acc, load(row + j));
      } else {
        A part[V];
#pragma unroll
        for (int k = 0; k < V; ++k) part[k] = neutral<kMax, A>();
        for (int64_t j = int64_t(sub) * V; j < size; j += int64_t(kLanes) * V) {
          const Vec<T, V> v = *reinterpret_cast<const Vec<T, V>*>(row + j);
#pragma unroll
          for (int k = 0; k < V; ++k) part[k] = combine<kMax>(part[k], widen(v.v[k]));
        }
#pragma unroll
        for (int k = 0; k < V; ++k) acc = combine<kMax>(acc, part[k]);
      }
    }
#pragma unroll
    for (int o = kLanes / 2; o > 0; o /= 2) acc = shuffleCombine<kMax>(acc, o);
    if (r < rows && sub == 0) y[r] = finish<T>(acc, size, kMax);
  }
}

//! Plain X, one block (256 threads) per row (long rows, few of them); V as globalPoolRowsKernel.
template <bool kMax, int V, typename T>
__global__ void __launch_bounds__(256) globalPoolBlockKernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows,
                                                             int64_t size) {
  using A = Acc<T>;
  __shared__ A warpAcc[8];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = x + r * size;
    A acc = neutral<kMax, A>();
    if constexpr (V == 1) {
#pragma unroll 4
      for (int64_t j = threadIdx.x; j < size; j += blockDim.x) acc = combine<kMax>(acc, load(row + j));
    } else {
      for (int64_t j = int64_t(threadIdx.x) * V; j < size; j += int64_t(blockDim.x) * V) {
        const Vec<T, V> v = *reinterpret_cast<const Vec<T, V>*>(row + j);
#pragma unroll
        for (int k = 0; k < V; ++k) acc = combine<kMax>(acc, widen(v.v[k]));
      }
    }
    for (int o = 16; o > 0; o >>= 1) acc = shuffleCombine<kMax>(acc, o);
    if ((threadIdx.x & 31) == 0) warpAcc[threadIdx.x / 32] = acc;
    __syncthreads();
    if (threadIdx.x < 32) {
      A v = threadIdx.x < blockDim.x / 32 ? warpAcc[threadIdx.x] : neutral<kMax, A>();
      for (int o = 16; o > 0; o >>= 1) v = shuffleCombine<kMax>(v, o);
      if (threadIdx.x == 0) y[r] = finish<T>(v, size, kMax);
    }
    __syncthreads();
  }
}

//! How a channels-last global pool splits its work (host-chosen, see planChannelsLast).
struct ChannelsLastPlan {
  int64_t batch = 0, size = 0, channels = 0;
  int64_t vecs = 0;       // channel vectors per pixel: channels / V
  int tc = 1, ts = 1;     // threads of a block across channel vectors / across pixels
  int64_t cTiles = 1;     // blocks across the channel vectors
  int64_t chunks = 1, chunkLen = 0;  // blocks across the pixels, pixels per chunk
  int64_t blocks() const { return batch * cTiles * chunks; }
};

//! Channels-last X [N][S][C], V channels per thread: block (n, channel tile, chunk of S); threads
//! tc across channel vectors, ts across pixels; the ts partial results meet in shared memory.
//! One chunk: Y directly; else the chunk's partial results to partial[n][chunk][C].
template <bool kMax, typename T, int V>
__global__ void __launch_bounds__(256) globalPoolChannelsLastKernel(const T* __restrict__ x, T* __restrict__ y,
                                                                    Acc<T>* __restrict__ partial, ChannelsLastPlan p) {
  using A = Acc<T>;
  __shared__ A red[256 * V];  // [pixel thread][channel vector thread][V]
  int64_t b = blockIdx.x;
  const int64_t chunk = b % p.chunks;
  b /= p.chunks;
  const int64_t tileC = b % p.cTiles, n = b / p.cTiles;
  const int tcI = threadIdx.x % p.tc, tsI = threadIdx.x / p.tc;
  const int64_t cv = tileC * p.tc + tcI;
  A acc[V];
#pragma unroll
  for (int j = 0; j < V; ++j) acc[j] = neutral<kMax, A>();
  if (tsI < p.ts && cv < p.vecs) {
    const int64_t s0 = chunk * p.chunkLen, s1 = std::min(p.size, s0 + p.chunkLen);
    const T* base = x + n * p.size * p.channels + cv * V;
#pragma unroll 4
    for (int64_t s = s0 + tsI; s < s1; s += p.ts) {
      const Vec<T, V> v = *reinterpret_cast<const Vec<T, V>*>(base + s * p.channels);
#pragma unroll
      for (int j = 0; j < V; ++j) acc[j] = combine<kMax>(acc[j], widen(v.v[j]));
    }
  }
#pragma unroll
  for (int j = 0; j < V; ++j) red[threadIdx.x * V + j] = acc[j];
  __syncthreads();
  const int width = p.tc * V;  // channels of this tile
  for (int k = threadIdx.x; k < width; k += blockDim.x) {
    const int64_t c = tileC * width + k;
    if (c >= p.channels) continue;
    A r = red[k];
    for (int s = 1; s < p.ts; ++s) r = combine<kMax>(r, red[s * width + k]);
    if (p.chunks == 1) y[n * p.channels + c] = finish<T>(r, p.size, kMax);
    else partial[(n * p.chunks + chunk) * p.channels + c] = r;
  }
}

//! Second pass of a channels-last pool of several chunks: Y[n][c] from partial[n][0..chunks)[c].
template <bool kMax, typename T>
__global__ void globalPoolCombineKernel(const Acc<T>* __restrict__ partial, T* __restrict__ y, ChannelsLastPlan p) {
  const int64_t total = p.batch * p.channels;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = i / p.channels, c = i - n * p.channels;
    const Acc<T>* at = partial + n * p.chunks * p.channels + c;
    Acc<T> r = at[0];
    for (int64_t k = 1; k < p.chunks; ++k) r = combine<kMax>(r, at[k * p.channels]);
    y[i] = finish<T>(r, p.size, kMax);
  }
}

//! GlobalLpPool (plain X only): one warp per plane.
template <typename T>
__global__ void globalLpPoolKernel(const T* __restrict__ x, T* __restrict__ y, int64_t planes, int64_t size, float p) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t q = blockIdx.x * int64_t(blockDim.x / 32) + threadIdx.x / 32; q < planes; q += warps) {
    const T* plane = x + q * size;
    float acc = 0.f;
    for (int64_t j = lane; j < size; j += 32) acc += powf(fabsf(cuda::toF(__ldg(plane + j))), p);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) y[q] = cuda::fromF<T>(powf(acc, 1.f / p));
  }
}

// ---- host side ----

//! V channels per thread: tiles of at most 32 channel vectors (a warp's width: 512 contiguous
//! bytes per pixel), split evenly, the rest of the block across pixels (at least 8); chunks of S
//! until about 8 blocks per SM (an SM's worth of threads) exist, as long as each thread still
//! walks 4 pixels and the partial results stay small next to X (S / 32 chunks at most: 7x7
//! planes take none, so no second pass).
ChannelsLastPlan planChannelsLast(int64_t batch, int64_t size, int64_t channels, int v) {
  ChannelsLastPlan p;
  p.batch = batch;
  p.size = size;
  p.channels = channels;
  p.vecs = channels / v;
  p.cTiles = (p.vecs + 31) / 32;
  p.tc = static_cast<int>((p.vecs + p.cTiles - 1) / p.cTiles);
  p.ts = 256 / p.tc;
  const int64_t target = int64_t(cuda::smCount()) * 8, base = batch * p.cTiles;
  if (base < target)
    p.chunks = std::min({(target + base - 1) / base, (size + 4 * p.ts - 1) / (4 * p.ts), size / 32});
  p.chunks = std::max<int64_t>(p.chunks, 1);
  p.chunkLen = (size + p.chunks - 1) / p.chunks;
  p.chunks = (size + p.chunkLen - 1) / p.chunkLen;  // no empty chunk
  return p;
}

struct GlobalPoolState : KernelState {
  int64_t planes = 0, size = 0;
  bool channelsLast = false;
  int lanes = 32;      // plain X: lanes per row (32, 8 or 1) reading one element at a time
  int lanesVec = 32;   // the same for 16-byte vectors (rows a multiple of 16 bytes, X aligned)
  bool rowsVec = false;
  bool perBlock = false;
  int vec = 1;         // channels-last X: channels per thread of `wide` (1 in `narrow`)
  ChannelsLastPlan wide, narrow;  // narrow: for pointers not aligned to 16 bytes
};

class GlobalPoolKernel : public Kernel {
 public:
  explicit GlobalPoolKernel(const LayerDesc& l)
      : max_(l.op == "GlobalMaxPool"), lp_(l.op == "GlobalLpPool"), p_(static_cast<float>(l.attrs->getInt("p", 2))) {}

  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const Dims& x = l.inputs[0].dims;
    auto s = std::make_unique<GlobalPoolState>();
    s->planes = x[0] * x[1];
    s->size = s->planes == 0 ? 0 : volume(x) / s->planes;
    s->channelsLast = inLayoutBlock(l) == kNhwcBlock;
    // Plain: a warp per row, 8 lanes for short rows, 1 for rows of a few elements; a block per row
    // for long rows too few for warps to fill the GPU.
    auto lanesFor = [](int64_t units) { return units >= 64 ? 32 : units >= 8 ? 8 : 1; };
    const int64_t vecElems = 16 / static_cast<int64_t>(elementSize(l.inputs[0].type));
    s->lanes = lanesFor(s->size);
    s->rowsVec = vecElems > 1 && s->size % vecElems == 0;
    s->lanesVec = lanesFor(s->size / vecElems);
    s->perBlock = s->size >= 2048 && s->planes < int64_t(cuda::smCount()) * 64;
    size_t ws = 0;
    if (s->channelsLast && s->planes > 0 && s->size > 0) {
      const size_t es = elementSize(l.inputs[0].type);
      const size_t acc = isPoolInt(l.inputs[0].type) ? es : sizeof(float);
      s->vec = x[1] % static_cast<int64_t>(16 / es) == 0 ? static_cast<int>(16 / es) : 1;
      s->wide = planChannelsLast(x[0], s->size, x[1], s->vec);
      s->narrow = planChannelsLast(x[0], s->size, x[1], 1);
      for (const ChannelsLastPlan* p : {&s->wide, &s->narrow})
        if (p->chunks > 1) ws = std::max(ws, static_cast<size_t>(p->batch * p->chunks * p->channels) * acc);
    }
    state = std::move(s);
    return ws;
  }

  void execute(const KernelIO& io, KernelState* state) const override {
    const auto* s = static_cast<const GlobalPoolState*>(state);
    if (s->planes == 0) return;
    cudaStream_t stream = cuda::streamOf(io);
    if (s->size == 0) {  // empty planes: the reference writes 0
      KILN_CUDA_CHECK(cudaMemsetAsync(io.out[0].data, 0, static_cast<size_t>(s->planes) * elementSize(io.out[0].type), stream));
      return;
    }
    if (lp_) {
      dispatchPoolType(io.in[0].type, false, [&](auto tag) {
        using T = decltype(tag);
        if constexpr (!std::is_integral_v<T>)
          globalLpPoolKernel<T><<<cuda::gridFor(s->planes * 32), 256, 0, stream>>>(io.in[0].as<T>(), io.out[0].as<T>(), s->planes,
                                                                                 s->size, p_);
      });
      KILN_CUDA_CHECK_LAUNCH();
      return;
    }
    dispatchPoolType(io.in[0].type, max_, [&](auto tag) {
      using T = decltype(tag);
      if (max_) launch<true, T>(io, *s, stream);
      else if constexpr (!std::is_integral_v<T>) launch<false, T>(io, *s, stream);
    });
  }

 private:
  //! Plain X: a block per row (long rows, few of them) or `lanes` lanes per row, V elements per access.
  template <bool kMax, int V, typename T>
  static void launchRows(const T* x, T* y, const GlobalPoolState& s, int lanes, cudaStream_t stream) {
    if (s.perBlock) {
      const auto blocks = static_cast<unsigned>(std::min<int64_t>(s.planes, int64_t(cuda::smCount()) * 64));
      globalPoolBlockKernel<kMax, V, T><<<blocks, 256, 0, stream>>>(x, y, s.planes, s.size);
    } else if (lanes == 32) {
      globalPoolRowsKernel<kMax, 32, V, T><<<cuda::gridFor(s.planes * 32), 256, 0, stream>>>(x, y, s.planes, s.size);
    } else if (lanes == 8) {
      globalPoolRowsKernel<kMax, 8, V, T><<<cuda::gridFor(s.planes * 8), 256, 0, stream>>>(x, y, s.planes, s.size);
    } else {
      globalPoolRowsKernel<kMax, 1, V, T><<<cuda::gridFor(s.planes), 256, 0, stream>>>(x, y, s.planes, s.size);
    }
  }

  template <bool kMax, typename T>
  void launch(const KernelIO& io, const GlobalPoolState& s, cudaStream_t stream) const {
    const T* x = io.in[0].as<T>();
    T* y = io.out[0].as<T>();
    if (!s.channelsLast) {
      constexpr int kV = static_cast<int>(16 / sizeof(T));
      if (s.rowsVec && reinterpret_cast<uintptr_t>(x) % 16 == 0) launchRows<kMax, kV, T>(x, y, s, s.lanesVec, stream);
      else launchRows<kMax, 1, T>(x, y, s, s.lanes, stream);
      KILN_CUDA_CHECK_LAUNCH();
      return;
    }
    constexpr int kVec = static_cast<int>(16 / sizeof(T));
    const bool wide = s.vec == kVec && reinterpret_cast<uintptr_t>(x) % 16 == 0;
    const ChannelsLastPlan& p = wide ? s.wide : s.narrow;
    auto* partial = static_cast<Acc<T>*>(io.workspace);
    if (p.blocks() >= (int64_t(1) << 31)) throw UnsupportedError("CUDA global pool: too many blocks");
    const auto blocks = static_cast<unsigned>(p.blocks());
    if (wide) globalPoolChannelsLastKernel<kMax, T, kVec><<<blocks, 256, 0, stream>>>(x, y, partial, p);
    else globalPoolChannelsLastKernel<kMax, T, 1><<<blocks, 256, 0, stream>>>(x, y, partial, p);
    KILN_CUDA_CHECK_LAUNCH();
    if (p.chunks > 1) {
      globalPoolCombineKernel<kMax, T><<<cuda::gridFor(p.batch * p.channels), 256, 0, stream>>>(partial, y, p);
      KILN_CUDA_CHECK_LAUNCH();
    }
  }

  bool max_, lp_;
  float p_;
};

bool supportsGlobalPool(const LayerDesc& l) {
  const bool isMax = l.op == "GlobalMaxPool";
  if (l.inputs.size() != 1 || !l.present(0) || l.outputs.size() != 1) return false;
  const DataType t = l.inputs[0].type;
  if (!(isFloatType(t) || (isMax && isPoolInt(t)))) return false;
  const Dims& x = l.inputs[0].dims;
  if (x.size() < 3 || x.size() > 5) return false;
  // Layouts: plain, or an nhwc X (4-D, not Lp) into a plain Y.
  if (hasPlainLayouts(l)) return true;
  const int64_t in = inLayoutBlock(l);
  return x.size() == 4 && l.op != "GlobalLpPool" && (in == 1 || in == kNhwcBlock) && outLayoutBlock(l) == 1;
}

std::unique_ptr<Kernel> createGlobalPool(const LayerDesc& l) { return std::make_unique<GlobalPoolKernel>(l); }

}  // namespace

namespace cuda {
KernelFactory globalPoolCuda() { return {supportsGlobalPool, createGlobalPool}; }
}  // namespace cuda

}  // namespace kiln
