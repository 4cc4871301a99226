// The exported form of exact GELU, x * 0.5 * (1 + erf(x / sqrt(2))), in any of the orders
// PyTorch emits, becomes one Gelu layer (which can then join a MatMul epilogue).
#include <cmath>

#include "builder/passes/passes.h"

namespace kiln {

namespace {

bool isScalar(const Tensor* t, double v, double tol = 1e-4) {
  return t && t->isConstant() && t->value.count() == 1 && isFloat(t->type) && std::fabs(t->value.getDouble(0) - v) <= tol;
}

// For a binary layer with one operand `known`, returns the other operand.
Tensor* other(const Layer* l, const Tensor* known) {
  if (l->inputs.size() != 2) return nullptr;
  if (l->inputs[0] == known) return l->inputs[1];
  if (l->inputs[1] == known) return l->inputs[0];
  return nullptr;
}

}  // namespace

bool fuseGeluPattern(Network& net) {
  bool changed = false;
  for (size_t i = 0; i < net.layers().size(); ++i) {
    Layer* erf = net.layer(static_cast<int>(i));
    if (erf->op != "Erf" || erf->inputs.size() != 1 || erf->outputs[0]->type != DataType::kFLOAT) continue;
    Layer* scale = erf->inputs[0]->producer;  // x / sqrt2  or  x * (1/sqrt2)
    if (!scale || scale->inputs.size() != 2 || scale->inputs[0]->isConstant() || soleConsumer(net, scale->outputs[0]) != erf) continue;
    Tensor* x = scale->inputs[0];
    if (!((scale->op == "Div" && isScalar(scale->inputs[1], std::sqrt(2.0))) ||
          (scale->op == "Mul" && isScalar(scale->inputs[1], 1.0 / std::sqrt(2.0)))))
      continue;
    Layer* add = soleConsumer(net, erf->outputs[0]);
    if (!add || add->op != "Add" || !isScalar(other(add, erf->outputs[0]), 1.0)) continue;
    Layer* m1 = soleConsumer(net, add->outputs[0]);
    if (!m1 || m1->op != "Mul") continue;
    Tensor* m1other = other(m1, add->outputs[0]);
    std::vector<Layer*> dead{scale, erf, add, m1};
    Tensor* result = nullptr;
    if (m1other == x) {  // (x * (1 + erf)) * 0.5
      Layer* m2 = soleConsumer(net, m1->outputs[0]);
      if (!m2 || m2->op != "Mul" || !isScalar(other(m2, m1->outputs[0]), 0.5)) continue;
      dead.push_back(m2);
      result = m2->outputs[0];
    } else if (m1other && m1other->producer && m1other->producer->op == "Mul") {  // (x * 0.5) * (1 + erf)
      Layer* half = m1other->producer;
      if (other(half, x) == nullptr || !isScalar(other(half, x), 0.5) || soleConsumer(net, m1other) != m1) continue;
      dead.push_back(half);
      result = m1->outputs[0];
    } else {
      continue;
    }
    Attributes a;
    a.set("approximate", std::string("none"));
    Layer* gelu = net.addLayer("Gelu", {x}, 1, a, erf->name + "_gelu");
    for (Layer* d : dead) recordFusion(gelu, d);
    gelu->fusedOps.erase(gelu->fusedOps.begin());  // the synthetic Gelu itself is not an original op
    for (Layer* d : dead) net.removeLayer(d);
    net.replaceUses(result, gelu->outputs[0]);
    gelu->outputs[0]->type = DataType::kFLOAT;
    gelu->outputs[0]->dims = result->dims;
    gelu->outputs[0]->dimsKnown = true;
    net.topoSort();
    changed = true;
    i = 0;
  }
  return changed;
}

}  // namespace kiln
