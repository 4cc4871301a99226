// Conv / ConvTranspose / Gemm / MatMul / Fp8MatMul / GroupNormalization / InstanceNormalization followed by an activation: the activation runs in the
// producer's epilogue (oneDNN post-op, cuDNN graph, GEMM epilogue) instead of a second pass over
// memory. Besides single activation ops, the gated forms exporters write for SiLU/Swish
// (x * Sigmoid(x)) and Mish (x * Tanh(Softplus(x))), where x feeds both the gate and the Mul.
//
// GPU (`epilogueActsOnly`): cuBLASLt's epilogue computes only ReLU and tanh-GELU; any other
// activation fused into a MatMul / Gemm runs as a post pass over the product (one more read and
// write of it). When the activation's output goes on to an elementwise layer (LLaMA / Qwen's
// SwiGLU: silu(gate) * up), the activation stays out of the GEMM so that the pointwise chain
// fusion takes it together with that layer: zero extra passes instead of one (qwen2 s512 b16 on
// the H100: the gate projection took 0.288 ms against the up projection's 0.211 ms).
//
// Gated linear units (GPU): when that elementwise layer is a Mul by a tensor U of the MatMul's
// output shape (SwiGLU: silu(x W_gate) * (x W_up); GeGLU; a bare x W * U), the activation and the
// Mul join the MatMul as its 4th input: Y = act(A @ B + bias) * U. cuDNN's fused matmul reads U in
// its epilogue and writes Y once (the pointwise chain wrote the product, then read it and U and
// wrote Y); the cuBLASLt tactics apply it in their post pass, no more traffic than the chain's.
#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "builder/passes/passes.h"
#include "ops/pointwise_chain.h"

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
      op == "Elu" || op == "HardSigmoid" || op == "Mish") {
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

//! x * Sigmoid(x) (SiLU) or x * Tanh(Softplus(x)) (Mish) on `x`, whose only consumers are the gate
//! and the Mul. On a match, `chain` holds the gate's layers and then the Mul.
bool matchGatedActivation(const Network& net, Tensor* x, Activation* a, std::vector<Layer*>* chain) {
  if (x->isOutput) return false;
  const std::vector<Layer*> c = net.consumers(x);
  if (c.size() != 2) return false;
  for (int first = 0; first < 2; ++first) {
    Layer* g = c[first];
    Layer* mul = c[1 - first];
    if (mul->op != "Mul" || g->inputs.size() != 1 || g->inputs[0] != x || g->outputs.size() != 1) continue;
    std::vector<Layer*> found{g};
    Tensor* gate = g->outputs[0];
    ActKind kind;
    if (g->op == "Sigmoid") {
      kind = ActKind::kSilu;
    } else if (g->op == "Softplus") {
      Layer* tanh = soleConsumer(net, gate);
      if (!tanh || tanh->op != "Tanh" || tanh->inputs.size() != 1 || tanh->outputs.size() != 1) continue;
      found.push_back(tanh);
      gate = tanh->outputs[0];
      kind = ActKind::kMish;
    } else {
      continue;
    }
    if (soleConsumer(net, gate) != mul || otherInput(mul, x) != gate || mul->outputs.size() != 1) continue;
    found.push_back(mul);
    *a = Activation{kind, 0.f, 0.f};
    *chain = std::move(found);
    return true;
  }
  return false;
}

//! Whether the activation ending at `out` (of MatMul / Gemm `p`) is better left to the pointwise
//! chain fusion (see the top of the file).
bool leaveToPointwiseChain(const Network& net, const Layer* p, const Activation& a, const Tensor* out) {
  if (p->op != "MatMul" && p->op != "Gemm" && p->op != "Fp8MatMul") return false;
  if (a.kind == ActKind::kNone || a.kind == ActKind::kRelu || a.kind == ActKind::kGeluTanh) return false;
  if (out->isOutput) return false;
  const Layer* next = soleConsumer(net, out);
  return next && isChainableOp(next->op) && next->outputs.size() == 1 && next->outputs[0]->dims == out->dims &&
         next->outputs[0]->type == out->type;
}

//! The gated-linear-unit form (top of the file): MatMul `p` -> `chain` (its activation `a`'s
//! layers, empty for none) -> Mul by U of the same shape. Rewrites and returns true on a match.
bool fuseGatedMatMul(Network& net, Layer* p, const Activation& a, const std::vector<Layer*>& chain, SymbolicDims& sym) {
  if (p->op != "MatMul" || p->inputs.size() > 3 || hasFusedActivation(p->attrs)) return false;
  Tensor* out = chain.empty() ? p->outputs[0] : chain.back()->outputs[0];
  if (out->isOutput) return false;
  Layer* mul = soleConsumer(net, out);
  if (!mul || mul->op != "Mul" || mul->inputs.size() != 2 || mul->outputs.size() != 1) return false;
  Tensor* u = otherInput(mul, out);
  // U is not produced downstream of p: every path from p's output runs through `chain` and `mul`.
  if (!u || u == out || u->isConstant() || u->type != out->type || !sym.sameDims(u, out) ||
      !sym.sameDims(mul->outputs[0], out))
    return false;
  for (const Layer* l : chain)
    for (const Tensor* t : l->outputs)
      if (t == u) return false;
  // A bare product times an activated value (SwiGLU's up projection, met before the gate): the
  // activated side is the one to fuse, with its activation, when its own producer comes.
  if (chain.empty() && u->producer && isChainableOp(u->producer->op)) return false;
  if (a.kind != ActKind::kNone) setFusedActivation(p->attrs, a);
  while (p->inputs.size() < 3) p->inputs.push_back(nullptr);
  p->inputs.push_back(u);
  for (Layer* l : chain) recordFusion(p, l);
  recordFusion(p, mul);
  Tensor* result = mul->outputs[0];
  for (Layer* l : chain) net.removeLayer(l);
  net.removeLayer(mul);
  net.replaceUses(result, p->outputs[0]);
  return true;
}

}  // namespace

bool fuseActivation(Network& net, bool epilogueActsOnly, const InputSamples& samples) {
  SymbolicDims sym(samples);
  static const std::set<std::string> producers{"Conv", "ConvTranspose", "Gemm", "MatMul", "Fp8MatMul", "GroupNormalization",
                                               "InstanceNormalization"};
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
    std::vector<Layer*> gated;
    Activation g;
    if (!act && matchGatedActivation(net, p->outputs[0], &g, &gated) && epilogueActsOnly) {
      if (fuseGatedMatMul(net, p, g, gated, sym)) {
        changed = true;
        continue;
      }
      if (leaveToPointwiseChain(net, p, g, gated.back()->outputs[0])) continue;
    }
    if (!act && !gated.empty()) {
      setFusedActivation(p->attrs, g);
      for (Layer* l : gated) recordFusion(p, l);
      Tensor* out = gated.back()->outputs[0];
      for (Layer* l : gated) net.removeLayer(l);
      net.replaceUses(out, p->outputs[0]);
      changed = true;
      continue;
    }
    if (!act || act->outputs.size() != 1 || act->inputs.empty() || act->inputs[0] != actIn) continue;
    Activation a;
    if (!describeActivation(act, &a)) {
      if (epilogueActsOnly && !view && act->op == "Mul") changed |= fuseGatedMatMul(net, p, Activation{}, {}, sym);
      continue;
    }
    // Gated first (any activation: cuBLASLt's fused ReLU / tanh-GELU then multiply in the post pass,
    // Gemma's GeGLU), else the activation alone.
    if (epilogueActsOnly && !view && fuseGatedMatMul(net, p, a, {act}, sym)) {
      changed = true;
      continue;
    }
    if (epilogueActsOnly && leaveToPointwiseChain(net, p, a, act->outputs[0])) continue;
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
