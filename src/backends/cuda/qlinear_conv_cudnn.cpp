// "q_linear_conv_int_cudnn_0".."_3": QLinearConv (what builder/passes/lower_qdq.cpp makes of a Q/DQ
// conv, explicit or calibrated) on cuDNN's int8 tensor-core convolutions, with the requantizing
// epilogue in the same graph:
//   conv_fprop(X int8, W int8) -> int32 -> * m[k] -> + bias[k] * m[k] -> [+ R * r] -> [Relu / Clip] -> Y
// with m[k] = x_scale * w_scale[k] / y_scale and Y int8 (a Q follows), or m[k] = x_scale * w_scale[k]
// and Y float (no Q: float32, or the engine's float16 / bfloat16, kiln_float_out_type); the conversion to int8 rounds to nearest and saturates. The reference
// (QLinearParams::output) scales acc + bias in one product, so a value within float rounding of a
// half-way point may land one step away (the graph shape below is the one the probe found engines
// for: scale, then bias). Why: on an H100 (session 33 probe,
// ResNet-50's layers at batch 256) these graphs ran its 3x3 convs 1.4-1.9x and its 256 -> 64 1x1
// conv 1.8x faster than the float16 conv + bias + ReLU graphs.
// Symmetric quantization only (what calibration and ModelOpt-style exports make): int8 X with zero
// point 0, int8 W with zero points 0 (per-channel scales), int8 Y with zero point 0; group 1, 2-D,
// C and K multiples of 8, constant weights and scalars. cuDNN's int8 engines read channels-last
// tensors: X / Y are "nhwc" where the GPU layout pass made them so (gpu_layout.cpp), else the
// tactic transposes them through its workspace. kiln's residual R (QLinearConv inputs 9..11: a ResNet
// block's last conv + Add + Relu + Q) is int8 with zero point 0 in Y's layout, scaled by
// r = r_scale / y_scale (or r_scale for a float Y) in the same graph, so the block needs no float
// Add, no Relu and no Q pass of its own. The i-th tactic runs the i-th engine config that
// builds (plan_cache.h), so the builder's timing picks.
#include "backends/cuda/cuda_tactics.h"

#ifdef KILN_HAVE_CUDNN_FRONTEND
#include <cudnn_frontend.h>

#include <algorithm>
#include <mutex>
#include <string>

#include "backends/cuda/conv_cuda_common.h"
#include "backends/cuda/cuda_util.h"
#include "backends/cuda/cudnn_handle.h"
#include "backends/cuda/plan_cache.h"
#include "backends/cuda/shape_cuda.cuh"
#include "ops/conv_geometry.h"
#include "ops/conv_layout.h"
#include "ops/fused_attrs.h"
#include "ops/op_util.h"
#include "ops/qlinear.h"
#endif

namespace kiln {

#ifdef KILN_HAVE_CUDNN_FRONTEND

namespace {

namespace fe = cudnn_frontend;

constexpr int kTactics = 4;
constexpr int64_t kMaxWorkspace = int64_t(256) << 20;
enum Uid : int64_t { kUidX = 1, kUidW = 2, kUidBias = 3, kUidScale = 4, kUidY = 5, kUidR = 6, kUidRScale = 7 };

bool isFloatOut(DataType t) { return t == DataType::kFLOAT || t == DataType::kHALF || t == DataType::kBF16; }
fe::DataType_t feOut(DataType t) {
  switch (t) {
    case DataType::kFLOAT: return fe::DataType_t::FLOAT;
    case DataType::kHALF: return fe::DataType_t::HALF;
    case DataType::kBF16: return fe::DataType_t::BFLOAT16;
    default: return fe::DataType_t::INT8;
  }
}

//! The layer's quantization when this tactic can run it (symmetric int8, Relu / Clip / none).
bool readSymmetric(const LayerDesc& l, QLinearParams& q) {
  try {
    q = readQLinearParams(l, constantInputViews(l), l.inputs[kQW].dims[0], 1);
  } catch (const Error&) {
    return false;
  }
  if (q.xZero != 0 || q.yZero != 0) return false;
  for (int32_t z : q.wZero)
    if (z != 0) return false;
  if (q.residual && q.rZero != 0) return false;
  const ActKind a = q.act.kind;
  if (a == ActKind::kClip && (!std::isfinite(q.act.alpha) || !std::isfinite(q.act.beta) || !(q.act.alpha <= q.act.beta))) return false;
  return a == ActKind::kNone || a == ActKind::kRelu || a == ActKind::kClip;
}

bool supportsQConvCudnn(const LayerDesc& l) {
  if (l.op != "QLinearConv" || l.inputs.size() <= kQWZero || !l.present(kQX) || !l.present(kQW) || l.outputs.size() != 1) return false;
  const TensorDesc &x = l.inputs[kQX], &w = l.inputs[kQW];
  if (x.type != DataType::kINT8 || w.type != DataType::kINT8 || x.dims.size() != 4 || w.dims.size() != 4 || !w.value.valid() ||
      !isStatic(w.dims))
    return false;
  const DataType yt = l.outputs[0].type;
  if (yt != DataType::kINT8 && !isFloatOut(yt)) return false;
  if (l.present(kQR)) {  // int8 R of Y's (static) shape
    const TensorDesc& r = l.inputs[kQR];
    if (r.type != DataType::kINT8 || r.dims != l.outputs[0].dims || !isStatic(r.dims)) return false;
  }
  if (l.attrs->getInt("group", 1) != 1) return false;
  const int64_t K = w.dims[0], C = w.dims[1];
  if (K % 8 != 0 || C % 8 != 0 || (x.dims[1] >= 0 && x.dims[1] != C)) return false;
  for (int b : {inLayoutBlock(l), outLayoutBlock(l)})
    if (b != 1 && b != kNhwcBlock) return false;
  if (!qlinearScalarsConstant(l)) return false;
  QLinearParams q;
  return readSymmetric(l, q);
}

using GraphCache = cuda::PlanCache<fe::graph::Graph>;
GraphCache& graphCache() {
  static GraphCache* c = new GraphCache(64);  // never destroyed: kernel states may outlive statics
  return *c;
}

std::vector<int64_t> nhwcStrides(const std::vector<int64_t>& d) { return {d[1] * d[2] * d[3], 1, d[3] * d[1], d[1]}; }

//! Copies an NCHW tensor of dims `d` channels last (X, and R when Y stays NCHW).
cuda::CopyPlan toChannelsLast(const std::vector<int64_t>& d) {
  const int64_t hw = d[2] * d[3];
  return cuda::makeCopyPlan({d[0], hw, d[1]}, {d[1] * hw, 1, hw}, {hw * d[1], d[1], 1});
}

struct QConvState : KernelState {
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t plan = 0;
  std::vector<int64_t> uids;
  size_t cudnnBytes = 0, xBytes = 0, rBytes = 0;  // workspace: cuDNN's, X staged channels last, R, then Y
  bool stageX = false, stageY = false;  // Y NCHW: R is NCHW too (it has Y's layout) and is staged as well
  cuda::CopyPlan toNhwc, fromNhwc, toNhwcR;
};

class QConvCudnnKernel : public Kernel {
 public:
  QConvCudnnKernel(const LayerDesc& l, int index) : index_(index) {
    readSymmetric(l, q_);
    const TensorDesc& w = l.inputs[kQW];
    K_ = w.dims[0];
    yType_ = l.outputs[0].type;
    // KCRS int8 weights uploaded KRSC (channels last, as the int8 engines read them).
    const HostTensor& wv = w.value;
    weights_ = cuda::DeviceConstant(wv, "krsc", [](const HostTensor& src) {
      const Dims& d = src.dims();
      HostTensor out(src.type(), d);
      transposeInner(src.data(), out.data(), d[0], d[1], d[2] * d[3], elementSize(src.type()));
      return out;
    });
    // The per-channel multiplier and the bias in the scaled units.
    HostTensor bias(DataType::kFLOAT, {1, K_, 1, 1}), scale(DataType::kFLOAT, {1, K_, 1, 1});
    for (int64_t k = 0; k < K_; ++k) {
      const float xw = q_.xs(0) * q_.ws(k);
      const float m = q_.floatOut ? xw : xw / q_.yScale;
      scale.as<float>()[k] = m;
      bias.as<float>()[k] = static_cast<float>(static_cast<double>(q_.biasAt(k)) * m);
    }
    hasBias_ = !q_.bias.empty();
    bias_ = cuda::DeviceConstant(bias);
    scale_ = cuda::DeviceConstant(scale);
    if (q_.residual) {  // R's multiplier, per channel like m: the graph form the int8 engines were found for
      HostTensor rs(DataType::kFLOAT, {1, K_, 1, 1});
      std::fill_n(rs.as<float>(), K_, q_.floatOut ? q_.rScale : q_.rScale / q_.yScale);
      rScale_ = cuda::DeviceConstant(rs);
    }
  }

  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const ConvProblem cp = resolveConv(qlinearConvView(l));
    if (l.inputs[kQX].dims.size() != 4) opError(l, "q_linear_conv_int_cudnn: 2-D convolutions only");
    const Window3& win = cp.win;
    const std::vector<int64_t> x{cp.batch, cp.inChannels, win.in[1], win.in[2]}, y{cp.batch, cp.outChannels, win.out[1], win.out[2]};
    const std::vector<int64_t> w{K_, cp.inChannels, win.kernel[1], win.kernel[2]};
    auto s = std::make_unique<QConvState>();
    if (volume(Dims(y.begin(), y.end())) == 0) {
      state = std::move(s);
      return 0;
    }
    const std::vector<int64_t> padB{win.padBegin[1], win.padBegin[2]}, padE{win.padEnd[1], win.padEnd[2]};
    const std::vector<int64_t> stride{win.stride[1], win.stride[2]}, dil{win.dilation[1], win.dilation[2]};
    cuda::GraphKey key;
    key.add(static_cast<int64_t>(yType_)).add(hasBias_).add(q_.residual).add(static_cast<int64_t>(q_.act.kind)).addBits(clipLow()).addBits(clipHigh());
    for (const auto* vec : {&x, &w, &padB, &padE, &stride, &dil}) key.addList(*vec);
    std::lock_guard<std::mutex> lock(cuda::cudnnHandle().mu);
    cuda::CudnnPlanChoice c;
    s->graph = cuda::sharedCudnnPlan(graphCache(), key.str(), kMaxWorkspace, [&] { return makeGraph(x, w, y, padB, padE, stride, dil); },
                                     index_, l, c);
    s->plan = c.plan;
    s->uids = std::move(c.uids);
    s->cudnnBytes = cuda::roundUp(static_cast<size_t>(std::max<int64_t>(c.workspace, 0)), cuda::kWorkspaceAlign);
    const int64_t hwOut = y[2] * y[3];
    const size_t yCount = static_cast<size_t>(volume(Dims(y.begin(), y.end())));
    s->stageX = inLayoutBlock(l) != kNhwcBlock;
    s->stageY = outLayoutBlock(l) != kNhwcBlock;
    size_t bytes = s->cudnnBytes;
    if (s->stageX) {
      s->toNhwc = toChannelsLast(x);
      s->xBytes = cuda::roundUp(static_cast<size_t>(volume(Dims(x.begin(), x.end()))), cuda::kWorkspaceAlign);
      bytes += s->xBytes;
    }
    if (s->stageY) {
      s->fromNhwc = cuda::makeCopyPlan({y[0], y[1], hwOut}, {hwOut * y[1], 1, y[1]}, {y[1] * hwOut, hwOut, 1});
      if (q_.residual) {
        s->toNhwcR = toChannelsLast(y);
        s->rBytes = cuda::roundUp(yCount, cuda::kWorkspaceAlign);  // int8
        bytes += s->rBytes;
      }
      bytes += yCount * elementSize(yType_);
    }
    state = std::move(s);
    return bytes;
  }

  void execute(const KernelIO& io, KernelState* state) const override {
    auto* s = static_cast<QConvState*>(state);
    if (!s->graph) return;
    const cudaStream_t stream = cuda::streamOf(io);
    char* ws = static_cast<char*>(io.workspace);
    void* x = io.in[kQX].data;
    void* y = io.out[0].data;
    if (s->stageX) {
      cuda::launchCopy(s->toNhwc, 1, x, ws + s->cudnnBytes, stream);
      x = ws + s->cudnnBytes;
    }
    void* r = q_.residual ? io.in[kQR].data : nullptr;
    if (s->stageY && q_.residual) {
      cuda::launchCopy(s->toNhwcR, 1, r, ws + s->cudnnBytes + s->xBytes, stream);
      r = ws + s->cudnnBytes + s->xBytes;
    }
    if (s->stageY) y = ws + s->cudnnBytes + s->xBytes + s->rBytes;
    void* ptrs[7];
    int n = 0;
    for (int64_t uid : s->uids) {
      switch (uid) {
        case kUidX: ptrs[n++] = x; break;
        case kUidW: ptrs[n++] = const_cast<void*>(weights_.get()); break;
        case kUidBias: ptrs[n++] = const_cast<void*>(bias_.get()); break;
        case kUidScale: ptrs[n++] = const_cast<void*>(scale_.get()); break;
        case kUidY: ptrs[n++] = y; break;
        case kUidR: ptrs[n++] = r; break;
        case kUidRScale: ptrs[n++] = const_cast<void*>(rScale_.get()); break;
        default: throw Error("cuDNN int8 conv: unexpected tensor uid " + std::to_string(uid));
      }
    }
    cuda::executeCudnnPlan(*s->graph, s->plan, ptrs, n, io.workspace, stream, "cuDNN int8 conv");
    if (s->stageY) cuda::launchCopy(s->fromNhwc, elementSize(yType_), y, io.out[0].data, stream);
  }

  bool holdsInput(size_t i) const override { return i != kQX && i != kQR; }  // weights and scalars are uploaded

 private:
  //! Relu / Clip bounds in the units of the scaled value (the quantized output's, or the real one's).
  float clipLow() const {
    if (q_.act.kind == ActKind::kRelu) return 0.f;
    return q_.act.kind == ActKind::kClip ? (q_.floatOut ? q_.act.alpha : q_.act.alpha / q_.yScale) : 0.f;
  }
  float clipHigh() const { return q_.act.kind == ActKind::kClip ? (q_.floatOut ? q_.act.beta : q_.act.beta / q_.yScale) : 0.f; }

  std::shared_ptr<fe::graph::Graph> makeGraph(const std::vector<int64_t>& x, const std::vector<int64_t>& w, const std::vector<int64_t>& y,
                                              const std::vector<int64_t>& padB, const std::vector<int64_t>& padE,
                                              const std::vector<int64_t>& stride, const std::vector<int64_t>& dil) const {
    auto g = std::make_shared<fe::graph::Graph>();
    g->set_io_data_type(fe::DataType_t::INT8).set_intermediate_data_type(fe::DataType_t::INT32).set_compute_data_type(fe::DataType_t::INT32);
    auto tensor = [&](const char* name, int64_t uid, const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                      fe::DataType_t t) {
      return g->tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(dims).set_stride(strides).set_data_type(t));
    };
    auto xt = tensor("X", kUidX, x, nhwcStrides(x), fe::DataType_t::INT8);
    auto wt = tensor("W", kUidW, w, nhwcStrides(w), fe::DataType_t::INT8);
    auto acc = g->conv_fprop(xt, wt,
                             fe::graph::Conv_fprop_attributes()
                                 .set_name("fprop")
                                 .set_pre_padding(padB)
                                 .set_post_padding(padE)
                                 .set_stride(stride)
                                 .set_dilation(dil)
                                 .set_compute_data_type(fe::DataType_t::INT32));
    acc->set_data_type(fe::DataType_t::INT32);
    const std::vector<int64_t> perChannel{1, K_, 1, 1}, perChannelStrides{K_, 1, 1, 1};
    auto channelScalars = [&](const char* name, int64_t uid) { return tensor(name, uid, perChannel, perChannelStrides, fe::DataType_t::FLOAT); };
    // A float binary pointwise op (the epilogue computes in float32 between the int32 acc and Y).
    auto floatOp = [&](auto a, auto b, const char* name, fe::PointwiseMode_t mode) {
      auto out = g->pointwise(a, b, fe::graph::Pointwise_attributes().set_name(name).set_mode(mode).set_compute_data_type(fe::DataType_t::FLOAT));
      out->set_data_type(fe::DataType_t::FLOAT);
      return out;
    };
    auto v = floatOp(acc, channelScalars("scale", kUidScale), "scale", fe::PointwiseMode_t::MUL);
    if (hasBias_) v = floatOp(v, channelScalars("bias", kUidBias), "bias", fe::PointwiseMode_t::ADD);
    if (q_.residual) {
      auto r = tensor("R", kUidR, y, nhwcStrides(y), fe::DataType_t::INT8);
      v = floatOp(v, floatOp(r, channelScalars("r_scale", kUidRScale), "r_scale", fe::PointwiseMode_t::MUL), "residual", fe::PointwiseMode_t::ADD);
    }
    if (q_.act.kind != ActKind::kNone) {
      auto attrs = fe::graph::Pointwise_attributes().set_name("act").set_mode(fe::PointwiseMode_t::RELU_FWD).set_compute_data_type(fe::DataType_t::FLOAT);
      if (q_.act.kind == ActKind::kClip) attrs.set_relu_lower_clip(clipLow()).set_relu_upper_clip(clipHigh());
      v = g->pointwise(v, attrs);
    }
    v->set_output(true).set_uid(kUidY).set_dim(y).set_stride(nhwcStrides(y)).set_data_type(feOut(yType_));
    return g;
  }

  int index_;
  QLinearParams q_;
  int64_t K_ = 0;
  DataType yType_ = DataType::kINT8;
  bool hasBias_ = false;
  cuda::DeviceConstant weights_, bias_, scale_, rScale_;
};

template <int I>
std::unique_ptr<Kernel> createQConvCudnn(const LayerDesc& l) {
  return std::make_unique<QConvCudnnKernel>(l, I);
}

}  // namespace

namespace cuda {
KernelFactory cudnnQLinearConv(int engine) {
  static_assert(kTactics == 4, "one create per engine config below");
  static constexpr KernelFactory kByEngine[] = {{supportsQConvCudnn, createQConvCudnn<0>},
                                                {supportsQConvCudnn, createQConvCudnn<1>},
                                                {supportsQConvCudnn, createQConvCudnn<2>},
                                                {supportsQConvCudnn, createQConvCudnn<3>}};
  return kByEngine[engine];
}
}  // namespace cuda

#endif

}  // namespace kiln
