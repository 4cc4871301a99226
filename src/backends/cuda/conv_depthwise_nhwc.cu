// "conv_fp_depthwise_nhwc_tiled": depthwise KxK convolution (K = 3, 5, 7; stride 1 or 2;
// dilation 1) on a channels-last X (the GPU layout pass's "nhwc"), Y channels-last or NCHW,
// float32/float16/bfloat16 with float32 accumulation. cuDNN's channels-last engines for
// group == C ran MobileNet/EfficientNet/ConvNeXt depthwise layers at 44-136 GB/s on the H200.
// Each thread computes kPix adjacent output pixels of one row for a vector of V channels (16
// bytes: 8 halves or 4 floats; one channel where C or a pointer does not allow that). Per kernel
// row it loads the K weight vectors once and streams the (kPix-1)*S+K input pixels the kPix
// outputs share, so each input vector is loaded once per row instead of K times; neighbouring
// threads read neighbouring channels (coalesced 16-byte loads), and the rows re-read by the
// threads of the next output rows hit L1/L2. Bias, the residual (in Y's layout) and the fused
// activation are applied before the single store.
// Measured on the H200 (fp16, the builder's timings, 2026-12-03): [64, 96, 56, 56] 7x7 0.30 ms
// (cuDNN's best 2.1 ms), [128, 144, 56, 56] 5x5 s2 0.23 ms (1.3 ms). Far from bandwidth (~250-620
// GB/s): 120-150 registers per thread leave few warps, each waiting on one kernel row's loads at a
// time. For 3x3, conv_half_depthwise_nhwc (one pixel per thread, many more loads in flight) is
// faster (0.18 vs 0.26 ms at [128, 32, 112, 112]) and the builder keeps it.
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

constexpr int kPix = 4;        // output pixels per thread along W
constexpr int kThreads = 128;  // per block
//! Blocks per SM the registers must allow: 4 (128 registers) unless a row's weights and the
//! accumulators need more (16-byte vectors at K = 5, 7: 3, 170 registers) than spilling would cost.
template <int V, int K>
constexpr int kMinBlocks = V * (kPix + K) > 64 ? 3 : 4;
constexpr int kMaxGridY = 65535;

struct NhwcGeom {
  int batch, h, w, c, oh, ow, padH, padW;
  int vecs, groupsW;  // channel vectors per pixel (C / V), pixel groups per output row
  int64_t imageIn, imageOut;  // elements per image of X and Y (each below 2^31)
  bool outNchw;
};

//! An unsigned type of B bytes, for __ldg of B-byte element vectors.
template <int B> struct Raw;
template <> struct Raw<16> { using type = uint4; };
template <> struct Raw<8> { using type = uint2; };
template <> struct Raw<4> { using type = unsigned; };
template <> struct Raw<2> { using type = unsigned short; };

//! V elements of T moved as one load / store.
template <typename T, int V>
union Vec {
  typename Raw<sizeof(T) * V>::type raw;
  T e[V];
  __device__ Vec() {}
};

template <typename T, int V>
__device__ __forceinline__ void loadF(const T* p, float (&out)[V]) {
  using R = typename Raw<sizeof(T) * V>::type;
  Vec<T, V> v;
  v.raw = __ldg(reinterpret_cast<const R*>(p));
#pragma unroll
  for (int i = 0; i < V; ++i) out[i] = cuda::toF(v.e[i]);
}

//! X [N][H][W][C], W taps-major [K*K][C], Y [N][OH][OW][C] (or [N][C][OH][OW] when outNchw), the
//! residual like Y. One thread: kPix outputs along W x V channels; blockIdx.y strides over images.
template <typename T, int V, int K, int S>
__global__ void __launch_bounds__(kThreads, (kMinBlocks<V, K>)) depthwiseNhwcTiledKernel(const T* __restrict__ x, const T* __restrict__ w,
                                                                     const T* __restrict__ bias, const T* __restrict__ res,
                                                                     T* __restrict__ y, NhwcGeom g, DevAct act) {
  constexpr int kSpan = (kPix - 1) * S + K;  // input pixels a thread's kPix outputs read per kernel row
  const int idx = static_cast<int>(blockIdx.x) * kThreads + static_cast<int>(threadIdx.x);
  if (idx >= g.vecs * g.groupsW * g.oh) return;
  const int c0 = (idx % g.vecs) * V;
  const int t = idx / g.vecs;
  const int ow0 = (t % g.groupsW) * kPix, oh = t / g.groupsW;
  float b[V] = {};
  if (bias) loadF<T, V>(bias + c0, b);
  const int iw0 = ow0 * S - g.padW;
  for (int n = blockIdx.y; n < g.batch; n += gridDim.y) {
    const T* xn = x + n * g.imageIn + c0;
    float acc[kPix][V];
#pragma unroll
    for (int q = 0; q < kPix; ++q)
#pragma unroll
      for (int v = 0; v < V; ++v) acc[q][v] = b[v];
#pragma unroll 1  // a row at a time: unrolled, the compiler hoists every row's loads (200+ registers)
    for (int kh = 0; kh < K; ++kh) {
      const int ih = oh * S - g.padH + kh;
      if (static_cast<unsigned>(ih) >= static_cast<unsigned>(g.h)) continue;
      float wk[K][V];
#pragma unroll
      for (int kw = 0; kw < K; ++kw) loadF<T, V>(w + (kh * K + kw) * g.c + c0, wk[kw]);
      const T* row = xn + ih * g.w * g.c;
#pragma unroll
      for (int j = 0; j < kSpan; ++j) {
        const int iw = iw0 + j;
        if (static_cast<unsigned>(iw) >= static_cast<unsigned>(g.w)) continue;
        float xv[V];
        loadF<T, V>(row + iw * g.c, xv);
#pragma unroll
        for (int q = 0; q < kPix; ++q) {
          const int kw = j - q * S;  // the tap of output q that input pixel j meets (compile time)
          if (kw < 0 || kw >= K) continue;
#pragma unroll
          for (int v = 0; v < V; ++v) acc[q][v] = fmaf(xv[v], wk[kw][v], acc[q][v]);
        }
      }
    }
    const int64_t yn = n * g.imageOut;
#pragma unroll
    for (int q = 0; q < kPix; ++q) {
      const int ow = ow0 + q;
      if (ow >= g.ow) break;
      if (!g.outNchw) {
        const int64_t at = yn + (oh * g.ow + ow) * g.c + c0;
        float r[V];
        if (res) loadF<T, V>(res + at, r);
        Vec<T, V> out;
#pragma unroll
        for (int v = 0; v < V; ++v) out.e[v] = cuda::fromF<T>(cuda::applyAct(acc[q][v] + (res ? r[v] : 0.f), act));
        *reinterpret_cast<typename Raw<sizeof(T) * V>::type*>(y + at) = out.raw;
      } else {
#pragma unroll
        for (int v = 0; v < V; ++v) {
          const int64_t at = yn + (c0 + v) * (g.oh * g.ow) + oh * g.ow + ow;
          const float r = res ? cuda::toF(res[at]) : 0.f;
          y[at] = cuda::fromF<T>(cuda::applyAct(acc[q][v] + r, act));
        }
      }
    }
  }
}

template <typename T>
using NhwcKernelFn = void (*)(const T*, const T*, const T*, const T*, T*, NhwcGeom, DevAct);

template <typename T, int V>
NhwcKernelFn<T> pickNhwc(int k, int s) {
  switch (k * 10 + s) {
    case 31: return depthwiseNhwcTiledKernel<T, V, 3, 1>;
    case 32: return depthwiseNhwcTiledKernel<T, V, 3, 2>;
    case 51: return depthwiseNhwcTiledKernel<T, V, 5, 1>;
    case 52: return depthwiseNhwcTiledKernel<T, V, 5, 2>;
    case 71: return depthwiseNhwcTiledKernel<T, V, 7, 1>;
    case 72: return depthwiseNhwcTiledKernel<T, V, 7, 2>;
    default: throw UnsupportedError("conv_fp_depthwise_nhwc_tiled: kernel " + std::to_string(k) + ", stride " + std::to_string(s));
  }
}

struct NhwcState : KernelState {
  NhwcGeom g{};
  int k = 0, s = 0;
};

class DepthwiseNhwcTiledKernel : public Kernel {
 public:
  explicit DepthwiseNhwcTiledKernel(const LayerDesc& l)
      : weights_(l.inputs[1].value, "taps_major", cuda::tapsMajor),
        bias_(l.present(2) ? l.inputs[2].value : HostTensor()),
        act_(cuda::toDevAct(fusedActivation(*l.attrs))) {}

  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const ConvProblem p = resolveConv(l);
    const Window3& w = p.win;
    auto s = std::make_unique<NhwcState>();
    const int64_t limit = int64_t(1) << 31;
    s->g.imageIn = p.inChannels * w.in[1] * w.in[2];
    s->g.imageOut = p.outChannels * w.out[1] * w.out[2];
    if (s->g.imageIn >= limit || s->g.imageOut >= limit)
      throw UnsupportedError("conv_fp_depthwise_nhwc_tiled: an image over 2^31 elements");
    s->g.batch = static_cast<int>(p.batch);
    s->g.c = static_cast<int>(p.inChannels);
    s->g.h = static_cast<int>(w.in[1]);
    s->g.w = static_cast<int>(w.in[2]);
    s->g.oh = static_cast<int>(w.out[1]);
    s->g.ow = static_cast<int>(w.out[2]);
    s->g.padH = static_cast<int>(w.padBegin[1]);
    s->g.padW = static_cast<int>(w.padBegin[2]);
    s->g.groupsW = (s->g.ow + kPix - 1) / kPix;
    s->g.outNchw = outLayoutBlock(l) != kNhwcBlock;
    s->k = static_cast<int>(w.kernel[1]);
    s->s = static_cast<int>(w.stride[1]);
    state = std::move(s);
    return 0;
  }

  void execute(const KernelIO& io, KernelState* state) const override {
    const auto* s = static_cast<const NhwcState*>(state);
    if (int64_t(s->g.batch) * s->g.imageOut == 0) return;
    const void* res = io.in.size() > 3 ? io.in[3].data : nullptr;
    const void* bias = bias_.orInput(io, 2);
    auto run = [&](auto tag) {
      using T = decltype(tag);
      constexpr int kVec = 16 / sizeof(T);
      // 16-byte vectors where C and every pointer allow them (arena and constant buffers are
      // 256-byte aligned; user buffers may not be), else one channel per thread.
      auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
      const bool vec = s->g.c % kVec == 0 && aligned(io.in[0].data) && aligned(io.out[0].data) && aligned(res) &&
                       aligned(bias) && aligned(weights_.get());
      NhwcGeom g = s->g;
      g.vecs = vec ? g.c / kVec : g.c;
      const int64_t threads = int64_t(g.vecs) * g.groupsW * g.oh;
      const dim3 grid(static_cast<unsigned>((threads + kThreads - 1) / kThreads), static_cast<unsigned>(std::min(g.batch, kMaxGridY)));
      const NhwcKernelFn<T> kernel = vec ? pickNhwc<T, kVec>(s->k, s->s) : pickNhwc<T, 1>(s->k, s->s);
      kernel<<<grid, kThreads, 0, cuda::streamOf(io)>>>(io.in[0].as<T>(), static_cast<const T*>(weights_.get()),
                                                        static_cast<const T*>(bias), static_cast<const T*>(res),
                                                        io.out[0].as<T>(), g, act_);
    };
    cuda::dispatchCudaType<kFloatTypes>(io.in[0].type, run, "conv_fp_depthwise_nhwc_tiled");
    KILN_CUDA_CHECK_LAUNCH();
  }

  bool holdsInput(size_t i) const override { return i == 1 || (i == 2 && bias_.get()); }

 private:
  DeviceConstant weights_, bias_;
  DevAct act_;
};

bool supportsNhwcTiled(const LayerDesc& l) {
  if (inLayoutBlock(l) != kNhwcBlock || (outLayoutBlock(l) != kNhwcBlock && outLayoutBlock(l) != 1)) return false;
  return cuda::tiledDepthwise(l) && l.inputs[1].value.valid();  // weights uploaded taps-major
}

std::unique_ptr<Kernel> createNhwcTiled(const LayerDesc& l) { return std::make_unique<DepthwiseNhwcTiledKernel>(l); }

}  // namespace

namespace cuda {
KernelFactory depthwiseConvNhwcTiledCuda() { return {supportsNhwcTiled, createNhwcTiled}; }
}  // namespace cuda

}  // namespace kiln
