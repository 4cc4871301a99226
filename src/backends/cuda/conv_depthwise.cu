// "conv_fp_depthwise": 3x3 depthwise convolution (group == C == M, as in MobileNetV2), NCHW, any
// stride/dilation/pads, float32/float16/bfloat16 with float32 accumulation. One thread per output
// element, consecutive threads along the output row (coalesced; the 3x3 taps of neighbours hit
// L1); bias, residual and the fused activation are applied before the single store.
// "depthwise_nhwc": the same convolution on channels-last float16/bfloat16 tensors (the GPU
// layout pass's "nhwc", C % 8 == 0): one thread per 8 channels of an output pixel, 16-byte loads
// of X and of the weights (uploaded as [3][3][C]) per tap and one 16-byte store. cuDNN's engines
// for channels-last grouped convolutions with group == C are slow, and without this tactic a
// depthwise conv inside an nhwc chain would need a transpose on each side.
#include <string>
#include <vector>

#include "backends/cuda/cuda_tactics.h"
#include "backends/cuda/conv_act.cuh"
#include "backends/cuda/conv_depthwise.h"
#include "backends/cuda/cuda_util.h"
#include "ops/conv_geometry.h"
#include "ops/conv_layout.h"
#include "ops/fused_attrs.h"

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

//! Channels-last 3x3 depthwise: X [N][inH][inW][C], W [3][3][C], Y and the residual [N][outH][outW][C].
//! I: the index type, 32-bit where every offset fits (the divisions below are the kernel's main
//! arithmetic cost; 64-bit ones are several times slower).
template <typename T, typename I>
__global__ void depthwise3x3NhwcKernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                                       const T* __restrict__ res, T* __restrict__ y, int64_t total64, DwGeom g64, DevAct act) {
  const I total = static_cast<I>(total64), channels = static_cast<I>(g64.channels), c8 = channels / 8;
  const I inH = static_cast<I>(g64.inH), inW = static_cast<I>(g64.inW), outH = static_cast<I>(g64.outH), outW = static_cast<I>(g64.outW);
  for (I i = static_cast<I>(blockIdx.x) * static_cast<I>(blockDim.x) + static_cast<I>(threadIdx.x); i < total;
       i += static_cast<I>(gridDim.x) * static_cast<I>(blockDim.x)) {
    const I cg = i % c8, pix = i / c8;
    const I ow = pix % outW, t = pix / outW, oh = t % outH, n = t / outH;
    const I c0 = cg * 8;
    float acc[8];
    if (bias) {
      const cuda::Pack16<T> b(__ldg(reinterpret_cast<const uint4*>(bias + c0)));
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[e] = cuda::toF(b.e[e]);
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[e] = 0.f;
    }
    const I ih0 = oh * g64.strideH - g64.padH, iw0 = ow * g64.strideW - g64.padW;
    const T* xn = x + n * inH * inW * channels + c0;
#pragma unroll
    for (int kh = 0; kh < 3; ++kh) {
      const I ih = ih0 + kh * g64.dilH;
      if (ih < 0 || ih >= inH) continue;
#pragma unroll
      for (int kw = 0; kw < 3; ++kw) {
        const I iw = iw0 + kw * g64.dilW;
        if (iw < 0 || iw >= inW) continue;
        const cuda::Pack16<T> xv(__ldg(reinterpret_cast<const uint4*>(xn + (ih * inW + iw) * channels)));
        const cuda::Pack16<T> wv(__ldg(reinterpret_cast<const uint4*>(w + (kh * 3 + kw) * channels + c0)));
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[e] += cuda::toF(xv.e[e]) * cuda::toF(wv.e[e]);
      }
    }
    cuda::Pack16<T> r(make_uint4(0, 0, 0, 0));
    if (res) r.u = *reinterpret_cast<const uint4*>(res + static_cast<int64_t>(i) * 8);
    cuda::Pack16<T> out;
#pragma unroll
    for (int e = 0; e < 8; ++e) out.e[e] = cuda::fromF<T>(cuda::applyAct(acc[e] + (res ? cuda::toF(r.e[e]) : 0.f), act));
    *reinterpret_cast<uint4*>(y + static_cast<int64_t>(i) * 8) = out.u;
  }
}

struct DwState : KernelState {
  DwGeom g{};
  int64_t total = 0;
  bool small = false;  //!< every element offset (and the grid-stride loop's reach) fits in 32 bits
};

class DepthwiseKernel : public Kernel {
 public:
  DepthwiseKernel(const LayerDesc& l, bool nhwc)
      : nhwc_(nhwc),
        weights_(nhwc ? DeviceConstant(l.inputs[1].value, "taps_major", cuda::tapsMajor) : DeviceConstant(l.inputs[1].value)),
        bias_(l.present(2) ? l.inputs[2].value : HostTensor()), act_(cuda::toDevAct(fusedActivation(*l.attrs))) {}

  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const ConvProblem p = resolveConv(l);
    const Window3& w = p.win;
    auto s = std::make_unique<DwState>();
    s->g = DwGeom{p.inChannels, w.in[1], w.in[2], w.out[1], w.out[2], static_cast<int>(w.stride[1]),
                  static_cast<int>(w.stride[2]), static_cast<int>(w.dilation[1]), static_cast<int>(w.dilation[2]),
                  static_cast<int>(w.padBegin[1]), static_cast<int>(w.padBegin[2])};
    s->total = p.batch * p.outChannels * w.outSize() / (nhwc_ ? 8 : 1);
    const int64_t limit = int64_t(1) << 30;  // headroom for the grid stride and the tap offsets
    s->small = s->total * 8 < limit && p.batch * p.inChannels * w.in[1] * w.in[2] < limit;
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
      auto* kernel = depthwise3x3Kernel<T>;
      if constexpr (sizeof(T) == 2)  // the channels-last kernel: 8 two-byte channels per thread
        if (nhwc_) kernel = s->small ? depthwise3x3NhwcKernel<T, int32_t> : depthwise3x3NhwcKernel<T, int64_t>;
      kernel<<<cuda::gridFor(s->total), 256, 0, stream>>>(io.in[0].as<T>(), static_cast<const T*>(weights_.orInput(io, 1)),
                                                          static_cast<const T*>(bias_.orInput(io, 2)), static_cast<const T*>(res),
                                                          io.out[0].as<T>(), s->total, s->g, act_);
    };
    if (nhwc_) {  // 16-byte accesses (arena and constant buffers are 256-byte aligned; inputs from users may not be)
      auto aligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
      if (!aligned(io.in[0].data) || !aligned(io.out[0].data) || (res && !aligned(res)))
        throw Error("depthwise_nhwc: tensors must be 16-byte aligned");
    }
    if (nhwc_ && io.in[0].type == DataType::kFLOAT) throw UnsupportedError("depthwise_nhwc: float32");
    cuda::dispatchCudaType<kFloatTypes>(io.in[0].type, run, "conv_fp_depthwise");
    KILN_CUDA_CHECK_LAUNCH();
  }

  bool holdsInput(size_t i) const override { return (i == 1 && weights_.get()) || (i == 2 && bias_.get()); }
 private:
  bool nhwc_;
  DeviceConstant weights_, bias_;
  DevAct act_;
};

//! 3x3 depthwise geometry both kernels handle (layouts checked by the callers).
bool depthwiseShape(const LayerDesc& l) { return cuda::depthwiseSide(l) == 3; }

bool supportsDepthwise(const LayerDesc& l) { return hasPlainLayouts(l) && depthwiseShape(l); }  // NCHW

bool supportsDepthwiseNhwc(const LayerDesc& l) {
  const DataType t = l.inputs[0].type;
  if (t != DataType::kHALF && t != DataType::kBF16) return false;
  if (inLayoutBlock(l) != kNhwcBlock || outLayoutBlock(l) != kNhwcBlock)
    return false;
  if (!depthwiseShape(l) || l.inputs[0].dims[1] % 8 != 0) return false;
  for (int i = 1; i < 3; ++i)  // weights (and bias) constant: uploaded rearranged
    if (l.present(i) && !l.inputs[i].value.valid()) return false;
  return true;
}

std::unique_ptr<Kernel> createDepthwise(const LayerDesc& l) { return std::make_unique<DepthwiseKernel>(l, false); }
std::unique_ptr<Kernel> createDepthwiseNhwc(const LayerDesc& l) { return std::make_unique<DepthwiseKernel>(l, true); }

}  // namespace

namespace cuda {

int64_t depthwiseSide(const LayerDesc& l) {
  if (l.inputs.size() < 2 || !convFloatTypes(l) || !knownActivation(l)) return 0;
  const Dims& x = l.inputs[0].dims;
  const Dims& w = l.inputs[1].dims;
  if (x.size() != 4 || w.size() != 4 || x[1] < 0) return 0;
  const int64_t group = l.attrs->getInt("group", 1);
  if (group != x[1] || w[0] != x[1] || w[1] != 1 || w[2] != w[3] || w[2] < 1) return 0;
  // Geometry held in ints by the kernels.
  for (const char* a : {"strides", "dilations", "pads"})
    for (int64_t v : l.attrs->getInts(a))
      if (v < 0 || v > (int64_t(1) << 20)) return 0;
  return w[2];
}

bool tiledDepthwise(const LayerDesc& l) {
  const int64_t k = depthwiseSide(l);
  if (k != 3 && k != 5 && k != 7) return false;
  const std::vector<int64_t> s = l.attrs->getInts("strides", {1, 1});
  if (s.size() != 2 || s[0] != s[1] || (s[0] != 1 && s[0] != 2)) return false;
  for (int64_t d : l.attrs->getInts("dilations", {1, 1}))
    if (d != 1) return false;
  return true;
}

HostTensor tapsMajor(const HostTensor& w) {
  const int64_t c = w.dims()[0];
  HostTensor out(w.type(), w.dims());
  transposeInner(w.data(), out.data(), 1, c, w.count() / c, elementSize(w.type()));
  return out;
}

KernelFactory depthwiseConvCuda() { return {supportsDepthwise, createDepthwise}; }
KernelFactory depthwiseConvNhwcCuda() { return {supportsDepthwiseNhwc, createDepthwiseNhwc}; }
}  // namespace cuda

}  // namespace kiln
