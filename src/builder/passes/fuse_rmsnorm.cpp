// The decomposed RMS normalization of T5 / LLaMA-style exports,
//   v = ReduceMean(x^2, -1); r = x / Sqrt(v + eps)  [or x * (1 / Sqrt(..)), x * Reciprocal(Sqrt(..))];
//   y = g * r  (the scale is optional)
// becomes one RMSNormalization layer (ONNX opset 23; one pass over memory instead of six or seven).
#include "builder/passes/passes.h"

namespace kiln {

bool fuseRmsNormPattern(Network& net) {
  bool changed = false;
  for (size_t i = 0; i < net.layers().size(); ++i) {
    Layer* sq = net.layer(static_cast<int>(i));
    double v = 0;
    Tensor* x = sq->inputs.empty() ? nullptr : sq->inputs[0];
    const bool pow2 = sq->op == "Pow" && sq->inputs.size() == 2 && scalarValue(sq->inputs[1], &v) && v == 2.0;
    const bool square = sq->op == "Mul" && sq->inputs.size() == 2 && sq->inputs[0] == sq->inputs[1];
    if (!(pow2 || square) || !x || x->type != DataType::kFLOAT || !x->dimsKnown || x->dims.empty() || x->dims.back() <= 0) continue;
    Layer* mean = soleConsumer(net, sq->outputs[0]);
    if (!meanOverLastAxis(mean)) continue;
    Layer* addEps = soleConsumer(net, mean->outputs[0]);
    double eps = 0;
    if (!addEps || addEps->op != "Add" || !scalarValue(otherInput(addEps, mean->outputs[0]), &eps) || eps < 0) continue;
    Layer* sqrt = soleConsumer(net, addEps->outputs[0]);
    if (!sqrt || sqrt->op != "Sqrt") continue;
    // x / s, x * (1 / s) or x * Reciprocal(s)
    std::vector<Layer*> dead{sq, mean, addEps, sqrt};
    Layer* norm = soleConsumer(net, sqrt->outputs[0]);
    if (!norm) continue;
    if (norm->op == "Div" && norm->inputs[1] == sqrt->outputs[0] && norm->inputs[0] != x) {
      double one = 0;
      if (!scalarValue(norm->inputs[0], &one) || one != 1.0) continue;
      dead.push_back(norm);
      norm = soleConsumer(net, norm->outputs[0]);
      if (!norm || norm->op != "Mul" || otherInput(norm, dead.back()->outputs[0]) != x) continue;
    } else if (norm->op == "Reciprocal") {
      dead.push_back(norm);
      norm = soleConsumer(net, norm->outputs[0]);
      if (!norm || norm->op != "Mul" || otherInput(norm, dead.back()->outputs[0]) != x) continue;
    } else if (!(norm->op == "Div" && norm->inputs[0] == x && norm->inputs[1] == sqrt->outputs[0])) {
      continue;
    }
    dead.push_back(norm);
    // The scale: a constant of C values (any leading 1s) multiplied after, or none.
    const int64_t c = x->dims.back();
    Tensor* y = norm->outputs[0];
    HostTensor scale(DataType::kFLOAT, {c});
    for (int64_t k = 0; k < c; ++k) scale.as<float>()[k] = 1.f;
    Layer* mulG = y->isOutput ? nullptr : soleConsumer(net, y);
    Tensor* g = mulG && mulG->op == "Mul" ? otherInput(mulG, y) : nullptr;
    if (g && g->isConstant() && g->type == DataType::kFLOAT && g->value.count() == c && !g->dims.empty() && g->dims.back() == c &&
        mulG->outputs[0]->dims == y->dims) {
      scale = g->value.reshaped({c});
      dead.push_back(mulG);
      y = mulG->outputs[0];
    }
    Attributes a;
    a.set("axis", int64_t(-1));
    a.set("epsilon", static_cast<float>(eps));
    Layer* rms = net.addLayer("RMSNormalization", {x, net.addConstant(net.uniqueName(sq->name + "_rms_scale"), scale)}, 1, a,
                              net.uniqueName(sq->name + "_rmsnorm"));
    replaceWithFused(net, rms, dead, y);
    changed = true;
    i = 0;
  }
  return changed;
}

}  // namespace kiln
