// CUDA kernels of pure data movement: the strided copy (gather with 1..16-byte vectors), the
// tiled shared-memory transpose, and fills. Every layout op (Transpose, Concat, Split, Slice,
// Expand, Tile, DepthToSpace, SpaceToDepth) lowers to CopyPlans run by launchCopy.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include "backends/cuda/cuda_util.h"
#include "backends/cuda/shape_cuda.cuh"

namespace kiln::cuda {

namespace {

// ---------------------------------------------------------------- plan helpers (host)

int64_t planCount(const CopyPlan& p) {
  int64_t n = 1;
  for (int k = 0; k < p.rank; ++k) n *= p.dims[k];
  return n;
}

//! Largest |offset| a plan can reach (bounds the 32-bit index path).
int64_t maxOffset(const CopyPlan& p, bool input) {
  int64_t m = std::llabs(input ? p.ibase : p.obase);
  for (int k = 0; k < p.rank; ++k) m += (p.dims[k] - 1) * std::llabs(input ? p.istr[k] : p.ostr[k]);
  return m;
}

template <int VB> struct VecOf;
template <> struct VecOf<1> { using type = uint8_t; };
template <> struct VecOf<2> { using type = uint16_t; };
template <> struct VecOf<4> { using type = uint32_t; };
template <> struct VecOf<8> { using type = uint2; };
template <> struct VecOf<16> { using type = uint4; };

// Device plans store axes innermost first.
struct Plan32 {
  int rank;
  uint32_t count;
  int32_t ibase, obase;
  FastDiv div[kMaxCopyRank];
  int32_t istr[kMaxCopyRank], ostr[kMaxCopyRank];
};

struct Plan64 {
  int rank;
  int64_t count;
  int64_t ibase, obase;
  int64_t dims[kMaxCopyRank];
  int64_t istr[kMaxCopyRank], ostr[kMaxCopyRank];
};

// ---------------------------------------------------------------- kernels

template <typename V>
__global__ void __launch_bounds__(256) copy32Kernel(const V* __restrict__ src, V* __restrict__ dst, Plan32 p) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < p.count; i += gridDim.x * blockDim.x) {
    uint32_t r = i;
    int32_t io = p.ibase, oo = p.obase;
#pragma unroll
    for (int k = 0; k < kMaxCopyRank; ++k) {
      if (k == p.rank) break;
      uint32_t q = p.div[k].div(r);
      int32_t c = static_cast<int32_t>(r - q * p.div[k].d);
      io += c * p.istr[k];
      oo += c * p.ostr[k];
      r = q;
    }
    dst[oo] = src[io];
  }
}

template <typename V>
__global__ void __launch_bounds__(256) copy64Kernel(const V* __restrict__ src, V* __restrict__ dst, Plan64 p) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < p.count; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t r = i, io = p.ibase, oo = p.obase;
#pragma unroll
    for (int k = 0; k < kMaxCopyRank; ++k) {
      if (k == p.rank) break;
      int64_t q = r / p.dims[k], c = r - q * p.dims[k];
      io += c * p.istr[k];
      oo += c * p.ostr[k];
      r = q;
    }
    dst[oo] = src[io];
  }
}

//! Tiled transpose: axis A is contiguous in the input (stride 1), axis B is the innermost output
//! axis (stride 1); the other axes ("batch", innermost first) are walked per block. Elements
//! narrower than 4 bytes move as whole 4-byte words (P elements each) where the strides and
//! pointers allow, through a (32 * P) x (32 * P) tile: with one 2-byte element per thread and a
//! 32 x 32 tile, too few bytes were in flight (ConvNeXt's NCHW <-> NHWC Transposes ran at about
//! a quarter of the H200's bandwidth).
struct TileParams {
  int64_t dimA, dimB, strideB, strideA;  // strideB: input stride of B; strideA: output stride of A
  int64_t tilesB, batches;
  int64_t ibase, obase;
  int batchRank;
  bool wordIn, wordOut;  // rows of the input / output may be read / written as whole words
  int64_t bdims[kMaxCopyRank], bistr[kMaxCopyRank], bostr[kMaxCopyRank];
};

constexpr int kTile = 32, kTileRows = 8;

//! Elements per word (P) and the word type a tile row moves in.
template <typename T> struct TileWord {
  static constexpr int P = sizeof(T) < 4 ? static_cast<int>(4 / sizeof(T)) : 1;
  using W = std::conditional_t<(sizeof(T) < 4), uint32_t, T>;
};

//! P elements row[at .. at + P) as a word; those at or past `end` are left 0.
template <typename T>
__device__ __forceinline__ typename TileWord<T>::W loadWord(const T* row, int64_t at, int64_t end, bool whole) {
  using W = typename TileWord<T>::W;
  constexpr int P = TileWord<T>::P;
  if (whole && at + P <= end) return *reinterpret_cast<const W*>(row + at);
  T v[P] = {};
#pragma unroll
  for (int j = 0; j < P; ++j)
    if (at + j < end) v[j] = row[at + j];
  W w;
  memcpy(&w, v, sizeof w);
  return w;
}

template <typename T>
__global__ void __launch_bounds__(kTile* kTileRows, 4) transposeTileKernel(const T* __restrict__ src, T* __restrict__ dst,
                                                                        TileParams p) {
  using W = typename TileWord<T>::W;
  constexpr int P = TileWord<T>::P, kSide = kTile * P, kRows = kSide / kTileRows;
  __shared__ T tile[kSide][kSide + 1];  // [b][a]; the +1 keeps column reads free of bank conflicts
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t a0 = (blockIdx.x / p.tilesB) * kSide, b0 = (blockIdx.x % p.tilesB) * kSide;
  for (int64_t batch = blockIdx.y; batch < p.batches; batch += gridDim.y) {
    int64_t ib = p.ibase, ob = p.obase, r = batch;
    for (int k = 0; k < p.batchRank; ++k) {
      int64_t q = r / p.bdims[k], c = r - q * p.bdims[k];
      ib += c * p.bistr[k];
      ob += c * p.bostr[k];
      r = q;
    }
    // Read rows of B, P consecutive elements of A per thread: all loads first, then the stores.
    W w[kRows];
#pragma unroll
    for (int k = 0; k < kRows; ++k) {
      const int64_t b = b0 + ty + k * kTileRows;
      w[k] = b < p.dimB ? loadWord(src + ib + b * p.strideB, a0 + tx * P, p.dimA, p.wordIn) : W{};
    }
#pragma unroll
    for (int k = 0; k < kRows; ++k) {
      T v[P];
      memcpy(v, &w[k], sizeof v);
#pragma unroll
      for (int j = 0; j < P; ++j) tile[ty + k * kTileRows][tx * P + j] = v[j];
    }
    __syncthreads();
    // Write rows of A, P consecutive elements of B per thread.
    const int64_t b = b0 + tx * P;
#pragma unroll
    for (int k = 0; k < kRows; ++k) {
      const int ra = ty + k * kTileRows;
      const int64_t a = a0 + ra;
      if (a >= p.dimA) break;
      T v[P];
#pragma unroll
      for (int j = 0; j < P; ++j) v[j] = tile[tx * P + j][ra];
      T* row = dst + ob + a * p.strideA;
      if (p.wordOut && b + P <= p.dimB) {
        W out;
        memcpy(&out, v, sizeof out);
        *reinterpret_cast<W*>(row + b) = out;
      } else {
#pragma unroll
        for (int j = 0; j < P; ++j)
          if (b + j < p.dimB) row[b + j] = v[j];
      }
    }
    __syncthreads();
  }
}

template <typename E>
__global__ void fillKernel(uint4* __restrict__ body, int64_t nvec, uint4 pattern, E* __restrict__ tail, int64_t ntail, E v) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < nvec; i += stride) body[i] = pattern;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < ntail; i += stride) tail[i] = v;
}

// ---------------------------------------------------------------- launchers

template <int VB>
void launchGather(const CopyPlan& p, const void* src, void* dst, cudaStream_t stream) {
  using V = typename VecOf<VB>::type;
  const int64_t n = planCount(p);
  const unsigned grid = gridFor(n);
  if (n < (int64_t(1) << 31) && maxOffset(p, true) < (int64_t(1) << 31) && maxOffset(p, false) < (int64_t(1) << 31)) {
    Plan32 d{};
    d.rank = p.rank;
    d.count = static_cast<uint32_t>(n);
    d.ibase = static_cast<int32_t>(p.ibase);
    d.obase = static_cast<int32_t>(p.obase);
    for (int k = 0; k < p.rank; ++k) {
      int j = p.rank - 1 - k;
      d.div[k] = FastDiv(static_cast<uint32_t>(p.dims[j]));
      d.istr[k] = static_cast<int32_t>(p.istr[j]);
      d.ostr[k] = static_cast<int32_t>(p.ostr[j]);
    }
    copy32Kernel<V><<<grid, 256, 0, stream>>>(static_cast<const V*>(src), static_cast<V*>(dst), d);
  } else {
    Plan64 d{};
    d.rank = p.rank;
    d.count = n;
    d.ibase = p.ibase;
    d.obase = p.obase;
    for (int k = 0; k < p.rank; ++k) {
      int j = p.rank - 1 - k;
      d.dims[k] = p.dims[j];
      d.istr[k] = p.istr[j];
      d.ostr[k] = p.ostr[j];
    }
    copy64Kernel<V><<<grid, 256, 0, stream>>>(static_cast<const V*>(src), static_cast<V*>(dst), d);
  }
  KILN_CUDA_CHECK_LAUNCH();
}

//! The axis contiguous in the input that a tiled transpose can use (-1: none or too small).
int tileAxis(const CopyPlan& p) {
  if (p.rank < 2) return -1;
  const int inner = p.rank - 1;
  if (p.ostr[inner] != 1 || p.istr[inner] == 1 || p.dims[inner] < 16) return -1;
  for (int k = 0; k < inner; ++k)
    if (p.istr[k] == 1 && p.dims[k] >= 16) return k;
  return -1;
}

template <typename T>
void launchTile(const CopyPlan& p, int axisA, const void* src, void* dst, cudaStream_t stream) {
  constexpr int P = TileWord<T>::P, kSide = kTile * P;
  const int inner = p.rank - 1;
  TileParams t{};
  t.dimA = p.dims[axisA];
  t.dimB = p.dims[inner];
  t.strideB = p.istr[inner];
  t.strideA = p.ostr[axisA];
  t.ibase = p.ibase;
  t.obase = p.obase;
  t.batches = 1;
  // Whole words: every row start a multiple of P elements from a 4-byte aligned pointer.
  t.wordIn = reinterpret_cast<uintptr_t>(src) % 4 == 0 && t.ibase % P == 0 && t.strideB % P == 0;
  t.wordOut = reinterpret_cast<uintptr_t>(dst) % 4 == 0 && t.obase % P == 0 && t.strideA % P == 0;
  for (int k = inner - 1; k >= 0; --k) {
    if (k == axisA) continue;
    t.bdims[t.batchRank] = p.dims[k];
    t.bistr[t.batchRank] = p.istr[k];
    t.bostr[t.batchRank] = p.ostr[k];
    t.wordIn = t.wordIn && p.istr[k] % P == 0;
    t.wordOut = t.wordOut && p.ostr[k] % P == 0;
    ++t.batchRank;
    t.batches *= p.dims[k];
  }
  t.tilesB = (t.dimB + kSide - 1) / kSide;
  const int64_t tiles = t.tilesB * ((t.dimA + kSide - 1) / kSide);
  if (tiles >= (int64_t(1) << 31)) throw Error("CUDA transpose: too many tiles");
  dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(std::min<int64_t>(t.batches, 65535)));
  transposeTileKernel<T><<<grid, dim3(kTile, kTileRows), 0, stream>>>(static_cast<const T*>(src), static_cast<T*>(dst), t);
  KILN_CUDA_CHECK_LAUNCH();
}

}  // namespace

// ---------------------------------------------------------------- CopyPlan

int64_t CopyPlan::count() const { return planCount(*this); }

CopyPlan makeCopyPlan(const std::vector<int64_t>& dims, const std::vector<int64_t>& istr, const std::vector<int64_t>& ostr,
                      int64_t ibase, int64_t obase) {
  // Merge first (on vectors: any rank), then check the rank limit.
  std::vector<int64_t> d, is, os;
  bool empty = false;
  for (size_t k = 0; k < dims.size(); ++k) {
    if (dims[k] == 0) empty = true;
    if (dims[k] == 1) continue;
    if (!d.empty() && is.back() == istr[k] * dims[k] && os.back() == ostr[k] * dims[k]) {
      d.back() *= dims[k];
      is.back() = istr[k];
      os.back() = ostr[k];
    } else {
      d.push_back(dims[k]);
      is.push_back(istr[k]);
      os.push_back(ostr[k]);
    }
  }
  CopyPlan p;
  p.ibase = ibase;
  p.obase = obase;
  if (empty) {
    p.rank = 1;
    p.dims[0] = 0;
    p.istr[0] = p.ostr[0] = 1;
    return p;
  }
  if (d.size() > static_cast<size_t>(kMaxCopyRank))
    throw UnsupportedError("CUDA data movement: layout of rank " + std::to_string(d.size()) + " after merging axes exceeds " +
                           std::to_string(kMaxCopyRank));
  p.rank = static_cast<int>(d.size());
  for (int k = 0; k < p.rank; ++k) {
    p.dims[k] = d[k];
    p.istr[k] = is[k];
    p.ostr[k] = os[k];
  }
  return p;
}

std::vector<int64_t> contiguousStrides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t k = dims.size(); k-- > 1;) s[k - 1] = s[k] * dims[k];
  return s;
}

void copyDevice(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  if (!bytes || dst == src) return;
  KILN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
}

void launchCopy(const CopyPlan& plan, size_t es, const void* src, void* dst, cudaStream_t stream) {
  const int64_t n = plan.count();
  if (n == 0) return;
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  const int inner = plan.rank - 1;
  // Contiguous in both (or a single element): one memcpy.
  if (plan.rank == 0 || (plan.rank == 1 && plan.istr[0] == 1 && plan.ostr[0] == 1)) {
    copyDevice(d + plan.obase * es, s + plan.ibase * es, static_cast<size_t>(n) * es, stream);
    return;
  }
  if (int a = tileAxis(plan); a >= 0) {
    switch (es) {
      case 1: launchTile<uint8_t>(plan, a, src, dst, stream); return;
      case 2: launchTile<uint16_t>(plan, a, src, dst, stream); return;
      case 4: launchTile<uint32_t>(plan, a, src, dst, stream); return;
      case 8: launchTile<uint64_t>(plan, a, src, dst, stream); return;
      default: throw Error("CUDA copy: unsupported element size " + std::to_string(es));
    }
  }
  // Widest vector: the innermost axis contiguous in both, everything else a multiple of it.
  size_t vb = es;
  if (plan.istr[inner] == 1 && plan.ostr[inner] == 1) {
    for (size_t cand = 16; cand > es; cand /= 2) {
      if (cand % es) continue;
      const int64_t f = static_cast<int64_t>(cand / es);
      bool ok = plan.dims[inner] % f == 0 && plan.ibase % f == 0 && plan.obase % f == 0 &&
                reinterpret_cast<uintptr_t>(src) % cand == 0 && reinterpret_cast<uintptr_t>(dst) % cand == 0;
      for (int k = 0; ok && k < inner; ++k) ok = plan.istr[k] % f == 0 && plan.ostr[k] % f == 0;
      if (ok) {
        vb = cand;
        break;
      }
    }
  }
  CopyPlan p = plan;
  if (vb != es) {
    const int64_t f = static_cast<int64_t>(vb / es);
    p.dims[inner] /= f;
    for (int k = 0; k < inner; ++k) {
      p.istr[k] /= f;
      p.ostr[k] /= f;
    }
    p.ibase /= f;
    p.obase /= f;
  }
  switch (vb) {
    case 1: launchGather<1>(p, src, dst, stream); break;
    case 2: launchGather<2>(p, src, dst, stream); break;
    case 4: launchGather<4>(p, src, dst, stream); break;
    case 8: launchGather<8>(p, src, dst, stream); break;
    case 16: launchGather<16>(p, src, dst, stream); break;
    default: throw Error("CUDA copy: unsupported element size " + std::to_string(es));
  }
}

void launchFill(void* dst, int64_t count, size_t es, uint64_t value, cudaStream_t stream) {
  if (count <= 0) return;
  const size_t bytes = static_cast<size_t>(count) * es;
  uint4 pattern;
  auto* pb = reinterpret_cast<uint8_t*>(&pattern);
  for (size_t b = 0; b < 16; ++b) pb[b] = static_cast<uint8_t>(value >> (8 * (b % es)));
  const bool vec = reinterpret_cast<uintptr_t>(dst) % 16 == 0;
  const int64_t nvec = vec ? static_cast<int64_t>(bytes / 16) : 0;
  const int64_t ntail = count - nvec * static_cast<int64_t>(16 / es);
  auto* tail = static_cast<uint8_t*>(dst) + nvec * 16;
  const unsigned grid = gridFor(std::max(nvec, ntail));
  auto* body = static_cast<uint4*>(dst);
  switch (es) {
    case 1: fillKernel<uint8_t><<<grid, 256, 0, stream>>>(body, nvec, pattern, tail, ntail, static_cast<uint8_t>(value)); break;
    case 2: fillKernel<uint16_t><<<grid, 256, 0, stream>>>(body, nvec, pattern, reinterpret_cast<uint16_t*>(tail), ntail, static_cast<uint16_t>(value)); break;
    case 4: fillKernel<uint32_t><<<grid, 256, 0, stream>>>(body, nvec, pattern, reinterpret_cast<uint32_t*>(tail), ntail, static_cast<uint32_t>(value)); break;
    case 8: fillKernel<unsigned long long><<<grid, 256, 0, stream>>>(body, nvec, pattern, reinterpret_cast<unsigned long long*>(tail), ntail, static_cast<unsigned long long>(value)); break;
    default: throw Error("CUDA fill: unsupported element size " + std::to_string(es));
  }
  KILN_CUDA_CHECK_LAUNCH();
}

}  // namespace kiln::cuda
