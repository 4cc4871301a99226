// Per-op cost model for the roofline (op_cost.h). FLOPs per family:
//   Conv              2 * output elements * (input channels / group) * kernel window (matrix math
//                     unless each group has one output channel: depthwise is vector math)
//   ConvTranspose     2 * input elements * (output channels / group) * kernel window
//   MatMul, Gemm      2 * output elements * K
//   Attention         2 * B * H * Sq * Skv * (D + Dv) (QK^T and PV), halved when causal
//   RNN/GRU/LSTM      2 * steps * batch * gates * hidden * (input + hidden) * directions
//   normalizations    ~8 per input element (mean, variance, scale, shift); softmax ~5
//   pooling           output elements * window; reductions: input elements
//   elementwise       1 per output element and per fused step; data movement: 0
// Bytes: every present input and every output once, in its own type; gathers and slices read only
// what they output.
#include "ops/op_cost.h"

#include <algorithm>
#include <string>

#include "ops/attention_config.h"
#include "ops/attention_views.h"
#include "ops/fused_attrs.h"
#include "ops/pointwise_chain.h"

namespace kiln {
namespace {

double elements(const TensorDesc& t) {
  if (t.dims.empty()) return 1;  // a scalar
  double n = 1;
  for (int64_t d : t.dims) {
    if (d < 0) return 0;  // unknown: counts nothing rather than a guess
    n *= static_cast<double>(d);
  }
  return n;
}
double bytesOf(const TensorDesc& t) { return elements(t) * static_cast<double>(elementSize(t.type)); }

double windowOf(const TensorDesc& w, size_t from) {
  double n = 1;
  for (size_t i = from; i < w.dims.size(); ++i) n *= static_cast<double>(std::max<int64_t>(w.dims[i], 0));
  return n;
}

bool isOp(const std::string& op, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (op == n) return true;
  return false;
}

double attentionFlops(const LayerDesc& l) {
  double f = 0;
  if (hasQkvViews(*l.attrs)) {
    const QkvViews v = parseQkvViews(l);
    if (viewsUnresolved(v)) return 0;
    f = 2.0 * v.b * v.h * v.sq * v.skv * (v.d + v.dv);
  } else {
    const AttentionShape s = attentionShape(l);
    if (s.batch < 0 || s.qHeads < 0 || s.qSeq < 0 || s.total() < 0 || s.headSize < 0 || s.vHeadSize < 0) return 0;
    f = 2.0 * s.batch * s.qHeads * s.qSeq * s.total() * (s.headSize + s.vHeadSize);
  }
  return parseAttentionConfig(l).causal ? f / 2 : f;
}

double recurrentFlops(const LayerDesc& l) {
  // X [seq, batch, input], W [directions, gates * hidden, input]
  if (l.inputs.size() < 2 || l.inputs[0].dims.size() != 3 || l.inputs[1].dims.size() != 3) return 0;
  const Dims& x = l.inputs[0].dims;
  const Dims& w = l.inputs[1].dims;
  const double hidden = static_cast<double>(l.attrs->getInt("hidden_size", 0));
  return 2.0 * x[0] * x[1] * w[0] * w[1] * (static_cast<double>(x[2]) + hidden);
}

double chainSteps(const LayerDesc& l) {
  try {
    return static_cast<double>(std::max<size_t>(1, compilePointwise(*l.attrs, l.inputs.size()).steps.size()));
  } catch (const Error&) {
    return 1;
  }
}

}  // namespace

OpCost opCost(const LayerDesc& l) {
  OpCost c;
  const std::string& op = l.op;
  const double out = l.outputs.empty() ? 0 : elements(l.outputs[0]);
  const double in0 = l.inputs.empty() ? 0 : elements(l.inputs[0]);

  // Bytes: what the op must read and write at least once.
  const bool readsOutputSized = isOp(op, {"Gather", "GatherElements", "GatherND", "Slice", "Compress"});
  for (size_t i = 0; i < l.inputs.size(); ++i) {
    if (!l.present(i)) continue;
    if (i == 0 && readsOutputSized && !l.outputs.empty())
      c.bytes += out * static_cast<double>(elementSize(l.inputs[0].type));
    else
      c.bytes += bytesOf(l.inputs[i]);
  }
  for (const TensorDesc& o : l.outputs) c.bytes += bytesOf(o);

  try {
    if (op == "Conv" && l.inputs.size() >= 2) {
      c.flops = 2 * out * windowOf(l.inputs[1], 1);  // W [K, C/group, kernel...]
      // A group is the product [N*spatial, C/group*window] x [C/group*window, K/group]: with one
      // output channel per group (depthwise) that is a matrix-vector product, vector math.
      const Dims& w = l.inputs[1].dims;
      c.matrix = w.empty() || w[0] < 0 || w[0] / std::max<int64_t>(1, l.attrs->getInt("group", 1)) > 1;
    } else if (op == "ConvTranspose" && l.inputs.size() >= 2) {
      c.flops = 2 * in0 * windowOf(l.inputs[1], 1);  // W [C, K/group, kernel...]
      c.matrix = true;
    } else if (isOp(op, {"MatMul", "MatMulInteger", "Gemm", "QLinearMatMul"}) && !l.inputs.empty() &&
               !l.inputs[0].dims.empty()) {
      const Dims& a = l.inputs[0].dims;
      const int64_t k = op == "Gemm" && l.attrs->getInt("transA", 0) ? a.front() : a.back();
      c.flops = 2 * out * static_cast<double>(std::max<int64_t>(k, 0));
      c.matrix = true;
    } else if (op == "Attention") {
      c.flops = attentionFlops(l);
      c.matrix = true;
    } else if (isOp(op, {"RNN", "GRU", "LSTM"})) {
      c.flops = recurrentFlops(l);
      c.matrix = true;
    } else if (op == "Einsum") {
      c.flops = 2 * out;  // contraction sizes are not modelled: a lower bound
      c.matrix = true;
    } else if (isOp(op, {"LayerNormalization", "SkipLayerNormalization", "SimplifiedLayerNormalization",
                         "RMSNormalization", "GroupNormalization", "InstanceNormalization",
                         "BatchNormalization", "MeanVarianceNormalization", "LpNormalization"})) {
      c.flops = 8 * in0;
    } else if (isOp(op, {"Softmax", "LogSoftmax", "Hardmax"})) {
      c.flops = 5 * in0;
    } else if (isOp(op, {"MaxPool", "AveragePool", "LpPool"})) {
      const std::vector<int64_t> k = l.attrs->getInts("kernel_shape");
      double window = 1;
      for (int64_t x : k) window *= static_cast<double>(x);
      c.flops = out * window;
    } else if (isOp(op, {"GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool", "ReduceSum", "ReduceMean",
                         "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
                         "ReduceLogSumExp", "ReduceSumSquare", "ArgMax", "ArgMin", "CumSum", "TopK"})) {
      c.flops = in0;
    } else if (op == "PointwiseChain") {
      c.flops = out * chainSteps(l);
    } else if (isOp(op, {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mean", "Sum", "Where", "Relu", "LeakyRelu",
                         "PRelu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Reciprocal", "Neg", "Abs", "Erf",
                         "Gelu", "HardSigmoid", "HardSwish", "Mish", "Softplus", "Elu", "Selu", "Celu", "Clip",
                         "Sin", "Cos", "Mod", "QuickGelu", "BiasGelu", "FastGelu", "RotaryEmbedding",
                         "QuantizeLinear", "DequantizeLinear"})) {
      c.flops = out;
    }
  } catch (const Error&) {
    c.flops = 0;  // attributes the op's own checks refuse: the layer's kernel reports that
  }
  return c;
}

}  // namespace kiln
