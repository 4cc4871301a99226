// GPU: chains of Conv / pooling layers exchange their float16/bfloat16 4-D tensors channels-last
// ("nhwc") instead of NCHW. cuDNN's tensor-core convolutions and its runtime-fused
// conv + bias + residual + activation graphs are NHWC kernels: fed NCHW they either transpose
// internally around every convolution or find no fused engine at all (then our separate epilogue
// kernel makes one more pass over the output). Elementwise layers (residual adds, gates such as
// squeeze-excitation's x * s[N, C, 1, 1], activations, pointwise chains) run in the layout of
// their inputs, so a whole CNN stays NHWC as torch.compile's channels-last does. Network inputs
// and outputs stay NCHW; a LayoutConvert sits where an nhwc tensor meets any other op
// (layout_planner.h). Channel Concats of nhwc inputs stay nhwc as well.
//
// Permutes between channels-last blocks and conv regions take part too: perm [0, 2, 3, 1] reads
// an nhwc X and [0, 3, 1, 2] writes an nhwc Y as byte copies the runtime aliases away
// (ops/layout_transpose.h), so ConvNeXt's dwconv -> permute -> LayerNorm/MLP -> permute -> add
// needs no transpose at all. SegFormer/Swin-style token views (Reshape [N, C, H*W] then Transpose
// [0, 2, 1], and back) are first rewritten as the 4-D permute plus a Reshape (the same work) so
// that they qualify.
//
// At every batch by default (BuilderConfig::setChannelsLastMinBatch, default 1): at batch 1 on the
// H100, ten zoo CNNs ran 1.23x faster in the geometric mean channels-last than NCHW (ResNeXt-50
// 1.81x, Inception-v3 1.95x, DenseNet-121 1.63x; ShuffleNet-V2 0.85x, whose channel shuffles
// convert layouts; bench/results/channels-last-b1-h100.md). Channel counts
// must be multiples of 8 (tensor-core alignment). INT8 engines (QLinearConv, with the per-tensor
// Quantize/DequantizeLinear between them passing through) take part the same way: cuDNN's int8
// convolutions exist only channels last. Dynamic dims are judged at the opt shape, and
// each layer's tactic is checked there (a ResNeXt-50 profile of batch 1..64 ran NCHW, 2.1x the
// fixed engine, while the pass required static dims).
#include <optional>
#include <set>
#include <string>

#include "builder/passes/layout_planner.h"
#include "builder/passes/passes.h"
#include "builder/passes/symbolic_dims.h"
#include "ops/conv_layout.h"
#include "ops/layout_transpose.h"

namespace kiln {

namespace {

bool nhwcDims(DataType type, const Dims& d, int64_t minBatch) {
  return (type == DataType::kHALF || type == DataType::kBF16 || type == DataType::kINT8) && d.size() == 4 && d[0] >= minBatch && d[1] > 0 &&
         d[1] % 8 == 0 && d[2] > 0 && d[3] > 0;
}

//! A tensor's dims at the first profile's opt shape (samples[0]); its own dims when static or
//! when there are no samples. A dynamic engine is laid out for the shape it is tuned for, as
//! TensorRT tunes it: a batch 1..64 profile with opt 32 runs channels-last at every batch.
class OptDims {
 public:
  explicit OptDims(const InputSamples& samples) : samples_(samples) {}
  Dims of(const Tensor* t) {
    if (isStatic(t->dims) || samples_.empty()) return t->dims;
    return sym()->at(t, 0).dims;
  }
  //! Dim ka of a and kb of b are the same dim (equal static values, or one symbolic dim).
  bool sameDim(const Tensor* a, size_t ka, const Tensor* b, size_t kb) {
    const int64_t da = a->dims[ka], db = b->dims[kb];
    if (da >= 0 || db >= 0) return da == db;
    return !samples_.empty() && sym()->sameDim(a, ka, b, kb);
  }
  bool same(const Tensor* a, const Tensor* b) {
    if (a->dims != b->dims) return false;
    return (isStatic(a->dims) && isStatic(b->dims)) || samples_.empty() || sym()->sameDims(a, b);
  }

 private:
  SymbolicDims* sym() {
    if (!sym_) sym_.emplace(samples_);
    return &*sym_;
  }
  const InputSamples& samples_;
  std::optional<SymbolicDims> sym_;
};

//! An int8 conv (lower_qdq.cpp): cuDNN's int8 engines read and write channels last only.
bool isQuantizedConv(const Layer& l) { return l.op == "QLinearConv" && l.outputs.size() == 1; }

//! A Transpose (one input, one output) with exactly this perm.
bool isTranspose(const Layer* l, const std::vector<int64_t>& perm) {
  return l && l->op == "Transpose" && l->outputs.size() == 1 && l->inputs.size() == 1 && l->inputs[0] &&
         l->attrs.getInts("perm") == perm;
}

//! Every dim known but maybe the first (a dynamic batch).
bool staticButBatch(const Dims& d) {
  if (d.empty() || (d[0] < 0 && d[0] != -1)) return false;
  for (size_t k = 1; k < d.size(); ++k)
    if (d[k] < 0) return false;
  return true;
}

bool isPlainReshape(const Layer* l) {
  return l && l->op == "Reshape" && l->outputs.size() == 1 && !l->inputs.empty() && l->inputs[0] &&
         staticButBatch(l->outputs[0]->dims);
}

//! Replaces `dead` (the layers from `from` to `result`) by Transpose(perm) and Reshape(dims) in
//! `transposeFirst` order. A dynamic batch (dim 0, -1) is reshaped as 0: "the input's dim 0".
void rebuildView(Network& net, Tensor* from, bool transposeFirst, const std::vector<int64_t>& perm, const Dims& mid,
                 const std::vector<Layer*>& dead, Tensor* result) {
  const std::string base = dead.back()->name;
  auto transpose = [&](Tensor* in) {
    Attributes a;
    a.set("perm", perm);
    return net.addLayer("Transpose", {in}, 1, a, net.uniqueName(base + "_permute"));
  };
  auto reshape = [&](Tensor* in, const Dims& to) {
    HostTensor shape(DataType::kINT64, {static_cast<int64_t>(to.size())});
    for (size_t k = 0; k < to.size(); ++k) shape.as<int64_t>()[k] = k == 0 && to[k] < 0 ? 0 : to[k];
    return net.addLayer("Reshape", {in, net.addConstant(net.uniqueName(base + "_shape"), shape)}, 1, {},
                        net.uniqueName(base + "_view"));
  };
  Layer* first = transposeFirst ? transpose(from) : reshape(from, mid);
  first->outputs[0]->type = from->type;
  first->outputs[0]->dims = mid;
  first->outputs[0]->dimsKnown = true;
  Layer* second = transposeFirst ? reshape(first->outputs[0], result->dims) : transpose(first->outputs[0]);
  second->outputs[0]->type = result->type;
  second->outputs[0]->dims = result->dims;
  second->outputs[0]->dimsKnown = true;
  for (Layer* l : dead) net.removeLayer(l);
  net.replaceUses(result, second->outputs[0]);
}

//! Token views around conv regions as 4-D permutes (see the top of the file):
//!   Reshape(x [N, C, H, W] -> [N, C, H*W]) -> Transpose [0, 2, 1]  =>  Transpose [0, 2, 3, 1] -> Reshape [N, H*W, C]
//!   Transpose(z [N, L, C], [0, 2, 1]) -> Reshape [N, C, H, W] (H*W = L)  =>  Reshape [N, H, W, C] -> Transpose [0, 3, 1, 2]
bool permuteTokenViews(Network& net, int64_t minBatch, const InputSamples& samples) {
  static const std::vector<int64_t> swap12 = {0, 2, 1};
  OptDims opt(samples);  // its own: the rewrites below replace tensors the pass's later one asks about
  bool changed = false;
  for (bool again = true; again;) {
    again = false;
    for (auto& lp : net.layers()) {
      Layer* a = lp.get();
      Layer* b = a->outputs.size() == 1 ? soleConsumer(net, a->outputs[0]) : nullptr;
      if (!b || b->inputs.empty() || b->inputs[0] != a->outputs[0] || b->outputs.size() != 1 || b->outputs[0]->isOutput) continue;
      Tensor* x = a->inputs.empty() ? nullptr : a->inputs[0];
      Tensor* y = b->outputs[0];
      // Static dims, or a dynamic batch that is the same dim on both sides (judged at opt).
      if (!x || !staticButBatch(x->dims) || !staticButBatch(y->dims) || !opt.sameDim(x, 0, y, 0)) continue;
      const Dims& xd = x->dims;
      const Dims& yd = y->dims;
      const Dims& ad = a->outputs[0]->dims;
      if (isPlainReshape(a) && isTranspose(b, swap12) && xd.size() == 4 && nhwcDims(x->type, opt.of(x), minBatch) &&
          ad.size() == 3 && ad[1] == xd[1] && ad[2] == xd[2] * xd[3]) {
        rebuildView(net, x, true, toChannelsLastPerm(), {xd[0], xd[2], xd[3], xd[1]}, {a, b}, y);
      } else if (isTranspose(a, swap12) && isPlainReshape(b) && xd.size() == 3 && yd.size() == 4 &&
                 nhwcDims(y->type, opt.of(y), minBatch) && yd[1] == xd[2] && yd[2] * yd[3] == xd[1]) {
        rebuildView(net, x, false, fromChannelsLastPerm(), {yd[0], yd[2], yd[3], yd[1]}, {a, b}, y);
      } else {
        continue;
      }
      changed = again = true;
      break;  // the layer list changed
    }
  }
  if (changed) net.topoSort();
  return changed;
}

//! A permute the planner may place at a region's edge (ops/layout_transpose.h).
bool readsChannelsLast(const Layer& l) {
  return (isTranspose(&l, toChannelsLastPerm()) || isTranspose(&l, fromChannelsLastPerm())) && l.inputs[0]->dims.size() == 4;
}
bool writesChannelsLast(const Layer& l) { return isTranspose(&l, fromChannelsLastPerm()) && l.inputs[0]->dims.size() == 4; }

}  // namespace

bool assignGpuLayouts(Network& net, Backend& backend, const InputSamples& samples, int64_t minBatch) {
  if (backend.device() != DeviceType::kGPU) return false;
  if (layoutsAssigned(net)) return false;
  const bool viewsChanged = permuteTokenViews(net, minBatch, samples);
  OptDims opt(samples);
  LayoutPolicy p;
  p.block = kNhwcBlock;
  // Channels static (the layout's row), the rest judged at the opt shape.
  p.eligible = [&opt, minBatch](const Tensor* t) {
    return t->dims.size() == 4 && t->dims[1] > 0 && nhwcDims(t->type, opt.of(t), minBatch);
  };
  p.sameDims = [&opt](const Tensor* a, const Tensor* b) { return opt.same(a, b); };
  p.atOpt = [&opt](const Layer& l, LayerDesc& d) {
    for (size_t k = 0; k < l.inputs.size() && k < d.inputs.size(); ++k)
      if (l.inputs[k]) d.inputs[k].dims = opt.of(l.inputs[k]);
    for (size_t k = 0; k < l.outputs.size() && k < d.outputs.size(); ++k) d.outputs[k].dims = opt.of(l.outputs[k]);
  };
  // GroupNorm / InstanceNorm (ResNet-GN, PoolFormer) read and write nhwc in the middle of a conv
  // chain (their channels-last tactic) instead of two conversions around each of them.
  p.reads = [](const Layer& l) {
    return isLayoutConv(l) || isQuantizedConv(l) || isLayoutWindowPool(l) || isLayoutGlobalPool(l) || isLayoutGroupNorm(l) || readsChannelsLast(l);
  };
  // Global pools write [N,C,1,1]; a [0, 3, 1, 2] permute reads plain and writes nhwc (the
  // planner gives it an nhwc X only if its producer writes one, and no tactic takes that).
  p.writes = [](const Layer& l) { return isLayoutConv(l) || isQuantizedConv(l) || isLayoutWindowPool(l) || isLayoutGroupNorm(l) || writesChannelsLast(l); };
  p.transparent = [](const Layer& l) {
    static const std::set<std::string> ops = {"Add", "Sub", "Mul", "Div", "PRelu", "PointwiseChain", "Relu", "LeakyRelu",
                                              "Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "Elu", "Softplus", "Gelu",
                                              "Mish", "Clip", "QuantizeLinear", "DequantizeLinear"};
    return ops.count(l.op) > 0;
  };
  // DenseNet / Inception blocks: a Concat along the channels of nhwc inputs joins each pixel's
  // channel runs (the CUDA concat tactics read the layout attributes), so the convs and the
  // BN + ReLU chains around it need no conversion (each Concat was two LayoutConverts before).
  p.channelConcat = isLayoutChannelConcat;
  p.backend = &backend;
  p.verify = true;
  return assignLayouts(net, p) || viewsChanged;
}

}  // namespace kiln
