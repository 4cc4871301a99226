// The exported forms of GELU become one Gelu layer (which can then join a MatMul epilogue):
// exact, x * 0.5 * (1 + erf(x / sqrt(2))), and the tanh approximation GPT-2 writes out,
// 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))), in any of the orders PyTorch emits.
#include <cmath>

#include "builder/passes/passes.h"

namespace kiln {

namespace {

bool isScalar(const Tensor* t, double v, double tol = 1e-4) {
  return t && t->isConstant() && t->value.count() == 1 && isFloat(t->type) && std::fabs(t->value.getDouble(0) - v) <= tol;
}

//! x^3 as Pow(x, 3) or x * (x * x) in either order: returns x and adds the layers to `layers`.
Tensor* cubeOf(const Network& net, Tensor* t, std::vector<Layer*>& layers) {
  Layer* l = t->producer;
  if (!l || soleConsumer(net, t) == nullptr) return nullptr;
  if (l->op == "Pow" && l->inputs.size() == 2 && isScalar(l->inputs[1], 3.0, 0.0) && !l->inputs[0]->isConstant()) {
    layers.push_back(l);
    return l->inputs[0];
  }
  if (l->op != "Mul" || l->inputs.size() != 2) return nullptr;
  for (int s = 0; s < 2; ++s) {  // x * sq with sq = x * x
    Tensor *x = l->inputs[s], *sq = l->inputs[1 - s];
    const Layer* m = sq->producer;
    if (m && m->op == "Mul" && m->inputs.size() == 2 && m->inputs[0] == x && m->inputs[1] == x && soleConsumer(net, sq) == l) {
      layers.push_back(l);
      layers.push_back(const_cast<Layer*>(m));
      return x;
    }
  }
  return nullptr;
}

//! The part of a GELU before "1 + f(...)": the input x, the Add(1, f) layer, and the layers from
//! x up to f (all removed when the pattern fuses).
struct GeluHead {
  Tensor* x = nullptr;
  Layer* addOne = nullptr;
  std::vector<Layer*> layers;
  const char* approximate = "none";
};

//! f = Erf(x / sqrt(2)) or Erf(x * (1 / sqrt(2))).
bool erfHead(const Network& net, Layer* erf, GeluHead& h) {
  if (erf->op != "Erf" || erf->inputs.size() != 1 || erf->outputs[0]->type != DataType::kFLOAT) return false;
  Layer* scale = erf->inputs[0]->producer;
  if (!scale || scale->inputs.size() != 2 || scale->inputs[0]->isConstant() || soleConsumer(net, scale->outputs[0]) != erf) return false;
  if (!((scale->op == "Div" && isScalar(scale->inputs[1], std::sqrt(2.0))) ||
        (scale->op == "Mul" && isScalar(scale->inputs[1], 1.0 / std::sqrt(2.0)))))
    return false;
  h.x = scale->inputs[0];
  h.layers = {scale, erf};
  return true;
}

//! f = Tanh(sqrt(2/pi) * (x + 0.044715 * x^3)) (GPT-2's "new GELU"), operands in any order.
bool tanhHead(const Network& net, Layer* tanh, GeluHead& h) {
  if (tanh->op != "Tanh" || tanh->inputs.size() != 1 || tanh->outputs[0]->type != DataType::kFLOAT) return false;
  Layer* sc = tanh->inputs[0]->producer;
  if (!sc || sc->op != "Mul" || sc->inputs.size() != 2 || soleConsumer(net, sc->outputs[0]) != tanh) return false;
  const double c = kGeluTanhScale;  // sqrt(2/pi)
  Tensor* inner = isScalar(sc->inputs[0], c) ? sc->inputs[1] : (isScalar(sc->inputs[1], c) ? sc->inputs[0] : nullptr);
  Layer* ad = inner ? inner->producer : nullptr;
  if (!ad || ad->op != "Add" || ad->inputs.size() != 2 || soleConsumer(net, inner) != sc) return false;
  for (int s = 0; s < 2; ++s) {
    Tensor *x = ad->inputs[s], *term = ad->inputs[1 - s];
    Layer* k = term->producer;
    if (x->isConstant() || !k || k->op != "Mul" || k->inputs.size() != 2 || soleConsumer(net, term) != ad) continue;
    Tensor* cube = isScalar(k->inputs[0], kGeluTanhCubic, 1e-6) ? k->inputs[1]
                   : (isScalar(k->inputs[1], kGeluTanhCubic, 1e-6) ? k->inputs[0] : nullptr);
    std::vector<Layer*> layers;
    if (!cube || cubeOf(net, cube, layers) != x) continue;
    h.x = x;
    h.layers = layers;
    h.layers.insert(h.layers.end(), {k, ad, sc, tanh});
    h.approximate = "tanh";
    return true;
  }
  return false;
}

}  // namespace

//! GELU's exported forms: x * 0.5 * (1 + f) with f the erf term (exact GELU) or the tanh term
//! (approximate = "tanh"), in any of the orders PyTorch emits, become one Gelu layer (which can
//! then join a MatMul epilogue: cuBLASLt's GELU epilogue is the tanh form).
bool fuseGeluPattern(Network& net) {
  bool changed = false;
  for (size_t i = 0; i < net.layers().size(); ++i) {
    Layer* f = net.layer(static_cast<int>(i));
    GeluHead h;
    if (!erfHead(net, f, h) && !tanhHead(net, f, h)) continue;
    Tensor* x = h.x;
    Layer* add = soleConsumer(net, f->outputs[0]);
    if (!add || add->op != "Add" || !isScalar(otherInput(add, f->outputs[0]), 1.0)) continue;
    Layer* m1 = soleConsumer(net, add->outputs[0]);
    if (!m1 || m1->op != "Mul") continue;
    Tensor* m1other = otherInput(m1, add->outputs[0]);
    std::vector<Layer*> dead = h.layers;
    dead.insert(dead.end(), {add, m1});
    Tensor* result = nullptr;
    if (m1other == x) {  // (x * (1 + erf)) * 0.5
      Layer* m2 = soleConsumer(net, m1->outputs[0]);
      if (!m2 || m2->op != "Mul" || !isScalar(otherInput(m2, m1->outputs[0]), 0.5)) continue;
      dead.push_back(m2);
      result = m2->outputs[0];
    } else if (m1other && m1other->producer && m1other->producer->op == "Mul") {  // (x * 0.5) * (1 + erf)
      Layer* half = m1other->producer;
      if (otherInput(half, x) == nullptr || !isScalar(otherInput(half, x), 0.5) || soleConsumer(net, m1other) != m1) continue;
      dead.push_back(half);
      result = m1->outputs[0];
    } else {
      continue;
    }
    Attributes a;
    a.set("approximate", std::string(h.approximate));
    Layer* gelu = net.addLayer("Gelu", {x}, 1, a, f->name + "_gelu");
    replaceWithFused(net, gelu, dead, result);
    changed = true;
    i = 0;
  }
  return changed;
}

}  // namespace kiln
