// Conv / ConvTranspose / Gemm / MatMul followed by an activation: the activation runs in the
// producer's epilogue (oneDNN post-op, GEMM epilogue) instead of a second pass over memory.
#include <cmath>
#include <limits>
#include <set>

#include "builder/passes/passes.h"

namespace kiln {

namespace {

bool scalarConst(const Tensor* t, float* v) {
  if (!t) return false;
  if (!t->isConstant() || t->value.count() != 1 || !isFloat(t->type)) return false;
  *v = static_cast<float>(t->value.getDouble(0));
  return true;
}

// The fused form of `act`; false when it cannot be fused.
bool describeActivation(const Layer* act, Activation* out) {
  const std::string& op = act->op;
  Activation& a = *out;
  if (op == "Relu" || op == "Sigmoid" || op == "Tanh" || op == "HardSwish" || op == "Softplus" || op == "LeakyRelu" ||
      op == "Elu" || op == "HardSigmoid") {
    activationKindOf(op, &a.kind);
    if (op == "LeakyRelu" || op == "Elu") a.alpha = act->attrs.getFloat("alpha", op == "LeakyRelu" ? 0.01f : 1.0f);
    if (op == "HardSigmoid") {
      a.alpha = act->attrs.getFloat("alpha", 0.2f);
      a.beta = act->attrs.getFloat("beta", 0.5f);
    }
    return true;
  }
  if (op == "Gelu") {
    std::string approx = act->attrs.getString("approximate", "none");
    a.kind = approx == "tanh" ? ActKind::kGeluTanh : ActKind::kGelu;
    return approx == "tanh" || approx == "none";
  }
  if (op == "Clip") {
    float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
    if (act->inputs.size() > 1 && act->inputs[1] && !scalarConst(act->inputs[1], &lo)) return false;
    if (act->inputs.size() > 2 && act->inputs[2] && !scalarConst(act->inputs[2], &hi)) return false;
    a = Activation{ActKind::kClip, lo, hi};
    return true;
  }
  return false;
}

}  // namespace

bool fuseActivation(Network& net) {
  static const std::set<std::string> producers{"Conv", "ConvTranspose", "Gemm", "MatMul"};
  bool changed = false;
  for (size_t i = 0; i < net.layers().size(); ++i) {
    Layer* p = net.layer(static_cast<int>(i));
    if (!producers.count(p->op) || hasFusedActivation(p->attrs) || p->outputs.size() != 1 ||
        p->outputs[0]->type != DataType::kFLOAT)
      continue;
    Layer* act = soleConsumer(net, p->outputs[0]);
    // A Reshape between the producer and the activation (GPT-2: Gemm on [B*S, K] -> Reshape to
    // [B, S, N] -> GELU): the activation is elementwise, so it moves into the producer and the
    // Reshape then reads the activated values.
    Layer* view = nullptr;
    if (act && act->op == "Reshape" && act->inputs[0] == p->outputs[0] && act->outputs.size() == 1) {
      view = act;
      act = soleConsumer(net, view->outputs[0]);
    }
    Tensor* actIn = view ? view->outputs[0] : p->outputs[0];
    if (!act || act->outputs.size() != 1 || act->inputs.empty() || act->inputs[0] != actIn) continue;
    Activation a;
    if (!describeActivation(act, &a)) continue;
    setFusedActivation(p->attrs, a);
    recordFusion(p, act);
    Tensor* out = act->outputs[0];
    net.removeLayer(act);
    net.replaceUses(out, actIn);
    changed = true;
  }
  return changed;
}

}  // namespace kiln
