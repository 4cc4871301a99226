// CUDA elementwise family: device-side building blocks shared by the elementwise_*.cu files:
// compute types (half/bf16 in float32), 16-byte vectors, 32-bit fast division, the flat (unary)
// kernel and the broadcasting kernel, and the host launchers that split huge tensors into
// launches of < 2^31 elements (so that kernels index with 32 bits).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "backends/cuda/cuda_util.h"
#include "backends/cuda/elementwise_launch.cuh"

namespace kiln::cuda::ew {

// ---------------------------------------------------------------------------------------------
// Types.

template <class T> struct ComputeOf { using type = T; };
template <> struct ComputeOf<__half> { using type = float; };
template <> struct ComputeOf<__nv_bfloat16> { using type = float; };
//! The type an element is computed in: float for half/bf16, itself otherwise.
template <class T> using Cmp = typename ComputeOf<T>::type;

template <class T> __device__ __forceinline__ Cmp<T> widen(T x) {
  if constexpr (std::is_same_v<T, __half>) return __half2float(x);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(x);
  else return x;
}
template <class T, class R> __device__ __forceinline__ T narrow(R r) {
  if constexpr (std::is_same_v<T, __half>) return __float2half_rn(static_cast<float>(r));
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __float2bfloat16_rn(static_cast<float>(r));
  else return static_cast<T>(r);
}

template <class T> constexpr bool kIsFloat = std::is_floating_point_v<T>;

//! Reads element 0 of a device scalar of any kiln type as double (uniform: every thread the same).
__device__ __forceinline__ double loadAsDouble(const void* p, DataType t) {
  switch (t) {
    case DataType::kFLOAT: return *static_cast<const float*>(p);
    case DataType::kHALF: return __half2float(*static_cast<const __half*>(p));
    case DataType::kBF16: return __bfloat162float(*static_cast<const __nv_bfloat16*>(p));
    case DataType::kDOUBLE: return *static_cast<const double*>(p);
    case DataType::kINT8: return *static_cast<const int8_t*>(p);
    case DataType::kINT16: return *static_cast<const int16_t*>(p);
    case DataType::kINT32: return *static_cast<const int32_t*>(p);
    case DataType::kINT64: return static_cast<double>(*static_cast<const int64_t*>(p));
    case DataType::kUINT8: return *static_cast<const uint8_t*>(p);
    case DataType::kUINT16: return *static_cast<const uint16_t*>(p);
    case DataType::kUINT32: return *static_cast<const uint32_t*>(p);
    case DataType::kUINT64: return static_cast<double>(*static_cast<const uint64_t*>(p));
    case DataType::kBOOL: return *static_cast<const uint8_t*>(p) ? 1.0 : 0.0;
    default: break;  // the narrow types: no CUDA kernel's type set includes them
  }
  return 0.0;
}

//! A double converted to T as the CPU reference does: out-of-range/NaN give 0 for integers.
template <class T> __device__ __forceinline__ T fromDouble(double v) {
  if constexpr (kIsFloat<T>) {
    return static_cast<T>(v);
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else {
    if (!(v > -0x1p63 && v < 0x1p63)) return T(0);
    return static_cast<T>(static_cast<int64_t>(v));
  }
}

// ---------------------------------------------------------------------------------------------
// Vectors and division.

template <class T, int V> struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

template <class... T> constexpr int vecWidth() { return static_cast<int>(16 / std::max({sizeof(T)...})); }

inline bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

//! n / d and n % d for n < 2^31 by multiply-high (Granlund-Montgomery, round-up variant).
struct FastDiv {
  uint32_t d = 1, mul = 1, shift = 0;
  FastDiv() = default;
  explicit FastDiv(uint32_t div) : d(div) {
    shift = 0;
    while (shift < 32 && (uint64_t(1) << shift) < div) ++shift;
    mul = static_cast<uint32_t>(((uint64_t(1) << 32) * ((uint64_t(1) << shift) - div)) / div + 1);
  }
  __host__ __device__ __forceinline__ uint32_t div(uint32_t n) const {
#ifdef __CUDA_ARCH__
    uint32_t hi = __umulhi(n, mul);
#else
    uint32_t hi = static_cast<uint32_t>((uint64_t(n) * mul) >> 32);
#endif
    return (hi + n) >> shift;
  }
};

//! Largest number of elements one launch covers (kernels index with 32 bits).
constexpr int64_t kMaxLaunch = (int64_t(1) << 31) - 1;
constexpr int64_t kFlatChunk = int64_t(1) << 30;
constexpr unsigned kBlock = 256;

// ---------------------------------------------------------------------------------------------
// Flat kernel: y[i] = op(x[i]); op takes and returns storage types (see Widened).

template <class Op, class TI, class TO>
__global__ void __launch_bounds__(kBlock) flatKernel(const TI* __restrict__ x, TO* __restrict__ y, uint32_t n, Op op, bool vec) {
  constexpr int V = vecWidth<TI, TO>();
  op.prepare();
  const uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x, step = gridDim.x * blockDim.x;
  uint32_t done = 0;
  if (vec) {
    const uint32_t units = n / V;
    for (uint32_t u = tid; u < units; u += step) {
      Vec<TI, V> a = reinterpret_cast<const Vec<TI, V>*>(x)[u];
      Vec<TO, V> r;
#pragma unroll
      for (int j = 0; j < V; ++j) r.v[j] = op(a.v[j]);
      reinterpret_cast<Vec<TO, V>*>(y)[u] = r;
    }
    done = units * V;
  }
  for (uint32_t i = done + tid; i < n; i += step) y[i] = op(x[i]);
}

//! Runs a float-computing functor F (T -> R in compute types) on storage types TI -> TO.
template <class F, class TI, class TO> struct Widened {
  F f;
  __device__ __forceinline__ void prepare() { f.template prepare<TI>(); }
  __device__ __forceinline__ TO operator()(TI x) const { return narrow<TO>(f(widen(x))); }
};

//! Launches flatKernel over n elements in launches of at most kFlatChunk elements.
template <class Op, class TI, class TO>
void launchFlat(const TI* x, TO* y, int64_t n, const Op& op, cudaStream_t s) {
  constexpr int V = vecWidth<TI, TO>();
  for (int64_t off = 0; off < n; off += kFlatChunk) {
    const uint32_t len = static_cast<uint32_t>(std::min<int64_t>(kFlatChunk, n - off));
    const bool vec = aligned(x + off, sizeof(TI) * V) && aligned(y + off, sizeof(TO) * V);
    const int64_t work = vec ? std::max<int64_t>(len / V, 1) : len;
    flatKernel<Op, TI, TO><<<gridFor(work, kBlock), kBlock, 0, s>>>(x + off, y + off, len, op, vec);
    KILN_CUDA_CHECK_LAUNCH();
  }
}

// ---------------------------------------------------------------------------------------------
// Broadcasting kernel: N inputs (input 0 of type TA, the others of type TB), output TO.

template <int N> struct DevGeom {
  uint32_t total = 0;
  int rank = 1;
  FastDiv div[kMaxDims];
  uint32_t stride[N][kMaxDims];
  bool vec = false;  //!< inner dim % V == 0 and the pointers aligned: a unit lies in one row
  //! Without vec: bit k set when input k is dense (the output's shape and strides) and aligned to
  //! V elements, as is the output; 0 when not so for any input.
  uint32_t dense = 0;
};

//! Offsets of flat output element e in each input.
template <int N> __device__ __forceinline__ void offsetsOf(const DevGeom<N>& g, uint32_t e, uint32_t (&off)[N]) {
#pragma unroll
  for (int k = 0; k < N; ++k) off[k] = 0;
#pragma unroll
  for (int d = kMaxDims - 1; d >= 1; --d) {
    if (d < g.rank) {
      const uint32_t q = g.div[d].div(e), r = e - q * g.div[d].d;
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] += r * g.stride[k][d];
      e = q;
    }
  }
#pragma unroll
  for (int k = 0; k < N; ++k) off[k] += e * g.stride[k][0];
}

template <class Op, class A, class B, int NB>
__device__ __forceinline__ auto applyN(const Op& op, A a, const B (&b)[NB]) {
  if constexpr (NB == 0) return op(a);
  else if constexpr (NB == 1) return op(a, b[0]);
  else if constexpr (NB == 2) return op(a, b[0], b[1]);
  else return op(a, b[0], b[1], b[2]);
}

template <class T, int N> struct Ptrs {
  const T* p[N > 0 ? N : 1];
};

//! Loads V consecutive elements of one input at off (contiguous) or one broadcast (stride 0).
template <class T, int V> __device__ __forceinline__ void loadUnit(const T* p, uint32_t off, bool contiguous, Cmp<T> (&v)[V]) {
  if (contiguous) {
    Vec<T, V> a = *reinterpret_cast<const Vec<T, V>*>(p + off);
#pragma unroll
    for (int j = 0; j < V; ++j) v[j] = widen(a.v[j]);
  } else {
    const Cmp<T> s = widen(p[off]);
#pragma unroll
    for (int j = 0; j < V; ++j) v[j] = s;
  }
}

template <class Op, int N, class TA, class TB, class TO>
__global__ void __launch_bounds__(kBlock)
    bcastKernel(const __grid_constant__ DevGeom<N> g, const TA* __restrict__ a, Ptrs<TB, N - 1> b, TO* __restrict__ y, Op op) {
  constexpr int V = vecWidth<TA, TB, TO>();
  constexpr int NB = N - 1;
  const uint32_t units = (g.total + V - 1) / V;
  const uint32_t step = gridDim.x * blockDim.x;
  for (uint32_t u = blockIdx.x * blockDim.x + threadIdx.x; u < units; u += step) {
    const uint32_t e = u * V;
    if (g.vec) {
      uint32_t off[N];
      offsetsOf<N>(g, e, off);
      Cmp<TA> av[V];
      Cmp<TB> bv[NB > 0 ? NB : 1][V];
      loadUnit<TA, V>(a, off[0], g.stride[0][g.rank - 1] != 0, av);
#pragma unroll
      for (int k = 0; k < NB; ++k) loadUnit<TB, V>(b.p[k], off[k + 1], g.stride[k + 1][g.rank - 1] != 0, bv[k]);
      Vec<TO, V> r;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        Cmp<TB> bj[NB > 0 ? NB : 1];
#pragma unroll
        for (int k = 0; k < NB; ++k) bj[k] = bv[k][j];
        if constexpr (NB == 0) r.v[j] = narrow<TO>(op(av[j]));
        else r.v[j] = narrow<TO>(applyN(op, av[j], bj));
      }
      *reinterpret_cast<Vec<TO, V>*>(y + e) = r;
    } else if (g.dense != 0 && e + V <= g.total) {
      // A unit that may span rows (e.g. x[N, C, 7, 7] * s[N, C, 1, 1]): the dense inputs and the
      // output as vectors, the others element by element, their offsets stepped along the inner
      // dim (recomputed where it wraps) and a value along a broadcast inner dim loaded once per
      // row; the loop below made these strided 2-byte accesses, 4x slower than the bandwidth.
      Cmp<TA> av[V];
      Cmp<TB> bv[NB > 0 ? NB : 1][V];
      if (g.dense & 1u) loadUnit<TA, V>(a, e, true, av);
#pragma unroll
      for (int k = 0; k < NB; ++k)
        if (g.dense & (2u << k)) loadUnit<TB, V>(b.p[k], e, true, bv[k]);
      const int in = g.rank - 1;
      const uint32_t innerDim = g.div[in].d;
      uint32_t off[N], col = e - g.div[in].div(e) * innerDim;
      offsetsOf<N>(g, e, off);
#pragma unroll
      for (int j = 0; j < V; ++j) {
        bool fresh = j == 0;  // a new row: every offset recomputed, every value loaded
        if (j > 0) {
          if (++col == innerDim) {
            col = 0;
            fresh = true;
            offsetsOf<N>(g, e + j, off);
          } else {
#pragma unroll
            for (int k = 0; k < N; ++k) off[k] += g.stride[k][in];
          }
        }
        const int prev = j > 0 ? j - 1 : 0;
        if (!(g.dense & 1u)) av[j] = fresh || g.stride[0][in] != 0 ? widen(a[off[0]]) : av[prev];
#pragma unroll
        for (int k = 0; k < NB; ++k)
          if (!(g.dense & (2u << k))) bv[k][j] = fresh || g.stride[k + 1][in] != 0 ? widen(b.p[k][off[k + 1]]) : bv[k][prev];
      }
      Vec<TO, V> r;
#pragma unroll
      for (int j = 0; j < V; ++j) {
        Cmp<TB> bj[NB > 0 ? NB : 1];
#pragma unroll
        for (int k = 0; k < NB; ++k) bj[k] = bv[k][j];
        if constexpr (NB == 0) r.v[j] = narrow<TO>(op(av[j]));
        else r.v[j] = narrow<TO>(applyN(op, av[j], bj));
      }
      *reinterpret_cast<Vec<TO, V>*>(y + e) = r;
    } else {
      const uint32_t end = min(e + V, g.total);
      for (uint32_t i = e; i < end; ++i) {
        uint32_t off[N];
        offsetsOf<N>(g, i, off);
        Cmp<TB> bj[NB > 0 ? NB : 1];
#pragma unroll
        for (int k = 0; k < NB; ++k) bj[k] = widen(b.p[k][off[k + 1]]);
        if constexpr (NB == 0) y[i] = narrow<TO>(op(widen(a[off[0]])));
        else y[i] = narrow<TO>(applyN(op, widen(a[off[0]]), bj));
      }
    }
  }
}

//! Calls launch(sub, inOffsets, outOffset) for pieces of g of at most kMaxLaunch elements; offsets
//! are in elements. Pieces split the outer dims, so strides of the pieces fit in 32 bits.
template <class F>
void forEachPiece(const Geom& g, const int64_t* inOff, int64_t outOff, F&& launch) {
  if (g.total <= kMaxLaunch) {
    launch(g, inOff, outOff);
    return;
  }
  const int64_t inner = g.total / g.dims[0];  // elements per index of dim 0
  int64_t off[kMaxIn];
  if (g.rank == 1 || inner <= kMaxLaunch) {
    const int64_t rows = g.rank == 1 ? kFlatChunk : std::max<int64_t>(1, kFlatChunk / inner);
    for (int64_t r0 = 0; r0 < g.dims[0]; r0 += rows) {
      Geom sub = g;
      sub.dims[0] = std::min(rows, g.dims[0] - r0);
      sub.total = sub.dims[0] * inner;
      for (int k = 0; k < g.nIn; ++k) off[k] = inOff[k] + r0 * g.strides[k][0];
      launch(sub, off, outOff + r0 * inner);
    }
    return;
  }
  Geom sub = g;  // drop dim 0 and recurse per index
  sub.rank = g.rank - 1;
  sub.total = inner;
  for (int d = 0; d < sub.rank; ++d) {
    sub.dims[d] = g.dims[d + 1];
    for (int k = 0; k < g.nIn; ++k) sub.strides[k][d] = g.strides[k][d + 1];
  }
  for (int64_t r0 = 0; r0 < g.dims[0]; ++r0) {
    for (int k = 0; k < g.nIn; ++k) off[k] = inOff[k] + r0 * g.strides[k][0];
    forEachPiece(sub, off, outOff + r0 * inner, launch);
  }
}

//! Device geometry of a piece; vec when the inner dim is a multiple of V and every contiguous
//! pointer is aligned to V elements.
template <int N> DevGeom<N> devGeom(const Geom& g, int V, const void* const* ptrs, const size_t* esize, const void* out, size_t osize) {
  DevGeom<N> d;
  d.total = static_cast<uint32_t>(g.total);
  d.rank = g.rank;
  for (int i = 0; i < g.rank; ++i) {
    d.div[i] = FastDiv(static_cast<uint32_t>(g.dims[i]));
    for (int k = 0; k < N; ++k) d.stride[k][i] = static_cast<uint32_t>(g.strides[k][i]);
  }
  for (int i = g.rank; i < kMaxDims; ++i)
    for (int k = 0; k < N; ++k) d.stride[k][i] = 0;
  bool vec = g.dims[g.rank - 1] % V == 0 && aligned(out, osize * V);
  for (int k = 0; k < N && vec; ++k)
    if (g.strides[k][g.rank - 1] != 0) vec = aligned(ptrs[k], esize[k] * V);
  d.vec = vec;
  if (!vec && aligned(out, osize * V)) {
    for (int k = 0; k < N; ++k) {
      bool dense = aligned(ptrs[k], esize[k] * V);
      int64_t stride = 1;
      for (int i = g.rank - 1; i >= 0 && dense; --i) {
        dense = g.strides[k][i] == stride;
        stride *= g.dims[i];
      }
      if (dense) d.dense |= 1u << k;
    }
  }
  return d;
}

//! Launches bcastKernel<Op, N, TA, TB, TO> over g (g.nIn == N).
template <class Op, int N, class TA, class TB, class TO>
void launchBcast(const Geom& g, const void* const* in, void* out, const Op& op, cudaStream_t s) {
  if (g.total == 0) return;
  constexpr int V = vecWidth<TA, TB, TO>();
  int64_t zero[kMaxIn] = {};
  forEachPiece(g, zero, 0, [&](const Geom& piece, const int64_t* inOff, int64_t outOff) {
    const void* ptrs[N];
    size_t esize[N];
    ptrs[0] = static_cast<const TA*>(in[0]) + inOff[0];
    esize[0] = sizeof(TA);
    Ptrs<TB, N - 1> b{};
    for (int k = 1; k < N; ++k) {
      b.p[k - 1] = static_cast<const TB*>(in[k]) + inOff[k];
      ptrs[k] = b.p[k - 1];
      esize[k] = sizeof(TB);
    }
    TO* y = static_cast<TO*>(out) + outOff;
    DevGeom<N> dg = devGeom<N>(piece, V, ptrs, esize, y, sizeof(TO));
    const int64_t units = (piece.total + V - 1) / V;
    bcastKernel<Op, N, TA, TB, TO><<<gridFor(units, kBlock), kBlock, 0, s>>>(dg, static_cast<const TA*>(ptrs[0]), b, y, op);
    KILN_CUDA_CHECK_LAUNCH();
  });
}

// ---------------------------------------------------------------------------------------------
// Overloaded math for float / double compute types.
namespace dm {
#define KILN_EWD_MATH1(NAME)                                                       \
  __device__ __forceinline__ float NAME(float x) { return ::NAME##f(x); }          \
  __device__ __forceinline__ double NAME(double x) { return ::NAME(x); }
KILN_EWD_MATH1(exp) KILN_EWD_MATH1(expm1) KILN_EWD_MATH1(log) KILN_EWD_MATH1(log1p) KILN_EWD_MATH1(tanh)
KILN_EWD_MATH1(erf) KILN_EWD_MATH1(erfc) KILN_EWD_MATH1(sqrt) KILN_EWD_MATH1(sin) KILN_EWD_MATH1(cos)
KILN_EWD_MATH1(tan) KILN_EWD_MATH1(asin) KILN_EWD_MATH1(acos) KILN_EWD_MATH1(atan) KILN_EWD_MATH1(sinh)
KILN_EWD_MATH1(cosh) KILN_EWD_MATH1(asinh) KILN_EWD_MATH1(acosh) KILN_EWD_MATH1(atanh) KILN_EWD_MATH1(floor)
KILN_EWD_MATH1(ceil) KILN_EWD_MATH1(rint) KILN_EWD_MATH1(fabs)
#undef KILN_EWD_MATH1
__device__ __forceinline__ float fmax(float a, float b) { return ::fmaxf(a, b); }
__device__ __forceinline__ double fmax(double a, double b) { return ::fmax(a, b); }
__device__ __forceinline__ float fmin(float a, float b) { return ::fminf(a, b); }
__device__ __forceinline__ double fmin(double a, double b) { return ::fmin(a, b); }
__device__ __forceinline__ float fmod(float a, float b) { return ::fmodf(a, b); }
__device__ __forceinline__ double fmod(double a, double b) { return ::fmod(a, b); }
__device__ __forceinline__ float pow(float a, float b) { return ::powf(a, b); }
__device__ __forceinline__ double pow(double a, double b) { return ::pow(a, b); }
}  // namespace dm

// Integer arithmetic that wraps like numpy (no undefined behaviour).
template <class T> using WrapT = std::conditional_t<sizeof(T) <= 4, uint32_t, uint64_t>;
template <class T> __device__ __forceinline__ T addW(T a, T b) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<WrapT<T>>(a) + static_cast<WrapT<T>>(b));
  else return a + b;
}
template <class T> __device__ __forceinline__ T subW(T a, T b) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<WrapT<T>>(a) - static_cast<WrapT<T>>(b));
  else return a - b;
}
template <class T> __device__ __forceinline__ T mulW(T a, T b) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<WrapT<T>>(a) * static_cast<WrapT<T>>(b));
  else return a * b;
}
template <class T> __device__ __forceinline__ bool isNaN(T x) {
  if constexpr (kIsFloat<T>) return x != x;
  else return false;
}

}  // namespace kiln::cuda::ew
