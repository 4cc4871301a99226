// Conv -> Mul / Div / Add / Sub by a constant that varies at most per output channel: the scale
// goes into the conv's filters and bias, the shift into its bias, so one convolution computes
// both. Layer scale after a block's last conv (PoolFormer, ConvNeXt with conv MLPs, EfficientFormer:
// x + gamma * conv(h)) then leaves the conv's output to the residual Add, which the residual
// fusion takes into the conv as well: a pointwise pass per block fewer.
#include <cmath>

#include "builder/passes/passes.h"

namespace kiln {

namespace {

//! The constant operand's value per output channel (K of them) when it broadcasts against the
//! conv's output [N, K, spatial...] along the channel axis only; empty otherwise.
std::vector<float> perChannel(const Tensor* t, size_t outRank, int64_t k) {
  if (!t || !t->isConstant() || t->type != DataType::kFLOAT || t->dims.size() > outRank) return {};
  const size_t r = t->dims.size();
  bool channelDim = false;
  for (size_t i = 0; i < r; ++i) {
    const size_t axis = outRank - r + i;
    const int64_t d = t->dims[i];
    if (axis == 1 && d == k) channelDim = true;
    else if (d != 1) return {};
  }
  std::vector<float> v(static_cast<size_t>(k));
  for (int64_t c = 0; c < k; ++c) v[static_cast<size_t>(c)] = t->value.as<float>()[channelDim ? c : 0];
  return v;
}

}  // namespace

bool foldChannelScaleIntoConv(Network& net) {
  bool changed = false;
  for (size_t i = 0; i < net.layers().size(); ++i) {
    Layer* conv = net.layer(static_cast<int>(i));
    if (conv->op != "Conv" || conv->inputs.size() < 2 || conv->inputs.size() > 3 || conv->outputs.size() != 1 ||
        hasFusedActivation(conv->attrs))
      continue;
    Tensor* w = conv->inputs[1];
    Tensor* b = conv->inputs.size() > 2 ? conv->inputs[2] : nullptr;
    if (!w->isConstant() || w->type != DataType::kFLOAT || w->dims.empty() || (b && (!b->isConstant() || b->type != DataType::kFLOAT)))
      continue;
    const int64_t k = w->dims[0];
    Tensor* y = conv->outputs[0];
    Layer* op = soleConsumer(net, y);
    if (!op || op->inputs.size() != 2 || op->outputs.size() != 1 || y->dims.size() < 3 || k <= 0 || (b && b->value.count() != k))
      continue;
    const bool mul = op->op == "Mul" || op->op == "Div", add = op->op == "Add" || op->op == "Sub";
    if (!mul && !add) continue;
    // Div and Sub only with the conv's output as the dividend / minuend.
    const int side = op->inputs[0] == y ? 0 : 1;
    if (side == 1 && (op->op == "Div" || op->op == "Sub")) continue;
    std::vector<float> v = perChannel(op->inputs[1 - side], y->dims.size(), k);
    if (v.empty() || op->outputs[0]->dims.size() != y->dims.size()) continue;
    bool finite = true;
    for (float& e : v) {
      if (op->op == "Div") e = 1.f / e;
      if (op->op == "Sub") e = -e;
      finite = finite && std::isfinite(e);
    }
    if (!finite) continue;
    HostTensor nb(DataType::kFLOAT, {k});
    for (int64_t c = 0; c < k; ++c) nb.as<float>()[c] = b ? b->value.as<float>()[c] : 0.f;
    if (mul) {
      HostTensor nw = w->value.clone();
      const int64_t per = nw.count() / k;
      for (int64_t c = 0; c < k; ++c) {
        float* wc = nw.as<float>() + c * per;
        for (int64_t e = 0; e < per; ++e) wc[e] *= v[static_cast<size_t>(c)];
        nb.as<float>()[c] *= v[static_cast<size_t>(c)];
      }
      conv->inputs[1] = net.addConstant(net.uniqueName(w->name + "_scaled"), nw);
    } else {
      for (int64_t c = 0; c < k; ++c) nb.as<float>()[c] += v[static_cast<size_t>(c)];
    }
    Tensor* bias = net.addConstant(net.uniqueName(conv->name + "_bias_folded"), nb);
    if (conv->inputs.size() > 2) conv->inputs[2] = bias;
    else conv->inputs.push_back(bias);
    recordFusion(conv, op);
    Tensor* out = op->outputs[0];
    net.removeLayer(op);
    net.replaceUses(out, y);  // a network output keeps its name
    changed = true;
    --i;  // the conv again: a Mul then an Add fold in turn
  }
  return changed;
}

}  // namespace kiln
