// oneDNN int8 tactics for the integer layers of Q/DQ models (builder/passes/lower_qdq.cpp):
//   q_linear_conv_int_onednn:   QLinearConv through convolution_forward (u8/s8 src, s8 weights);
//   q_linear_matmul_int_onednn: QLinearMatMul with a constant 2-D B through matmul (A's batches
//                              folded into M).
// Both accumulate in s32 with the int32 bias, scale by x_scale * w_scale[c] (/ y_scale) per output
// channel (output scales), apply Relu (or, for a float output, any activation oneDNN has) as a
// post-op, add y_zero_point (dst zero point) and round to nearest even with saturation: the
// epilogue of QLinearParams::output (ops/qlinear.h), in the same float operations. The src zero
// point is oneDNN's (a runtime zero point), so padding holds x_zero_point as ONNX says.
// QLinearConv's kiln residual (a ResNet block's last conv + Add + Relu + Q) is oneDNN's sum post-op:
// R's bytes are put in dst's buffer (reordered into its layout) and summed, read as R's type (int8
// into a uint8 Y too: a downsample branch's signed output beside a Relu'd block output), with scale
// r_scale / y_scale and zero point r_zero before the Relu; Y's zero point must be 0.
// Weight zero points must be 0 (symmetric int8 weights, quantize_static's default); other layers
// run the reference kernel. Before VNNI (AVX2 without AVX-VNNI), x64 oneDNN sums u8*s8 pairs in
// int16 with saturation (vpmaddubsw), and for s8 sources it halves the weights: there the tactics
// take only weights in [-64, 64] (2 * 255 * 64 = 32640 fits int16, so every pair sum is exact; the
// implicit INT8 pass quantizes weights to [-63, 63] on such CPUs, int8WeightLimit; QLinearMatMul
// splits wider weights in two halves over a doubled K, see QMatMulKernel; wide conv weights go to
// q_linear_conv_int_avx2) and feed s8 sources as u8 (x ^ 0x80, zero point + 128: the same
// x - x_zero_point), so they stay exact too.
// Tensors are plain NCHW / row-major; the conv reorders src / dst into the layout oneDNN chose
// (nhwc-like for int8) inside the kernel, in the workspace.
#ifdef KILN_HAVE_ONEDNN
#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "backends/cpu/cpu_tactics.h"
#include "backends/cpu/int8_pair_sums.h"
#include "backends/cpu/onednn_common.h"
#include "core/thread_pool.h"
#include "ops/conv_geometry.h"
#include "ops/op_util.h"
#include "ops/qlinear.h"

namespace kiln::cpu {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using Dt = memory::data_type;

size_t alignUp(size_t n) { return (n + 63) / 64 * 64; }

Dt dnnlType(DataType t) { return t == DataType::kINT8 ? Dt::s8 : t == DataType::kUINT8 ? Dt::u8 : Dt::f32; }

bool vnniIsa() {
  using Isa = dnnl::cpu_isa;
  switch (dnnl::get_effective_cpu_isa()) {
    case Isa::avx512_core_vnni: case Isa::avx512_core_bf16: case Isa::avx512_core_amx: case Isa::avx2_vnni: return true;
    default: return false;
  }
}

//! Without VNNI, s8 sources go to oneDNN as u8 (see the file comment).
bool shiftsSignedSource(DataType x) { return x == DataType::kINT8 && !vnniIsa(); }

//! What both tactics accept: constant scalars, symmetric weights, an epilogue oneDNN expresses;
//! without VNNI, weights in [-64, 64] unless the kernel splits wider ones (`splits`).
bool supportsCommon(const LayerDesc& l, int64_t channels, bool splits) {
  if (l.inputs.size() <= kQWScale || !l.inputs[kQW].value.valid() || l.inputs[kQW].type != DataType::kINT8) return false;
  if (!qlinearScalarsConstant(l) || (!vnniIsa() && !splits && !weightsPairSafe(l.inputs[kQW].value))) return false;
  try {
    const QLinearParams q = readQLinearParams(l, constantInputViews(l), channels, 1);
    for (int32_t z : q.wZero)
      if (z != 0) return false;
    if (q.xScale.size() != 1) return false;
    // kiln's residual (QLinearConv): oneDNN's sum post-op over Y's buffer holding R's bytes (int8 or
    // uint8, read as R's type), so the output is quantized, with zero point 0.
    if (q.residual && (q.floatOut || q.yZero != 0)) return false;
    dnnl::algorithm alg;
    float a, b;
    if (q.floatOut) return q.act.kind == ActKind::kNone || toOneDnnEltwise(q.act, alg, a, b);
    return q.act.kind == ActKind::kNone || q.act.kind == ActKind::kRelu;
  } catch (const Error&) {
    return false;
  }
}

//! Output scales, post-ops and zero points of the epilogue.
dnnl::primitive_attr epilogueAttr(const QLinearParams& q, int64_t channels, int scaleMask, Dt residualType = Dt::undef) {
  dnnl::primitive_attr attr;
  std::vector<float> scales(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) {
    const float xw = q.xs(0) * q.ws(c);
    scales[c] = q.floatOut ? xw : xw / q.yScale;
  }
  if (q.wScale.size() == 1) scales.resize(1);
  attr.set_output_scales(q.wScale.size() == 1 ? 0 : scaleMask, scales);
  dnnl::post_ops po;
  // + (R - r_zero) * r_scale / y_scale, read from dst (which holds R), before the activation.
  if (q.residual) po.append_sum(q.rScale / q.yScale, q.rZero, residualType);
  dnnl::algorithm alg;
  float a, b;
  if (q.act.kind != ActKind::kNone && toOneDnnEltwise(q.act, alg, a, b)) po.append_eltwise(1.f, alg, a, b);
  attr.set_post_ops(po);
  if (q.xZero != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  if (!q.floatOut && q.yZero != 0) attr.set_zero_points(DNNL_ARG_DST, 0, {DNNL_RUNTIME_S32_VAL});
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

//! Per-context pieces common to both kernels.
struct DnnlRun : KernelState {
  dnnl::primitive prim;
  dnnl::stream stream;
  memory src, dst, scratch, userSrc, userDst, bias, weights, srcZero, dstZero;
  dnnl::reorder srcIn, dstOut, residualIn;
  bool reorderSrc = false, reorderDst = false, residual = false;
  size_t srcBytes = 0, dstBytes = 0, scratchBytes = 0;
  // Without VNNI the source is copied into the workspace first: s8 flipped to u8 (flip 0x80), and
  // for a split QLinearMatMul each element twice (dup).
  size_t shiftCount = 0, shiftBytes = 0;
  uint8_t flip = 0;
  bool dup = false;
  int32_t xZero = 0, yZero = 0;
};

//! Binds the buffers and runs: the source copy (flipped / doubled), src reorder in, the primitive,
//! dst reorder out (workspace: source copy, src, dst, scratchpad).
void runPrimitive(DnnlRun& s, const KernelIO& io) {
  setOneDnnThreads(io.pool->size());
  auto* ws = static_cast<uint8_t*>(io.workspace);
  void* x = const_cast<void*>(io.in[kQX].data);
  if (s.shiftCount) {
    const auto* in = static_cast<const uint8_t*>(x);
    io.pool->parallelFor(static_cast<int64_t>(s.shiftCount), 1 << 16, [&](int64_t b, int64_t e) {
      if (s.dup)
        for (int64_t i = b; i < e; ++i) ws[2 * i] = ws[2 * i + 1] = in[i] ^ s.flip;
      else
        for (int64_t i = b; i < e; ++i) ws[i] = in[i] ^ s.flip;
    });
    x = ws;
    ws += s.shiftBytes;
  }
  s.userSrc.set_data_handle(x);
  s.userDst.set_data_handle(io.out[0].data);
  if (s.reorderSrc) {
    s.src.set_data_handle(ws);
    s.srcIn.execute(s.stream, s.userSrc, s.src);
  }
  if (s.reorderDst) s.dst.set_data_handle(ws + s.srcBytes);
  s.scratch.set_data_handle(ws + s.srcBytes + s.dstBytes);
  if (s.residual) {  // the sum post-op reads R from dst: R in dst's layout first
    const void* r = io.in[kQR].data;
    if (s.reorderDst) {
      memory userR(s.userDst.get_desc(), oneDnnEngine(), const_cast<void*>(r));
      s.residualIn.execute(s.stream, userR, s.dst);
    } else if (r != io.out[0].data) {
      std::memcpy(io.out[0].data, r, s.userDst.get_desc().get_size());
    }
  }
  std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, s.reorderSrc ? s.src : s.userSrc},
                                          {DNNL_ARG_WEIGHTS, s.weights},
                                          {DNNL_ARG_DST, s.reorderDst ? s.dst : s.userDst},
                                          {DNNL_ARG_SCRATCHPAD, s.scratch}};
  if (s.bias) args[DNNL_ARG_BIAS] = s.bias;
  if (s.srcZero) args[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC] = s.srcZero;
  if (s.dstZero) args[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST] = s.dstZero;
  s.prim.execute(s.stream, args);
  if (s.reorderDst) s.dstOut.execute(s.stream, s.dst, s.userDst);
  s.stream.wait();
}

//! Fills the parts of `s` that follow from a primitive descriptor's chosen layouts.
template <typename Pd>
size_t bindLayouts(DnnlRun& s, const Pd& pd, const memory::desc& userSrc, const memory::desc& userDst,
                   const HostTensor& weights, const memory::desc& userWeights, const QLinearParams& q, const memory::desc& biasMd) {
  auto& eng = oneDnnEngine();
  s.stream = dnnl::stream(eng);
  s.userSrc = memory(userSrc, eng, DNNL_MEMORY_NONE);
  s.userDst = memory(userDst, eng, DNNL_MEMORY_NONE);
  s.src = memory(pd.src_desc(), eng, DNNL_MEMORY_NONE);
  s.dst = memory(pd.dst_desc(), eng, DNNL_MEMORY_NONE);
  s.scratch = memory(pd.scratchpad_desc(), eng, DNNL_MEMORY_NONE);
  s.reorderSrc = userSrc != pd.src_desc();
  s.reorderDst = userDst != pd.dst_desc();
  if (s.reorderSrc) {
    s.srcIn = dnnl::reorder(s.userSrc, s.src);
    s.srcBytes = alignUp(pd.src_desc().get_size());
  }
  if (s.reorderDst) {
    s.dstOut = dnnl::reorder(s.dst, s.userDst);
    s.dstBytes = alignUp(pd.dst_desc().get_size());
  }
  s.residual = q.residual;
  if (s.residual && s.reorderDst) s.residualIn = dnnl::reorder(s.userDst, s.dst);
  s.scratchBytes = alignUp(pd.scratchpad_desc().get_size());
  // Constant weights in the primitive's layout (the reorder adds oneDNN's compensation terms).
  memory plain(userWeights, eng, const_cast<void*>(weights.data()));
  s.weights = memory(pd.weights_desc(), eng);
  dnnl::reorder(plain, s.weights).execute(s.stream, plain, s.weights);
  if (!q.bias.empty()) {
    s.bias = memory(biasMd, eng);
    std::memcpy(s.bias.get_data_handle(), q.bias.data(), q.bias.size() * sizeof(int32_t));
  }
  s.xZero = q.xZero;
  s.yZero = q.yZero;
  if (s.shiftCount) s.shiftBytes = alignUp(s.shiftCount * (s.dup ? 2 : 1));
  memory::desc zd({1}, Dt::s32, Tag::a);
  if (q.xZero != 0) {
    s.srcZero = memory(zd, eng);
    *static_cast<int32_t*>(s.srcZero.get_data_handle()) = q.xZero;
  }
  if (!q.floatOut && q.yZero != 0) {
    s.dstZero = memory(zd, eng);
    *static_cast<int32_t*>(s.dstZero.get_data_handle()) = q.yZero;
  }
  s.stream.wait();
  return s.shiftBytes + s.srcBytes + s.dstBytes + s.scratchBytes;
}

memory::desc biasDesc(const QLinearParams& q, int64_t channels) {
  return q.bias.empty() ? memory::desc() : memory::desc({channels}, Dt::s32, Tag::a);
}

// ---- QLinearConv ----------------------------------------------------------------------------------

class QConvKernel : public Kernel {
 public:
  explicit QConvKernel(const LayerDesc& l)
      : weights_(l.inputs[kQW].value), q_(readQLinearParams(l, constantInputViews(l), l.inputs[kQW].dims[0], 1)),
        xType_(l.inputs[kQX].type), yType_(l.outputs[0].type), shift_(shiftsSignedSource(xType_)) {
    if (shift_) q_.xZero += 128, xType_ = DataType::kUINT8;
  }

  size_t reshape(const LayerDesc& c, std::unique_ptr<KernelState>& state) const override {
    const ConvProblem p = resolveConv(qlinearConvView(c));
    if (c.inputs[kQX].dims.size() != 4) throw UnsupportedError("q_linear_conv_int_onednn: 2-D convolutions only");
    const Window3& w = p.win;
    memory::dims src{p.batch, p.inChannels, w.in[1], w.in[2]}, dst{p.batch, p.outChannels, w.out[1], w.out[2]};
    memory::dims wei = p.group > 1 ? memory::dims{p.group, p.outChannelsPerGroup(), p.inChannelsPerGroup(), w.kernel[1], w.kernel[2]}
                                   : memory::dims{p.outChannels, p.inChannels, w.kernel[1], w.kernel[2]};
    memory::dims strides{w.stride[1], w.stride[2]}, dil{w.dilation[1] - 1, w.dilation[2] - 1}, padL{w.padBegin[1], w.padBegin[2]}, padR;
    for (int i = 1; i < 3; ++i)
      padR.push_back((w.out[i] - 1) * w.stride[i] + (w.kernel[i] - 1) * w.dilation[i] + 1 - w.in[i] - w.padBegin[i]);
    memory::desc userSrc(src, dnnlType(xType_), Tag::nchw), userDst(dst, dnnlType(yType_), Tag::nchw);
    memory::desc anySrc(src, dnnlType(xType_), Tag::any), anyDst(dst, dnnlType(yType_), Tag::any), anyWei(wei, Dt::s8, Tag::any);
    auto s = std::make_unique<DnnlRun>();
    if (shift_) s->shiftCount = static_cast<size_t>(volume(c.inputs[kQX].dims)), s->flip = 0x80;
    try {
      auto attr = epilogueAttr(q_, p.outChannels, 1 << 1, q_.residual ? dnnlType(c.inputs[kQR].type) : Dt::undef);
      auto desc = q_.bias.empty()
                      ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, anySrc,
                                                        anyWei, anyDst, strides, dil, padL, padR)
                      : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, anySrc,
                                                        anyWei, biasDesc(q_, p.outChannels), anyDst, strides, dil, padL, padR);
      dnnl::convolution_forward::primitive_desc pd(desc, attr, oneDnnEngine());
      s->prim = dnnl::convolution_forward(pd);
      memory::desc userWei(wei, Dt::s8, p.group > 1 ? Tag::goihw : Tag::oihw);
      size_t bytes = bindLayouts(*s, pd, userSrc, userDst, weights_, userWei, q_, biasDesc(q_, p.outChannels));
      state = std::move(s);
      return bytes;
    } catch (const dnnl::error& e) {
      throw UnsupportedError("layer '" + c.name + "': oneDNN int8 convolution cannot run it: " + e.what());
    }
  }

  void execute(const KernelIO& io, KernelState* state) const override { runPrimitive(*static_cast<DnnlRun*>(state), io); }

 private:
  HostTensor weights_;
  QLinearParams q_;
  DataType xType_, yType_;  // xType_: as oneDNN sees it (u8 when shift_)
  bool shift_;
};

bool supportsQConv(const LayerDesc& l) {
  if (l.inputs.size() <= kQW || l.inputs[kQX].dims.size() != 4 || !isStatic(l.inputs[kQW].dims)) return false;
  return supportsCommon(l, l.inputs[kQW].dims[0], false);  // q_linear_conv_int_avx2 splits wide weights
}

std::unique_ptr<Kernel> createQConv(const LayerDesc& l) { return std::make_unique<QConvKernel>(l); }

// ---- QLinearMatMul --------------------------------------------------------------------------------

//! Without VNNI, B with weights outside [-64, 64] runs as B' [2K, N] with rows 2k = floor(B[k] / 2)
//! and 2k + 1 = ceil(B[k] / 2) (both in [-64, 64], so any int16 pair sum oneDNN forms is exact)
//! against A' [M, 2K] with each element twice: the same products, the same zero-point terms.
class QMatMulKernel : public Kernel {
 public:
  explicit QMatMulKernel(const LayerDesc& l)
      : weights_(l.inputs[kQW].value), q_(readQLinearParams(l, constantInputViews(l), l.inputs[kQW].dims[1], 1)),
        xType_(l.inputs[kQX].type), yType_(l.outputs[0].type), shift_(shiftsSignedSource(xType_)),
        split_(!vnniIsa() && !weightsPairSafe(weights_)) {
    if (shift_) q_.xZero += 128, xType_ = DataType::kUINT8;
    if (split_) {
      const int64_t K = weights_.dims()[0], N = weights_.dims()[1];
      HostTensor halves(DataType::kINT8, {2 * K, N});
      for (int64_t k = 0; k < K; ++k)
        for (int64_t n = 0; n < N; ++n) {
          const auto [hi, lo] = splitWeight(weights_.as<int8_t>()[k * N + n]);
          halves.as<int8_t>()[2 * k * N + n] = hi;
          halves.as<int8_t>()[(2 * k + 1) * N + n] = lo;
        }
      weights_ = halves;
    }
  }

  size_t reshape(const LayerDesc& c, std::unique_ptr<KernelState>& state) const override {
    const Dims& a = c.inputs[kQX].dims;
    const int64_t K = a.back() * (split_ ? 2 : 1), N = weights_.dims()[1], M = volume(a) / std::max<int64_t>(a.back(), 1);
    if (M == 0 || K == 0 || N == 0) throw UnsupportedError("q_linear_matmul_int_onednn: empty product");
    memory::desc userSrc({M, K}, dnnlType(xType_), Tag::ab), userDst({M, N}, dnnlType(yType_), Tag::ab);
    memory::desc anyWei({K, N}, Dt::s8, Tag::any);
    auto s = std::make_unique<DnnlRun>();
    if (shift_ || split_) s->shiftCount = static_cast<size_t>(volume(a)), s->flip = shift_ ? 0x80 : 0, s->dup = split_;
    try {
      auto attr = epilogueAttr(q_, N, 1 << 1);
      auto desc = q_.bias.empty() ? dnnl::matmul::desc(userSrc, anyWei, userDst)
                                  : dnnl::matmul::desc(userSrc, anyWei, memory::desc({1, N}, Dt::s32, Tag::ab), userDst);
      dnnl::matmul::primitive_desc pd(desc, attr, oneDnnEngine());
      s->prim = dnnl::matmul(pd);
      size_t bytes = bindLayouts(*s, pd, userSrc, userDst, weights_, memory::desc({K, N}, Dt::s8, Tag::ab), q_,
                                 memory::desc({1, N}, Dt::s32, Tag::ab));
      state = std::move(s);
      return bytes;
    } catch (const dnnl::error& e) {
      throw UnsupportedError("layer '" + c.name + "': oneDNN int8 matmul cannot run it: " + e.what());
    }
  }

  void execute(const KernelIO& io, KernelState* state) const override { runPrimitive(*static_cast<DnnlRun*>(state), io); }

 private:
  HostTensor weights_;
  QLinearParams q_;
  DataType xType_, yType_;  // xType_: as oneDNN sees it (u8 when shift_)
  bool shift_;
  bool split_;  // weights_ holds B' (see the class comment)
};

bool supportsQMatMul(const LayerDesc& l) {
  if (l.inputs.size() <= kQW || l.inputs[kQW].dims.size() != 2 || !isStatic(l.inputs[kQW].dims) || l.inputs[kQX].dims.size() < 2)
    return false;
  return supportsCommon(l, l.inputs[kQW].dims[1], true);
}

std::unique_ptr<Kernel> createQMatMul(const LayerDesc& l) { return std::make_unique<QMatMulKernel>(l); }

}  // namespace

KernelFactory oneDnnQLinearConv() { return {supportsQConv, createQConv}; }
KernelFactory oneDnnQLinearMatMul() { return {supportsQMatMul, createQMatMul}; }
int int8WeightLimit() { return vnniIsa() ? 127 : kPairSafeWeight - 1; }

}  // namespace kiln::cpu

#else
namespace kiln::cpu {
// Without oneDNN the integer conv tactic is q_linear_conv_int_avx2, which takes [-64, 64].
int int8WeightLimit() { return __builtin_cpu_supports("avx2") ? 63 : 127; }
}  // namespace kiln::cpu
#endif  // KILN_HAVE_ONEDNN
