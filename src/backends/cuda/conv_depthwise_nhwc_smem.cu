// "conv_fp_depthwise_nhwc_smem": depthwise KxK convolution (K = 3, 5, 7; stride 1 or 2; dilation 1;
// any pads) on a channels-last X, Y channels-last or NCHW, float32/float16/bfloat16 with float32
// accumulation: a shared-memory tiled alternative to conv_fp_depthwise_nhwc_tiled.
// Why: that kernel streams every kernel row's inputs from L1/L2 with 120-150 registers per thread;
// ConvNeXt's 7x7 layers at batch 64 spent 2.05 ms of 6.1 ms there (H200 profile, ~250-680 GB/s of
// ~4 TB/s). Here a block of 256 threads owns a 32-channel slice of an output tile of one image: it
// copies the input tile with its halo ((tile - 1) * S + K pixels a side, zeros outside the image)
// into shared memory once with 16-byte cp.async copies (all in flight together), the slice's
// weights as float32 beside it, then each thread computes P adjacent output pixels of a row for 2
// channels (half2 / bfloat162 / float2 reads), one kernel row's weights in registers at a time.
// Per kernel row and item: K weight reads, (P-1)*S+K input reads and 2*P*K FMAs, so the FMA units,
// not memory, bound it (a 7x7 layer does 49 FMAs per output element). Lanes 0-15 / 16-31 of a warp
// take adjacent output rows and the tile's row pitch is padded so their reads fall in different
// banks. The tile shape is chosen per layer (planDepthwiseSmemTile: fewest issued instructions,
// counting idle lanes of edge tiles and the halo copy) so that 7x7 and 14x14 maps waste little.
// Bias, the residual (in Y's layout) and the fused activation are applied before the single store.
#include <algorithm>
#include <cmath>
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

namespace cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kLanes = 16;                   //!< threads along the slice's channels (2 channels each)
constexpr int kSlice = kSliceChannels;       //!< channels per block
static_assert(kSlice == 2 * kLanes);
constexpr int kGroups = kThreads / kLanes;   //!< thread groups per block, each on its own items
constexpr int kMaxSmem = 48 * 1024;          //!< no opt-in needed; several blocks fit on an SM

int smemRowPitch(int inTileW, int elemSize, int stride) {
  int pitch = inTileW * kSlice;  // elements
  if (elemSize == 2)  // 16 lanes read 16 words: two rows S * pitch apart must be 16 banks apart
    while ((stride * pitch / 2) % 32 != 16) pitch += 8;
  return pitch;
}

}  // namespace

DepthwiseSmemTile planDepthwiseSmemTile(int k, int stride, int outH, int outW, int elemSize, int64_t planes, int sms) {
  DepthwiseSmemTile best;
  double bestTime = -1.0;
  const int perRead = elemSize == 2 ? 3 : 1;  // a 2-channel read: 1 load (+ 2 converts for halves)
  for (int p : {4, 8}) {
    const int span = (p - 1) * stride + k;
    const double itemCost = double(k) * (k + span * perRead + 2 * p * k) + 20.0 * p;  // warp instructions
    for (int cw = 1; cw <= 8; ++cw) {
      const int tileW = cw * p;
      if (cw > 1 && tileW > outW + p - 1) break;  // wider than the image
      for (int tileH = 1; tileH <= 32; ++tileH) {
        if (tileH > 1 && tileH > outH) break;
        DepthwiseSmemTile t{p, tileH, tileW, (tileH - 1) * stride + k, (tileW - 1) * stride + k, 0, 0};
        t.pitch = smemRowPitch(t.inTileW, elemSize, stride);
        t.smemBytes = ((t.inTileH * t.pitch * elemSize + 15) / 16) * 16 + k * k * kSlice * 4;
        if (t.smemBytes > kMaxSmem) break;
        // Warp instructions per image and slice: each block's halo copy (16 bytes a thread, ~24
        // instructions with the index arithmetic) and weights, and per pair of items (a warp's two
        // groups) the item's cost; edge tiles run only their valid items.
        const double copy = double(t.inTileH) * t.inTileW * kSlice * elemSize / 16 / 32 * 24 + k * k + 120.0;
        const int rowTiles[2][2] = {{outH / tileH, tileH}, {outH % tileH ? 1 : 0, outH % tileH}};
        const int colTiles[2][2] = {{outW / tileW, cw}, {outW % tileW ? 1 : 0, (outW % tileW + p - 1) / p}};
        double total = 0.0;
        for (const auto& rt : rowTiles)
          for (const auto& ct : colTiles)
            total += double(rt[0]) * ct[0] * (copy + double(ct[1]) * ((rt[1] + 1) / 2) * itemCost);
        // Few blocks: a block's busiest warp (at about half an instruction a cycle) bounds the time.
        const double critical = 2.0 * std::ceil(double(tileH) * cw / kGroups) * itemCost + copy;
        const double time = std::max(total * double(planes) / (4.0 * std::max(sms, 1)), critical);
        if (bestTime < 0 || time < bestTime) bestTime = time, best = t;
      }
    }
  }
  return best;
}

}  // namespace cuda

namespace {

using cuda::DepthwiseSmemTile;
using cuda::kGroups;
using cuda::kLanes;
using cuda::kSlice;
using cuda::kThreads;
using cuda::DevAct;
using cuda::DeviceConstant;

struct SmemGeom {
  int batch, h, w, c, oh, ow, padH, padW;
  int tileH, tileW, inTileH, inTileW, pitch, tilesW;
  int tileBytes;                //!< the input tile's shared memory (16-byte multiple); weights follow
  int64_t imageIn, imageOut;    //!< elements per image of X and Y (each below 2^31)
  bool outNchw, vecIn, pairOut;  //!< 16-byte tile copies; 2-channel stores of Y (and residual loads)
};

__device__ __forceinline__ float2 load2(const float* p) { return *reinterpret_cast<const float2*>(p); }
__device__ __forceinline__ float2 load2(const __half* p) { return __half22float2(*reinterpret_cast<const __half2*>(p)); }
__device__ __forceinline__ float2 load2(const __nv_bfloat16* p) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
}
__device__ __forceinline__ void store2(float* p, float a, float b) { *reinterpret_cast<float2*>(p) = make_float2(a, b); }
__device__ __forceinline__ void store2(__half* p, float a, float b) { *reinterpret_cast<__half2*>(p) = __floats2half2_rn(a, b); }
__device__ __forceinline__ void store2(__nv_bfloat16* p, float a, float b) {
  *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(a, b);
}

//! 16 bytes from global `src` to shared `dst`, or zeros when !valid (src is then not read).
__device__ __forceinline__ void copy16(void* dst, const void* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 16 : 0));
#else
  *reinterpret_cast<uint4*>(dst) = valid ? __ldg(reinterpret_cast<const uint4*>(src)) : make_uint4(0, 0, 0, 0);
#endif
}

__device__ __forceinline__ void copyWait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;\n" ::);
#endif
}

//! X [N][H][W][C], W taps-major [K*K][C], Y [N][OH][OW][C] (or [N][C][OH][OW] when outNchw), the
//! residual like Y. Grid: (tiles of one image, channel slices, images).
template <typename T, int K, int S, int P>
__global__ void __launch_bounds__(kThreads, 3) depthwiseNhwcSmemKernel(const T* __restrict__ x, const T* __restrict__ w,
                                                                     const T* __restrict__ bias, const T* __restrict__ res,
                                                                     T* __restrict__ y, SmemGeom g, DevAct act) {
  constexpr int kSpan = (P - 1) * S + K;  // input pixels of a row that an item's P outputs read
  extern __shared__ __align__(16) unsigned char smem[];
  T* tile = reinterpret_cast<T*>(smem);
  float* wts = reinterpret_cast<float*>(smem + g.tileBytes);
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid % kLanes, grp = tid / kLanes;
  const int th0 = static_cast<int>(blockIdx.x) / g.tilesW * g.tileH, tw0 = static_cast<int>(blockIdx.x) % g.tilesW * g.tileW;
  const int cBase = static_cast<int>(blockIdx.y) * kSlice, c0 = cBase + 2 * lane;
  const int ih0 = th0 * S - g.padH, iw0 = tw0 * S - g.padW;

  for (int i = tid; i < K * K * kSlice; i += kThreads) {
    const int ch = cBase + i % kSlice;
    wts[i] = ch < g.c ? cuda::toF(w[(i / kSlice) * g.c + ch]) : 0.f;
  }
  float b[2] = {0.f, 0.f};
  if (bias) {
    if (c0 < g.c) b[0] = cuda::toF(bias[c0]);
    if (c0 + 1 < g.c) b[1] = cuda::toF(bias[c0 + 1]);
  }
  const int colGroups = g.tileW / P, items = g.tileH * colGroups;

  for (int n = blockIdx.z; n < g.batch; n += gridDim.z) {
    if (n != static_cast<int>(blockIdx.z)) __syncthreads();  // the last image's tile is read
    const T* xn = x + n * g.imageIn;
    if (g.vecIn) {
      constexpr int kE = 16 / sizeof(T), kU = kSlice / kE;  // elements per copy, copies per pixel
      const int total = g.inTileH * g.inTileW * kU;
      for (int u = tid; u < total; u += kThreads) {
        const int part = u % kU, pix = u / kU;
        const int r = pix / g.inTileW, col = pix % g.inTileW;
        const int ih = ih0 + r, iw = iw0 + col, ch = cBase + part * kE;
        const bool in = static_cast<unsigned>(ih) < static_cast<unsigned>(g.h) && static_cast<unsigned>(iw) < static_cast<unsigned>(g.w) && ch < g.c;
        copy16(tile + r * g.pitch + col * kSlice + part * kE, in ? xn + (ih * g.w + iw) * g.c + ch : xn, in);
      }
      copyWait();
    } else {  // C or X not aligned for 16-byte copies: one element at a time
      const int total = g.inTileH * g.inTileW * kSlice;
      for (int e = tid; e < total; e += kThreads) {
        const int ch = e % kSlice, pix = e / kSlice;
        const int r = pix / g.inTileW, col = pix % g.inTileW;
        const int ih = ih0 + r, iw = iw0 + col;
        const bool in = static_cast<unsigned>(ih) < static_cast<unsigned>(g.h) && static_cast<unsigned>(iw) < static_cast<unsigned>(g.w) && cBase + ch < g.c;
        tile[r * g.pitch + col * kSlice + ch] = in ? xn[(ih * g.w + iw) * g.c + cBase + ch] : cuda::fromF<T>(0.f);
      }
    }
    __syncthreads();

    const int64_t yn = n * g.imageOut;
    for (int it = grp; it < items; it += kGroups) {
      const int r = it % g.tileH, cg = it / g.tileH;  // neighbouring groups: neighbouring rows
      const int oh = th0 + r, ow0 = tw0 + cg * P;
      if (oh >= g.oh || ow0 >= g.ow) continue;
      float acc[P][2];
#pragma unroll
      for (int q = 0; q < P; ++q) acc[q][0] = b[0], acc[q][1] = b[1];
      const T* base = tile + r * S * g.pitch + cg * P * S * kSlice + 2 * lane;
#pragma unroll 1  // a kernel row at a time keeps K weights, not K*K, in registers
      for (int kh = 0; kh < K; ++kh) {
        float2 wk[K];
#pragma unroll
        for (int kw = 0; kw < K; ++kw) wk[kw] = *reinterpret_cast<const float2*>(wts + (kh * K + kw) * kSlice + 2 * lane);
        const T* row = base + kh * g.pitch;
#pragma unroll
        for (int j = 0; j < kSpan; ++j) {
          const float2 xv = load2(row + j * kSlice);
#pragma unroll
          for (int q = 0; q < P; ++q) {
            const int kw = j - q * S;  // the tap of output q that input pixel j meets (compile time)
            if (kw < 0 || kw >= K) continue;
            acc[q][0] = fmaf(xv.x, wk[kw].x, acc[q][0]);
            acc[q][1] = fmaf(xv.y, wk[kw].y, acc[q][1]);
          }
        }
      }
      if (c0 >= g.c) continue;
#pragma unroll
      for (int q = 0; q < P; ++q) {
        const int ow = ow0 + q;
        if (ow >= g.ow) break;
        if (!g.outNchw) {
          const int64_t at = yn + (oh * g.ow + ow) * g.c + c0;
          if (g.pairOut) {  // C even: both channels exist, 2-element aligned
            float r0 = 0.f, r1 = 0.f;
            if (res) {
              const float2 rv = load2(res + at);
              r0 = rv.x, r1 = rv.y;
            }
            store2(y + at, cuda::applyAct(acc[q][0] + r0, act), cuda::applyAct(acc[q][1] + r1, act));
          } else {
            for (int v = 0; v < 2 && c0 + v < g.c; ++v) {
              const float rv = res ? cuda::toF(res[at + v]) : 0.f;
              y[at + v] = cuda::fromF<T>(cuda::applyAct(acc[q][v] + rv, act));
            }
          }
        } else {
          for (int v = 0; v < 2 && c0 + v < g.c; ++v) {
            const int64_t at = yn + int64_t(c0 + v) * (g.oh * g.ow) + oh * g.ow + ow;
            const float rv = res ? cuda::toF(res[at]) : 0.f;
            y[at] = cuda::fromF<T>(cuda::applyAct(acc[q][v] + rv, act));
          }
        }
      }
    }
  }
}

template <typename T>
using SmemKernelFn = void (*)(const T*, const T*, const T*, const T*, T*, SmemGeom, DevAct);

template <typename T, int P>
SmemKernelFn<T> pickSmem(int k, int s) {
  switch (k * 10 + s) {
    case 31: return depthwiseNhwcSmemKernel<T, 3, 1, P>;
    case 32: return depthwiseNhwcSmemKernel<T, 3, 2, P>;
    case 51: return depthwiseNhwcSmemKernel<T, 5, 1, P>;
    case 52: return depthwiseNhwcSmemKernel<T, 5, 2, P>;
    case 71: return depthwiseNhwcSmemKernel<T, 7, 1, P>;
    case 72: return depthwiseNhwcSmemKernel<T, 7, 2, P>;
    default: throw UnsupportedError("conv_fp_depthwise_nhwc_smem: kernel " + std::to_string(k) + ", stride " + std::to_string(s));
  }
}

struct SmemState : KernelState {
  SmemGeom g{};
  int k = 0, s = 0, p = 4, smemBytes = 0, tiles = 0, slices = 0;
};

class DepthwiseNhwcSmemKernel : public Kernel {
 public:
  explicit DepthwiseNhwcSmemKernel(const LayerDesc& l)
      : weights_(l.inputs[1].value, "taps_major", cuda::tapsMajor),
        bias_(l.present(2) ? l.inputs[2].value : HostTensor()),
        act_(cuda::toDevAct(fusedActivation(*l.attrs))) {}

  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const ConvProblem p = resolveConv(l);
    const Window3& w = p.win;
    auto s = std::make_unique<SmemState>();
    SmemGeom& g = s->g;
    const int64_t limit = int64_t(1) << 31;
    g.imageIn = p.inChannels * w.in[1] * w.in[2];
    g.imageOut = p.outChannels * w.out[1] * w.out[2];
    if (g.imageIn >= limit || g.imageOut >= limit)
      throw UnsupportedError("conv_fp_depthwise_nhwc_smem: an image over 2^31 elements");
    g.batch = static_cast<int>(p.batch);
    g.c = static_cast<int>(p.inChannels);
    g.h = static_cast<int>(w.in[1]);
    g.w = static_cast<int>(w.in[2]);
    g.oh = static_cast<int>(w.out[1]);
    g.ow = static_cast<int>(w.out[2]);
    g.padH = static_cast<int>(w.padBegin[1]);
    g.padW = static_cast<int>(w.padBegin[2]);
    g.outNchw = outLayoutBlock(l) != kNhwcBlock;
    s->k = static_cast<int>(w.kernel[1]);
    s->s = static_cast<int>(w.stride[1]);
    const int elem = static_cast<int>(elementSize(l.inputs[0].type));
    const DepthwiseSmemTile t = cuda::planDepthwiseSmemTile(s->k, s->s, std::max(g.oh, 1), std::max(g.ow, 1), elem,
                                                                 int64_t(g.batch) * ((g.c + kSlice - 1) / kSlice), cuda::smCount());
    if (t.smemBytes == 0) throw UnsupportedError("conv_fp_depthwise_nhwc_smem: no tile fits in shared memory");
    s->p = t.p;
    g.tileH = t.tileH, g.tileW = t.tileW, g.inTileH = t.inTileH, g.inTileW = t.inTileW, g.pitch = t.pitch;
    g.tileBytes = ((t.inTileH * t.pitch * elem + 15) / 16) * 16;
    s->smemBytes = t.smemBytes;
    g.tilesW = (g.ow + g.tileW - 1) / g.tileW;
    s->tiles = g.tilesW * ((g.oh + g.tileH - 1) / g.tileH);
    s->slices = (g.c + kSlice - 1) / kSlice;
    state = std::move(s);
    return 0;
  }

  void execute(const KernelIO& io, KernelState* state) const override {
    const auto* s = static_cast<const SmemState*>(state);
    if (int64_t(s->g.batch) * s->g.imageOut == 0) return;
    const void* res = io.in.size() > 3 ? io.in[3].data : nullptr;
    const void* bias = bias_.orInput(io, 2);
    auto run = [&](auto tag) {
      using T = decltype(tag);
      auto aligned = [](const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; };
      SmemGeom g = s->g;
      g.vecIn = g.c % (16 / sizeof(T)) == 0 && aligned(io.in[0].data, 16);
      g.pairOut = g.c % 2 == 0 && aligned(io.out[0].data, 2 * sizeof(T)) && aligned(res, 2 * sizeof(T));
      const dim3 grid(static_cast<unsigned>(s->tiles), static_cast<unsigned>(s->slices), static_cast<unsigned>(std::min(g.batch, 65535)));
      const SmemKernelFn<T> kernel = s->p == 8 ? pickSmem<T, 8>(s->k, s->s) : pickSmem<T, 4>(s->k, s->s);
      kernel<<<grid, kThreads, s->smemBytes, cuda::streamOf(io)>>>(io.in[0].as<T>(), static_cast<const T*>(weights_.get()),
                                                                  static_cast<const T*>(bias), static_cast<const T*>(res),
                                                                  io.out[0].as<T>(), g, act_);
    };
    cuda::dispatchCudaType<kFloatTypes>(io.in[0].type, run, "conv_fp_depthwise_nhwc_smem");
    KILN_CUDA_CHECK_LAUNCH();
  }

  bool holdsInput(size_t i) const override { return i == 1 || (i == 2 && bias_.get()); }

 private:
  DeviceConstant weights_, bias_;
  DevAct act_;
};

bool supportsNhwcSmem(const LayerDesc& l) {
  if (inLayoutBlock(l) != kNhwcBlock || (outLayoutBlock(l) != kNhwcBlock && outLayoutBlock(l) != 1)) return false;
  if (!cuda::tiledDepthwise(l) || !l.inputs[1].value.valid()) return false;  // weights uploaded taps-major
  const Dims& x = l.inputs[0].dims;  // tiles.x * slices in the grid's limits
  return x[1] > 0 && (x[1] + cuda::kSliceChannels - 1) / cuda::kSliceChannels <= 65535;
}

std::unique_ptr<Kernel> createNhwcSmem(const LayerDesc& l) { return std::make_unique<DepthwiseNhwcSmemKernel>(l); }

}  // namespace

namespace cuda {
KernelFactory depthwiseConvNhwcSmemCuda() { return {supportsNhwcSmem, createNhwcSmem}; }
}  // namespace cuda

}  // namespace kiln
