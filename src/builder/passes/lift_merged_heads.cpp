// Batched MatMuls over merged batch and head dims -> the same MatMuls over [B, H, ...].
// Eager attention written with torch.bmm (DeBERTa, BART / Marian / M2M-style encoders and
// decoders) reshapes Q, K, V from [B, H, S, D] to [B*H, S, D], multiplies in 3-D and reshapes the
// scores back to [B, H, S, S] for the mask and the softmax (and the probabilities to 3-D again).
// The attention fusion matches 4-D attention only; these rewrites move the merging Reshapes out of
// the way, which changes no value:
//   MatMul(merge(a), merge(b)) -> merge(MatMul(a, b))  (a, b: [B, H, X, Y] with one B, H)
//   Transpose(merge(x), perm 0,2,1) -> merge(Transpose(x, perm 0,1,3,2))
//   Add / Sub / Mul / Div(merge(x), scalar constant or y of the merged dims, or of [B*H, 1|X, 1|Y]
//   (ALiBi's per-head [B*H, 1, S] bias)) -> merge(op(x, scalar or y viewed as [B, H, ..]))
//   Softmax(merge(x)) read only by a Reshape back to x's dims (XGLM) -> Softmax(x)
// where merge is a Reshape [B, H, X, Y] -> [B*H, X, Y]; a Reshape of the lifted MatMul back to
// [B, H, ...] reads the 4-D product directly. Static dims only.
#include <set>
#include <vector>

#include "builder/passes/passes.h"

namespace kiln {

namespace {

//! x ([B, H, X, Y], static) when `t` ([B*H, X, Y]) is Reshape(x); else null.
Tensor* mergedHeads(const Tensor* t) {
  const Layer* r = t ? t->producer : nullptr;
  if (!r || r->op != "Reshape" || !r->domain.empty() || r->inputs.empty() || !r->inputs[0] || !t->dimsKnown || t->dims.size() != 3)
    return nullptr;
  Tensor* x = r->inputs[0];
  if (!x->dimsKnown || x->dims.size() != 4 || x->type != t->type) return nullptr;
  const Dims &xd = x->dims, &td = t->dims;
  for (int64_t v : xd)
    if (v <= 0) return nullptr;
  return xd[0] * xd[1] == td[0] && xd[2] == td[1] && xd[3] == td[2] ? x : nullptr;
}

//! The lifted layer that replaces `from`.
Tensor* liftedLayer(Network& net, const Layer* from, const std::vector<Tensor*>& in, const Attributes& a, DataType type, const Dims& dims) {
  return addStandIn(net, from, from->op, in, a, from->name + "_heads", type, dims);
}

//! Merges this pass made (Reshapes of lifted results back to [B*H, ..]): an elementwise layer on one
//! continues a lift that began at a MatMul or a Transpose.
using Lifted = std::set<const Tensor*>;

//! Whether `t` is read (alone) by a MatMul, directly or through up to two elementwise / Transpose
//! layers: the lifts below a MatMul's operands only go where a MatMul lift follows (MobileViT's
//! unfolding merges [B*C*nh, ..] too; lifting its elementwise layers only added Reshapes).
bool feedsMatMul(const Network& net, const Tensor* t, int depth = 2) {
  const Layer* c = soleConsumer(net, t);
  if (!c) return false;
  if (c->op == "MatMul") return true;
  const bool through = c->op == "Transpose" || c->op == "Add" || c->op == "Sub" || c->op == "Mul" || c->op == "Div";
  return through && depth > 0 && c->outputs.size() == 1 && feedsMatMul(net, c->outputs[0], depth - 1);
}

//! Points every reader of `y` ([B*H, ..], not a network output) at `y4` ([B, H, ..]): a Reshape
//! to y4's dims reads y4 itself (its readers take y4), the others a merge of y4.
void replaceMerged(Network& net, Tensor* y, Tensor* y4, const std::string& name, Lifted& lifted) {
  Tensor* merged = nullptr;
  for (Layer* c : net.consumers(y)) {
    if (c->op == "Reshape" && c->domain.empty() && c->inputs[0] == y && c->outputs[0]->dimsKnown && c->outputs[0]->dims == y4->dims &&
        !c->outputs[0]->isOutput) {
      net.replaceUses(c->outputs[0], y4);  // c is dead now
      continue;
    }
    if (!merged) lifted.insert(merged = addReshape(net, y4, y->dims, name + "_merged"));
    for (Tensor*& in : c->inputs)
      if (in == y) in = merged;
  }
}

bool liftMatMul(Network& net, Layer* m, Lifted& lifted) {
  if (m->op != "MatMul" || !m->domain.empty() || m->inputs.size() != 2 || m->outputs.size() != 1) return false;
  Tensor *a = mergedHeads(m->inputs[0]), *b = mergedHeads(m->inputs[1]);
  if (!a || !b || a->dims[0] != b->dims[0] || a->dims[1] != b->dims[1]) return false;
  Tensor* y = m->outputs[0];
  if (!y->dimsKnown || y->dims.size() != 3 || y->isOutput) return false;
  const Dims y4{a->dims[0], a->dims[1], y->dims[1], y->dims[2]};
  Tensor* p = liftedLayer(net, m, {a, b}, m->attrs, y->type, y4);
  replaceMerged(net, y, p, m->name, lifted);
  return true;
}

bool liftTranspose(Network& net, Layer* t, Lifted& lifted) {
  if (t->op != "Transpose" || !t->domain.empty() || t->inputs.size() != 1 || t->attrs.getInts("perm", {}) != std::vector<int64_t>{0, 2, 1})
    return false;
  Tensor* x = mergedHeads(t->inputs[0]);
  if (!x || t->outputs.size() != 1 || t->outputs[0]->isOutput || !feedsMatMul(net, t->outputs[0])) return false;
  Attributes a;
  a.set("perm", std::vector<int64_t>{0, 1, 3, 2});
  Tensor* p = liftedLayer(net, t, {x}, a, x->type, {x->dims[0], x->dims[1], x->dims[3], x->dims[2]});
  replaceMerged(net, t->outputs[0], p, t->name, lifted);
  return true;
}

//! Add / Sub / Mul / Div of a merge and a rank-0 constant, or of a merge and a tensor of the merged
//! dims or broadcast over X or Y (viewed as [B, H, ..] by a Reshape): DeBERTa-v3 adds its
//! relative-position terms (c2p, p2c: [B*H, S, S]) to the merged scores, BLOOM its ALiBi bias
//! ([B*H, 1, S]).
bool liftElementwise(Network& net, Layer* l, Lifted& lifted) {
  if ((l->op != "Add" && l->op != "Sub" && l->op != "Mul" && l->op != "Div") || !l->domain.empty() || l->inputs.size() != 2 ||
      l->outputs.size() != 1 || l->outputs[0]->isOutput || !l->inputs[0] || !l->inputs[1])
    return false;
  for (int s = 0; s < 2; ++s) {
    Tensor *m = l->inputs[s], *other = l->inputs[1 - s];
    Tensor* x = mergedHeads(m);
    if (!x || !(lifted.count(m) || feedsMatMul(net, l->outputs[0]))) continue;
    double c = 0;
    const bool scalar = other->dims.empty() && scalarValue(other, &c);
    // A per-(batch, head) term [B*H, X|1, Y|1]: the merged dims, or broadcast over queries or keys
    // (ALiBi's [B*H, 1, S]).
    const Dims& od = other->dims;
    const bool perHead = other->dimsKnown && other->type == m->type && od.size() == 3 && od[0] == m->dims[0] &&
                         (od[1] == 1 || od[1] == m->dims[1]) && (od[2] == 1 || od[2] == m->dims[2]);
    if (!scalar && !perHead) continue;
    std::vector<Tensor*> in = l->inputs;
    in[s] = x;
    if (perHead) in[1 - s] = addReshape(net, other, {x->dims[0], x->dims[1], od[1], od[2]}, l->name + "_operand_heads");
    Tensor* p = liftedLayer(net, l, in, l->attrs, x->type, x->dims);
    replaceMerged(net, l->outputs[0], p, l->name, lifted);
    return true;
  }
  return false;
}

//! Softmax over the last axis of a merge, read only by a Reshape back to [B, H, ..] (XGLM views its
//! 4-D scores as [B*H, S, S] for the softmax alone): the softmax of the 4-D scores.
bool liftSoftmax(Network& net, Layer* l, Lifted& lifted) {
  if (l->op != "Softmax" || !l->domain.empty() || l->inputs.size() != 1 || l->outputs.size() != 1 || l->outputs[0]->isOutput) return false;
  Tensor* x = mergedHeads(l->inputs[0]);
  const int64_t axis = l->attrs.getInt("axis", -1);
  const Layer* back = soleConsumer(net, l->outputs[0]);
  if (!x || (axis != -1 && axis != 2) || !back || back->op != "Reshape" || back->outputs[0]->dims != x->dims) return false;
  Attributes a = l->attrs;
  a.set("axis", int64_t(-1));
  Tensor* p = liftedLayer(net, l, {x}, a, x->type, x->dims);
  replaceMerged(net, l->outputs[0], p, l->name, lifted);
  return true;
}

}  // namespace

bool liftMergedHeads(Network& net) {
  bool changed = false;
  Lifted lifted;
  // Transposes and scales first, so that the MatMuls they feed see merges of 4-D tensors; then the
  // elementwise layers after the lifted MatMuls (the scores' scale and relative-position terms).
  for (auto lift : {liftTranspose, liftElementwise, liftMatMul, liftElementwise, liftSoftmax}) {
    const size_t n = net.layers().size();  // layers added here are already lifted
    for (size_t i = 0; i < n; ++i) changed = lift(net, net.layer(static_cast<int>(i)), lifted) || changed;
  }
  if (changed) net.removeDeadLayers();  // any layer order (it sweeps until stable); the builder sorts after the pass
  return changed;
}

}  // namespace kiln
