// Chains of float32 elementwise layers (each the sole consumer of the previous one) become one
// PointwiseChain layer: one pass over memory instead of one per op.
#include <limits>

#include "builder/passes/passes.h"
#include "ops/pointwise_chain.h"

namespace kiln {

namespace {

bool scalarConstant(const Tensor* t, float* v) {
  if (!t || !t->isConstant() || t->value.count() != 1 || !isFloat(t->type)) return false;
  *v = static_cast<float>(t->value.getDouble(0));
  return true;
}

// Whether `operand` broadcasts into `out` without changing its dims: each of its dims is 1 or the
// same symbolic dim as out's (symbolic_dims.h; in a static network, the same number).
bool broadcastsInto(SymbolicDims& sym, const Tensor* operand, const Tensor* out) {
  const Dims &od = sym.at(operand, 0).dims, &dims = sym.at(out, 0).dims;
  if (od.size() > dims.size()) return false;
  size_t off = dims.size() - od.size();
  for (size_t i = 0; i < od.size(); ++i)
    if (sym.constantDim(operand, i) != 1 && !sym.sameDim(operand, i, out, off + i)) return false;
  return true;
}

struct Step {
  std::string op;
  Tensor* operand = nullptr;
  bool swapped = false;
  float alpha = 0.f, beta = 0.f;
};

// Describes layer l as a step applied to `value`; false if it cannot join a chain on `value`.
bool asStep(SymbolicDims& sym, const Layer* l, const Tensor* value, Step* s) {
  if (!isChainableOp(l->op) || l->outputs.size() != 1 || l->outputs[0]->type != DataType::kFLOAT || l->inputs.empty()) return false;
  const Dims& dims = l->outputs[0]->dims;
  if (value->dims != dims || value->type != DataType::kFLOAT) return false;
  s->op = l->op;
  const std::string& op = l->op;
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Pow" || op == "Max" || op == "Min") {
    if (l->inputs.size() != 2 || !l->inputs[0] || !l->inputs[1]) return false;
    if (l->inputs[0] == value && l->inputs[1] != value) s->operand = l->inputs[1];
    else if (l->inputs[1] == value && l->inputs[0] != value) { s->operand = l->inputs[0]; s->swapped = true; }
    else return false;
    // The chain's value keeps the output's dims: it must not be the operand that broadcasts.
    if (s->operand->type != DataType::kFLOAT || !sym.sameDims(value, l->outputs[0]) ||
        !broadcastsInto(sym, s->operand, l->outputs[0]))
      return false;
    return true;
  }
  if (l->inputs[0] != value) return false;
  if (op == "Clip") {
    s->alpha = -std::numeric_limits<float>::infinity();
    s->beta = std::numeric_limits<float>::infinity();
    if (l->inputs.size() > 1 && l->inputs[1] && !scalarConstant(l->inputs[1], &s->alpha)) return false;
    if (l->inputs.size() > 2 && l->inputs[2] && !scalarConstant(l->inputs[2], &s->beta)) return false;
    return true;
  }
  if (l->inputs.size() != 1) return false;
  if (op == "LeakyRelu") s->alpha = l->attrs.getFloat("alpha", 0.01f);
  if (op == "Elu") s->alpha = l->attrs.getFloat("alpha", 1.f);
  if (op == "HardSigmoid") { s->alpha = l->attrs.getFloat("alpha", 0.2f); s->beta = l->attrs.getFloat("beta", 0.5f); }
  if (op == "Gelu") {
    std::string a = l->attrs.getString("approximate", "none");
    if (a != "none" && a != "tanh") return false;
    s->alpha = a == "tanh" ? 1.f : 0.f;
  }
  return true;
}

}  // namespace

bool fusePointwiseChains(Network& net, const InputSamples& samples) {
  bool changed = false;
  SymbolicDims sym(samples);
  for (size_t i = 0; i < net.layers().size(); ++i) {
    Layer* first = net.layer(static_cast<int>(i));
    if (first->op == "PointwiseChain" || first->inputs.empty() || !first->inputs[0]) continue;
    // The chain's input: the operand whose shape is the output's (for binary ops, the first such).
    Tensor* x = nullptr;
    Step s0;
    for (Tensor* cand : first->inputs)
      if (cand && asStep(sym, first, cand, &s0)) { x = cand; break; }
    if (!x) continue;
    std::vector<Layer*> chain{first};
    std::vector<Step> steps{s0};
    Tensor* value = first->outputs[0];
    for (;;) {
      Layer* next = soleConsumer(net, value);
      Step s;
      if (!next || !asStep(sym, next, value, &s)) break;
      chain.push_back(next);
      steps.push_back(s);
      value = next->outputs[0];
    }
    if (chain.size() < 2) continue;
    std::vector<Tensor*> inputs{x};
    PointwiseChainAttrs c;
    for (const Step& s : steps) {
      c.steps.push_back(s.op);
      if (s.operand) {
        c.operand.push_back(static_cast<int64_t>(inputs.size()));
        inputs.push_back(s.operand);
      } else {
        c.operand.push_back(-1);
      }
      c.swapped.push_back(s.swapped ? 1 : 0);
      c.alpha.push_back(s.alpha);
      c.beta.push_back(s.beta);
    }
    Attributes a;
    setPointwiseChainAttrs(a, c);
    Layer* fused = net.addLayer("PointwiseChain", inputs, 1, a, first->name + "_chain");
    replaceWithFused(net, fused, chain, value);
    changed = true;
    i = 0;
  }
  return changed;
}

}  // namespace kiln
