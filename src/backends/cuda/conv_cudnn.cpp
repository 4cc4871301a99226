// "conv_fp_cudnn_0".."_3" (and conv_transpose_fp_cudnn_*): Conv and ConvTranspose through cuDNN 9's graph API (C++ frontend).
// Conv: conv_fprop -> (+ bias) -> (+ residual) -> (activation), one fused graph where cuDNN has an
// engine for it, else conv_fprop alone followed by our epilogue kernel (conv_epilogue.cu).
// ConvTranspose: conv_dgrad (the transposed convolution) + our epilogue for bias/activation.
// Tensors are NCHW (1-D convs as H = 1), or channels-last where the GPU layout pass marked the
// layer's X / Y (and R) "nhwc" (kiln_layout_in / kiln_layout_out); then the constant weights are
// uploaded KRSC (channels last too), which cuDNN's NHWC tensor-core engines want. Float32 (TF32
// when allowed), float16, bfloat16 with float32 compute. The i-th tactic runs the i-th engine config of heuristics A + fallback that
// builds for the concrete shape (the first one when fewer build), so the builder's timing picks.
// "conv_half_cudnn_pad8_0" / "_1" (Conv, float16/bfloat16, plain NCHW X, group 1, constant
// weights, C % 8 != 0, C <= 64): cuDNN's NHWC tensor-core engines want the input channels a
// multiple of 8, and a network's first conv (C = 3, e.g. ResNet-50's 7x7 stem) otherwise runs a
// slow kernel. These tactics copy X channels last with C zero-padded to Cp = roundup(C, 8) into
// the workspace (conv_pad.cu), upload the weights KRSC with zero channels C..Cp-1, and run the
// same cuDNN graph on [N, Cp, H, W] (as TensorRT does); Y and the fusions are as above.
#include "backends/cuda/cuda_tactics.h"
#include "backends/cuda/conv_cuda_common.h"

#ifdef KILN_HAVE_CUDNN_FRONTEND
#include <cudnn_frontend.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>

#include "backends/cuda/cuda_util.h"
#include "backends/cuda/cudnn_handle.h"
#include "backends/cuda/plan_cache.h"
#include "ops/conv_geometry.h"
#include "ops/conv_layout.h"
#include "ops/fused_attrs.h"
#endif

namespace kiln {

#ifdef KILN_HAVE_CUDNN_FRONTEND

namespace {

namespace fe = cudnn_frontend;
using cuda::DevAct;
using cuda::DeviceConstant;

constexpr int kCudnnTactics = 4;
constexpr int kPaddedTactics = 2;         // "conv_half_cudnn_pad8_<i>"
constexpr int64_t kPadChannels = 8;       // the padded tactics' channel multiple
constexpr int64_t kMaxPaddedChannels = 64;
constexpr int64_t kMaxWorkspace = int64_t(512) << 20;
// Variant-pack uids of the graph's user tensors.
enum Uid : int64_t { kUidX = 1, kUidW = 2, kUidB = 3, kUidR = 4, kUidY = 5 };

using cuda::CudnnHandle;
using cuda::kWorkspaceAlign;
using cuda::roundUp;
using cuda::cudnnHandle;


fe::DataType_t feType(DataType t) {
  switch (t) {
    case DataType::kFLOAT: return fe::DataType_t::FLOAT;
    case DataType::kHALF: return fe::DataType_t::HALF;
    case DataType::kBF16: return fe::DataType_t::BFLOAT16;
    default: throw UnsupportedError(std::string("cuDNN conv: unsupported type ") + toString(t));
  }
}

std::vector<int64_t> packedStrides(const std::vector<int64_t>& d) {
  std::vector<int64_t> s(d.size(), 1);
  for (size_t i = d.size(); i-- > 1;) s[i - 1] = s[i] * d[i];
  return s;
}

//! Strides of logical [N, C, spatial...] dims stored channels last ([N, spatial..., C]).
std::vector<int64_t> channelsLastStrides(const std::vector<int64_t>& d) {
  std::vector<int64_t> s(d.size(), 1);
  int64_t step = d[1];  // C is innermost
  for (size_t i = d.size(); i-- > 2;) {
    s[i] = step;
    step *= d[i];
  }
  s[0] = step;
  return s;
}

//! KCRS weights ([K][C/g][kernel...]) rearranged as KRSC ([K][kernel...][C/g]).
HostTensor toChannelsLast(const HostTensor& w) {
  const Dims& d = w.dims();
  const int64_t k = d[0], c = d[1], spatial = d.size() > 2 ? volume(Dims(d.begin() + 2, d.end())) : 1;
  HostTensor out(w.type(), d);
  transposeInner(w.data(), out.data(), k, c, spatial, elementSize(w.type()));
  return out;
}

//! KCRS weights ([K][C][kernel...]) as KRSC with the channels zero-padded to `cp` >= C:
//! [K][kernel...][cp], channels C..cp-1 zero (group 1).
HostTensor toPaddedChannelsLast(const HostTensor& w, int64_t cp) {
  const Dims& d = w.dims();
  const int64_t k = d[0], c = d[1], spatial = d.size() > 2 ? volume(Dims(d.begin() + 2, d.end())) : 1;
  const HostTensor last = toChannelsLast(w);
  Dims pd = d;
  pd[1] = cp;
  HostTensor out(w.type(), pd);  // zero-initialized: the padding channels stay 0
  const size_t es = elementSize(w.type());
  const int64_t rows = volume(Dims{k, spatial});
  const auto* from = static_cast<const char*>(last.data());
  auto* to = static_cast<char*>(out.data());
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(to + static_cast<size_t>(r * cp) * es, from + static_cast<size_t>(r * c) * es, static_cast<size_t>(c) * es);
  return out;
}


//! The concrete problem in cuDNN's terms: 4-D (1-D/2-D convs) or 5-D tensors, NCHW-packed.
struct Problem {
  bool transpose = false;
  bool xLast = false, yLast = false, wLast = false;  // channels-last X / Y (and R) / W
  DataType type = DataType::kFLOAT;
  std::vector<int64_t> x, w, y;  // dims: X (conv input / dgrad's dy), W, Y (conv output / dgrad's dx)
  std::vector<int64_t> padBegin, padEnd, stride, dilation;
  int64_t batch = 0, outChannels = 0, outSize = 0;
};

Problem resolve(const LayerDesc& l) {
  Problem p;
  p.transpose = l.op == "ConvTranspose";
  p.type = l.inputs[0].type;
  const ConvProblem cp = p.transpose ? resolveConvTranspose(l) : resolveConv(l);
  const Window3& win = cp.win;
  const Dims& wd = l.inputs[1].dims;
  const size_t rank = l.inputs[0].dims.size() - 2;
  const int first = rank == 3 ? 0 : 1;  // 1-D and 2-D convs as 2-D (H = 1 for 1-D)
  p.x = {cp.batch, cp.inChannels};
  p.y = {cp.batch, cp.outChannels};
  p.w = {wd[0], wd[1]};
  for (int a = first; a < 3; ++a) {
    p.x.push_back(win.in[a]);
    p.y.push_back(win.out[a]);
    p.w.push_back(win.kernel[a]);
    p.padBegin.push_back(win.padBegin[a]);
    p.padEnd.push_back(win.padEnd[a]);
    p.stride.push_back(win.stride[a]);
    p.dilation.push_back(win.dilation[a]);
  }
  p.batch = cp.batch;
  p.outChannels = cp.outChannels;
  p.outSize = win.outSize();
  if (p.transpose) {
    // dgrad computes the conv whose forward maps Y's size to X's: every axis must agree.
    for (size_t a = 0; a < p.stride.size(); ++a) {
      const int64_t ext = (p.w[a + 2] - 1) * p.dilation[a] + 1;
      const int64_t span = p.y[a + 2] + p.padBegin[a] + p.padEnd[a] - ext;
      if (p.padEnd[a] < 0 || span < 0 || span / p.stride[a] + 1 != p.x[a + 2])
        throw UnsupportedError("layer '" + l.name + "' (ConvTranspose): output_padding/output_shape geometry not supported by cuDNN");
    }
  }
  return p;
}

//! Whether the conv graph applies `a` itself. A clip (ReLU6) only on channels-last outputs: with
//! NCHW outputs the engines that fuse it ran MobileNetV2's batch-1 expansion convs 3-4x slower on
//! the H200 than the same convs without it (0.09 vs 0.027 ms), more than our epilogue pass costs.
bool graphAct(const Activation& a, const Problem& p) { return (a.kind != ActKind::kClip || p.yLast) && cuda::cudnnAct(a); }

//! What the cuDNN graph computes itself (the epilogue kernel does the rest).
struct Fusion {
  bool bias = false, residual = false, act = false;
};

std::shared_ptr<fe::graph::Graph> makeGraph(const Problem& p, const Activation& act, bool hasBias, bool hasRes,
                                            const Fusion& f) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(feType(p.type))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto tensor = [&](const char* name, int64_t uid, const std::vector<int64_t>& dims, bool last = false) {
    return g->tensor(fe::graph::Tensor_attributes()
                         .set_name(name)
                         .set_uid(uid)
                         .set_dim(dims)
                         .set_stride(last ? channelsLastStrides(dims) : packedStrides(dims))
                         .set_data_type(feType(p.type)));
  };
  auto x = tensor("X", kUidX, p.x, p.xLast);
  auto w = tensor("W", kUidW, p.w, p.wLast);
  std::shared_ptr<fe::graph::Tensor_attributes> y;
  if (p.transpose) {
    auto attrs = fe::graph::Conv_dgrad_attributes()
                     .set_name("dgrad")
                     .set_pre_padding(p.padBegin)
                     .set_post_padding(p.padEnd)
                     .set_stride(p.stride)
                     .set_dilation(p.dilation);
    y = g->conv_dgrad(x, w, attrs);
    y->set_dim(p.y);  // dgrad cannot infer its output size
  } else {
    auto attrs = fe::graph::Conv_fprop_attributes()
                     .set_name("fprop")
                     .set_pre_padding(p.padBegin)
                     .set_post_padding(p.padEnd)
                     .set_stride(p.stride)
                     .set_dilation(p.dilation);
    y = g->conv_fprop(x, w, attrs);
  }
  auto pointwise = [&](std::shared_ptr<fe::graph::Tensor_attributes> in, std::shared_ptr<fe::graph::Tensor_attributes> other,
                       fe::PointwiseMode_t mode) {
    auto a = fe::graph::Pointwise_attributes().set_mode(mode).set_compute_data_type(fe::DataType_t::FLOAT);
    return other ? g->pointwise(in, other, a) : g->pointwise(in, a);
  };
  if (f.bias && hasBias) {
    std::vector<int64_t> bd(p.y.size(), 1);
    bd[1] = p.outChannels;
    y = pointwise(y, tensor("B", kUidB, bd), fe::PointwiseMode_t::ADD);
  }
  if (f.residual && hasRes) y = pointwise(y, tensor("R", kUidR, p.y, p.yLast), fe::PointwiseMode_t::ADD);
  fe::graph::Pointwise_attributes actAttrs;
  if (f.act && graphAct(act, p) && cuda::cudnnAct(act, &actAttrs)) y = g->pointwise(y, actAttrs);
  y->set_output(true).set_uid(kUidY).set_dim(p.y).set_stride(p.yLast ? channelsLastStrides(p.y) : packedStrides(p.y))
      .set_data_type(feType(p.type));
  return g;
}

//! Built graphs shared by the four tactics of a layer and by layers of one shape (plan_cache.h).
using GraphCache = cuda::PlanCache<fe::graph::Graph>;
GraphCache& graphCache() {
  static GraphCache* c = new GraphCache(64);  // never destroyed: kernel states may outlive statics
  return *c;
}

//! Everything makeGraph and the plan filters read, and the device: equal keys, equal graphs.
std::string graphKey(const Problem& p, const Activation& act, bool hasBias, bool hasRes, const Fusion& f, bool tf32) {
  cuda::GraphKey k;
  k.add(static_cast<int64_t>(p.type)).add(p.transpose).add(p.xLast).add(p.yLast).add(p.wLast).add(tf32);
  for (const auto* v : {&p.x, &p.w, &p.y, &p.padBegin, &p.padEnd, &p.stride, &p.dilation}) k.addList(*v);
  k.add(f.bias && hasBias).add(f.residual && hasRes);
  if (f.act && graphAct(act, p)) k.add(static_cast<int64_t>(act.kind)).addBits(act.alpha).addBits(act.beta);
  return k.str();
}

struct ConvState : KernelState {
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t plan = 0;
  std::vector<int64_t> uids;  // the graph's user tensors, in the order execute wants them
  Fusion fused;
  bool epilogue = false;
  DevAct act;
  int64_t planes = 0, channels = 0, size = 0;
  // Padded tactics: X copied to the workspace's first `padBytes` as [n][hw][cp] (c channels real).
  bool pad = false;
  int64_t padN = 0, padC = 0, padHw = 0, padCp = 0, padBytes = 0;
};

//! Whether Y is described to cuDNN as channels-last. A 1x1 output image is the same bytes in both
//! layouts, and is described as NCHW: on the H200 engine 0 computed a 3x3 conv of 3x3 images
//! (a 1x1 output) from an NCHW X into an NHWC Y wrong at batch 1 in float16 and bfloat16, while
//! the all-NCHW graph was right (CudaLayout.SqueezeExcitationConvsAtLargeBatch).
bool describedChannelsLastY(const LayerDesc& l, const Dims& y) {
  return outLayoutBlock(l) == kNhwcBlock && !(y.size() == 4 && y[2] == 1 && y[3] == 1);
}

bool anyChannelsLast(const LayerDesc& l) {
  return inLayoutBlock(l) == kNhwcBlock || describedChannelsLastY(l, l.outputs[0].dims);
}

class CudnnConvKernel : public Kernel {
 public:
  //! `padChannels`: the "conv_half_cudnn_pad8_*" variant (supportsPaddedCudnnConv): X's channels padded to
  //! a multiple of kPadChannels in a channels-last copy, the constant weights padded KRSC.
  CudnnConvKernel(const LayerDesc& l, int index, bool padChannels = false)
      : index_(index),
        pad_(padChannels),
        weightsLast_(pad_ || (anyChannelsLast(l) && l.inputs[1].value.valid())),
        weights_(uploadWeights(l, pad_, weightsLast_)),
        bias_(l.present(2) ? l.inputs[2].value : HostTensor()) {}

  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    Problem p = resolve(l);
    p.xLast = inLayoutBlock(l) == kNhwcBlock;
    p.yLast = describedChannelsLastY(l, p.y);
    p.wLast = weightsLast_;
    int64_t padBytes = 0;
    if (pad_) {  // cuDNN sees the padded channels-last copy of X and the padded KRSC weights
      if (p.x.size() != 4 || p.w.size() != 4 || p.xLast)
        throw UnsupportedError("layer '" + l.name + "' (Conv): the padded cuDNN tactic wants a plain 4-D X");
      const int64_t cp = roundUp(p.x[1], kPadChannels);
      p.x[1] = cp;
      p.w[1] = cp;
      p.xLast = true;
      padBytes = roundUp(volume(Dims{p.x[0], cp, p.x[2], p.x[3], static_cast<int64_t>(elementSize(p.type))}), kWorkspaceAlign);
    }
    const Activation act = fusedActivation(*l.attrs);
    const bool hasBias = l.present(2), hasRes = l.present(3);
    // Fused graph first (Conv only: dgrad fusions are rare), then the bare convolution.
    std::vector<Fusion> levels;
    // No fused graph for 1x1 outputs at batch != 1 (float32 squeeze-excitation FCs; float16 / bfloat16
    // ones are refused at build, isPixelGemmConv, unless their shape is known only now): on the H100
    // every cuDNN 9.14 engine computed conv + bias + SiLU of [N, C, 1, 1] wrong at batches 2 to 128
    // (float32 and float16) while the bare conv was right for every engine, so the bias and
    // activation go to our epilogue.
    const bool pixelImages = p.x.size() == 4 && p.y.size() == 4 && p.y[2] == 1 && p.y[3] == 1 && p.x[0] != 1;
    if (!p.transpose && !pixelImages && (hasBias || hasRes || graphAct(act, p))) levels.push_back(Fusion{true, true, true});
    levels.push_back(Fusion{});
    const bool tf32 = cuda::allowTf32(l);
    CudnnHandle& h = cudnnHandle();
    std::lock_guard<std::mutex> lock(h.mu);
    std::string failures;
    for (const Fusion& f : levels) {
      auto entry = graphCache().get(graphKey(p, act, hasBias, hasRes, f, tf32), [&](GraphCache::Entry& e) {
        auto g = makeGraph(p, act, hasBias, hasRes, f);
        e.failure = cuda::createCudnnPlans(*g, h.h);
        if (!e.failure.empty()) return;
        g->deselect_workspace_greater_than(kMaxWorkspace);
        if (p.type == DataType::kFLOAT) {
          // float32 inputs are never computed in half; TF32 tensor cores only when allowed.
          std::vector<fe::NumericalNote_t> notes{fe::NumericalNote_t::DOWN_CONVERT_INPUTS};
          if (!tf32) notes.push_back(fe::NumericalNote_t::TENSOR_CORE);
          g->deselect_numeric_notes(notes);
        }
        e.graph = std::move(g);
      });
      if (!entry->graph) {
        failures += "\n" + entry->failure;
        continue;
      }
      cuda::CudnnPlanChoice c;
      if (!cuda::chooseCudnnPlan(*entry, index_, l, c)) {
        failures += "\nno engine config builds";
        continue;
      }
      const int64_t ws = c.workspace;
      auto s = std::make_unique<ConvState>();
      s->graph = entry->graph;
      s->plan = c.plan;
      s->uids = std::move(c.uids);
      s->fused = Fusion{f.bias && hasBias, f.residual && hasRes, f.act && graphAct(act, p)};
      s->epilogue = (hasBias && !s->fused.bias) || (hasRes && !s->fused.residual) ||
                    (act.kind != ActKind::kNone && !s->fused.act);
      s->act = cuda::toDevAct(s->fused.act ? Activation{} : act);
      s->planes = p.batch * p.outChannels;
      s->channels = p.outChannels;
      s->size = p.outSize;
      if (p.yLast) {  // the epilogue's "planes" of one element: channel = index % channels
        s->planes = p.batch * p.outChannels * p.outSize;
        s->size = 1;
      }
      if (pad_) {
        s->pad = true;
        s->padN = p.batch;
        s->padC = l.inputs[0].dims[1];
        s->padHw = volume(Dims{p.x[2], p.x[3]});
        s->padCp = p.x[1];
        s->padBytes = padBytes;
      }
      state = std::move(s);
      const int64_t cudnnWs = roundUp(std::max<int64_t>(ws, 0), pad_ ? kWorkspaceAlign : 1);
      if (cudnnWs > std::numeric_limits<int64_t>::max() - padBytes) throw Error("cuDNN conv: workspace size overflow");
      return static_cast<size_t>(padBytes + cudnnWs);
    }
    throw UnsupportedError("layer '" + l.name + "' (" + l.op + "): no cuDNN engine supports it" + failures);
  }

  void execute(const KernelIO& io, KernelState* state) const override {
    auto* s = static_cast<ConvState*>(state);
    const void* bias = bias_.orInput(io, 2);
    const void* res = io.in.size() > 3 ? io.in[3].data : nullptr;
    cudaStream_t stream = cuda::streamOf(io);
    void* x = io.in[0].data;
    void* workspace = io.workspace;
    if (s->pad) {  // X channels last, zero-padded to padCp, at the workspace's start; cuDNN's after it
      x = io.workspace;
      workspace = static_cast<char*>(io.workspace) + s->padBytes;
      cuda::launchNchwToNhwcPadded(io.in[0].type, io.in[0].data, x, s->padN, s->padC, s->padHw, s->padCp, stream);
    }
    void* ptrs[5];
    int n = 0;
    for (int64_t uid : s->uids) {
      switch (uid) {
        case kUidX: ptrs[n++] = x; break;
        case kUidW: ptrs[n++] = const_cast<void*>(weights_.orInput(io, 1)); break;
        case kUidB: ptrs[n++] = const_cast<void*>(bias); break;
        case kUidR: ptrs[n++] = const_cast<void*>(res); break;
        case kUidY: ptrs[n++] = io.out[0].data; break;
        default: throw Error("cuDNN conv: unexpected tensor uid " + std::to_string(uid));
      }
    }
    cuda::executeCudnnPlan(*s->graph, s->plan, ptrs, n, workspace, stream, "cuDNN conv");
    if (s->epilogue)
      cuda::launchConvEpilogue(io.out[0].type, io.out[0].data, s->fused.bias ? nullptr : bias,
                               s->fused.residual ? nullptr : res, s->planes, s->channels, s->size, s->act, stream);
  }

  bool holdsInput(size_t i) const override { return (i == 1 && weights_.get()) || (i == 2 && bias_.get()); }
 private:
  //! The weights as cuDNN reads them: KCRS as they are, KRSC (channels last), or KRSC with the
  //! channels zero-padded (the padded variant, which needs constant 4-D weights).
  static DeviceConstant uploadWeights(const LayerDesc& l, bool pad, bool last) {
    const HostTensor& w = l.inputs[1].value;
    if (pad) {
      if (!w.valid() || w.dims().size() != 4)
        throw UnsupportedError("layer '" + l.name + "' (Conv): the padded cuDNN tactic wants constant 4-D weights");
      const int64_t cp = roundUp(w.dims()[1], kPadChannels);
      return DeviceConstant(w, "krsc_pad:" + std::to_string(cp), [cp](const HostTensor& t) { return toPaddedChannelsLast(t, cp); });
    }
    if (last) return DeviceConstant(w, "krsc", toChannelsLast);
    return DeviceConstant(w);
  }

  int index_;
  bool pad_;
  bool weightsLast_;
  DeviceConstant weights_, bias_;
};

bool supportsCudnnConvBase(const LayerDesc& l) {
  if (!cuda::convFloatTypes(l) || !cuda::knownActivation(l)) return false;
  if (l.op == "Conv" && cuda::isPixelGemmConv(l)) return false;  // wrong results (conv_cuda_common.h)
  const Dims& x = l.inputs[0].dims;
  if (x.size() < 3 || x.size() > 5 || l.inputs[1].dims.size() != x.size()) return false;
  for (const int64_t b : {inLayoutBlock(l), outLayoutBlock(l)}) {  // plain, or nhwc for 2-D convs
    if (b != 1 && !(b == kNhwcBlock && x.size() == 4 && l.op == "Conv")) return false;
  }
  // A channels-last Y needs K % 8 == 0 (the layout pass only makes such tensors channels last
  // anyway; see supportsCudnnConv for the mixed-layout case).
  const Dims& w = l.inputs[1].dims;
  if (outLayoutBlock(l) == kNhwcBlock && (w[0] <= 0 || w[0] % 8 != 0)) return false;
  if (l.op == "ConvTranspose") {
    // dgrad cannot express output padding at or beyond the stride (dilation-only padding).
    const size_t r = x.size() - 2;
    std::vector<int64_t> op = l.attrs->getInts("output_padding", std::vector<int64_t>(r, 0));
    std::vector<int64_t> st = l.attrs->getInts("strides", std::vector<int64_t>(r, 1));
    for (size_t i = 0; i < op.size() && i < st.size(); ++i)
      if (op[i] >= st[i]) return false;
    // output_shape may need negative pads; with known dims, ask resolve() (convtranspose_direct
    // runs what dgrad cannot).
    // The batch may be dynamic: resolve() only passes it through.
    const bool known = std::all_of(x.begin() + 1, x.end(), [](int64_t d) { return d >= 0; }) &&
                       std::all_of(w.begin(), w.end(), [](int64_t d) { return d >= 0; });
    if (known) {
      try {
        resolve(l);
      } catch (const Error&) {
        return false;
      }
    }
  }
  return true;
}

//! The "conv_half_cudnn_pad8_*" tactics: plain NCHW float16/bfloat16 4-D Conv, group 1, constant weights,
//! input channels not a multiple of kPadChannels (and few: the stem convs this is for).
//! The plain cuDNN tactics. On the H200, an NCHW X whose channel count is not a multiple of 8
//! (C = 5) with a channels-last Y (16 channels) and a fused residual got wrong results (zeros)
//! from every engine cuDNN offered, in float16 and bfloat16, while the same conv through
//! cudnn_pad8 was right: such mixed-layout convs go to cudnn_pad8 only.
bool supportsCudnnConv(const LayerDesc& l) {
  if (!supportsCudnnConvBase(l)) return false;
  const bool mixed = inLayoutBlock(l) == 1 && outLayoutBlock(l) == kNhwcBlock;
  const int64_t c = l.inputs[0].dims.size() > 1 ? l.inputs[0].dims[1] : -1;
  return !(mixed && (c <= 0 || c % 8 != 0));
}

bool supportsPaddedCudnnConv(const LayerDesc& l) {
  if (l.op != "Conv" || !supportsCudnnConvBase(l)) return false;
  const DataType t = l.inputs[0].type;
  if (t != DataType::kHALF && t != DataType::kBF16) return false;
  const Dims& x = l.inputs[0].dims;
  const Dims& w = l.inputs[1].dims;
  if (x.size() != 4 || w.size() != 4 || inLayoutBlock(l) != 1) return false;
  if (l.attrs->getInt("group", 1) != 1 || !l.inputs[1].value.valid()) return false;
  const int64_t c = x[1];
  return c > 0 && c % kPadChannels != 0 && c <= kMaxPaddedChannels && w[1] == c;
}

template <int I>
std::unique_ptr<Kernel> createCudnnConv(const LayerDesc& l) {
  return std::make_unique<CudnnConvKernel>(l, I);
}

template <int I>
std::unique_ptr<Kernel> createPaddedCudnnConv(const LayerDesc& l) {
  return std::make_unique<CudnnConvKernel>(l, I, true);
}

}  // namespace

namespace cuda {
KernelFactory cudnnConv(int engine) {
  static_assert(kCudnnTactics == 4, "one create per engine config below");
  static constexpr KernelFactory kByEngine[] = {{supportsCudnnConv, createCudnnConv<0>}, {supportsCudnnConv, createCudnnConv<1>},
                                                {supportsCudnnConv, createCudnnConv<2>}, {supportsCudnnConv, createCudnnConv<3>}};
  return kByEngine[engine];
}
KernelFactory cudnnConvPad8(int engine) {
  static_assert(kPaddedTactics == 2, "one create per engine config below");
  static constexpr KernelFactory kByEngine[] = {{supportsPaddedCudnnConv, createPaddedCudnnConv<0>},
                                                {supportsPaddedCudnnConv, createPaddedCudnnConv<1>}};
  return kByEngine[engine];
}
}  // namespace cuda

#endif

}  // namespace kiln
