// CUDA elementwise family: PointwiseChain (float32, float16, bfloat16 tensors; the math in float32
// registers). One kernel runs the whole chain per element: x is read once, each operand is read
// (broadcast) where its step needs it, y is written once, all in the tensors' own type, so a
// reduced-precision engine never round-trips the chain through float32 tensors. Steps follow the
// CPU kernel (pointwise_chain.cpp); activations in the elementwise ops' forms (activation_math.cuh).
#include "backends/cuda/activation_math.cuh"
#include "backends/cuda/elementwise_functors.cuh"

namespace kiln::cuda::ew {

namespace {

template <class T> struct ChainParams {
  ChainProgram prog;
  DevGeom<kMaxIn> g;
  const T* in[kMaxIn];
  T* out;
};

__device__ __forceinline__ uint32_t offsetOne(const DevGeom<kMaxIn>& g, int k, uint32_t e) {
  uint32_t off = 0;
#pragma unroll
  for (int d = kMaxDims - 1; d >= 1; --d) {
    if (d < g.rank) {
      const uint32_t q = g.div[d].div(e), r = e - q * g.div[d].d;
      off += r * g.stride[k][d];
      e = q;
    }
  }
  return off + e * g.stride[k][0];
}

//! Clip as the reference: NaN stays NaN.
__device__ __forceinline__ float clip(float x, float lo, float hi) {
  const float v = x < lo ? lo : x;
  return v > hi ? hi : v;
}
__device__ __forceinline__ float softplus(float x) { return x > 0.f ? x + log1pf(expf(-x)) : log1pf(expf(x)); }

//! One unary step over V values; the op switched on once per step, not per value.
template <int V> __device__ __forceinline__ void unarySteps(int op, float (&v)[V], float alpha, float beta) {
#define KILN_CHAIN_UNARY(OP, EXPR)                    \
  case ChainOp::OP:                                   \
    _Pragma("unroll") for (int j = 0; j < V; ++j) { \
      const float x = v[j];                           \
      v[j] = (EXPR);                                  \
    }                                                 \
    break;
  switch (static_cast<ChainOp>(op)) {
    KILN_CHAIN_UNARY(kRelu, x > 0.f ? x : 0.f)
    KILN_CHAIN_UNARY(kLeakyRelu, x >= 0.f ? x : alpha * x)
    KILN_CHAIN_UNARY(kSigmoid, sigmoid(x))
    KILN_CHAIN_UNARY(kTanh, tanhf(x))
    KILN_CHAIN_UNARY(kHardSwish, x * fminf(fmaxf(x / 6.f + 0.5f, 0.f), 1.f))
    KILN_CHAIN_UNARY(kHardSigmoid, fminf(fmaxf(alpha * x + beta, 0.f), 1.f))
    KILN_CHAIN_UNARY(kElu, x >= 0.f ? x : alpha * expm1f(x))
    KILN_CHAIN_UNARY(kSoftplus, softplus(x))
    KILN_CHAIN_UNARY(kGelu, geluErfc(x))
    KILN_CHAIN_UNARY(kGeluTanh, geluTanh(x))
    KILN_CHAIN_UNARY(kClip, clip(x, alpha, beta))
    KILN_CHAIN_UNARY(kSilu, x / (1.f + expf(-x)))
    KILN_CHAIN_UNARY(kMish, mish(x))
    KILN_CHAIN_UNARY(kErf, erff(x))
    KILN_CHAIN_UNARY(kSqrt, sqrtf(x))
    KILN_CHAIN_UNARY(kExp, expf(x))
    KILN_CHAIN_UNARY(kLog, logf(x))
    KILN_CHAIN_UNARY(kNeg, -x)
    KILN_CHAIN_UNARY(kAbs, fabsf(x))
    KILN_CHAIN_UNARY(kReciprocal, 1.f / x)
    KILN_CHAIN_UNARY(kFloor, floorf(x))
    KILN_CHAIN_UNARY(kCeil, ceilf(x))
    default: break;
  }
#undef KILN_CHAIN_UNARY
}

//! One binary step over V values with their operands o (v OP o, or o OP v when swapped).
template <int V> __device__ __forceinline__ void binarySteps(int op, float (&v)[V], const float (&o)[V], bool swapped) {
#define KILN_CHAIN_BINARY(OP, EXPR)                                          \
  case ChainOp::OP:                                                          \
    _Pragma("unroll") for (int j = 0; j < V; ++j) {                        \
      const float a = swapped ? o[j] : v[j], b = swapped ? v[j] : o[j];      \
      (void)a, (void)b;                                                      \
      const float x = v[j], y = o[j];                                        \
      (void)x, (void)y;                                                      \
      v[j] = (EXPR);                                                         \
    }                                                                        \
    break;
  switch (static_cast<ChainOp>(op)) {
    KILN_CHAIN_BINARY(kAdd, x + y)
    KILN_CHAIN_BINARY(kMul, x * y)
    KILN_CHAIN_BINARY(kSub, a - b)
    KILN_CHAIN_BINARY(kDiv, a / b)
    KILN_CHAIN_BINARY(kPow, b == 2.f ? a * a : powf(a, b))
    KILN_CHAIN_BINARY(kMax, (x != x) || x > y ? x : y)
    KILN_CHAIN_BINARY(kMin, (x != x) || x < y ? x : y)
    default: break;
  }
#undef KILN_CHAIN_BINARY
}

//! The V operand values of input k for the V consecutive outputs from e. g.vec (the inner dim a
//! multiple of V, aligned): one offset, then one vector or one broadcast value. Otherwise the
//! offsets are stepped along the inner dim and recomputed where a row ends (NCHW 7x7 planes
//! times a per-channel operand: one division chain per row, not per element).
template <class T, int V>
__device__ __forceinline__ void loadOperand(const DevGeom<kMaxIn>& g, const T* __restrict__ in, int k, uint32_t e, float (&o)[V]) {
  const int inner = g.rank - 1;
  const uint32_t innerStride = g.stride[k][inner];
  uint32_t off = offsetOne(g, k, e);
  if (g.vec) {
    if (innerStride != 0) {
      const Vec<T, V> x = *reinterpret_cast<const Vec<T, V>*>(in + off);
#pragma unroll
      for (int j = 0; j < V; ++j) o[j] = widen(x.v[j]);
    } else {
      const float b = widen(in[off]);
#pragma unroll
      for (int j = 0; j < V; ++j) o[j] = b;
    }
    return;
  }
  const uint32_t innerDim = g.div[inner].d;
  uint32_t col = e - g.div[inner].div(e) * innerDim;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    if (j > 0) {
      if (++col == innerDim) {
        col = 0;
        off = offsetOne(g, k, e + j);
      } else {
        off += innerStride;
      }
    }
    o[j] = widen(in[off]);
  }
}

//! V consecutive outputs per thread step (V = 16 bytes of T; 1 when x or y is not 16-byte
//! aligned): x (the output's shape, contiguous) and y as one vector, each operand as loadOperand
//! says; the elements after the last whole vector one per thread at the end. 4 elements per step
//! (8 bytes of float16) and a per-element step switch ran ResNet26-Mish's chains at ~900 GB/s.
template <class T, int V> __global__ void __launch_bounds__(kBlock) chainKernel(const __grid_constant__ ChainParams<T> p) {
  const DevGeom<kMaxIn>& g = p.g;
  const uint32_t units = g.total / V, step = gridDim.x * blockDim.x, tid = blockIdx.x * blockDim.x + threadIdx.x;
  for (uint32_t u = tid; u < units; u += step) {
    const uint32_t e = u * V;
    float v[V];
    const Vec<T, V> x = *reinterpret_cast<const Vec<T, V>*>(p.in[0] + e);
#pragma unroll
    for (int j = 0; j < V; ++j) v[j] = widen(x.v[j]);
    for (int s = 0; s < p.prog.nSteps; ++s) {
      const ChainStep& st = p.prog.steps[s];
      if (st.operand > 0) {
        float o[V];
        loadOperand<T, V>(g, p.in[st.operand], st.operand, e, o);
        binarySteps<V>(st.op, v, o, st.swapped != 0);
      } else {
        unarySteps<V>(st.op, v, st.alpha, st.beta);
      }
    }
    Vec<T, V> y;
#pragma unroll
    for (int j = 0; j < V; ++j) y.v[j] = narrow<T>(v[j]);
    *reinterpret_cast<Vec<T, V>*>(p.out + e) = y;
  }
  for (uint32_t e = units * V + tid; e < g.total; e += step) {  // the tail
    float v[1] = {widen(p.in[0][e])};
    for (int s = 0; s < p.prog.nSteps; ++s) {
      const ChainStep& st = p.prog.steps[s];
      if (st.operand > 0) {
        const float o[1] = {widen(p.in[st.operand][offsetOne(g, st.operand, e)])};
        binarySteps<1>(st.op, v, o, st.swapped != 0);
      } else {
        unarySteps<1>(st.op, v, st.alpha, st.beta);
      }
    }
    p.out[e] = narrow<T>(v[0]);
  }
}

}  // namespace

void launchChain(const ChainProgram& prog, const Geom& g, const void* const* in, void* out, DataType type,
                 cudaStream_t s) {
  if (g.total == 0) return;
  if (g.nIn < 1 || g.nIn > kMaxIn) throw Error("CUDA PointwiseChain: bad input count");
  dispatchCudaType<kFloatTypes>(type, [&](auto tag) {
    using T = decltype(tag);
    int64_t zero[kMaxIn] = {};
    forEachPiece(g, zero, 0, [&](const Geom& piece, const int64_t* inOff, int64_t outOff) {
      ChainParams<T> p{};
      p.prog = prog;
      const void* ptrs[kMaxIn] = {};
      size_t esize[kMaxIn];
      for (int k = 0; k < kMaxIn; ++k) {
        esize[k] = sizeof(T);
        if (k < g.nIn) p.in[k] = static_cast<const T*>(in[k]) + inOff[k];
        ptrs[k] = p.in[k] ? p.in[k] : p.in[0];
      }
      p.out = static_cast<T*>(out) + outOff;
      Geom full = piece;
      for (int k = g.nIn; k < kMaxIn; ++k)
        for (int d = 0; d < kMaxDims; ++d) full.strides[k][d] = 0;
      constexpr int V = static_cast<int>(16 / sizeof(T));
      // x has the output's shape: contiguous (row-major strides) always, by infer.
      for (int k = g.nIn; k < kMaxIn; ++k) p.in[k] = p.in[0];
      const bool wide = aligned(p.in[0], 16) && aligned(p.out, 16);
      p.g = devGeom<kMaxIn>(full, wide ? V : 1, ptrs, esize, p.out, sizeof(T));
      const unsigned grid = gridFor(wide ? piece.total / V + 1 : piece.total, kBlock);
      if (wide) chainKernel<T, V><<<grid, kBlock, 0, s>>>(p);
      else chainKernel<T, 1><<<grid, kBlock, 0, s>>>(p);
      KILN_CUDA_CHECK_LAUNCH();
    });
  }, "CUDA elementwise");
}

}  // namespace kiln::cuda::ew
