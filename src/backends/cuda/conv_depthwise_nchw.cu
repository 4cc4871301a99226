// "conv_fp_depthwise_nchw_tiled": depthwise KxK convolution (K = 3, 5, 7; stride 1 or 2;
// dilation 1) on NCHW tensors, float32/float16/bfloat16 with float32 accumulation: the layouts
// that stay NCHW (ConvNeXt's depthwise convs sit between an Add and a Transpose; cuDNN ran its
// [64, 96, 56, 56] 7x7 layer at 87 GB/s on the H200, conv_fp_depthwise EfficientNet's at 270).
// A block takes a band of output rows of one plane (n, c), or several whole small planes. It
// copies the input rows it needs from global memory in 16-byte loads into shared memory (as
// float), each thread computes kPix adjacent outputs of one row with the plane's K*K weights in
// registers, streaming the (kPix-1)*S+K inputs those outputs share once per kernel row, and the
// results go back through shared memory so that the stores (and residual loads) are 16-byte
// vectors too. A plane's rows, and a block's whole planes, are contiguous in NCHW, so both copies
// are flat ranges.
// Measured on the H200 (fp16, the builder's timings, 2026-12-03): [64, 96, 56, 56] 7x7 0.21 ms
// (cuDNN 0.94), [128, 96, 112, 112] 3x3 s2 0.23 ms (1.7 TB/s; conv_fp_depthwise 0.59), [128, 32,
// 112, 112] 3x3 0.20 ms (1.0 TB/s), 5x5 layers 0.57-1.1 TB/s. The 7x7 layers (~360 GB/s) are bound
// by latency: a block waits for its tile's loads, then computes, with nothing of its own in flight.
#include <algorithm>
#include <cstdint>
#include <string>

#include "backends/cuda/conv_act.cuh"
#include "backends/cuda/conv_depthwise.h"
#include "backends/cuda/cuda_tactics.h"
#include "backends/cuda/cuda_util.h"
#include "ops/conv_geometry.h"
#include "ops/conv_layout.h"
#include "ops/fused_attrs.h"

namespace kiln {

namespace {

using cuda::DevAct;
using cuda::DeviceConstant;
using cuda::Pack16;

// Output pixels per thread along W. Odd: the threads of a row then read shared memory kPix words
// apart, which never share a bank (at stride 1).
constexpr int kPix = 7;
constexpr int kMaxThreads = 256;
constexpr int64_t kSmemBudget = 48 * 1024;  // the default dynamic shared memory limit
constexpr int kMaxVec = 8;                  // elements per 16 bytes, at most (2-byte types)

struct NchwGeom {
  int planes, c, h, w, oh, ow, padH, padW;
  int groupsW;         // threads per output row (ceil(ow / kPix))
  int rowsPerBlock;    // output rows of a plane per block
  int planesPerBlock;  // > 1 only with wholePlanes
  bool wholePlanes;    // a block stages all H rows of its planes (one flat range)
  int xFloats;         // shared floats of the input copy (a multiple of 4); the output copy follows
  bool vec;            // 16-byte global accesses (x, y and the residual 16-byte aligned)
};

//! Elements before p reaches a 16-byte boundary, at most `count`; all of them without `vec`.
template <typename T>
__device__ __forceinline__ int headOf(const T* p, int count, bool vec) {
  constexpr int kV = 16 / sizeof(T);
  if (!vec) return count;
  const int mis = static_cast<int>(reinterpret_cast<uintptr_t>(p) % 16 / sizeof(T));
  return min(count, (kV - mis) % kV);
}

//! dst[e] = float(src[e]) for e < count by the whole block: `head` scalar elements, then 16-byte
//! chunks (dst + head is 16-byte aligned: the caller offsets dst), then the scalar tail.
template <typename T>
__device__ __forceinline__ void copyIn(const T* __restrict__ src, float* dst, int count, int head) {
  constexpr int kV = 16 / sizeof(T);
  const int nt = static_cast<int>(blockDim.x), tid = static_cast<int>(threadIdx.x);
  for (int e = tid; e < head; e += nt) dst[e] = cuda::toF(__ldg(src + e));
  const int chunks = (count - head) / kV;
  const uint4* s4 = reinterpret_cast<const uint4*>(src + head);
  float4* d4 = reinterpret_cast<float4*>(dst + head);
  for (int i0 = tid; i0 < chunks; i0 += 2 * nt) {  // two loads in flight per thread
    Pack16<T> v[2];
#pragma unroll
    for (int u = 0; u < 2; ++u)
      if (i0 + u * nt < chunks) v[u].u = __ldg(s4 + i0 + u * nt);
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      if (i0 + u * nt >= chunks) continue;
#pragma unroll
      for (int q = 0; q < kV / 4; ++q)
        d4[(i0 + u * nt) * (kV / 4) + q] = make_float4(cuda::toF(v[u].e[4 * q]), cuda::toF(v[u].e[4 * q + 1]),
                                                       cuda::toF(v[u].e[4 * q + 2]), cuda::toF(v[u].e[4 * q + 3]));
    }
  }
  for (int e = head + chunks * kV + tid; e < count; e += nt) dst[e] = cuda::toF(__ldg(src + e));
}

//! dst[e] = act(src[e] + res[e]) for e < count by the whole block, stored as T (the same split as
//! copyIn; `res` may be null).
template <typename T>
__device__ __forceinline__ void copyOut(const float* src, const T* __restrict__ res, T* __restrict__ dst, int count, int head,
                                        const DevAct& act) {
  constexpr int kV = 16 / sizeof(T);
  const int nt = static_cast<int>(blockDim.x), tid = static_cast<int>(threadIdx.x);
  for (int e = tid; e < head; e += nt) dst[e] = cuda::fromF<T>(cuda::applyAct(src[e] + (res ? cuda::toF(__ldg(res + e)) : 0.f), act));
  const int chunks = (count - head) / kV;
  for (int i = tid; i < chunks; i += nt) {
    const int e0 = head + i * kV;
    Pack16<T> r(make_uint4(0, 0, 0, 0)), o;
    if (res) r.u = __ldg(reinterpret_cast<const uint4*>(res + e0));
#pragma unroll
    for (int q = 0; q < kV / 4; ++q) {
      const float4 a = reinterpret_cast<const float4*>(src + e0)[q];
      const float av[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
      for (int k = 0; k < 4; ++k)
        o.e[4 * q + k] = cuda::fromF<T>(cuda::applyAct(av[k] + (res ? cuda::toF(r.e[4 * q + k]) : 0.f), act));
    }
    *reinterpret_cast<uint4*>(dst + e0) = o.u;
  }
  for (int e = head + chunks * kV + tid; e < count; e += nt)
    dst[e] = cuda::fromF<T>(cuda::applyAct(src[e] + (res ? cuda::toF(__ldg(res + e)) : 0.f), act));
}

//! X [N*C planes][H][W], W [C][K*K], Y and the residual [N*C][OH][OW]. blockIdx.x: a group of
//! planes; blockIdx.y: a band of output rows.
template <typename T, int K, int S>
__global__ void __launch_bounds__(kMaxThreads, 2) depthwiseNchwTiledKernel(const T* __restrict__ x, const T* __restrict__ w,
                                                                        const T* __restrict__ bias, const T* __restrict__ res,
                                                                        T* __restrict__ y, NchwGeom g, DevAct act) {
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  constexpr int kV = 16 / sizeof(T);
  constexpr int kSpan = (kPix - 1) * S + K;  // input pixels a thread's kPix outputs read per kernel row
  const int plane0 = static_cast<int>(blockIdx.x) * g.planesPerBlock;
  const int nPlanes = min(g.planesPerBlock, g.planes - plane0);
  const int oh0 = static_cast<int>(blockIdx.y) * g.rowsPerBlock;
  const int nRows = min(g.rowsPerBlock, g.oh - oh0);

  // The input rows [ihLo, ihHi) of each plane this block reads.
  const int ihLo = g.wholePlanes ? 0 : max(0, oh0 * S - g.padH);
  const int ihHi = g.wholePlanes ? g.h : min(g.h, (oh0 + nRows - 1) * S - g.padH + K);
  const int rows = max(0, ihHi - ihLo);
  const T* src = x + (int64_t(plane0) * g.h + ihLo) * g.w;
  const int inCount = nPlanes * rows * g.w;
  const int inHead = headOf(src, inCount, g.vec);
  float* xs = smem + (kV - inHead % kV) % kV;  // xs[e] holds src[e]; src's 16-byte chunks land 16-byte aligned
  copyIn(src, xs, inCount, inHead);

  const int64_t outAt = (int64_t(plane0) * g.oh + oh0) * g.ow;
  const int outCount = nPlanes * nRows * g.ow;
  const int outHead = headOf(y + outAt, outCount, g.vec);
  float* ys = smem + g.xFloats + (kV - outHead % kV) % kV;
  __syncthreads();

  const int tid = static_cast<int>(threadIdx.x);
  const int gw = tid % g.groupsW, r = tid / g.groupsW % g.rowsPerBlock, pb = tid / (g.groupsW * g.rowsPerBlock);
  if (pb < nPlanes && r < nRows) {
    const int c = (plane0 + pb) % g.c;
    float wk[K * K];
#pragma unroll
    for (int i = 0; i < K * K; ++i) wk[i] = cuda::toF(__ldg(w + c * K * K + i));
    const float b = bias ? cuda::toF(__ldg(bias + c)) : 0.f;
    float acc[kPix];
#pragma unroll
    for (int q = 0; q < kPix; ++q) acc[q] = b;
    const int oh = oh0 + r, ow0 = gw * kPix, iw0 = ow0 * S - g.padW;
    const float* plane = xs + pb * rows * g.w;
#pragma unroll
    for (int kh = 0; kh < K; ++kh) {
      const int ih = oh * S - g.padH + kh;
      if (ih < ihLo || ih >= ihHi) continue;  // padding (the rows in range are all staged)
      const float* row = plane + (ih - ihLo) * g.w;
#pragma unroll
      for (int j = 0; j < kSpan; ++j) {
        const int iw = iw0 + j;
        if (static_cast<unsigned>(iw) >= static_cast<unsigned>(g.w)) continue;
        const float xv = row[iw];
#pragma unroll
        for (int q = 0; q < kPix; ++q) {
          const int kw = j - q * S;  // the tap of output q that input pixel j meets (compile time)
          if (kw >= 0 && kw < K) acc[q] = fmaf(xv, wk[kh * K + kw], acc[q]);
        }
      }
    }
    float* out = ys + (pb * nRows + r) * g.ow;
#pragma unroll
    for (int q = 0; q < kPix; ++q)
      if (ow0 + q < g.ow) out[ow0 + q] = acc[q];
  }
  __syncthreads();
  copyOut(ys, res ? res + outAt : nullptr, y + outAt, outCount, outHead, act);
}

template <typename T>
using NchwKernelFn = void (*)(const T*, const T*, const T*, const T*, T*, NchwGeom, DevAct);

template <typename T>
NchwKernelFn<T> pickNchw(int k, int s) {
  switch (k * 10 + s) {
    case 31: return depthwiseNchwTiledKernel<T, 3, 1>;
    case 32: return depthwiseNchwTiledKernel<T, 3, 2>;
    case 51: return depthwiseNchwTiledKernel<T, 5, 1>;
    case 52: return depthwiseNchwTiledKernel<T, 5, 2>;
    case 71: return depthwiseNchwTiledKernel<T, 7, 1>;
    case 72: return depthwiseNchwTiledKernel<T, 7, 2>;
    default: throw UnsupportedError("conv_fp_depthwise_nchw_tiled: kernel " + std::to_string(k) + ", stride " + std::to_string(s));
  }
}

//! Shared memory bytes of a block of `planes` planes x `rows` output rows staging `staged` input rows.
int64_t smemBytes(const NchwGeom& g, int64_t planes, int64_t rows, int64_t staged) {
  const int64_t xFloats = (planes * staged * g.w + kMaxVec + 3) / 4 * 4;
  return 4 * (xFloats + planes * rows * g.ow + kMaxVec);
}

//! Splits the output into blocks of at most kMaxThreads threads: several whole planes per block
//! when a plane needs few threads (7x7 and 14x14 maps), else bands of rows of one plane.
void planBlocks(NchwGeom& g, int k, int s) {
  const std::string what = "conv_fp_depthwise_nchw_tiled: ";
  g.groupsW = (g.ow + kPix - 1) / kPix;
  if (g.groupsW > kMaxThreads) throw UnsupportedError(what + "output rows of " + std::to_string(g.ow));
  const int64_t perPlane = int64_t(g.groupsW) * g.oh;
  g.wholePlanes = false;
  if (perPlane <= kMaxThreads && smemBytes(g, 1, g.oh, g.h) <= kSmemBudget) {
    int64_t pb = std::min<int64_t>(kMaxThreads / perPlane, g.planes);
    while (pb > 1 && smemBytes(g, pb, g.oh, g.h) > kSmemBudget) --pb;
    g.wholePlanes = true;
    g.planesPerBlock = static_cast<int>(pb);
    g.rowsPerBlock = g.oh;
  } else {
    int64_t rows = std::min<int64_t>(g.oh, kMaxThreads / g.groupsW);
    auto staged = [&](int64_t r) { return std::min<int64_t>(g.h, (r - 1) * s + k); };
    while (rows > 0 && smemBytes(g, 1, rows, staged(rows)) > kSmemBudget) --rows;
    if (rows == 0) throw UnsupportedError(what + "input rows of " + std::to_string(g.w) + " exceed shared memory");
    const int64_t bands = (g.oh + rows - 1) / rows;
    g.planesPerBlock = 1;
    g.rowsPerBlock = static_cast<int>((g.oh + bands - 1) / bands);  // the same work in every band
  }
  const int64_t staged = g.wholePlanes ? g.h : std::min<int64_t>(g.h, (int64_t(g.rowsPerBlock) - 1) * s + k);
  g.xFloats = static_cast<int>((int64_t(g.planesPerBlock) * staged * g.w + kMaxVec + 3) / 4 * 4);
}

struct NchwState : KernelState {
  NchwGeom g{};
  int k = 0, s = 0, threads = 0;
  unsigned blocksX = 0, blocksY = 0;
  size_t smem = 0;
};

class DepthwiseNchwTiledKernel : public Kernel {
 public:
  explicit DepthwiseNchwTiledKernel(const LayerDesc& l)
      : weights_(l.inputs[1].value), bias_(l.present(2) ? l.inputs[2].value : HostTensor()),
        act_(cuda::toDevAct(fusedActivation(*l.attrs))) {}

  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const ConvProblem p = resolveConv(l);
    const Window3& w = p.win;
    const int64_t limit = int64_t(1) << 31;  // planes and plane sizes in ints; bands in the grid's y (< 2^16)
    if (p.batch * p.inChannels >= limit || w.in[1] * w.in[2] >= limit || w.out[1] * w.out[2] >= limit || w.out[1] >= 65536)
      throw UnsupportedError("conv_fp_depthwise_nchw_tiled: shape beyond its int geometry");
    auto s = std::make_unique<NchwState>();
    NchwGeom& g = s->g;
    g.planes = static_cast<int>(p.batch * p.inChannels);
    g.c = static_cast<int>(p.inChannels);
    g.h = static_cast<int>(w.in[1]);
    g.w = static_cast<int>(w.in[2]);
    g.oh = static_cast<int>(w.out[1]);
    g.ow = static_cast<int>(w.out[2]);
    g.padH = static_cast<int>(w.padBegin[1]);
    g.padW = static_cast<int>(w.padBegin[2]);
    s->k = static_cast<int>(w.kernel[1]);
    s->s = static_cast<int>(w.stride[1]);
    if (g.planes > 0 && g.oh > 0 && g.ow > 0) {
      planBlocks(g, s->k, s->s);
      s->threads = (g.groupsW * g.rowsPerBlock * g.planesPerBlock + 31) / 32 * 32;
      s->blocksX = static_cast<unsigned>((g.planes + g.planesPerBlock - 1) / g.planesPerBlock);
      s->blocksY = static_cast<unsigned>((g.oh + g.rowsPerBlock - 1) / g.rowsPerBlock);
      s->smem = static_cast<size_t>(4 * (int64_t(g.xFloats) + int64_t(g.planesPerBlock) * g.rowsPerBlock * g.ow + kMaxVec));
    }
    state = std::move(s);
    return 0;
  }

  void execute(const KernelIO& io, KernelState* state) const override {
    const auto* s = static_cast<const NchwState*>(state);
    if (s->threads == 0) return;
    const void* res = io.in.size() > 3 ? io.in[3].data : nullptr;
    auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    NchwGeom g = s->g;
    g.vec = aligned(io.in[0].data) && aligned(io.out[0].data) && aligned(res);
    auto run = [&](auto tag) {
      using T = decltype(tag);
      pickNchw<T>(s->k, s->s)<<<dim3(s->blocksX, s->blocksY), s->threads, s->smem, cuda::streamOf(io)>>>(
          io.in[0].as<T>(), static_cast<const T*>(weights_.orInput(io, 1)), static_cast<const T*>(bias_.orInput(io, 2)),
          static_cast<const T*>(res), io.out[0].as<T>(), g, act_);
    };
    cuda::dispatchCudaType<kFloatTypes>(io.in[0].type, run, "conv_fp_depthwise_nchw_tiled");
    KILN_CUDA_CHECK_LAUNCH();
  }

  bool holdsInput(size_t i) const override { return (i == 1 && weights_.get()) || (i == 2 && bias_.get()); }

 private:
  DeviceConstant weights_, bias_;
  DevAct act_;
};

bool supportsNchwTiled(const LayerDesc& l) { return hasPlainLayouts(l) && cuda::tiledDepthwise(l); }

std::unique_ptr<Kernel> createNchwTiled(const LayerDesc& l) { return std::make_unique<DepthwiseNchwTiledKernel>(l); }

}  // namespace

namespace cuda {
KernelFactory depthwiseConvNchwTiledCuda() { return {supportsNchwTiled, createNchwTiled}; }
}  // namespace cuda

}  // namespace kiln
