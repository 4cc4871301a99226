// "conv_half_small_cin_wmma": a float16/bfloat16 2-D or 1-D Conv with few input channels (the stem
// of a CNN: C = 3, e.g. ResNet's 7x7 stride 2, EfficientNet / RegNet / MobileNet's 3x3 stride 2;
// wav2vec2 / HuBERT's first Conv1d: C = 1, kernel 10, 512 channels) as an implicit GEMM on the
// tensor cores, reading the plain NCHW input as it is.
//
// Why: cuDNN's tensor-core engines want C a multiple of 8; conv_half_cudnn_pad8 copies X channels
// last padded to 8 channels first (2.7x the input's bytes written, then read) and its engines ran
// these convs at 15-45 TFLOP/s, 0.13-0.35 ms at the zoo's throughput batches on the H200 (ResNet
// stems at batch 64: 0.35 ms, ~7% of ResNet-50-GN / DenseNet-121). Here the GEMM's K (C * R * S taps,
// 27 or 147) is small enough that a block holds a 64-pixel tile's whole im2col rows and all the
// weights in shared memory: one pass over X (through L1: neighbouring windows overlap), one store
// of Y (NHWC or NCHW), bias / residual / activation in the epilogue.
//
// Block: 256 threads (8 warps), persistent over 64-pixel tiles (pixels = flattened n, oh, ow):
//   1. per tile, each pixel's image offset and window origin (smem);
//   2. the tile's im2col rows A[64][Kp] (Kp = K rounded up to 16, zeros past K and in padding);
//   3. WMMA 16x16x16, float32 accumulators: warps over the 4 x 8 output tiles of 128 channels at a
//      time, B = the packed weights [Kp][Np] loaded once per block;
//   4. accumulators through smem to the epilogue, which writes Y in the layer's layout.
#include <mma.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "backends/cuda/conv_act.cuh"
#include "backends/cuda/cuda_tactics.h"
#include "backends/cuda/cuda_util.h"
#include "ops/conv_geometry.h"
#include "ops/conv_layout.h"
#include "ops/fused_attrs.h"

namespace kiln {

namespace {

using cuda::DevAct;
using cuda::DeviceConstant;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kTileM = 64;     // output pixels per tile
constexpr int kMaxK = 256;     // C * R * S (the im2col row) at most
constexpr int kChunkN = 128;   // output channels per MMA pass over a tile (wider Cout: several passes)
constexpr int kMaxCout = 1024;
constexpr int kMaxFrags = (kTileM / 16) * (kChunkN / 16) / kWarps;  // 16x16 output tiles per warp and pass
constexpr int kMaxSmem = 112 * 1024;  // dynamic shared memory at most (Kp 256, Np 128: ~106 KB)

struct SmallCinGeom {
  int c, h, w, oh, ow, r, s, strideH, strideW, dilH, dilW, padH, padW;
  int k, kp, cout, np;
  int64_t pixels, tiles;  // n * oh * ow, and its 64-pixel tiles
  bool outNchw, vecOut;
};

//! Shared memory of one block: A (and the float accumulator tile after the MMA), B, the tap and
//! pixel tables.
//! Leading dimensions in shared memory: rows padded by 16 bytes so that the 16 rows of a WMMA load
//! do not fall on the same banks (a 160-half row is 320 bytes: every other row on one bank group).
__host__ __device__ inline int ldA(const SmallCinGeom& g) { return g.kp + 8; }
__host__ __device__ inline int ldB(const SmallCinGeom& g) { return g.np + 8; }
__host__ __device__ inline int chunkN(const SmallCinGeom& g) { return g.np < kChunkN ? g.np : kChunkN; }
__host__ __device__ inline int ldC(const SmallCinGeom& g) { return chunkN(g) + 4; }
//! A, then the float accumulator tile of one pass: over A when one pass covers Cout (A is read
//! only before it), after A when later passes read A again.
__host__ __device__ inline size_t regionCOffset(const SmallCinGeom& g) {
  return g.np <= kChunkN ? 0 : size_t(kTileM) * ldA(g) * 2;
}
__host__ __device__ inline size_t regionABytes(const SmallCinGeom& g) {
  const size_t a = size_t(kTileM) * ldA(g) * 2, c = regionCOffset(g) + size_t(kTileM) * ldC(g) * 4;
  return a > c ? a : c;
}
__host__ __device__ inline size_t smemBytes(const SmallCinGeom& g) {
  return regionABytes(g) + size_t(g.kp) * ldB(g) * 2 + size_t(g.kp) * 3 * 4 + size_t(kTileM) * 3 * 8;
}

template <typename T>
__global__ void __launch_bounds__(kThreads) smallCinConvKernel(const T* __restrict__ x, const T* __restrict__ wpk,
                                                               const T* __restrict__ bias, const T* __restrict__ res,
                                                               T* __restrict__ y, const SmallCinGeom g, const DevAct act) {
  namespace wmma = nvcuda::wmma;
  extern __shared__ __align__(128) unsigned char smem[];
  T* sA = reinterpret_cast<T*>(smem);
  float* sC = reinterpret_cast<float*>(smem + regionCOffset(g));  // accumulators of one pass
  T* sB = reinterpret_cast<T*>(smem + regionABytes(g));
  int* sTapOff = reinterpret_cast<int*>(smem + regionABytes(g) + size_t(g.kp) * ldB(g) * 2);  // c*H*W + dy*W + dx
  int* sTapDy = sTapOff + g.kp;
  int* sTapDx = sTapDy + g.kp;
  int64_t* sPixBase = reinterpret_cast<int64_t*>(sTapDx + g.kp);  // n*C*H*W + iy0*W + ix0 (may be < 0: padding)
  int64_t* sPixY0 = sPixBase + kTileM;
  int64_t* sPixX0 = sPixY0 + kTileM;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int lda = ldA(g), ldb = ldB(g), ldc = ldC(g);

  // The weights [Kp][Np] (zero-padded on the host) once per block; the tap tables.
  {
    const int rowVecs = g.np / 8;  // Np % 16 == 0: whole 16-byte vectors
    const uint4* src = reinterpret_cast<const uint4*>(wpk);
    for (int i = tid; i < g.kp * rowVecs; i += kThreads)
      *reinterpret_cast<uint4*>(sB + (i / rowVecs) * ldb + (i % rowVecs) * 8) = src[i];
    for (int k = tid; k < g.kp; k += kThreads) {
      if (k < g.k) {
        const int c = k / (g.r * g.s), rs = k % (g.r * g.s), dy = rs / g.s * g.dilH, dx = rs % g.s * g.dilW;
        sTapOff[k] = c * g.h * g.w + dy * g.w + dx;
        sTapDy[k] = dy;
        sTapDx[k] = dx;
      } else {
        sTapOff[k] = -1;
        sTapDy[k] = sTapDx[k] = 0;
      }
    }
  }
  const T zero = cuda::fromF<T>(0.f);

  for (int64_t tile = blockIdx.x; tile < g.tiles; tile += gridDim.x) {
    const int64_t p0 = tile * kTileM;
    if (tid < kTileM) {
      const int64_t p = p0 + tid;
      if (p < g.pixels) {
        const int64_t n = p / (int64_t(g.oh) * g.ow);
        const int rem = static_cast<int>(p - n * g.oh * g.ow), oy = rem / g.ow, ox = rem % g.ow;
        const int64_t y0 = int64_t(oy) * g.strideH - g.padH, x0 = int64_t(ox) * g.strideW - g.padW;
        sPixBase[tid] = n * g.c * g.h * g.w + y0 * g.w + x0;
        sPixY0[tid] = y0;
        sPixX0[tid] = x0;
      } else {  // past the last pixel: a window origin no tap reaches into X from
        sPixBase[tid] = 0;
        sPixY0[tid] = -(int64_t(1) << 40);
        sPixX0[tid] = 0;
      }
    }
    __syncthreads();  // the pixel tables (and, first time round, B and the tap tables)
    // im2col rows: a warp per pixel at a time, its lanes over the taps (consecutive taps are
    // consecutive columns of X: coalesced within a window row).
    for (int m = warp; m < kTileM; m += kWarps) {
      const int64_t base = sPixBase[m], y0 = sPixY0[m], x0 = sPixX0[m];
      T* row = sA + m * lda;
      for (int k = lane; k < g.kp; k += 32) {
        T v = zero;
        const int off = sTapOff[k];
        if (off >= 0) {
          const int64_t iy = y0 + sTapDy[k], ix = x0 + sTapDx[k];
          if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w) v = x[base + off];
        }
        row[k] = v;
      }
    }
    __syncthreads();
    for (int n0 = 0; n0 < g.np; n0 += kChunkN) {  // passes over Cout, kChunkN channels each
      const int nTiles = min(kChunkN, g.np - n0) / 16, tilesTotal = (kTileM / 16) * nTiles;
      const int c1 = min(g.cout, n0 + kChunkN);  // channels n0 .. c1 - 1 are real
      // A warp's output tiles are t = warp + j * kWarps; the loops unroll over j so that the
      // fragments stay in registers (a run-time index would put them in local memory).
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kMaxFrags];
#pragma unroll
      for (int j = 0; j < kMaxFrags; ++j) {
        const int t = warp + j * kWarps;
        if (t >= tilesTotal) break;
        const int mt = t / nTiles, nt = t % nTiles;
        wmma::fill_fragment(acc[j], 0.f);
        for (int kk = 0; kk < g.kp; kk += 16) {
          wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
          wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> b;
          wmma::load_matrix_sync(a, sA + mt * 16 * lda + kk, lda);
          wmma::load_matrix_sync(b, sB + kk * ldb + n0 + nt * 16, ldb);
          wmma::mma_sync(acc[j], a, b, acc[j]);
        }
      }
      __syncthreads();  // every warp done reading A (one pass: the accumulators go over it)
#pragma unroll
      for (int j = 0; j < kMaxFrags; ++j) {
        const int t = warp + j * kWarps;
        if (t >= tilesTotal) break;
        const int mt = t / nTiles, nt = t % nTiles;
        wmma::store_matrix_sync(sC + mt * 16 * ldc + nt * 16, acc[j], ldc, wmma::mem_row_major);
      }
      __syncthreads();
      if (!g.outNchw) {
        // NHWC: Y[p][co], each thread 8 channels of one pixel (16-byte stores when Cout % 8 == 0).
        const int vecsPerPix = (c1 - n0 + 7) / 8;
        for (int i = tid; i < kTileM * vecsPerPix; i += kThreads) {
          const int m = i / vecsPerPix, cc = (i % vecsPerPix) * 8, c0 = n0 + cc;
          const int64_t p = p0 + m;
          if (p >= g.pixels) continue;
          const float* acc8 = sC + m * ldc + cc;
          T* out = y + p * g.cout + c0;
          const T* r = res ? res + p * g.cout + c0 : nullptr;
          if (g.vecOut) {
            cuda::Pack16<T> o, rv;
            if (r) rv.u = *reinterpret_cast<const uint4*>(r);
#pragma unroll
            for (int e = 0; e < 8; ++e) {
              const float v = acc8[e] + (bias ? cuda::toF(bias[c0 + e]) : 0.f) + (r ? cuda::toF(rv.e[e]) : 0.f);
              o.e[e] = cuda::fromF<T>(cuda::applyAct(v, act));
            }
            *reinterpret_cast<uint4*>(out) = o.u;
          } else {
            for (int e = 0; e < 8 && c0 + e < c1; ++e) {
              const float v = acc8[e] + (bias ? cuda::toF(bias[c0 + e]) : 0.f) + (r ? cuda::toF(r[e]) : 0.f);
              out[e] = cuda::fromF<T>(cuda::applyAct(v, act));
            }
          }
        }
      } else {
        // NCHW: Y[n][co][pixel], consecutive threads over consecutive pixels of one channel.
        const int64_t plane = int64_t(g.oh) * g.ow;
        for (int i = tid; i < kTileM * (c1 - n0); i += kThreads) {
          const int m = i % kTileM, co = n0 + i / kTileM;
          const int64_t p = p0 + m;
          if (p >= g.pixels) continue;
          const int64_t n = p / plane, at = (n * g.cout + co) * plane + (p - n * plane);
          const float v = sC[m * ldc + co - n0] + (bias ? cuda::toF(bias[co]) : 0.f) + (res ? cuda::toF(res[at]) : 0.f);
          y[at] = cuda::fromF<T>(cuda::applyAct(v, act));
        }
      }
      __syncthreads();  // the epilogue done with sC (the next pass's accumulators, or the next tile's rows)
    }
  }
}

//! W [Cout][C][R][S] (2-byte elements) as B [Kp][Np]: B[k][co] = W[co][k], zeros elsewhere.
HostTensor packWeights(const HostTensor& w, int64_t kp, int64_t np) {
  const int64_t cout = w.dims()[0], k = w.count() / cout;
  HostTensor out(w.type(), Dims{kp, np});
  const auto* src = static_cast<const uint16_t*>(w.data());
  auto* dst = static_cast<uint16_t*>(out.data());
  for (int64_t co = 0; co < cout; ++co)
    for (int64_t i = 0; i < k; ++i) dst[i * np + co] = src[co * k + i];
  return out;
}

int64_t roundUp16(int64_t v) { return (v + 15) / 16 * 16; }

struct SmallCinState : KernelState {
  SmallCinGeom g{};
  size_t smem = 0;
  unsigned blocks = 0;
};

//! The kernel for 2-byte type `t`, opted in to kMaxSmem bytes of dynamic shared memory (past 48 KB
//! a kernel must ask; once per type and process).
template <typename T>
auto optedInKernel() {
  static const cudaError_t optIn = cudaFuncSetAttribute(smallCinConvKernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxSmem);
  KILN_CUDA_CHECK(optIn);
  return smallCinConvKernel<T>;
}

class SmallCinConvKernel : public Kernel {
 public:
  explicit SmallCinConvKernel(const LayerDesc& l)
      : weights_(l.inputs[1].value, packing(l), [](const HostTensor& w) {
          const int64_t k = w.count() / w.dims()[0];
          return packWeights(w, roundUp16(k), roundUp16(w.dims()[0]));
        }),
        bias_(l.present(2) ? l.inputs[2].value : HostTensor()),
        act_(cuda::toDevAct(fusedActivation(*l.attrs))) {}

  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const ConvProblem p = resolveConv(l);
    const Window3& w = p.win;
    const int64_t limit = int64_t(1) << 31;
    if (p.inChannels * w.in[1] * w.in[2] >= limit || p.outChannels * w.out[1] * w.out[2] >= limit)
      throw UnsupportedError("conv_half_small_cin_wmma: an image over 2^31 elements");
    auto s = std::make_unique<SmallCinState>();
    SmallCinGeom& g = s->g;
    g.c = static_cast<int>(p.inChannels);
    g.h = static_cast<int>(w.in[1]);
    g.w = static_cast<int>(w.in[2]);
    g.oh = static_cast<int>(w.out[1]);
    g.ow = static_cast<int>(w.out[2]);
    g.r = static_cast<int>(w.kernel[1]);
    g.s = static_cast<int>(w.kernel[2]);
    g.strideH = static_cast<int>(w.stride[1]);
    g.strideW = static_cast<int>(w.stride[2]);
    g.dilH = static_cast<int>(w.dilation[1]);
    g.dilW = static_cast<int>(w.dilation[2]);
    g.padH = static_cast<int>(w.padBegin[1]);
    g.padW = static_cast<int>(w.padBegin[2]);
    g.k = g.c * g.r * g.s;
    g.kp = static_cast<int>(roundUp16(g.k));
    g.cout = static_cast<int>(p.outChannels);
    g.np = static_cast<int>(roundUp16(g.cout));
    g.pixels = p.batch * w.out[1] * w.out[2];
    g.tiles = (g.pixels + kTileM - 1) / kTileM;
    g.outNchw = outLayoutBlock(l) != kNhwcBlock;
    // Persistent blocks: as many as the SMs hold at once (each loads the weights once), at most one per tile.
    s->smem = smemBytes(g);
    int perSm = 0;
    cuda::dispatchCudaType<kFloatTypes>(l.inputs[0].type, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, float>) {
        throw UnsupportedError("conv_half_small_cin_wmma: float32");
      } else {
        KILN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, optedInKernel<T>(), kThreads, s->smem));
      }
    }, "conv_half_small_cin_wmma");
    if (perSm < 1) throw UnsupportedError("conv_half_small_cin_wmma: no block fits an SM");
    s->blocks = static_cast<unsigned>(std::min<int64_t>({g.tiles, int64_t(perSm) * cuda::smCount(), 1 << 30}));
    state = std::move(s);
    return 0;
  }

  void execute(const KernelIO& io, KernelState* state) const override {
    const auto* st = static_cast<const SmallCinState*>(state);
    SmallCinGeom g = st->g;
    if (g.pixels == 0) return;
    const void* res = io.in.size() > 3 ? io.in[3].data : nullptr;
    const void* bias = bias_.orInput(io, 2);
    auto aligned = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
    g.vecOut = g.cout % 8 == 0 && aligned(io.out[0].data) && (!res || aligned(res));
    auto run = [&](auto tag) {
      using T = decltype(tag);
      if constexpr (std::is_same_v<T, float>) {
        throw UnsupportedError("conv_half_small_cin_wmma: float32");
      } else {
        optedInKernel<T>()<<<st->blocks, kThreads, st->smem, cuda::streamOf(io)>>>(
            io.in[0].as<T>(), static_cast<const T*>(weights_.get()), static_cast<const T*>(bias), static_cast<const T*>(res),
            io.out[0].as<T>(), g, act_);
      }
    };
    cuda::dispatchCudaType<kFloatTypes>(io.in[0].type, run, "conv_half_small_cin_wmma");
    KILN_CUDA_CHECK_LAUNCH();
  }

  bool holdsInput(size_t i) const override { return i == 1 || (i == 2 && bias_.get()); }

 private:
  static std::string packing(const LayerDesc& l) {
    const int64_t cout = l.inputs[1].dims[0], k = l.inputs[1].value.count() / std::max<int64_t>(cout, 1);
    return "small_cin_b_" + std::to_string(roundUp16(k)) + "x" + std::to_string(roundUp16(cout));
  }

  DeviceConstant weights_, bias_;
  DevAct act_;
};

bool supportsSmallCin(const LayerDesc& l) {
  if (l.op != "Conv" || l.inputs.size() < 2 || !l.present(0) || !l.present(1) || l.outputs.size() != 1) return false;
  const DataType t = l.inputs[0].type;
  if (!isHalfType(t) || l.inputs[1].type != t || l.outputs[0].type != t) return false;
  if (l.present(2) && l.inputs[2].type != t) return false;
  if (l.inputs.size() > 3 && l.present(3) && l.inputs[3].type != t) return false;
  if (!cuda::knownActivation(l) || !l.inputs[1].value.valid()) return false;
  if (inLayoutBlock(l) != 1 || (outLayoutBlock(l) != 1 && outLayoutBlock(l) != kNhwcBlock)) return false;
  const Dims &x = l.inputs[0].dims, &w = l.inputs[1].dims;  // 2-D, or 1-D as H = 1
  if ((x.size() != 4 && x.size() != 3) || w.size() != x.size() || l.attrs->getInt("group", 1) != 1 || w[1] != x[1]) return false;
  // Few input channels (C a multiple of 8 suits cuDNN's engines) and a short im2col row.
  int64_t k = 1;
  for (size_t i = 1; i < w.size(); ++i) k *= w[i];
  const int64_t c = x[1];
  if (c <= 0 || c % 8 == 0 || k <= 0 || k > kMaxK || w[0] <= 0 || w[0] > kMaxCout) return false;
  SmallCinGeom g{};
  g.kp = static_cast<int>(roundUp16(k));
  g.np = static_cast<int>(roundUp16(w[0]));
  return smemBytes(g) <= size_t(kMaxSmem);
}

std::unique_ptr<Kernel> createSmallCin(const LayerDesc& l) { return std::make_unique<SmallCinConvKernel>(l); }

}  // namespace

namespace cuda {
KernelFactory smallCinWmmaConv() { return {supportsSmallCin, createSmallCin}; }
}  // namespace cuda

}  // namespace kiln
