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

//! Four consecutive elements, aligned so that one vector instruction moves them.
template <class T> struct alignas(4 * sizeof(T)) Pack4 {
  T v[4];
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

__device__ __forceinline__ float unaryStep(int op, float x, float alpha, float beta) {
  switch (static_cast<ChainOp>(op)) {
    case ChainOp::kRelu: return x > 0.f ? x : 0.f;
    case ChainOp::kLeakyRelu: return x >= 0.f ? x : alpha * x;
    case ChainOp::kSigmoid: return sigmoid(x);
    case ChainOp::kTanh: return tanhf(x);
    case ChainOp::kHardSwish: { float t = fminf(fmaxf(x / 6.f + 0.5f, 0.f), 1.f); return x * t; }
    case ChainOp::kHardSigmoid: return fminf(fmaxf(alpha * x + beta, 0.f), 1.f);
    case ChainOp::kElu: return x >= 0.f ? x : alpha * expm1f(x);
    case ChainOp::kSoftplus: return x > 0.f ? x + log1pf(expf(-x)) : log1pf(expf(x));
    case ChainOp::kGelu: return geluErfc(x);
    case ChainOp::kGeluTanh: return geluTanh(x);
    case ChainOp::kClip: { float v = x < alpha ? alpha : x; return v > beta ? beta : v; }
    case ChainOp::kSilu: return x / (1.f + expf(-x));
    case ChainOp::kMish: return x * tanhf(x > 0.f ? x + log1pf(expf(-x)) : log1pf(expf(x)));
    case ChainOp::kErf: return erff(x);
    case ChainOp::kSqrt: return sqrtf(x);
    case ChainOp::kExp: return expf(x);
    case ChainOp::kLog: return logf(x);
    case ChainOp::kNeg: return -x;
    case ChainOp::kAbs: return fabsf(x);
    case ChainOp::kReciprocal: return 1.f / x;
    case ChainOp::kFloor: return floorf(x);
    case ChainOp::kCeil: return ceilf(x);
    default: return x;
  }
}

__device__ __forceinline__ float binaryStep(int op, float v, float o, bool swapped) {
  const float a = swapped ? o : v, b = swapped ? v : o;
  switch (static_cast<ChainOp>(op)) {
    case ChainOp::kAdd: return v + o;
    case ChainOp::kMul: return v * o;
    case ChainOp::kSub: return a - b;
    case ChainOp::kDiv: return a / b;
    case ChainOp::kPow: return b == 2.f ? a * a : powf(a, b);
    case ChainOp::kMax: return (v != v) || v > o ? v : o;
    case ChainOp::kMin: return (v != v) || v < o ? v : o;
    default: return v;
  }
}

constexpr int kV = 4;

template <class T> __device__ __forceinline__ void load4(const T* p, float v[kV]) {
  const Pack4<T> x = *reinterpret_cast<const Pack4<T>*>(p);
#pragma unroll
  for (int j = 0; j < kV; ++j) v[j] = widen(x.v[j]);
}

template <class T> __global__ void __launch_bounds__(kBlock) chainKernel(const __grid_constant__ ChainParams<T> p) {
  const DevGeom<kMaxIn>& g = p.g;
  const uint32_t units = (g.total + kV - 1) / kV, step = gridDim.x * blockDim.x;
  const int inner = g.rank - 1;
  for (uint32_t u = blockIdx.x * blockDim.x + threadIdx.x; u < units; u += step) {
    const uint32_t e = u * kV;
    float v[kV];
    if (g.vec) {
      load4(p.in[0] + e, v);
    } else {
#pragma unroll
      for (int j = 0; j < kV; ++j) v[j] = e + j < g.total ? widen(p.in[0][e + j]) : 0.f;
    }
    for (int s = 0; s < p.prog.nSteps; ++s) {
      const ChainStep& st = p.prog.steps[s];
      if (st.operand > 0) {
        const int k = st.operand;
        float o[kV];
        if (g.vec) {
          const uint32_t off = offsetOne(g, k, e);
          if (g.stride[k][inner] != 0) {
            load4(p.in[k] + off, o);
          } else {
            const float b = widen(p.in[k][off]);
#pragma unroll
            for (int j = 0; j < kV; ++j) o[j] = b;
          }
        } else {
#pragma unroll
          for (int j = 0; j < kV; ++j) o[j] = e + j < g.total ? widen(p.in[k][offsetOne(g, k, e + j)]) : 0.f;
        }
#pragma unroll
        for (int j = 0; j < kV; ++j) v[j] = binaryStep(st.op, v[j], o[j], st.swapped != 0);
      } else {
#pragma unroll
        for (int j = 0; j < kV; ++j) v[j] = unaryStep(st.op, v[j], st.alpha, st.beta);
      }
    }
    if (g.vec) {
      Pack4<T> y;
#pragma unroll
      for (int j = 0; j < kV; ++j) y.v[j] = narrow<T>(v[j]);
      *reinterpret_cast<Pack4<T>*>(p.out + e) = y;
    } else {
#pragma unroll
      for (int j = 0; j < kV; ++j)
        if (e + j < g.total) p.out[e + j] = narrow<T>(v[j]);
    }
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
      p.g = devGeom<kMaxIn>(full, kV, ptrs, esize, p.out, sizeof(T));
      // x has the output's shape: contiguous only when its strides are row-major (always, by infer).
      for (int k = g.nIn; k < kMaxIn; ++k) p.in[k] = p.in[0];
      const int64_t units = (piece.total + kV - 1) / kV;
      chainKernel<T><<<gridFor(units, kBlock), kBlock, 0, s>>>(p);
      KILN_CUDA_CHECK_LAUNCH();
    });
  }, "CUDA elementwise");
}

}  // namespace kiln::cuda::ew
