// Flash-attention style kernels for the Attention op (4-D Q/K/V, no KV cache):
//  - flashTcKernel: float16/bfloat16 on tensor cores (mma.sync m16n8k16, float32 accumulation).
//    A block owns BM = 16 * NW query rows (16 per warp) of one (batch, head); K and V stream
//    through shared memory in tiles of 64 keys (cp.async, the next K tile loads during the
//    softmax and P V of the current one). Scores stay in registers: the accumulator layout of
//    S = Q K^T is reused as the A operand of O += P V. Online softmax in the exp2 domain. Head
//    sizes up to 128 run in tiles of 32, 64, 96 or 128 columns, the columns past the head size
//    zero in shared memory (they add nothing to Q K^T, and their outputs are not stored): Swin and
//    SegFormer's 32, MobileViT's 36/48/60 and 80 need no SIMT fallback.
//  - flashSimtKernel: any float type, head sizes up to 128, float32 CUDA-core math (the float32
//    path and the fallback for head sizes the tensor-core kernel does not cover).
// Both mask keys >= Skv (tail), keys >= maskLen (short ONNX masks), keys > query (causal), and
// write zeros for a query row whose keys are all masked with -inf (as the reference kernel). With
// kiln_mask_fill (maskedLog2 finite) such a row is uniform over every key instead, as the
// exporters' finfo.min masks make it: a causal block holding one reads all keys (fullyMaskedEnd).
// The tensor-core kernel is templated on the mask kind (none, key flags, dense), so the unmasked
// and key-padding paths carry no per-element mask code; key flags are read once per K tile into
// shared memory, and the causal / tail compares run only on tiles that cross the diagonal or the
// end (the tiles past a causal block's diagonal are never visited).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

#include "backends/cuda/attention_flash.h"
#include "backends/cuda/cuda_util.h"

namespace kiln::cuda {

namespace {

constexpr float kLog2e = 1.4426950408889634f;
constexpr int kTileN = 64;  // keys per K/V tile (tensor-core kernel)

// ---- element conversions ----
template <typename T> __device__ __forceinline__ float toF(T x);
template <> __device__ __forceinline__ float toF<float>(float x) { return x; }
template <> __device__ __forceinline__ float toF<__half>(__half x) { return __half2float(x); }
template <> __device__ __forceinline__ float toF<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T> __device__ __forceinline__ T fromF(float x);
template <> __device__ __forceinline__ float fromF<float>(float x) { return x; }
template <> __device__ __forceinline__ __half fromF<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 fromF<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

//! Two floats as one 32-bit register of T pairs (`lo` in the low half: the lower column).
template <typename T> __device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <> __device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
  __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}
template <> __device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

//! The additive mask value of (b, h, i, j) in the exp2 domain.
__device__ __forceinline__ float maskLog2(const FlashParams& p, int b, int h, int i, int j) {
  const int mb = p.maskPeriodB > 0 ? b % p.maskPeriodB : b;
  const int64_t idx = mb * p.maskStrideB + h * p.maskStrideH + i * p.maskStrideQ + j;
  switch (p.maskType) {
    case FlashMask::kFloat: return static_cast<const float*>(p.mask)[idx] * kLog2e;
    case FlashMask::kHalf: return __half2float(static_cast<const __half*>(p.mask)[idx]) * kLog2e;
    case FlashMask::kBf16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p.mask)[idx]) * kLog2e;
    case FlashMask::kBool: return static_cast<const unsigned char*>(p.mask)[idx] ? 0.f : p.maskedLog2;
    default: return 0.f;
  }
}

//! Keys [0, kvEnd) can contribute; causal blocks also stop after their last query row.
__device__ __forceinline__ int keyEnd(const FlashParams& p, int lastQueryExclusive) {
  int e = p.skv;
  if (p.maskType != FlashMask::kNone) e = min(e, p.maskLen);
  if (p.causal) e = min(e, lastQueryExclusive);
  return e;
}

//! kvEnd, or every key when a causal block holds a row whose keys are all masked by the key flags
//! and masked keys take the finite kiln_mask_fill (that row is then uniform over every key): row
//! q0 has no kept key in [0, q0]. (Rows after q0 see the keys q0 sees.) Block-uniform; every
//! thread of the block must call it.
__device__ __forceinline__ int fullyMaskedEnd(const FlashParams& p, int b, int q0, int kvEnd) {
  if (!p.keyPad || !p.causal || p.maskedLog2 == -INFINITY || kvEnd >= p.maskLen) return kvEnd;
  const unsigned char* flags = static_cast<const unsigned char*>(p.mask) + b * p.maskStrideB;
  int kept = 0;
  for (int j = threadIdx.x; j <= min(q0, p.maskLen - 1); j += blockDim.x) kept |= flags[j];
  return __syncthreads_or(kept) ? kvEnd : p.maskLen;
}

// ---- PTX wrappers (sm_80+) ----
__device__ __forceinline__ unsigned smemAddr(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void cpAsync16(void* smem, const void* gmem, bool valid) {
  // src-size 0 zero-fills the 16 bytes without reading global memory.
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smemAddr(smem)), "l"(gmem), "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void cpAsyncWait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

__device__ __forceinline__ void ldmatrixX4(uint32_t (&r)[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smemAddr(smem))
               : "memory");
}
__device__ __forceinline__ void ldmatrixX4Trans(uint32_t (&r)[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smemAddr(smem))
               : "memory");
}

//! c += a (16x16, row-major) * b (16x8, column-major), float32 accumulators.
template <typename T> __device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
template <> __device__ __forceinline__ void mma16816<__half>(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <> __device__ __forceinline__ void mma16816<__nv_bfloat16>(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

//! Copies `rows` rows of D elements from global `g` (row stride `ld`) to shared `s` (row stride
//! D + 8); rows >= validRows and columns >= cols (a head size below the tile's D) are zero-filled.
//! `vec`: 16-byte cp.async (cols is then a multiple of 8), else plain element copies.
template <typename T, int D>
__device__ __forceinline__ void loadTile(T* s, const T* g, int64_t ld, int rows, int validRows, int cols, bool vec) {
  constexpr int LD = D + 8, CH = D * static_cast<int>(sizeof(T)) / 16;
  if (vec) {
    for (int c = threadIdx.x; c < rows * CH; c += blockDim.x) {
      const int r = c / CH, k = c % CH;
      const bool ok = r < validRows && k * 8 < cols;
      cpAsync16(s + r * LD + k * 8, ok ? g + r * ld + k * 8 : g, ok);
    }
  } else {
    for (int e = threadIdx.x; e < rows * D; e += blockDim.x) {
      const int r = e / D, d = e % D;
      s[r * LD + d] = r < validRows && d < cols ? g[r * ld + d] : fromF<T>(0.f);
    }
  }
}

//! The tensor-core kernel's mask kinds (a template parameter).
enum class TcMask { kNone, kKeys, kDense };

template <typename T, int D, int NW, TcMask MK>
__global__ void __launch_bounds__(NW * 32) flashTcKernel(const FlashParams p) {
  constexpr int BM = 16 * NW, BN = kTileN, LD = D + 8;
  constexpr int DT = D / 8;    // 8-wide output column tiles per warp
  constexpr int KS = D / 16;   // k-steps of Q K^T
  constexpr int NT = BN / 8;   // 8-wide key tiles of S
  extern __shared__ __align__(16) unsigned char smemRaw[];
  T* Qs = reinterpret_cast<T*>(smemRaw);
  T* Ks = Qs + BM * LD;
  T* Vs = Ks + BN * LD;
  float* keyBias = reinterpret_cast<float*>(Vs + BN * LD);  // MK == kKeys: 0 or maskedLog2 per key of the tile

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, tig = lane & 3;
  const int bh = blockIdx.x, b = bh / p.heads, h = bh % p.heads;
  if (p.skipWhen && p.skipWhen[p.maskStrideB != 0 ? b : 0] != 0) return;  // a fallback: the primary served this row
  const int q0 = (gridDim.y - 1 - blockIdx.y) * BM;  // the longest causal blocks start first
  const T* Q = static_cast<const T*>(p.q) + b * p.qs.b + h * p.qs.h + q0 * p.qs.row;
  const T* K = static_cast<const T*>(p.k) + b * p.ks.b + (h / p.group) * p.ks.h;
  const T* V = static_cast<const T*>(p.v) + b * p.vs.b + (h / p.group) * p.vs.h;
  const int kvEnd = fullyMaskedEnd(p, b, q0, keyEnd(p, q0 + BM));
  const int nTiles = kvEnd > 0 ? (kvEnd + BN - 1) / BN : 0;
  const unsigned char* flags = static_cast<const unsigned char*>(p.mask) + b * p.maskStrideB;

  float o[DT][4];
#pragma unroll
  for (int i = 0; i < DT; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  uint32_t qf[KS][4];

  if (nTiles > 0) {
    loadTile<T, D>(Qs, Q, p.qs.row, BM, p.sq - q0, p.d, p.vec);
    loadTile<T, D>(Ks, K, p.ks.row, BN, min(BN, kvEnd), p.d, p.vec);
    cpAsyncCommit();
  }
  for (int t = 0; t < nTiles; ++t) {
    const int kv0 = t * BN;
    loadTile<T, D>(Vs, V + kv0 * p.vs.row, p.vs.row, BN, min(BN, kvEnd - kv0), p.dv, p.vec);
    cpAsyncCommit();
    if constexpr (MK == TcMask::kKeys)  // the previous tile's readers passed the loop's last barrier
      for (int c = threadIdx.x; c < BN; c += blockDim.x) keyBias[c] = kv0 + c < kvEnd && flags[kv0 + c] ? 0.f : p.maskedLog2;
    cpAsyncWait<1>();  // Q and this K tile have landed; V may still be in flight
    __syncthreads();
    if (t == 0) {
      const T* qr = Qs + (warp * 16 + g) * LD + 2 * tig;
#pragma unroll
      for (int kk = 0; kk < KS; ++kk) {
        qf[kk][0] = *reinterpret_cast<const uint32_t*>(qr + kk * 16);
        qf[kk][1] = *reinterpret_cast<const uint32_t*>(qr + 8 * LD + kk * 16);
        qf[kk][2] = *reinterpret_cast<const uint32_t*>(qr + kk * 16 + 8);
        qf[kk][3] = *reinterpret_cast<const uint32_t*>(qr + 8 * LD + kk * 16 + 8);
      }
    }
    // S = Q K^T: ldmatrix rows are keys, the 4 matrices cover 32 head columns (two k-steps).
    float s[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
      for (int k2 = 0; k2 < KS / 2; ++k2) {
        uint32_t r[4];
        ldmatrixX4(r, Ks + (nt * 8 + (lane & 7)) * LD + k2 * 32 + (lane >> 3) * 8);
        mma16816<T>(s[nt], qf[2 * k2], r[0], r[1]);
        mma16816<T>(s[nt], qf[2 * k2 + 1], r[2], r[3]);
      }
    }
    __syncthreads();  // every warp is done with Ks
    if (t + 1 < nTiles) {
      loadTile<T, D>(Ks, K + (kv0 + BN) * p.ks.row, p.ks.row, BN, min(BN, kvEnd - kv0 - BN), p.d, p.vec);
      cpAsyncCommit();
    }
    // Scale, mask, online softmax. This thread holds rows g and g + 8 of the warp's 16 rows.
    // Only a tile crossing the end of the keys or this warp's diagonal compares per element.
    const bool edge = kv0 + BN > kvEnd || (p.causal && kv0 + BN - 1 > q0 + warp * 16);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int i = q0 + warp * 16 + g + half * 8;
      float mx = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int j = kv0 + nt * 8 + 2 * tig + e;
          float x = s[nt][2 * half + e] * p.scaleLog2;
          if constexpr (MK == TcMask::kKeys) {
            const float kb = keyBias[nt * 8 + 2 * tig + e];
            if (kb < 0.f) x = kb;  // masked: the fill (absorbs any score) or -inf
          }
          if constexpr (MK == TcMask::kDense)
            if (j < kvEnd && i < p.sq) x += maskLog2(p, b, h, i, j);
          if (edge) {
            if (j >= kvEnd) x = -INFINITY;
            else if (p.causal && j > i) x = p.maskedLog2;
          }
          s[nt][2 * half + e] = x;
          mx = fmaxf(mx, x);
        }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float mNew = fmaxf(m[half], mx);
      const float base = mNew == -INFINITY ? 0.f : mNew;
      const float alpha = exp2f(m[half] - base);
      m[half] = mNew;
      float sum = 0.f;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float pv = exp2f(s[nt][2 * half + e] - base);
          s[nt][2 * half + e] = pv;
          sum += pv;
        }
      l[half] = l[half] * alpha + sum;  // this thread's partial row sum (the quad reduces at the end)
#pragma unroll
      for (int dt = 0; dt < DT; ++dt) {
        o[dt][2 * half] *= alpha;
        o[dt][2 * half + 1] *= alpha;
      }
    }
    // P as the A operand (16 queries x 16 keys per k-step) straight from the S accumulators.
    uint32_t pf[BN / 16][4];
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      pf[kk][0] = pack2<T>(s[2 * kk][0], s[2 * kk][1]);
      pf[kk][1] = pack2<T>(s[2 * kk][2], s[2 * kk][3]);
      pf[kk][2] = pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      pf[kk][3] = pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3]);
    }
    if (t + 1 < nTiles) cpAsyncWait<1>();  // V has landed; the next K may still be in flight
    else cpAsyncWait<0>();
    __syncthreads();
    // O += P V: transposed ldmatrix of V rows (keys) gives the column-major B operand; the 4
    // matrices cover 16 keys x 16 head columns (two output tiles).
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk)
#pragma unroll
      for (int np = 0; np < DT / 2; ++np) {
        uint32_t r[4];
        ldmatrixX4Trans(r, Vs + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LD + np * 16 + (lane >> 4) * 8);
        mma16816<T>(o[2 * np], pf[kk], r[0], r[1]);
        mma16816<T>(o[2 * np + 1], pf[kk], r[2], r[3]);
      }
    __syncthreads();  // every warp is done with Vs
  }
  cpAsyncWait<0>();
  __syncthreads();

  // Normalize, stage the warp's 16 rows in Qs (free now), then store whole rows.
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float sum = l[half];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    T* row = Qs + (warp * 16 + g + half * 8) * LD + 2 * tig;
#pragma unroll
    for (int dt = 0; dt < DT; ++dt)
      *reinterpret_cast<uint32_t*>(row + dt * 8) = pack2<T>(o[dt][2 * half] * inv, o[dt][2 * half + 1] * inv);
  }
  __syncthreads();
  T* O = static_cast<T*>(p.o) + b * p.os.b + h * p.os.h + q0 * p.os.row;
  const int rows = min(BM, p.sq - q0);
  if (p.vec) {
    const int ch = p.dv * static_cast<int>(sizeof(T)) / 16;  // the padded columns are not stored
    for (int c = threadIdx.x; c < rows * ch; c += blockDim.x) {
      const int r = c / ch, k = c % ch;
      *reinterpret_cast<uint4*>(O + r * p.os.row + k * 8) = *reinterpret_cast<const uint4*>(Qs + r * LD + k * 8);
    }
  } else {
    for (int e = threadIdx.x; e < rows * p.dv; e += blockDim.x) O[(e / p.dv) * p.os.row + e % p.dv] = Qs[(e / p.dv) * LD + e % p.dv];
  }
}

// ---- SIMT kernel ----
constexpr int kSimtWarps = 4, kSimtRows = 4, kSimtBM = kSimtWarps * kSimtRows, kSimtBN = 32;
constexpr int kSimtMaxD = kFlashSimtMaxD, kSimtChunks = kSimtMaxD / 32;

template <typename T>
__global__ void __launch_bounds__(kSimtWarps * 32) flashSimtKernel(const FlashParams p) {
  __shared__ float Qs[kSimtBM][kSimtMaxD];
  __shared__ float Ks[kSimtBN][kSimtMaxD + 1];  // +1: lane j reads row j without bank conflicts
  __shared__ float Vs[kSimtBN][kSimtMaxD];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int bh = blockIdx.x, b = bh / p.heads, h = bh % p.heads;
  const int q0 = (gridDim.y - 1 - blockIdx.y) * kSimtBM;
  const int D = p.d, Dv = p.dv;
  const T* Q = static_cast<const T*>(p.q) + b * p.qs.b + h * p.qs.h + q0 * p.qs.row;
  const T* K = static_cast<const T*>(p.k) + b * p.ks.b + (h / p.group) * p.ks.h;
  const T* V = static_cast<const T*>(p.v) + b * p.vs.b + (h / p.group) * p.vs.h;
  const int kvEnd = fullyMaskedEnd(p, b, q0, keyEnd(p, q0 + kSimtBM));

  for (int e = threadIdx.x; e < kSimtBM * D; e += blockDim.x) {
    const int r = e / D, d = e % D;
    Qs[r][d] = q0 + r < p.sq ? toF(Q[r * p.qs.row + d]) * p.scaleLog2 : 0.f;
  }
  float o[kSimtRows][kSimtChunks], m[kSimtRows], l[kSimtRows];
#pragma unroll
  for (int r = 0; r < kSimtRows; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.f;
#pragma unroll
    for (int c = 0; c < kSimtChunks; ++c) o[r][c] = 0.f;
  }
  for (int kv0 = 0; kv0 < kvEnd; kv0 += kSimtBN) {
    const int valid = min(kSimtBN, kvEnd - kv0);
    __syncthreads();  // the previous tile is consumed (and Qs is written, first time)
    for (int e = threadIdx.x; e < kSimtBN * D; e += blockDim.x) {
      const int r = e / D, d = e % D;
      Ks[r][d] = r < valid ? toF(K[(kv0 + r) * p.ks.row + d]) : 0.f;
    }
    for (int e = threadIdx.x; e < kSimtBN * Dv; e += blockDim.x) {
      const int r = e / Dv, d = e % Dv;
      Vs[r][d] = r < valid ? toF(V[(kv0 + r) * p.vs.row + d]) : 0.f;
    }
    __syncthreads();
    const int j = kv0 + lane;  // this lane's key
    float pr[kSimtRows];
#pragma unroll
    for (int r = 0; r < kSimtRows; ++r) {
      const int row = warp * kSimtRows + r, i = q0 + row;
      float x = 0.f;
      for (int d = 0; d < D; ++d) x += Qs[row][d] * Ks[lane][d];
      if (j >= kvEnd) x = -INFINITY;
      else if (p.causal && j > i) x = p.maskedLog2;
      else if (p.maskType != FlashMask::kNone && i < p.sq) x += maskLog2(p, b, h, i, j);
      float mx = x;
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
      const float mNew = fmaxf(m[r], mx);
      const float base = mNew == -INFINITY ? 0.f : mNew;
      const float alpha = exp2f(m[r] - base);
      m[r] = mNew;
      pr[r] = exp2f(x - base);
      l[r] = l[r] * alpha + pr[r];  // per-lane partial sum (reduced at the end)
#pragma unroll
      for (int c = 0; c < kSimtChunks; ++c) o[r][c] *= alpha;
    }
    for (int jj = 0; jj < valid; ++jj) {
      float vv[kSimtChunks];
#pragma unroll
      for (int c = 0; c < kSimtChunks; ++c) vv[c] = lane + 32 * c < Dv ? Vs[jj][lane + 32 * c] : 0.f;
#pragma unroll
      for (int r = 0; r < kSimtRows; ++r) {
        const float pj = __shfl_sync(0xffffffffu, pr[r], jj);
#pragma unroll
        for (int c = 0; c < kSimtChunks; ++c) o[r][c] += pj * vv[c];
      }
    }
  }
  T* O = static_cast<T*>(p.o) + b * p.os.b + h * p.os.h + q0 * p.os.row;
#pragma unroll
  for (int r = 0; r < kSimtRows; ++r) {
    float sum = l[r];
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    const int row = warp * kSimtRows + r;
    if (q0 + row >= p.sq) continue;
#pragma unroll
    for (int c = 0; c < kSimtChunks; ++c)
      if (lane + 32 * c < Dv) O[row * p.os.row + lane + 32 * c] = fromF<T>(o[r][c] * inv);
  }
}

// ---- host dispatch ----
template <typename T, int D, int NW> size_t tcSmemBytes() {
  return static_cast<size_t>(16 * NW + 2 * kTileN) * (D + 8) * sizeof(T) + kTileN * sizeof(float);
}

TcMask tcMaskOf(const FlashParams& p) {
  if (p.maskType == FlashMask::kNone) return TcMask::kNone;
  return p.keyPad ? TcMask::kKeys : TcMask::kDense;
}

//! The tile width a head size runs in (0: none).
int tcTileD(int d) { return d <= 0 || d > 128 ? 0 : (d + 31) / 32 * 32; }

//! Calls f.template operator()<T, D, NW>() for head size d's tile width D and `warps`.
template <typename F>
void withTcConfig(DataType t, int d, int warps, F&& f) {
  auto byWarps = [&]<typename T, int D>() {
    if (warps == 2) f.template operator()<T, D, 2>();
    else if (warps == 4) f.template operator()<T, D, 4>();
    else if (warps == 8) f.template operator()<T, D, 8>();
    else throw UnsupportedError("flash attention: no tensor-core kernel with " + std::to_string(warps) + " warps");
  };
  auto byType = [&]<typename T>() {
    switch (tcTileD(d)) {
      case 32: byWarps.template operator()<T, 32>(); break;
      case 64: byWarps.template operator()<T, 64>(); break;
      case 96: byWarps.template operator()<T, 96>(); break;
      case 128: byWarps.template operator()<T, 128>(); break;
      default: throw UnsupportedError("flash attention: no tensor-core kernel for head size " + std::to_string(d));
    }
  };
  dispatchCudaType<typeBit(DataType::kHALF) | typeBit(DataType::kBF16)>(
      t, [&](auto tag) { byType.template operator()<decltype(tag)>(); }, "flash attention's tensor-core kernel");
}

}  // namespace

bool flashTcSupported(DataType t, int d, int dv, int warps) {
  return isHalfType(t) && d == dv && tcTileD(d) > 0 && (warps == 2 || warps == 4 || warps == 8);
}

void prepareFlashTc(DataType t, int d, int warps) {
  withTcConfig(t, d, warps, [&]<typename T, int D, int NW>() {
    const int bytes = static_cast<int>(tcSmemBytes<T, D, NW>());
    for (auto* k : {flashTcKernel<T, D, NW, TcMask::kNone>, flashTcKernel<T, D, NW, TcMask::kKeys>, flashTcKernel<T, D, NW, TcMask::kDense>})
      KILN_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  });
}

void launchFlashTc(const FlashParams& p, DataType t, int warps, cudaStream_t s) {
  withTcConfig(t, p.d, warps, [&]<typename T, int D, int NW>() {
    const dim3 grid(static_cast<unsigned>(p.batch * p.heads), static_cast<unsigned>((p.sq + 16 * NW - 1) / (16 * NW)));
    const size_t smem = tcSmemBytes<T, D, NW>();
    switch (tcMaskOf(p)) {
      case TcMask::kNone: flashTcKernel<T, D, NW, TcMask::kNone><<<grid, NW * 32, smem, s>>>(p); break;
      case TcMask::kKeys: flashTcKernel<T, D, NW, TcMask::kKeys><<<grid, NW * 32, smem, s>>>(p); break;
      case TcMask::kDense: flashTcKernel<T, D, NW, TcMask::kDense><<<grid, NW * 32, smem, s>>>(p); break;
    }
  });
}

void launchFlashSimt(const FlashParams& p, DataType t, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(p.batch * p.heads), static_cast<unsigned>((p.sq + kSimtBM - 1) / kSimtBM));
  dispatchCudaType<kFloatTypes>(
      t, [&](auto tag) { flashSimtKernel<decltype(tag)><<<grid, kSimtWarps * 32, 0, s>>>(p); }, "flash attention");
}

}  // namespace kiln::cuda
