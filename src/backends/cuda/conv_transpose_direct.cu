// "convtranspose_direct": ConvTranspose of any geometry cuDNN's dgrad cannot express (output_shape
// that needs negative pads, output_padding at or beyond the stride), 1-3 spatial axes, groups,
// float32/float16/bfloat16 with float32 accumulation, bias and the fused activation. Gather form
// (as the reference kernel, src/ops/conv_geometry.h): one thread per output element sums
// X[i] * W[k] over the taps k whose source i = (o + pad - k*dil) / stride is exact and in range.
// A fallback for correctness, not a fast path: the builder times it against the cuDNN tactics,
// which win wherever they apply.
#include <string>

#include "backends/cuda/cuda_tactics.h"
#include "backends/cuda/conv_act.cuh"
#include "backends/cuda/cuda_util.h"
#include "ops/conv_geometry.h"
#include "ops/conv_layout.h"
#include "ops/fused_attrs.h"

namespace kiln {

namespace {

using cuda::DevAct;
using cuda::DeviceConstant;

struct TGeom {
  int64_t inChannels, outChannels, cg, mg;  // cg, mg: input / output channels per group
  int64_t in[3], out[3], kernel[3], stride[3], dilation[3], padBegin[3];
};

//! Source index along one axis for output o and tap k, or -1 when no input element maps there.
__device__ __forceinline__ int64_t sourceIndex(const TGeom& g, int a, int64_t o, int64_t k) {
  const int64_t num = o + g.padBegin[a] - k * g.dilation[a];
  if (num < 0 || num % g.stride[a] != 0) return -1;
  const int64_t i = num / g.stride[a];
  return i < g.in[a] ? i : -1;
}

template <typename T>
__global__ void convTransposeDirectKernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                                          T* __restrict__ y, int64_t total, TGeom g, DevAct act) {
  const int64_t inSize = g.in[0] * g.in[1] * g.in[2];
  const int64_t kSize = g.kernel[0] * g.kernel[1] * g.kernel[2];
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t ow = i % g.out[2];
    const int64_t oh = (i / g.out[2]) % g.out[1];
    const int64_t od = (i / (g.out[2] * g.out[1])) % g.out[0];
    const int64_t nm = i / (g.out[2] * g.out[1] * g.out[0]);  // n * M + m
    const int64_t n = nm / g.outChannels, m = nm % g.outChannels, grp = m / g.mg, mIn = m % g.mg;
    const T* xg = x + (n * g.inChannels + grp * g.cg) * inSize;
    const T* wg = w + (grp * g.cg * g.mg + mIn) * kSize;  // W[c][mIn] for c in the group: stride mg * kSize
    float acc = bias ? cuda::toF(__ldg(bias + m)) : 0.f;
    for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
      const int64_t id = sourceIndex(g, 0, od, kd);
      if (id < 0) continue;
      for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
        const int64_t ih = sourceIndex(g, 1, oh, kh);
        if (ih < 0) continue;
        for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
          const int64_t iw = sourceIndex(g, 2, ow, kw);
          if (iw < 0) continue;
          const int64_t xOff = (id * g.in[1] + ih) * g.in[2] + iw;
          const int64_t kOff = (kd * g.kernel[1] + kh) * g.kernel[2] + kw;
          for (int64_t c = 0; c < g.cg; ++c)
            acc += cuda::toF(__ldg(xg + c * inSize + xOff)) * cuda::toF(__ldg(wg + c * g.mg * kSize + kOff));
        }
      }
    }
    y[i] = cuda::fromF<T>(cuda::applyAct(acc, act));
  }
}

struct TState : KernelState {
  TGeom g{};
  int64_t total = 0;
};

class ConvTransposeDirectKernel : public Kernel {
 public:
  explicit ConvTransposeDirectKernel(const LayerDesc& l)
      : weights_(l.inputs[1].value), bias_(l.present(2) ? l.inputs[2].value : HostTensor()),
        act_(cuda::toDevAct(fusedActivation(*l.attrs))) {}

  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const ConvProblem p = resolveConvTranspose(l);
    const Window3& w = p.win;
    auto s = std::make_unique<TState>();
    TGeom& g = s->g;
    g.inChannels = p.inChannels, g.outChannels = p.outChannels, g.cg = p.inChannelsPerGroup(), g.mg = p.outChannelsPerGroup();
    for (int a = 0; a < 3; ++a) {
      g.in[a] = w.in[a], g.out[a] = w.out[a], g.kernel[a] = w.kernel[a], g.stride[a] = w.stride[a];
      g.dilation[a] = w.dilation[a], g.padBegin[a] = w.padBegin[a];
      if (g.stride[a] <= 0) throw UnsupportedError("layer '" + l.name + "' (ConvTranspose): strides must be positive");
    }
    // The output's element count was checked for overflow when the shapes were inferred.
    s->total = p.batch * p.outChannels * w.outSize();
    state = std::move(s);
    return 0;
  }

  void execute(const KernelIO& io, KernelState* state) const override {
    const auto* s = static_cast<const TState*>(state);
    if (s->total == 0) return;
    cudaStream_t stream = cuda::streamOf(io);
    auto run = [&](auto tag) {
      using T = decltype(tag);
      convTransposeDirectKernel<T><<<cuda::gridFor(s->total), 256, 0, stream>>>(
          io.in[0].as<T>(), static_cast<const T*>(weights_.orInput(io, 1)), static_cast<const T*>(bias_.orInput(io, 2)),
          io.out[0].as<T>(), s->total, s->g, act_);
    };
    cuda::dispatchCudaType<kFloatTypes>(io.in[0].type, run, "convtranspose_direct");
    KILN_CUDA_CHECK_LAUNCH();
  }

  bool holdsInput(size_t i) const override { return (i == 1 && weights_.get()) || (i == 2 && bias_.get()); }
 private:
  DeviceConstant weights_, bias_;
  DevAct act_;
};

bool supportsConvTransposeDirect(const LayerDesc& l) {
  if (l.inputs.size() < 2 || l.inputs.size() > 3 || l.outputs.size() != 1 || !l.present(0) || !l.present(1)) return false;
  if (!cuda::convFloatTypes(l) || !cuda::knownActivation(l) || !hasPlainLayouts(l)) return false;
  const Dims& x = l.inputs[0].dims;
  return x.size() >= 3 && x.size() <= 5 && l.inputs[1].dims.size() == x.size();
}

std::unique_ptr<Kernel> createConvTransposeDirect(const LayerDesc& l) { return std::make_unique<ConvTransposeDirectKernel>(l); }

}  // namespace

namespace cuda {
KernelFactory convTransposeDirectCuda() { return {supportsConvTransposeDirect, createConvTransposeDirect}; }
}  // namespace cuda

}  // namespace kiln
