// Conv -> BatchNormalization with constant parameters: scale the conv's filters and shift its
// bias so that one convolution computes both (exact up to float rounding). Any other inference
// BatchNormalization (DenseNet's and pre-activation ResNets' BN -> ReLU -> Conv after a Concat or an
// Add) becomes (x - mean[c]) * a[c] + beta[c]: a Sub, a Mul and an Add that the pointwise fusion
// chains with the ReLU that follows (one pass instead of two), and that the layout passes see
// through. Centering first, as BatchNormalization computes: x * a + (beta - mean * a) cancels
// where |mean| is large against the spread of x (timm's Visformer: 2.6x float32 PyTorch's error).
#include <cmath>

#include "builder/passes/passes.h"

namespace kiln {

bool foldBatchNormIntoConv(Network& net) {
  bool changed = false;
  for (size_t i = 0; i < net.layers().size(); ++i) {
    Layer* conv = net.layer(static_cast<int>(i));
    if (conv->op != "Conv" || conv->inputs.size() < 2 || conv->inputs.size() > 3 || hasFusedActivation(conv->attrs)) continue;
    Tensor* w = conv->inputs[1];
    Tensor* b = conv->inputs.size() > 2 ? conv->inputs[2] : nullptr;
    if (!w->isConstant() || w->type != DataType::kFLOAT || (b && (!b->isConstant() || b->type != DataType::kFLOAT))) continue;
    Layer* bn = soleConsumer(net, conv->outputs[0]);
    if (!bn || bn->op != "BatchNormalization" || bn->inputs.size() != 5 || bn->outputs.size() != 1 || bn->inputs[0] != conv->outputs[0]) continue;
    bool constParams = true;
    for (int k = 1; k < 5; ++k) constParams = constParams && bn->inputs[k] && bn->inputs[k]->isConstant() && bn->inputs[k]->type == DataType::kFLOAT;
    if (!constParams || bn->attrs.getInt("training_mode", 0) != 0) continue;
    const int64_t cout = w->dims.empty() ? 0 : w->dims[0];
    bool shapesOk = cout > 0;
    for (int k = 1; k < 5; ++k) shapesOk = shapesOk && bn->inputs[k]->value.count() == cout;
    if (!shapesOk) continue;
    const float eps = bn->attrs.getFloat("epsilon", 1e-5f);
    const float* scale = bn->inputs[1]->value.as<float>();
    const float* shift = bn->inputs[2]->value.as<float>();
    const float* mean = bn->inputs[3]->value.as<float>();
    const float* var = bn->inputs[4]->value.as<float>();
    HostTensor nw = w->value.clone();
    HostTensor nb(DataType::kFLOAT, {cout});
    const int64_t per = nw.count() / cout;
    for (int64_t c = 0; c < cout; ++c) {
      const float s = scale[c] / std::sqrt(var[c] + eps);
      float* wc = nw.as<float>() + c * per;
      for (int64_t k = 0; k < per; ++k) wc[k] *= s;
      const float b0 = b ? b->value.as<float>()[c] : 0.f;
      nb.as<float>()[c] = (b0 - mean[c]) * s + shift[c];
    }
    conv->inputs[1] = net.addConstant(w->name + "_bnfold", nw);
    Tensor* bias = net.addConstant(conv->name + "_bias_bnfold", nb);
    if (conv->inputs.size() > 2) conv->inputs[2] = bias;
    else conv->inputs.push_back(bias);
    recordFusion(conv, bn);
    Tensor* bnOut = bn->outputs[0];
    net.removeLayer(bn);
    net.replaceUses(bnOut, conv->outputs[0]);
    changed = true;
  }
  return changed;
}

bool lowerBatchNormToScaleShift(Network& net) {
  bool changed = false;
  std::vector<Layer*> bns;
  for (size_t i = 0; i < net.layers().size(); ++i)
    if (net.layer(static_cast<int>(i))->op == "BatchNormalization") bns.push_back(net.layer(static_cast<int>(i)));
  for (Layer* bn : bns) {
    if (bn->op != "BatchNormalization" || bn->inputs.size() != 5 || bn->outputs.size() != 1 ||
        bn->attrs.getInt("training_mode", 0) != 0)
      continue;
    Tensor* x = bn->inputs[0];
    if (!x || x->type != DataType::kFLOAT || x->dims.size() < 2 || x->dims[1] <= 0) continue;
    const int64_t c = x->dims[1];
    bool ok = true;
    for (int k = 1; k < 5; ++k)
      ok = ok && bn->inputs[k] && bn->inputs[k]->isConstant() && bn->inputs[k]->type == DataType::kFLOAT &&
           bn->inputs[k]->value.count() == c;
    if (!ok) continue;
    const float eps = bn->attrs.getFloat("epsilon", 1e-5f);
    Dims pd(x->dims.size() - 1, 1);  // [C, 1, ...]: broadcasts over N and the spatial dims
    pd[0] = c;
    HostTensor mean = bn->inputs[3]->value.reshaped(pd), a(DataType::kFLOAT, pd);
    for (int64_t k = 0; k < c; ++k)
      a.as<float>()[k] = bn->inputs[1]->value.as<float>()[k] / std::sqrt(bn->inputs[4]->value.as<float>()[k] + eps);
    Tensor* out = bn->outputs[0];
    Layer* sub = net.addLayer("Sub", {x, net.addConstant(net.uniqueName(bn->name + "_mean"), mean)}, 1, {},
                              net.uniqueName(bn->name + "_center"));
    Layer* mul = net.addLayer("Mul", {sub->outputs[0], net.addConstant(net.uniqueName(bn->name + "_scale"), a)}, 1, {},
                              net.uniqueName(bn->name + "_mul"));
    Layer* add = net.addLayer("Add", {mul->outputs[0], net.addConstant(net.uniqueName(bn->name + "_shift"), bn->inputs[2]->value.reshaped(pd))},
                              1, {}, net.uniqueName(bn->name + "_add"));
    for (Layer* l : {sub, mul, add}) {
      l->outputs[0]->type = DataType::kFLOAT;
      l->outputs[0]->dims = out->dims;
    }
    recordFusion(add, bn);
    net.removeLayer(bn);
    net.replaceUses(out, add->outputs[0]);  // a network output keeps its name
    changed = true;
  }
  if (changed) net.topoSort();
  return changed;
}

}  // namespace kiln
