// (x + c1) + c2 -> x + (c1 + c2) and (x * c1) * c2 -> x * (c1 * c2) for float32 constants c1, c2
// whose broadcast does not grow x's shape: one layer and one constant instead of two. Exports stack
// constant addends where the model adds several masks or biases in a row (transformers' Swin-V2
// adds two constant [1, P, 1, S, S] terms to its windowed scores between the same two Reshapes,
// which the attention fusion's window-mask form takes only as one Add).
#include "builder/passes/passes.h"
#include "ops/shape_propagation.h"

namespace kiln {

namespace {

bool floatConstant(const Tensor* t) { return t && t->isConstant() && t->type == DataType::kFLOAT && t->value.valid(); }

//! The constant operand of a two-input `op` layer and its other input, or false.
bool splitConstant(const Layer* l, const std::string& op, Tensor** x, Tensor** c) {
  if (!l || l->op != op || l->inputs.size() != 2 || l->outputs.size() != 1 || !l->inputs[0] || !l->inputs[1]) return false;
  for (int s = 0; s < 2; ++s)
    if (floatConstant(l->inputs[1 - s]) && !l->inputs[s]->isConstant()) {
      *x = l->inputs[s];
      *c = l->inputs[1 - s];
      return true;
    }
  return false;
}

}  // namespace

bool foldConstantOperands(Network& net) {
  bool changed = false;
  for (size_t i = 0; i < net.layers().size(); ++i) {
    Layer* outer = net.layer(static_cast<int>(i));
    for (const char* op : {"Add", "Mul"}) {
      Tensor *y = nullptr, *c2 = nullptr, *x = nullptr, *c1 = nullptr;
      if (!splitConstant(outer, op, &y, &c2) || !splitConstant(y->producer, op, &x, &c1) || soleConsumer(net, y) != outer ||
          y->isOutput)
        continue;
      // c1 op c2, computed now by constant folding (the op's reference kernel, numpy broadcasting);
      // removeFoldedLayers drops the layer and keeps its constant output.
      Layer* combined = net.addLayer(op, {c1, c2}, 1, {}, net.uniqueName(outer->name + "_folded_operand"));
      Tensor* folded = combined->outputs[0];
      try {
        inferLayerInPlace(*combined, /*fold=*/true);
      } catch (const Error&) {
        folded->value = HostTensor();  // c1 and c2 do not broadcast together
      }
      // The combined constant must not broadcast x to a larger shape than the outer layer's output.
      const Dims& sum = folded->dims;
      bool fits = folded->isConstant() && x->dimsKnown && sum.size() <= x->dims.size() && outer->outputs[0]->dimsKnown &&
                  outer->outputs[0]->dims.size() == x->dims.size();
      for (size_t d = 0; fits && d < sum.size(); ++d) {
        const int64_t s = sum[d], o = outer->outputs[0]->dims[x->dims.size() - sum.size() + d];
        fits = s == 1 || s == o;
      }
      if (!fits) {
        net.removeLayer(combined);
        continue;
      }
      Layer* inner = y->producer;
      Layer* l = net.addLayer(op, {x, folded}, 1, {}, net.uniqueName(outer->name + "_folded"));
      replaceWithFused(net, l, {outer, inner}, outer->outputs[0]);
      changed = true;
      i = static_cast<size_t>(-1);  // re-sorted: start over
      break;
    }
  }
  return changed;
}

}  // namespace kiln
