// GroupNorm as PyTorch's ONNX exporter writes it before opset 18 (and as timm/transformers models
// still export it):
//   r = Reshape(x [N, C, ...] -> [N, G, -1]); n = InstanceNormalization(r, s[G], b[G]);
//   y = Reshape(n -> x's shape) [* gamma (per channel)] [+ beta (per channel)]
// becomes one GroupNormalization with per-channel scale gamma*s and bias gamma*b + beta (opset 21
// semantics): one layer instead of five, and a producer that fuse_activation can give the
// following SiLU/GELU/ReLU (ResNet-GN, PoolFormer, wav2vec2, diffusion UNets). A dynamic batch or
// spatial size (the Reshape target [0, G, -1] after fold_shape_arithmetic) is compared at the
// profiles' samples.
#include <optional>

#include "builder/passes/passes.h"

namespace kiln {

namespace {

//! A constant float operand with `c` values, one per channel of an [N, C, ...] tensor of rank `rank`
//! (dims [C, 1, ...], [1, C, 1, ...] or any right-aligned form with 1s elsewhere).
bool perChannelConst(const Tensor* t, int64_t c, size_t rank) {
  return constantAlongAxis(t, rank, 1, c, false) && t->value.count() == c;
}

//! Folds a per-channel Mul gamma and then an Add beta reading `y` (each optional; constants with
//! one value per channel of an [N, C, ...] tensor of rank `rank`, outputs of `x`'s dims) into
//! `scale` / `bias`: scale * gamma, bias * gamma + beta. The folded layers join `dead` and `y`
//! becomes the last one's output.
template <class SameDims>
void foldChannelAffine(const Network& net, Tensor*& y, const Tensor* x, int64_t c, HostTensor& scale, HostTensor& bias,
                       std::vector<Layer*>& dead, const SameDims& sameDims) {
  const size_t rank = x->dims.size();
  Layer* mul = y->isOutput ? nullptr : soleConsumer(net, y);
  if (mul && mul->op == "Mul" && perChannelConst(otherInput(mul, y), c, rank) && sameDims(mul->outputs[0], x)) {
    const Tensor* gamma = otherInput(mul, y);
    for (int64_t k = 0; k < c; ++k) {
      const float g = static_cast<float>(gamma->value.getDouble(k));
      scale.as<float>()[k] *= g;
      bias.as<float>()[k] *= g;
    }
    dead.push_back(mul);
    y = mul->outputs[0];
  }
  Layer* add = y->isOutput ? nullptr : soleConsumer(net, y);
  if (add && add->op == "Add" && perChannelConst(otherInput(add, y), c, rank) && sameDims(add->outputs[0], x)) {
    const Tensor* beta = otherInput(add, y);
    for (int64_t k = 0; k < c; ++k) bias.as<float>()[k] += static_cast<float>(beta->value.getDouble(k));
    dead.push_back(add);
    y = add->outputs[0];
  }
}

}  // namespace

bool fuseGroupNormPattern(Network& net, const InputSamples& samples) {
  std::optional<SymbolicDims> symbolic;  // a dynamic batch or spatial size: dims compared at the samples
  if (!samples.empty()) symbolic.emplace(samples);
  SymbolicDims* sym = symbolic ? &*symbolic : nullptr;
  auto sameDims = [&](const Tensor* a, const Tensor* b) {
    if (a->dimsKnown && b->dimsKnown && isStatic(a->dims) && a->dims == b->dims) return true;
    return sym && sym->sameDims(a, b);
  };
  bool changed = false;
  for (size_t i = 0; i < net.layers().size(); ++i) {
    Layer* r1 = net.layer(static_cast<int>(i));
    if (r1->op != "Reshape" || r1->outputs.size() != 1 || r1->inputs.empty()) continue;
    Tensor* x = r1->inputs[0];
    const Dims& xd = x->dims;
    const Dims& rd = r1->outputs[0]->dims;
    if (x->type != DataType::kFLOAT || !x->dimsKnown || !r1->outputs[0]->dimsKnown || xd.size() < 3 || rd.size() != 3) continue;
    const int64_t n = xd[0], c = xd[1], groups = rd[1];
    if (c <= 0 || groups <= 0 || c % groups != 0) continue;
    // [N, C, ...] -> [N, G, rest]: rest is C/G times the spatial size, as the Reshape keeps the volume.
    const bool batchKept = n > 0 ? rd[0] == n : sym && sym->sameDim(r1->outputs[0], 0, x, 0);
    if (!batchKept || (n > 0 && isStatic(xd) && rd[2] * groups != volume(xd) / n)) continue;
    Layer* in = soleConsumer(net, r1->outputs[0]);
    if (!in || in->op != "InstanceNormalization" || in->inputs.size() != 3 || in->inputs[0] != r1->outputs[0]) continue;
    const Tensor* s = in->inputs[1];
    const Tensor* b = in->inputs[2];
    if (!s || !b || !s->isConstant() || !b->isConstant() || s->value.count() != groups || b->value.count() != groups) continue;
    Layer* r2 = soleConsumer(net, in->outputs[0]);
    if (!r2 || r2->op != "Reshape" || r2->outputs.size() != 1 || !sameDims(r2->outputs[0], x)) continue;
    std::vector<Layer*> dead{r1, in, r2};
    Tensor* y = r2->outputs[0];
    // Per-channel scale and bias: the group's s/b, then the optional gamma and beta.
    HostTensor scale(DataType::kFLOAT, {c}), bias(DataType::kFLOAT, {c});
    const int64_t perGroup = c / groups;
    for (int64_t k = 0; k < c; ++k) {
      scale.as<float>()[k] = static_cast<float>(s->value.getDouble(k / perGroup));
      bias.as<float>()[k] = static_cast<float>(b->value.getDouble(k / perGroup));
    }
    foldChannelAffine(net, y, x, c, scale, bias, dead, sameDims);
    Attributes a;
    a.set("num_groups", groups);
    a.set("epsilon", in->attrs.getFloat("epsilon", 1e-5f));
    Layer* gn = net.addLayer("GroupNormalization",
                             {x, net.addConstant(net.uniqueName(in->name + "_gn_scale"), scale),
                              net.addConstant(net.uniqueName(in->name + "_gn_bias"), bias)},
                             1, a, net.uniqueName(in->name + "_groupnorm"));
    replaceWithFused(net, gn, dead, y);
    changed = true;
    i = 0;
  }
  // A norm whose input needs no Reshape into groups (GroupNorm with one group per channel on
  // [N, C, T], where the exporter's Reshape keeps the shape and is elided: wav2vec2's feature
  // extractor; InstanceNormalization itself) keeps its per-channel Mul gamma / Add beta as layers:
  // they fold into its scale and bias, so that fuse_activation can reach the GELU after them.
  for (size_t i = 0; i < net.layers().size(); ++i) {
    Layer* norm = net.layer(static_cast<int>(i));
    if ((norm->op != "InstanceNormalization" && norm->op != "GroupNormalization") || norm->inputs.size() != 3 ||
        norm->outputs.size() != 1 || hasFusedActivation(norm->attrs))
      continue;
    Tensor* x = norm->inputs[0];
    const Tensor *s = norm->inputs[1], *b = norm->inputs[2];
    if (!x || x->type != DataType::kFLOAT || !x->dimsKnown || x->dims.size() < 3) continue;
    const int64_t c = x->dims[1];
    if (c <= 0 || !s || !b || !s->isConstant() || !b->isConstant() || s->value.count() != c || b->value.count() != c) continue;
    Tensor* y = norm->outputs[0];
    HostTensor scale(DataType::kFLOAT, {c}), bias(DataType::kFLOAT, {c});
    for (int64_t k = 0; k < c; ++k) {
      scale.as<float>()[k] = static_cast<float>(s->value.getDouble(k));
      bias.as<float>()[k] = static_cast<float>(b->value.getDouble(k));
    }
    std::vector<Layer*> dead;
    foldChannelAffine(net, y, x, c, scale, bias, dead, sameDims);
    if (dead.empty()) continue;
    norm->inputs[1] = net.addConstant(net.uniqueName(norm->name + "_scale"), scale);
    norm->inputs[2] = net.addConstant(net.uniqueName(norm->name + "_bias"), bias);
    Tensor* out = norm->outputs[0];
    for (Layer* l : dead) recordFusion(norm, l);
    for (Layer* l : dead) net.removeLayer(l);
    net.replaceUses(y, out);
    changed = true;
    i = 0;
  }
  return changed;
}

}  // namespace kiln
