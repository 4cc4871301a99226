// Layers that compute nothing: Identity, Cast to the type its input already has (T5's RMSNorm
// casts float32 to float32), and data movement that moves nothing: Pad by all-zero pads
// (torchvision's Swin pads every stage to a multiple of the window, zero at 224x224, and slices
// the padding off again), Slice that takes every sliced axis whole (unit steps), Expand/Tile whose
// output has the input's static dims, Transpose by the identity perm, Concat of one input once
// the inputs empty along its axis are dropped. Pad, Slice and Transpose
// are recognized with a dynamic batch too. Their
// readers read the input instead, so neither a copy per inference nor a break in the fusion
// patterns is left. A network output keeps its layer (the output tensor must keep its name and
// its own buffer).
#include "builder/passes/passes.h"

namespace kiln {

namespace {

//! Input k is absent, or a constant whose integers all equal `v`.
bool constantAll(const Layer* l, size_t k, int64_t v) {
  if (k >= l->inputs.size() || !l->inputs[k]) return true;
  const Tensor* t = l->inputs[k];
  if (!t->isConstant()) return false;
  for (int64_t i = 0; i < t->value.count(); ++i)
    if (t->value.getInt(i) != v) return false;
  return true;
}

//! A Slice whose sliced axes all have a static input dim equal to the output's, with unit steps:
//! it takes each of them whole (step 1 and the same length: start 0, end past the dim), and the
//! axes it does not slice pass through whatever their dims (a dynamic batch).
bool slicesNothing(const Layer* l, const Tensor* in, const Tensor* out) {
  if (l->inputs.size() < 3 || !constantAll(l, 4, 1) || in->dims.size() != out->dims.size()) return false;
  const int64_t rank = static_cast<int64_t>(in->dims.size());
  std::vector<int64_t> axes;
  if (l->inputs.size() > 3 && l->inputs[3]) {
    if (!l->inputs[3]->isConstant()) return false;
    for (int64_t i = 0; i < l->inputs[3]->value.count(); ++i) axes.push_back(l->inputs[3]->value.getInt(i));
  } else {
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
  }
  for (int64_t a : axes) {
    if (a < 0) a += rank;
    if (a < 0 || a >= rank || in->dims[a] < 0 || in->dims[a] != out->dims[a]) return false;
  }
  return true;
}

bool movesNothing(const Layer* l) {
  const Tensor* in = l->inputs[0];
  const Tensor* out = l->outputs[0];
  if (l->op == "Identity") return true;
  if (!in->dimsKnown || !out->dimsKnown || in->type != out->type) return false;
  if (l->op == "Cast") return true;
  // All-zero pads and the identity perm move nothing at any dims (a dynamic batch included).
  if (l->op == "Pad") {
    for (int64_t p : l->attrs.getInts("pads"))  // before opset 11
      if (p != 0) return false;
    return constantAll(l, 1, 0) && (l->inputs.size() > 1 || l->attrs.has("pads"));
  }
  if (l->op == "Transpose") {
    const std::vector<int64_t> perm = l->attrs.getInts("perm");
    if (perm.empty()) return in->dims.size() <= 1;
    for (size_t k = 0; k < perm.size(); ++k)
      if (perm[k] != static_cast<int64_t>(k)) return false;
    return true;
  }
  if (l->op == "Slice" && l->inputs.size() > 1) return slicesNothing(l, in, out);
  // Other data movement: the same static dims (dynamic dims may differ at run time).
  if (!isStatic(in->dims) || in->dims != out->dims) return false;
  if (l->op == "Expand" || l->op == "Tile") return true;
  if (l->op == "Slice") return true;  // opset < 10 (starts/ends attributes): the same dims means all of it
  return false;
}

//! A Concat's inputs that are empty along its axis (static 0: GPT-J's pass-through part x[..., R:]
//! when the rotation takes the whole head) are dropped; true when any was. The output must not be
//! empty itself, and one input always stays.
bool dropEmptyConcatInputs(Layer* l) {
  if (l->op != "Concat" || l->inputs.size() < 2 || !l->outputs[0]->dimsKnown) return false;
  const Dims& out = l->outputs[0]->dims;
  int64_t axis = l->attrs.getInt("axis", 0);
  if (axis < 0) axis += static_cast<int64_t>(out.size());
  if (axis < 0 || axis >= static_cast<int64_t>(out.size()) || out[axis] <= 0) return false;
  std::vector<Tensor*> kept;
  for (Tensor* t : l->inputs) {
    const bool empty = t && t->dimsKnown && t->dims.size() == out.size() && t->dims[axis] == 0;
    if (!empty) kept.push_back(t);
  }
  if (kept.size() == l->inputs.size() || kept.empty()) return false;
  l->inputs = kept;
  return true;
}

}  // namespace

bool elideNoOps(Network& net) {
  std::vector<Layer*> dead;
  bool changed = false;
  for (auto& lp : net.layers()) {
    Layer* l = lp.get();
    if (!l->domain.empty() || l->inputs.empty() || l->outputs.size() != 1 || !l->inputs[0] || l->outputs[0]->isOutput) continue;
    if (dropEmptyConcatInputs(l)) changed = true;
    const bool soleConcatInput = l->op == "Concat" && l->inputs.size() == 1 && l->inputs[0]->dimsKnown &&
                                 l->inputs[0]->dims == l->outputs[0]->dims;
    if (!soleConcatInput && !movesNothing(l)) continue;
    net.replaceUses(l->outputs[0], l->inputs[0]);
    dead.push_back(l);
  }
  for (Layer* l : dead) net.removeLayer(l);
  return changed || !dead.empty();
}

}  // namespace kiln
