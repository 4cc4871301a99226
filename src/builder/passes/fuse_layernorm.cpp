// The decomposed layer normalization that exporters emit before opset 17,
//   m = ReduceMean(x, -1); d = x - m; v = ReduceMean(d^2, -1); y = d / Sqrt(v + eps) * g + b,
// becomes one LayerNormalization layer (one pass over memory instead of nine).
#include <cmath>

#include "builder/passes/passes.h"

namespace kiln {

namespace {

Layer* consumerOf(const Network& net, const Tensor* t, const char* op) {
  for (Layer* c : net.consumers(t))
    if (c->op == op) return c;
  return nullptr;
}

}  // namespace

bool fuseLayerNormPattern(Network& net) {
  bool changed = false;
  for (size_t i = 0; i < net.layers().size(); ++i) {
    Layer* mean = net.layer(static_cast<int>(i));
    if (!meanOverLastAxis(mean) || mean->outputs[0]->type != DataType::kFLOAT) continue;
    Tensor* x = mean->inputs[0];
    Layer* sub = soleConsumer(net, mean->outputs[0]);
    if (!sub || sub->op != "Sub" || sub->inputs[0] != x || sub->inputs[1] != mean->outputs[0]) continue;
    Tensor* d = sub->outputs[0];
    if (d->isOutput || net.consumers(d).size() != 2) continue;
    Layer* sq = consumerOf(net, d, "Pow");
    double two = 0;
    if (sq && !(sq->inputs[0] == d && scalarValue(sq->inputs[1], &two) && two == 2.0)) sq = nullptr;
    if (!sq) {
      sq = consumerOf(net, d, "Mul");
      if (sq && !(sq->inputs[0] == d && sq->inputs[1] == d)) sq = nullptr;
    }
    Layer* div = consumerOf(net, d, "Div");
    if (!sq || !div || div->inputs[0] != d) continue;
    Layer* var = soleConsumer(net, sq->outputs[0]);
    if (!meanOverLastAxis(var)) continue;
    Layer* addEps = soleConsumer(net, var->outputs[0]);
    double eps = 0;
    if (!addEps || addEps->op != "Add" || !scalarValue(otherInput(addEps, var->outputs[0]), &eps)) continue;
    Layer* sqrt = soleConsumer(net, addEps->outputs[0]);
    if (!sqrt || sqrt->op != "Sqrt" || soleConsumer(net, sqrt->outputs[0]) != div || div->inputs[1] != sqrt->outputs[0]) continue;
    Layer* mul = soleConsumer(net, div->outputs[0]);
    if (!mul || mul->op != "Mul") continue;
    Tensor* gamma = otherInput(mul, div->outputs[0]);
    Layer* add = soleConsumer(net, mul->outputs[0]);
    if (!add || add->op != "Add") continue;
    Tensor* beta = otherInput(add, mul->outputs[0]);
    const int64_t c = x->dims.back();
    auto isVec = [&](const Tensor* t) { return t && t->isConstant() && t->type == DataType::kFLOAT && t->value.count() == c && c > 0; };
    if (!isVec(gamma) || !isVec(beta)) continue;
    Attributes a;
    a.set("axis", int64_t(-1));
    a.set("epsilon", static_cast<float>(eps));
    Tensor* g1 = net.addConstant(gamma->name + "_ln", gamma->value.reshaped({c}));
    Tensor* b1 = net.addConstant(beta->name + "_ln", beta->value.reshaped({c}));
    Layer* ln = net.addLayer("LayerNormalization", {x, g1, b1}, 1, a, mean->name + "_layernorm");
    std::vector<Layer*> dead{mean, sub, sq, var, addEps, sqrt, div, mul, add};
    replaceWithFused(net, ln, dead, add->outputs[0]);
    changed = true;
    i = 0;
  }
  return changed;
}

}  // namespace kiln
