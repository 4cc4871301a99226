// The conv epilogue kernel (bias + residual + activation applied in place to a conv result, for
// what cuDNN did not fuse) and small host helpers shared by the CUDA conv tactics.
#include <string>

#include "backends/cuda/conv_act.cuh"
#include "backends/cuda/cuda_util.h"
#include "backends/cuda/shape_cuda.cuh"
#include "ops/fused_attrs.h"

namespace kiln::cuda {

namespace {

//! Channel of flat element e: (e / size) % channels, by multiply-shift in 32 bits (every index of
//! a launch below 2^31) or plain division in 64.
struct Div32 {
  FastDiv f;
  explicit Div32(int64_t d) : f(static_cast<uint32_t>(d)) {}
  __device__ __forceinline__ uint32_t div(uint32_t n) const { return f.div(n); }
  __device__ __forceinline__ uint32_t d() const { return f.d; }
};
struct Div64 {
  uint64_t v;
  explicit Div64(int64_t d) : v(static_cast<uint64_t>(d)) {}
  __device__ __forceinline__ uint64_t div(uint64_t n) const { return n / v; }
  __device__ __forceinline__ uint64_t d() const { return v; }
};

//! How a vector's bias values are read: per element walking the channels, one value (the plane
//! size a multiple of V), or one 16-byte vector (channels last, C a multiple of V, bias aligned).
enum BiasMode : int { kBiasWalk, kBiasOne, kBiasVector };

//! y = act(y + res + bias[channel]) over `total` elements, channel of element e = (e / size) %
//! channels (NCHW: size = H*W; channels last: size 1, so the channel runs fastest). Each thread
//! step takes V consecutive elements as one 16-byte access of Y and R (V = 1: unaligned
//! pointers) and walks their channels from one division pair, so neither layout nor any size
//! needs a multiple of V: the elements past the last whole vector go one per thread at the end.
//! The kernel before had 16-byte accesses only for NCHW planes of a multiple of 8 and made
//! channels-last outputs (every cuDNN conv of an NHWC region whose activation cuDNN cannot fuse:
//! Mish, HardSwish, LeakyRelu) 2-byte accesses with two 64-bit divisions per element.
template <typename T, int V, typename Index, typename Div>
__global__ void __launch_bounds__(256) convEpilogueKernel(T* __restrict__ y, const T* __restrict__ bias, const T* __restrict__ res,
                                                         Index total, Div bySize, Div byChannels, int biasMode, DevAct act) {
  static_assert(V == 1 || V * sizeof(T) == 16, "one 16-byte access per vector");
  const Index units = total / V, stride = Index(gridDim.x) * blockDim.x, tid = Index(blockIdx.x) * blockDim.x + threadIdx.x;
  const Index size = bySize.d(), channels = byChannels.d();
  auto channelOf = [&](Index e, Index& s) {
    const Index plane = bySize.div(e);
    s = e - plane * size;
    return plane - byChannels.div(plane) * channels;
  };
  for (Index u = tid; u < units; u += stride) {
    const Index e = u * V;
    float v[V];
    if constexpr (V == 1) {
      v[0] = toF(y[e]) + (res ? toF(__ldg(res + e)) : 0.f);
    } else {
      const Pack16<T> py(reinterpret_cast<const uint4*>(y)[u]);
#pragma unroll
      for (int k = 0; k < V; ++k) v[k] = toF(py.e[k]);
      if (res) {
        const Pack16<T> pr(__ldg(reinterpret_cast<const uint4*>(res) + u));
#pragma unroll
        for (int k = 0; k < V; ++k) v[k] += toF(pr.e[k]);
      }
    }
    if (bias) {
      Index s;
      const Index c = channelOf(e, s);
      if (biasMode == kBiasOne) {  // the vector lies in one plane
        const float b = toF(__ldg(bias + c));
#pragma unroll
        for (int k = 0; k < V; ++k) v[k] += b;
      } else if (biasMode == kBiasVector) {  // channels last, C % V == 0: V consecutive channels
        const Pack16<T> pb(__ldg(reinterpret_cast<const uint4*>(bias + c)));
#pragma unroll
        for (int k = 0; k < V; ++k) v[k] += toF(pb.e[k]);
      } else {
        Index ck = c;
#pragma unroll
        for (int k = 0; k < V; ++k) {
          v[k] += toF(__ldg(bias + ck));
          if (++s == size) {
            s = 0;
            if (++ck == channels) ck = 0;
          }
        }
      }
    }
    applyActivations<V>(static_cast<ActKind>(act.kind), act.alpha, act.beta, v);
    if constexpr (V == 1) {
      y[e] = fromF<T>(v[0]);
    } else {
      Pack16<T> out;
#pragma unroll
      for (int k = 0; k < V; ++k) out.e[k] = fromF<T>(v[k]);
      reinterpret_cast<uint4*>(y)[u] = out.u;
    }
  }
  for (Index e = units * V + tid; e < total; e += stride) {  // the tail after the last whole vector
    Index s;
    float v = toF(y[e]) + (res ? toF(__ldg(res + e)) : 0.f) + (bias ? toF(__ldg(bias + channelOf(e, s))) : 0.f);
    float one[1] = {v};
    applyActivations<1>(static_cast<ActKind>(act.kind), act.alpha, act.beta, one);
    y[e] = fromF<T>(one[0]);
  }
}

template <typename T>
void launchTyped(void* y, const void* bias, const void* res, int64_t planes, int64_t channels, int64_t size, DevAct act,
                 cudaStream_t stream) {
  constexpr int kVec = 16 / sizeof(T);
  const int64_t total = planes * size;
  auto aligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  const bool vec = kVec > 1 && aligned(y) && (!res || aligned(res));
  auto* yt = static_cast<T*>(y);
  const auto* bt = static_cast<const T*>(bias);
  const auto* rt = static_cast<const T*>(res);
  const unsigned grid = gridFor(vec ? total / kVec + 1 : total);
  const int biasMode = !vec ? kBiasWalk
                       : size % kVec == 0 ? kBiasOne
                       : size == 1 && channels % kVec == 0 && aligned(bias) ? kBiasVector
                                                                            : kBiasWalk;
  // 32-bit indices when the grid stride past the end still fits (FastDiv: n < 2^31).
  if (total + int64_t(grid) * 256 * kVec < (int64_t(1) << 31)) {
    const Div32 bySize(size), byChannels(channels);
    const auto n = static_cast<uint32_t>(total);
    if (vec) convEpilogueKernel<T, kVec, uint32_t><<<grid, 256, 0, stream>>>(yt, bt, rt, n, bySize, byChannels, biasMode, act);
    else convEpilogueKernel<T, 1, uint32_t><<<grid, 256, 0, stream>>>(yt, bt, rt, n, bySize, byChannels, biasMode, act);
  } else {
    const Div64 bySize(size), byChannels(channels);
    const auto n = static_cast<uint64_t>(total);
    if (vec) convEpilogueKernel<T, kVec, uint64_t><<<grid, 256, 0, stream>>>(yt, bt, rt, n, bySize, byChannels, biasMode, act);
    else convEpilogueKernel<T, 1, uint64_t><<<grid, 256, 0, stream>>>(yt, bt, rt, n, bySize, byChannels, biasMode, act);
  }
  KILN_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launchConvEpilogue(DataType type, void* y, const void* bias, const void* res, int64_t planes, int64_t channels,
                        int64_t size, DevAct act, cudaStream_t stream) {
  if (planes <= 0 || size <= 0) return;
  if (channels <= 0) throw Error("conv epilogue: no channels");
  dispatchCudaType<kFloatTypes>(
      type, [&](auto tag) { launchTyped<decltype(tag)>(y, bias, res, planes, channels, size, act, stream); }, "conv epilogue");
}

bool knownActivation(const LayerDesc& l) {
  try {
    fusedActivation(*l.attrs);
    return true;
  } catch (const Error&) {
    return false;
  }
}

bool convFloatTypes(const LayerDesc& l) {
  if (l.inputs.size() < 2) return false;
  const DataType t = l.inputs[0].type;
  if (t != DataType::kFLOAT && t != DataType::kHALF && t != DataType::kBF16) return false;
  for (size_t i = 0; i < l.inputs.size(); ++i)
    if (l.present(i) && l.inputs[i].type != t) return false;
  for (const auto& o : l.outputs)
    if (o.type != t) return false;
  return true;
}

}  // namespace kiln::cuda
