// Conv, or MatMul by constant weights W[K, N] (with or without its fused bias), then Mul / Div /
// Add / Sub by a constant that varies at most along the output channel (Conv: axis 1; MatMul: the
// last axis): the scale goes into the filters / W's columns and the bias, the shift into the bias,
// so one GEMM or convolution computes both. Layer scale after a block's last conv or linear
// (PoolFormer, ConvNeXt, CaiT / DeiT-III / DINOv2: x + gamma * f(h)) then leaves the producer's output
// to the residual Add that follows: a pointwise pass per block fewer.
#include <cmath>

#include "builder/passes/passes.h"

namespace kiln {

namespace {

//! The constant operand's value per output channel (k of them) when it broadcasts against the
//! producer's output of rank `outRank` along `axis` only; empty otherwise.
std::vector<float> perChannel(const Tensor* t, size_t outRank, size_t axis, int64_t k) {
  if (!constantAlongAxis(t, outRank, axis, k, true)) return {};
  const bool channelDim = t->value.count() == k;  // else one value for every channel
  std::vector<float> v(static_cast<size_t>(k));
  for (int64_t c = 0; c < k; ++c) v[static_cast<size_t>(c)] = t->value.as<float>()[channelDim ? c : 0];
  return v;
}

constexpr size_t kBias = 2;  //!< a Conv's bias input, and a MatMul's fused one (fuse_matmul_bias)

//! The producer's output-channel count and axis, and whether W is laid out with the channel
//! leading (Conv: [K, ...]) or trailing (MatMul: [K_in, N]); k = 0: not foldable.
struct Producer {
  int64_t k = 0;
  size_t axis = 0;
  bool channelLeads = true;
};

Producer producerOf(const Layer* l) {
  Producer p;
  if ((l->op != "Conv" && l->op != "MatMul") || l->outputs.size() != 1 || hasFusedActivation(l->attrs) || l->inputs.size() < 2)
    return p;
  const Tensor* w = l->inputs[1];  // an optional input left out is null (other ops: Clip's min)
  if (!w || !w->isConstant() || w->type != DataType::kFLOAT || w->dims.empty()) return p;
  const size_t rank = l->outputs[0]->dims.size();
  if (l->op == "Conv" && l->inputs.size() <= 3 && rank >= 3) {
    p = {w->dims[0], 1, true};
  } else if (l->op == "MatMul" && l->inputs.size() <= 3 && w->dims.size() == 2 && rank >= 2) {
    p = {w->dims[1], rank - 1, false};
  }
  if (p.k > 0 && l->inputs.size() > kBias) {
    const Tensor* b = l->inputs[kBias];  // null: left out
    if (b && (!b->isConstant() || b->type != DataType::kFLOAT || b->value.count() != p.k)) p.k = 0;
  }
  return p;
}

}  // namespace

bool foldChannelScale(Network& net) {
  bool changed = false;
  for (size_t i = 0; i < net.layers().size(); ++i) {
    Layer* prod = net.layer(static_cast<int>(i));
    const Producer pr = producerOf(prod);
    if (pr.k <= 0) continue;
    Tensor* y = prod->outputs[0];
    Layer* op = soleConsumer(net, y);
    if (!op || op->inputs.size() != 2 || op->outputs.size() != 1) continue;
    const bool mul = op->op == "Mul" || op->op == "Div", add = op->op == "Add" || op->op == "Sub";
    if (!mul && !add) continue;
    // Div and Sub only with the producer's output as the dividend / minuend.
    if (op->inputs[0] != y && (op->op == "Div" || op->op == "Sub")) continue;
    std::vector<float> v = perChannel(otherInput(op, y), y->dims.size(), pr.axis, pr.k);
    if (v.empty() || op->outputs[0]->dims.size() != y->dims.size()) continue;
    bool finite = true;
    for (float& e : v) {
      if (op->op == "Div") e = 1.f / e;
      if (op->op == "Sub") e = -e;
      finite = finite && std::isfinite(e);
    }
    if (!finite) continue;
    const Tensor* b = prod->inputs.size() > kBias ? prod->inputs[kBias] : nullptr;
    HostTensor nb(DataType::kFLOAT, {pr.k});
    for (int64_t c = 0; c < pr.k; ++c) nb.as<float>()[c] = b ? b->value.as<float>()[c] : 0.f;
    if (mul) {
      const Tensor* w = prod->inputs[1];
      HostTensor nw = w->value.clone();
      const int64_t rows = pr.channelLeads ? pr.k : nw.count() / pr.k, cols = nw.count() / rows;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) nw.as<float>()[r * cols + c] *= v[static_cast<size_t>(pr.channelLeads ? r : c)];
      for (int64_t c = 0; c < pr.k; ++c) nb.as<float>()[c] *= v[static_cast<size_t>(c)];
      prod->inputs[1] = net.addConstant(net.uniqueName(w->name + "_scaled"), nw);
    } else {
      for (int64_t c = 0; c < pr.k; ++c) nb.as<float>()[c] += v[static_cast<size_t>(c)];
    }
    Tensor* bias = net.addConstant(net.uniqueName(prod->name + "_bias_folded"), nb);
    if (prod->inputs.size() > kBias) prod->inputs[kBias] = bias;
    else prod->inputs.push_back(bias);
    recordFusion(prod, op);
    Tensor* out = op->outputs[0];
    net.removeLayer(op);
    net.replaceUses(out, y);  // a network output keeps its name
    changed = true;
    --i;  // the producer again: a Mul then an Add fold in turn
  }
  return changed;
}

}  // namespace kiln
