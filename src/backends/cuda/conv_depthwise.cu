// "depthwise_direct": 3x3 depthwise convolution (group == C == M, as in MobileNetV2), NCHW, any
// stride/dilation/pads, float32/float16/bfloat16 with float32 accumulation. One thread per output
// element, consecutive threads along the output row (coalesced; the 3x3 taps of neighbours hit
// L1); bias, residual and the fused activation are applied before the single store.
#include <string>

#include "backends/cpu/conv_geometry.h"
#include "backends/cpu/conv_layout.h"
#include "backends/cuda/conv_act.cuh"
#include "backends/cuda/cuda_util.h"

namespace kiln {

namespace {

using cuda::DevAct;
using cuda::DeviceConstant;

struct DwGeom {
  int64_t channels, inH, inW, outH, outW;
  int strideH, strideW, dilH, dilW, padH, padW;
};

template <typename T>
__global__ void depthwise3x3Kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                                   const T* __restrict__ res, T* __restrict__ y, int64_t total, DwGeom g, DevAct act) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t ow = i % g.outW;
    const int64_t oh = (i / g.outW) % g.outH;
    const int64_t plane = i / (g.outW * g.outH);  // n * C + c
    const int64_t c = plane % g.channels;
    const T* xp = x + plane * g.inH * g.inW;
    const T* wc = w + c * 9;
    const int64_t ih0 = oh * g.strideH - g.padH, iw0 = ow * g.strideW - g.padW;
    float acc = bias ? cuda::toF(__ldg(bias + c)) : 0.f;
#pragma unroll
    for (int kh = 0; kh < 3; ++kh) {
      const int64_t ih = ih0 + kh * g.dilH;
      if (ih < 0 || ih >= g.inH) continue;
#pragma unroll
      for (int kw = 0; kw < 3; ++kw) {
        const int64_t iw = iw0 + kw * g.dilW;
        if (iw < 0 || iw >= g.inW) continue;
        acc += cuda::toF(__ldg(xp + ih * g.inW + iw)) * cuda::toF(__ldg(wc + kh * 3 + kw));
      }
    }
    if (res) acc += cuda::toF(res[i]);
    y[i] = cuda::fromF<T>(cuda::applyAct(acc, act));
  }
}

struct DwState : KernelState {
  DwGeom g{};
  int64_t total = 0;
};

class DepthwiseKernel : public Kernel {
 public:
  explicit DepthwiseKernel(const LayerDesc& l)
      : weights_(l.inputs[1].value), bias_(l.present(2) ? l.inputs[2].value : HostTensor()),
        act_(cuda::toDevAct(fusedActivation(*l.attrs))) {}

  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const ConvProblem p = resolveConv(l);
    const Window3& w = p.win;
    auto s = std::make_unique<DwState>();
    s->g = DwGeom{p.inChannels, w.in[1], w.in[2], w.out[1], w.out[2], static_cast<int>(w.stride[1]),
                  static_cast<int>(w.stride[2]), static_cast<int>(w.dilation[1]), static_cast<int>(w.dilation[2]),
                  static_cast<int>(w.padBegin[1]), static_cast<int>(w.padBegin[2])};
    s->total = p.batch * p.outChannels * w.outSize();
    state = std::move(s);
    return 0;
  }

  void execute(const KernelIO& io, KernelState* state) const override {
    const auto* s = static_cast<const DwState*>(state);
    if (s->total == 0) return;
    cudaStream_t stream = cuda::streamOf(io);
    const void* res = io.in.size() > 3 ? io.in[3].data : nullptr;
    auto run = [&](auto tag) {
      using T = decltype(tag);
      depthwise3x3Kernel<T><<<cuda::gridFor(s->total), 256, 0, stream>>>(
          io.in[0].as<T>(), static_cast<const T*>(weights_.orInput(io, 1)), static_cast<const T*>(bias_.orInput(io, 2)),
          static_cast<const T*>(res), io.out[0].as<T>(), s->total, s->g, act_);
    };
    switch (io.in[0].type) {
      case DataType::kFLOAT: run(float{}); break;
      case DataType::kHALF: run(__half{}); break;
      case DataType::kBF16: run(__nv_bfloat16{}); break;
      default: throw UnsupportedError("depthwise_direct: unsupported type");
    }
    KILN_CUDA_CHECK_LAUNCH();
  }

 private:
  DeviceConstant weights_, bias_;
  DevAct act_;
};

bool supportsDepthwise(const LayerDesc& l) {
  if (!cuda::convFloatTypes(l) || !cuda::knownActivation(l) || !cpu::hasPlainLayouts(l)) return false;  // NCHW only
  const Dims& x = l.inputs[0].dims;
  const Dims& w = l.inputs[1].dims;
  if (x.size() != 4 || w.size() != 4 || x[1] < 0) return false;
  const int64_t group = l.attrs->getInt("group", 1);
  if (group != x[1] || w[0] != x[1] || w[1] != 1 || w[2] != 3 || w[3] != 3) return false;
  // Geometry held in ints by the kernel.
  for (const char* a : {"strides", "dilations", "pads"})
    for (int64_t v : l.attrs->getInts(a))
      if (v < 0 || v > (int64_t(1) << 20)) return false;
  return true;
}

std::unique_ptr<Kernel> createDepthwise(const LayerDesc& l) { return std::make_unique<DepthwiseKernel>(l); }

}  // namespace

void addDepthwiseConvCudaTactics(std::vector<TacticDef>& v) {
  v.push_back(TacticDef{"Conv", "depthwise_direct", supportsDepthwise, createDepthwise});
}

}  // namespace kiln
