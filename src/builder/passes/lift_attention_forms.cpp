// Attention written in forms the attention fusion's 4-D matcher does not take, rewritten into the
// form it does (no value changes; GPU fusions, before the attention fusion):
//  - The product with transposed probabilities, Y = A P^T with P = Softmax(..) over the last axis
//    (timm's EfficientViT, LeViT-style: feat = v @ attn.transpose(-2, -1), v [.., Dv, Skv]):
//    Y = (P A^T)^T, written Transpose(MatMul(P, Transpose(A))) (A^T is A's input when A is itself
//    such a transpose). The attention then reads V = A^T as a view or a copy of V, which costs less
//    than the copy of P^T it replaces whenever Dv < Skv.
//  - Attention over rank-3 scores ([N, Sq, Skv]: one head per batch row, as single-head window
//    and cascaded-group attentions write it) or rank >= 5 ([B, H, T, Sq, Skv]: timm's NesT, a
//    block axis; MaxViT's [B, G, H, S, S] grid) : each operand of the chain from the Q K^T MatMul
//    to the P V MatMul is viewed as 4-D ([N, 1, ..], or the leading dims merged into two groups,
//    cut where every operand, a per-head bias [H, S, S] included, still broadcasts: a Reshape,
//    which the runtime aliases) and the chain runs in 4-D; a Reshape back takes the product's
//    readers. Masks that would broadcast differently however the dims are grouped keep the chain.
#include <algorithm>

#include "builder/passes/fuse_attention_steps.h"
#include "builder/passes/passes.h"

namespace kiln {

namespace {

using attention_fusion::matchScores;
using attention_fusion::ScoreChain;

//! A Transpose swapping the last two axes (and nothing else).
bool swapsLastTwo(const Layer* l) {
  if (!l || l->op != "Transpose" || l->inputs.empty() || !l->inputs[0] || !l->inputs[0]->dimsKnown) return false;
  const int64_t r = static_cast<int64_t>(l->inputs[0]->dims.size());
  const std::vector<int64_t> p = l->attrs.getInts("perm");
  if (r < 2 || static_cast<int64_t>(p.size()) != r || p[r - 1] != r - 2 || p[r - 2] != r - 1) return false;
  for (int64_t i = 0; i + 2 < r; ++i)
    if (p[i] != i) return false;
  return true;
}

Tensor* swapLastTwo(Network& net, Tensor* x, const std::string& name) {
  const size_t r = x->dims.size();
  std::vector<int64_t> perm(r);
  for (size_t i = 0; i < r; ++i) perm[i] = static_cast<int64_t>(i);
  std::swap(perm[r - 1], perm[r - 2]);
  Attributes a;
  a.set("perm", perm);
  Dims d = x->dims;
  std::swap(d[r - 1], d[r - 2]);
  return addTypedLayer(net, "Transpose", {x}, a, name, x->type, d);
}

//! A P^T -> (P A^T)^T for Softmax `sm` (top of the file).
bool untransposeProbs(Network& net, Layer* sm) {
  Tensor* p = sm->outputs[0];
  const size_t r = p->dims.size();
  if (!p->dimsKnown || (r != 3 && r != 4) || p->isOutput) return false;
  const int64_t axis = sm->attrs.getInt("axis", -1);
  if (axis != -1 && axis != static_cast<int64_t>(r) - 1) return false;
  Layer* t = soleConsumer(net, p);
  if (!swapsLastTwo(t) || t->outputs[0]->isOutput) return false;
  Layer* mm = soleConsumer(net, t->outputs[0]);
  if (!mm || mm->op != "MatMul" || mm->inputs.size() != 2 || mm->inputs[1] != t->outputs[0] || mm->inputs[0] == t->outputs[0]) return false;
  Tensor* a = mm->inputs[0];
  Tensor* y = mm->outputs[0];
  if (!a || !a->dimsKnown || a->dims.size() != r || !y->dimsKnown || y->dims.size() != r) return false;
  Layer* aT = a->producer;
  Tensor* v = swapsLastTwo(aT) && soleConsumer(net, a) == mm && !a->isOutput ? aT->inputs[0] : swapLastTwo(net, a, mm->name + "_values");
  Dims zd = y->dims;
  std::swap(zd[r - 1], zd[r - 2]);
  Tensor* z = addStandIn(net, mm, "MatMul", {p, v}, {}, mm->name + "_untransposed", y->type, zd);
  Tensor* y2 = swapLastTwo(net, z, mm->name + "_output");
  net.replaceUses(y, y2);
  net.removeLayer(mm);
  net.removeLayer(t);
  net.topoSort();
  return true;
}

//! `d` (rank r = 3 or >= 5, the last two the matrix dims) as 4-D, its leading dims cut into two
//! groups after the first `cut`: [N, X, Y] -> [N, 1, X, Y]; [A, B, C, X, Y] -> [A, B*C, X, Y]
//! (cut 1) or [A*B, C, X, Y] (cut 2). A shorter `d` is right-aligned to rank r first.
//! A dynamic batch (dim 0 unknown, the first group's only unknown) makes the first group -1.
Dims asFourD(Dims d, size_t r, size_t cut) {
  d.insert(d.begin(), r - d.size(), 1);
  int64_t g1 = 1, g2 = 1;
  for (size_t i = 0; i + 2 < r; ++i) (i < cut ? g1 : g2) *= d[i];
  return {d[0] < 0 ? -1 : g1, g2, d[r - 2], d[r - 1]};
}

//! The Reshape shape for asFourD(d): a dynamic batch copied (entry 0) when it is the first group
//! alone, else inferred (entry -1, the shape's only one).
Dims fourDShape(const Dims& d, size_t r, size_t cut) {
  Dims s = asFourD(d, r, cut);
  if (s[0] < 0) s[0] = cut == 1 && d.size() == r ? 0 : -1;
  return s;
}

//! Dims the rewrite can view in 4-D: static, or a dynamic batch (dim 0 of a full-rank tensor) the
//! only unknown.
bool liftableDims(const Dims& d, size_t r) {
  for (size_t i = 0; i < d.size(); ++i)
    if (d[i] < 0 && !(i == 0 && d.size() == r)) return false;
  return true;
}

//! `t` (an operand of the chain of rank <= r) viewed as 4-D (asFourD). Scalar Mul / Div layers and
//! last-two-axes Transposes right above it (the scale and K^T of the Q K^T product) are redone in
//! 4-D above the view, so that the attention matcher still sees them (and reads K in place).
Tensor* fourDView(Network& net, Tensor* t, size_t r, size_t cut, const std::string& name) {
  std::vector<const Layer*> above;  // from t upward
  Tensor* x = t;
  for (;;) {
    Layer* p = x->producer;
    if (!p || p->outputs.size() != 1 || x->isOutput || (x != t && soleConsumer(net, x) == nullptr) || x->dims.size() != r) break;
    double c = 0;
    const bool scaled = (p->op == "Mul" || p->op == "Div") && p->inputs.size() == 2 && scalarValue(p->inputs[1], &c) &&
                        p->inputs[0]->dims == x->dims;
    const bool scaledFirst = p->op == "Mul" && p->inputs.size() == 2 && scalarValue(p->inputs[0], &c) && p->inputs[1]->dims == x->dims;
    if (!(swapsLastTwo(p) || scaled || scaledFirst) || !liftableDims(p->inputs[scaledFirst ? 1 : 0]->dims, r)) break;
    above.push_back(p);
    x = p->inputs[scaledFirst ? 1 : 0];
  }
  const Dims d4 = asFourD(x->dims, r, cut);
  Tensor* v = addReshape(net, x, fourDShape(x->dims, r, cut), name, d4);
  for (auto it = above.rbegin(); it != above.rend(); ++it) {
    const Layer* p = *it;
    if (p->op == "Transpose") {
      v = swapLastTwo(net, v, p->name + "_heads");
    } else {
      double c = 0;
      std::vector<Tensor*> in = p->inputs;
      in[scalarValue(p->inputs[1], &c) ? 0 : 1] = v;
      v = addStandIn(net, p, p->op, in, p->attrs, p->name + "_heads", v->type, v->dims);
    }
  }
  return v;
}

//! The attention chain of Softmax `sm` over rank-3 or rank >= 5 scores run in 4-D (top of the file).
bool liftToFourD(Network& net, Layer* sm) {
  const Tensor* s = sm->inputs.empty() ? nullptr : sm->inputs[0];
  if (!s || !s->dimsKnown || (s->dims.size() != 3 && s->dims.size() < 5) || !liftableDims(s->dims, s->dims.size())) return false;
  const size_t r = s->dims.size();
  const int64_t axis = sm->attrs.getInt("axis", -1);
  if (axis != -1 && axis != static_cast<int64_t>(r) - 1) return false;
  ScoreChain chain;
  if (!matchScores(net, sm, chain) || chain.windowMask || chain.headScale) return false;
  Tensor* y = chain.pv->outputs[0];
  if (y->isOutput || !y->dimsKnown || y->dims.size() != r) return false;
  std::vector<Tensor*> inner;  // the chain's own tensors (all but the product)
  for (Layer* l : chain.layers)
    if (l != chain.pv) inner.push_back(l->outputs[0]);
  auto isInner = [&](const Tensor* t) { return std::find(inner.begin(), inner.end(), t) != inner.end(); };
  const Dims lead(s->dims.begin(), s->dims.end() - 2);
  // An operand (right-aligned to the chain's rank; rank <= 2 broadcasts the same in 4-D) whose
  // leading dims, in each of the two groups, are the scores' or all 1 broadcasts the same in 4-D;
  // anything else would broadcast differently there. The first cut that serves every operand.
  auto viewable = [&](const Tensor* t, size_t cut) {
    if (!t->dimsKnown || !liftableDims(t->dims, r) || t->dims.size() > r) return false;
    if (t->dims.size() <= 2) return true;
    Dims tl(r - t->dims.size(), 1);
    tl.insert(tl.end(), t->dims.begin(), t->dims.end() - 2);
    auto groupOk = [&](size_t from, size_t to) {
      bool same = true, ones = true;
      for (size_t i = from; i < to; ++i) same = same && tl[i] == lead[i], ones = ones && tl[i] == 1;
      return same || ones;
    };
    return groupOk(0, cut) && groupOk(cut, lead.size());
  };
  for (Layer* l : chain.layers)
    if (l->outputs.size() != 1 || !l->outputs[0]->dimsKnown || l->outputs[0]->dims.size() != r) return false;
  size_t cut = 0;
  for (size_t c = 1; c <= lead.size() && !cut; ++c) {
    bool all = true;
    for (Layer* l : chain.layers)
      for (const Tensor* in : l->inputs) all = all && (!in || isInner(in) || viewable(in, c));
    if (all) cut = c;
  }
  if (!cut) return false;
  for (Layer* l : chain.layers)
    for (Tensor*& in : l->inputs)
      if (in && !isInner(in) && in->dims.size() > 2) in = fourDView(net, in, r, cut, l->name + "_heads");
  for (Tensor* t : inner) t->dims = asFourD(t->dims, r, cut);
  sm->attrs.set("axis", int64_t(-1));
  // The product runs in 4-D; a Reshape back to its dims takes its readers.
  const Dims yd = y->dims;
  const std::vector<Layer*> readers = net.consumers(y);
  y->dims = asFourD(yd, r, cut);
  Dims backShape = yd;
  if (backShape[0] < 0) backShape[0] = cut == 1 ? 0 : -1;  // a dynamic batch: the product's dim 0, or inferred
  Tensor* back = addReshape(net, y, backShape, chain.pv->name + "_rows", yd);
  for (Layer* c : readers)
    for (Tensor*& in : c->inputs)
      if (in == y) in = back;
  net.topoSort();
  return true;
}

}  // namespace

bool liftAttentionForms(Network& net) {
  bool changed = false;
  for (size_t i = 0; i < net.layers().size(); ++i) {
    Layer* l = net.layer(static_cast<int>(i));
    if (l->op != "Softmax" || !l->domain.empty() || l->outputs.size() != 1) continue;
    const bool untransposed = untransposeProbs(net, l);
    if (untransposed | liftToFourD(net, l)) {
      changed = true;
      i = 0;  // the layers were re-sorted
    }
  }
  return changed;
}

}  // namespace kiln
