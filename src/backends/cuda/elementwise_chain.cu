// CUDA elementwise family: PointwiseChain (float32). One kernel runs the whole chain per element
// in registers: x is read once, each operand is read (broadcast) where its step needs it, y is
// written once. Steps follow the CPU kernel (pointwise_chain.cpp); activations in the elementwise
// ops' forms (activation_math.cuh).
#include "backends/cuda/activation_math.cuh"
#include "backends/cuda/elementwise_functors.cuh"

namespace kiln::cuda::ew {

namespace {

struct ChainParams {
  ChainProgram prog;
  DevGeom<kMaxIn> g;
  const float* in[kMaxIn];
  float* out;
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

__global__ void __launch_bounds__(kBlock) chainKernel(const __grid_constant__ ChainParams p) {
  const DevGeom<kMaxIn>& g = p.g;
  const uint32_t units = (g.total + kV - 1) / kV, step = gridDim.x * blockDim.x;
  const int inner = g.rank - 1;
  for (uint32_t u = blockIdx.x * blockDim.x + threadIdx.x; u < units; u += step) {
    const uint32_t e = u * kV;
    float v[kV];
    if (g.vec) {
      const float4 x = reinterpret_cast<const float4*>(p.in[0])[u];
      v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
    } else {
#pragma unroll
      for (int j = 0; j < kV; ++j) v[j] = e + j < g.total ? p.in[0][e + j] : 0.f;
    }
    for (int s = 0; s < p.prog.nSteps; ++s) {
      const ChainStep& st = p.prog.steps[s];
      if (st.operand > 0) {
        const int k = st.operand;
        float o[kV];
        if (g.vec) {
          const uint32_t off = offsetOne(g, k, e);
          if (g.stride[k][inner] != 0) {
            const float4 b = *reinterpret_cast<const float4*>(p.in[k] + off);
            o[0] = b.x, o[1] = b.y, o[2] = b.z, o[3] = b.w;
          } else {
            const float b = p.in[k][off];
#pragma unroll
            for (int j = 0; j < kV; ++j) o[j] = b;
          }
        } else {
#pragma unroll
          for (int j = 0; j < kV; ++j) o[j] = e + j < g.total ? p.in[k][offsetOne(g, k, e + j)] : 0.f;
        }
#pragma unroll
        for (int j = 0; j < kV; ++j) v[j] = binaryStep(st.op, v[j], o[j], st.swapped != 0);
      } else {
#pragma unroll
        for (int j = 0; j < kV; ++j) v[j] = unaryStep(st.op, v[j], st.alpha, st.beta);
      }
    }
    if (g.vec) {
      reinterpret_cast<float4*>(p.out)[u] = make_float4(v[0], v[1], v[2], v[3]);
    } else {
#pragma unroll
      for (int j = 0; j < kV; ++j)
        if (e + j < g.total) p.out[e + j] = v[j];
    }
  }
}

}  // namespace

void launchChain(const ChainProgram& prog, const Geom& g, const void* const* in, void* out, cudaStream_t s) {
  if (g.total == 0) return;
  if (g.nIn < 1 || g.nIn > kMaxIn) throw Error("CUDA PointwiseChain: bad input count");
  int64_t zero[kMaxIn] = {};
  forEachPiece(g, zero, 0, [&](const Geom& piece, const int64_t* inOff, int64_t outOff) {
    ChainParams p{};
    p.prog = prog;
    const void* ptrs[kMaxIn] = {};
    size_t esize[kMaxIn];
    for (int k = 0; k < kMaxIn; ++k) {
      esize[k] = sizeof(float);
      if (k < g.nIn) p.in[k] = static_cast<const float*>(in[k]) + inOff[k];
      ptrs[k] = p.in[k] ? p.in[k] : p.in[0];
    }
    p.out = static_cast<float*>(out) + outOff;
    Geom full = piece;
    for (int k = g.nIn; k < kMaxIn; ++k)
      for (int d = 0; d < kMaxDims; ++d) full.strides[k][d] = 0;
    p.g = devGeom<kMaxIn>(full, kV, ptrs, esize, p.out, sizeof(float));
    // x has the output's shape: contiguous only when its strides are row-major (always, by infer).
    for (int k = g.nIn; k < kMaxIn; ++k) p.in[k] = p.in[0];
    const int64_t units = (piece.total + kV - 1) / kV;
    chainKernel<<<gridFor(units, kBlock), kBlock, 0, s>>>(p);
    KILN_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace kiln::cuda::ew
