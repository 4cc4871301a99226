// Attention fusion, step 1: the matcher (fuse_attention_steps.h). Walks from a Softmax up to the
// Q K^T MatMul and down to the P V MatMul, collecting scales, masks and the NaN guard.
#include <algorithm>
#include <cmath>

#include "builder/passes/fuse_attention_steps.h"
#include "builder/passes/passes.h"
#include "core/type_dispatch.h"
#include "ops/attention_config.h"

namespace kiln::attention_fusion {

bool isIdentityLayer(const Layer* l) {
  if (!l || l->inputs.empty() || !l->inputs[0] || l->outputs.size() != 1) return false;
  const Tensor *in = l->inputs[0], *out = l->outputs[0];
  if (l->op == "Identity" || (l->op == "Concat" && l->inputs.size() == 1)) return true;
  const bool view = l->op == "Reshape" || l->op == "Squeeze" || l->op == "Unsqueeze";
  return view && in->dimsKnown && out->dimsKnown && isStatic(in->dims) && in->dims == out->dims && in->type == out->type;
}

Tensor* throughIdentity(Tensor* t) {
  while (t && isIdentityLayer(t->producer)) t = t->producer->inputs[0];
  return t;
}

namespace {

//! Mul/Div of `t` by a scalar constant (either operand for Mul): returns the other operand and
//! the factor, or nullptr.
Tensor* scalarOperand(const Layer* l, double* factor) {
  if (!l || l->inputs.size() != 2 || !l->inputs[0] || !l->inputs[1]) return nullptr;
  double c = 0;
  Tensor* x = nullptr;
  if (l->op == "Mul") {
    if (scalarValue(l->inputs[1], &c)) x = l->inputs[0];
    else if (scalarValue(l->inputs[0], &c)) x = l->inputs[1];
    *factor = c;
  } else if (l->op == "Div" && scalarValue(l->inputs[1], &c) && c != 0) {
    x = l->inputs[0];
    *factor = 1.0 / c;
  }
  if (!x || x->isConstant() || !x->dimsKnown || x->dims != l->outputs[0]->dims) return nullptr;  // no rank-raising broadcast
  return x;
}

//! Mul(Tanh(Div(x, c)), c) (or Tanh(x * (1 / c)) inside, constants on either side), each layer read
//! only by the next, c > 0: Gemma-2's logit soft cap. Returns x (the scores operand) and sets *cap,
//! *tanh and *inner (the Div / Mul inside), or nullptr.
Tensor* softcapChain(const Network& net, Layer* mul, double* cap, Layer** tanh, Layer** inner) {
  double outer = 0, in = 0;
  if (!mul || mul->op != "Mul") return nullptr;
  Tensor* th = scalarOperand(mul, &outer);
  Layer* t = th ? th->producer : nullptr;
  if (!t || t->op != "Tanh" || t->inputs.size() != 1 || !t->inputs[0] || soleConsumer(net, th) != mul || !(outer > 0)) return nullptr;
  Layer* d = t->inputs[0]->producer;
  Tensor* x = d && soleConsumer(net, t->inputs[0]) == t ? scalarOperand(d, &in) : nullptr;
  if (!x || std::fabs(outer * in - 1.0) > 1e-6) return nullptr;
  *cap = outer;
  *tanh = t;
  *inner = d;
  return x;
}

//! Mul of scores [B, H, Sq, Skv] by a constant of H values broadcast as [1, H, 1, 1]: returns the
//! scores operand and sets *c, or nullptr.
Tensor* headScaleOperand(const Layer* l, Tensor** c) {
  if (!l || l->op != "Mul" || l->inputs.size() != 2 || !l->inputs[0] || !l->inputs[1] || l->outputs.size() != 1) return nullptr;
  const Dims& y = l->outputs[0]->dims;
  if (y.size() != 4 || y[1] <= 1) return nullptr;
  for (int s = 0; s < 2; ++s) {
    Tensor *x = l->inputs[s], *k = l->inputs[1 - s];
    if (x->isConstant() || x->dims != y || !k->isConstant() || !isFloat(k->type) || k->dims.size() > 4 || k->value.count() != y[1])
      continue;
    Dims d(4 - k->dims.size(), 1);
    d.insert(d.end(), k->dims.begin(), k->dims.end());
    if (d != Dims{1, y[1], 1, 1}) continue;
    *c = k;
    return x;
  }
  return nullptr;
}

//! Walks up Mul/Div-by-scalar layers above `t` (their other consumers keep them alive).
Tensor* peelScales(Tensor* t, double* scale) {
  double f = 1;
  while (Tensor* x = scalarOperand(t->producer, &f)) {
    *scale *= f;
    t = x;
  }
  return t;
}

//! K^T = transpose(root, perm) through Transposes and scalar scales above `kt` (rank 4).
Tensor* peelKeyTranspose(Tensor* kt, double* scale, std::vector<int64_t>* perm) {
  *perm = {0, 1, 2, 3};
  Tensor* t = kt;
  for (;;) {
    t = throughIdentity(peelScales(t, scale));
    if ((*perm)[0] == 0 && (*perm)[1] == 1 && (*perm)[2] == 3 && (*perm)[3] == 2) break;  // t is K itself
    const Layer* l = t->producer;
    if (!l || l->op != "Transpose" || !l->inputs[0] || !l->inputs[0]->dimsKnown || l->inputs[0]->dims.size() != 4) break;
    std::vector<int64_t> p = l->attrs.getInts("perm", {3, 2, 1, 0});
    if (p.size() != 4) break;
    for (int64_t& v : p) v = v < 0 ? v + 4 : v;
    for (int64_t& v : *perm) v = p[static_cast<size_t>(v)];  // kt dim i = input dim p[perm[i]]
    t = l->inputs[0];
  }
  return t;
}

//! Where(IsNaN(P), 0, P) reading the softmax output P and nothing else reading P or the IsNaN
//! result: returns {Where, IsNaN}, else {nullptr, nullptr}.
std::pair<Layer*, Layer*> nanGuard(const Network& net, const Layer* sm) {
  const Tensor* p = sm->outputs[0];
  if (p->isOutput) return {nullptr, nullptr};
  auto readers = net.consumers(p);
  if (readers.size() != 2) return {nullptr, nullptr};
  Layer* isnan = readers[0]->op == "IsNaN" ? readers[0] : readers[1];
  Layer* where = isnan == readers[0] ? readers[1] : readers[0];
  double zero = 1;
  if (isnan->op != "IsNaN" || where->op != "Where" || isnan->inputs.size() != 1 || where->inputs.size() != 3) return {nullptr, nullptr};
  if (soleConsumer(net, isnan->outputs[0]) != where || where->inputs[0] != isnan->outputs[0] || where->inputs[2] != p ||
      !scalarValue(where->inputs[1], &zero) || zero != 0 || where->outputs[0]->dims != p->dims)
    return {nullptr, nullptr};
  return {where, isnan};
}

//! Reshape `merge` ([B, P, H, Sq, Skv] -> [B * P, H, Sq, Skv]) of Add(Reshape(x) back to five
//! dims, mask) with a mask that is the same for every b of B: Swin's shifted-window mask, added per
//! window. Records the mask in m and returns x (the scores), else null. Static dims only.
Tensor* windowMaskSandwich(const Network& net, Layer* merge, ScoreChain& m) {
  if (merge->op != "Reshape" || m.windowMask || merge->inputs.empty() || !merge->inputs[0]) return nullptr;
  const Tensor *y = merge->outputs[0], *sum = merge->inputs[0];
  Layer* add = sum->producer;
  if (!add || add->op != "Add" || add->inputs.size() != 2 || soleConsumer(net, sum) != merge) return nullptr;
  if (!y->dimsKnown || !sum->dimsKnown || y->dims.size() != 4 || sum->dims.size() != 5) return nullptr;
  const Dims &d4 = y->dims, &d5 = sum->dims;
  for (size_t k = 1; k < 5; ++k)
    if (d5[k] <= 0) return nullptr;
  if (d5[2] != d4[1] || d5[3] != d4[2] || d5[4] != d4[3]) return nullptr;
  // A dynamic batch: the Reshapes' own shapes prove the split and the merge exact ([-1, P, H, S, S]
  // and [-1, H, S, S], the -1 the only unknown: B = N / P and N = B * P).
  auto shapeIs = [](const Layer* r, const Dims& want) {
    std::vector<int64_t> v;
    return r->inputs.size() > 1 && constantInts(r->inputs[1], &v) && v == std::vector<int64_t>(want.begin(), want.end());
  };
  const bool dynamicBatch = d5[0] < 0 || d4[0] < 0;
  if (dynamicBatch ? !(d5[0] < 0 && d4[0] < 0 && shapeIs(merge, {-1, d4[1], d4[2], d4[3]}))
                   : d5[0] * d5[1] != d4[0])
    return nullptr;
  for (int s = 0; s < 2; ++s) {
    Tensor *x5 = add->inputs[s], *mask = add->inputs[1 - s];
    Layer* split = x5 ? x5->producer : nullptr;
    if (!split || split->op != "Reshape" || !mask || !split->inputs[0] || soleConsumer(net, x5) != add) continue;
    Tensor* x = split->inputs[0];
    if (!x->dimsKnown || x->dims != d4 || x5->dims != d5 || !mask->dimsKnown || mask->dims.size() > 5 || mask->type != x->type) continue;
    if (dynamicBatch && !shapeIs(split, {-1, d5[1], d5[2], d5[3], d5[4]})) continue;
    Dims m5(5 - mask->dims.size(), 1);
    m5.insert(m5.end(), mask->dims.begin(), mask->dims.end());
    bool ok = m5[0] == 1;  // one mask for every image
    for (size_t k = 1; k < 5; ++k) ok = ok && (m5[k] == 1 || m5[k] == d5[k]);
    if (!ok) continue;
    m.windowMask = mask;
    m.windowMaskDims = {m5[1], m5[2], m5[3], m5[4]};
    m.windowPeriod = m5[1] > 1 && (d5[0] > 1 || dynamicBatch) ? d5[1] : 0;  // with B = 1 the period is harmless
    m.layers.insert(m.layers.end(), {merge, add, split});  // readers before producers
    return x;
  }
  return nullptr;
}

}  // namespace

bool matchScores(const Network& net, Layer* sm, ScoreChain& m) {
  m.softmax = sm;
  auto [where, isnan] = nanGuard(net, sm);
  Tensor* probs = where ? where->outputs[0] : sm->outputs[0];
  Layer* pv = soleConsumer(net, probs);
  if (!pv || pv->op != "MatMul" || pv->inputs.size() != 2 || pv->inputs[0] != probs) return false;
  m.pv = pv;
  m.layers = {pv};
  if (where) m.layers.insert(m.layers.end(), {where, isnan});
  m.layers.push_back(sm);
  Tensor* t = sm->inputs[0];
  Layer* next = sm;
  bool seenScale = false;
  for (;;) {
    Layer* l = t->producer;
    if (!l || soleConsumer(net, t) != next) return false;
    double f = 1;
    if (l->op == "MatMul" && l->inputs.size() == 2) {
      m.qk = l;
      m.layers.push_back(l);
      return true;
    }
    Tensor* hs = nullptr;
    Layer *tanh = nullptr, *inner = nullptr;
    double cap = 0;
    if (Tensor* x = m.softcap == 0 && !seenScale ? softcapChain(net, l, &cap, &tanh, &inner) : nullptr) {
      // Below the masks only: what is above it is scaled inside the tanh (the op's scale).
      m.softcap = cap;
      seenScale = true;
      m.layers.insert(m.layers.end(), {l, tanh, inner});
      t = x;
      next = inner;
      continue;
    } else if (Tensor* x = scalarOperand(l, &f)) {
      m.scale *= f;
      seenScale = true;
      t = x;
    } else if (Tensor* y = m.headScale ? nullptr : headScaleOperand(l, &hs)) {
      m.headScale = hs;
      seenScale = true;
      t = y;
    } else if (l->op == "Add" && l->inputs.size() == 2 && !seenScale) {  // a mask added after scaling only
      auto scoresLike = [&](const Tensor* x) {
        return x && !x->isConstant() && x->producer && x->dims == l->outputs[0]->dims &&
               (x->producer->op == "MatMul" || x->producer->op == "Mul" || x->producer->op == "Div" || x->producer->op == "Where" ||
                x->producer->op == "Add");
      };
      const int s = scoresLike(l->inputs[0]) ? 0 : (scoresLike(l->inputs[1]) ? 1 : -1);
      if (s < 0) return false;
      m.masks.push_back(l->inputs[1 - s]);
      t = l->inputs[s];
    } else if (Tensor* x = seenScale ? nullptr : windowMaskSandwich(net, l, m)) {
      t = x;  // the merging Reshape, the Add and the splitting Reshape are in m.layers
      next = m.layers.back();
      continue;
    } else if (double c = 0; l->op == "Max" && l->inputs.size() == 2 && !seenScale && m.clampFloor == 0 && m.masks.empty() &&
                             scalarValue(l->inputs[1], &c) && c <= kAttentionMaskFillMax && l->inputs[0] &&
                             l->inputs[0]->dims == l->outputs[0]->dims) {
      m.clampFloor = c;
      t = l->inputs[0];
    } else if (l->op == "Where" && l->inputs.size() == 3 && !seenScale && !m.where) {
      double c = 0;
      if (scalarValue(l->inputs[2], &c)) {
        t = l->inputs[1];
      } else if (scalarValue(l->inputs[1], &c)) {
        t = l->inputs[2];
        m.whereKeepsTrue = false;
      } else {
        return false;
      }
      if (!(c <= kVeryNegative) || !t || t->dims != l->outputs[0]->dims || l->inputs[0]->type != DataType::kBOOL) return false;
      m.where = l;
      m.whereFill = c;
    } else {
      return false;
    }
    m.layers.push_back(l);
    next = l;
  }
}

namespace {

//! Equal batch and head counts (no other MatMul broadcasting), matching sequence and head sizes.
//! One K / V head that the MatMuls broadcast over several query heads is MQA (timm's MobileNetV4
//! attention writes it so): the Attention op's kv_num_heads 1.
bool shapesAgree(const Dims& qd, const Dims& kd, const Dims& vd, const Dims& sc) {
  const bool mqa = kd[1] == 1 && vd[1] == 1 && qd[1] > 1 && sc[1] == qd[1];
  for (int i = 0; i < 2; ++i)
    if (!sameDim(qd[i], sc[i]) || (!(i == 1 && mqa) && (!sameDim(qd[i], kd[i]) || !sameDim(qd[i], vd[i])))) return false;
  return sameDim(qd[3], kd[3]) && sameDim(kd[2], vd[2]) && sameDim(sc[2], qd[2]) && sameDim(sc[3], kd[2]);
}

bool hasUnknownDim(const Dims& d) {
  return std::any_of(d.begin(), d.end(), [](int64_t x) { return x < 0; });
}

//! Where a dim is unknown statically, shapesAgree at every sample shape of the profiles: two -1s
//! are not taken to be the same dim (at run time one could be 1 and broadcast in the MatMuls,
//! which the Attention op does not do). Without samples (a pass run alone) they are trusted.
bool shapesAgreeAtSamples(const AttentionMatch& am, SampleDims& samples) {
  if (samples.empty() || !(hasUnknownDim(am.q->dims) || hasUnknownDim(am.kDims) || hasUnknownDim(am.v->dims) ||
                           hasUnknownDim(am.scores)))
    return true;
  SymbolicDims& sym = *samples.sym();
  for (size_t s = 0; s < sym.nbSamples(); ++s) {
    const Dims q = sym.at(am.q, s).dims, kr = sym.at(am.kRoot, s).dims, v = sym.at(am.v, s).dims;
    const Dims sc = sym.at(am.chain.qk->outputs[0], s).dims;
    for (const Dims* d : {&q, &kr, &v, &sc})
      if (d->size() != 4 || hasUnknownDim(*d)) return false;
    Dims kd(4);
    for (int i = 0; i < 4; ++i) kd[i] = kr[static_cast<size_t>(am.kPerm[i])];
    if (!shapesAgree(q, kd, v, sc)) return false;
  }
  return true;
}

//! x when `t` ([B, H, S, D]) is transformers' repeat_kv of x ([B, H / n, S, D], n > 1): Reshape
//! to [B, H, S, D] of Expand to [B, H / n, n, S, D] of x with a unit dim inserted at axis 2
//! (Unsqueeze or Reshape); query head h then reads x's head h / n, as Attention's GQA does.
Tensor* repeatedKvSource(Tensor* t, int64_t* n) {
  const Layer* r = t ? t->producer : nullptr;
  if (!r || r->op != "Reshape" || !t->dimsKnown || t->dims.size() != 4) return nullptr;
  const Tensor* e = r->inputs[0];
  const Layer* ex = e ? e->producer : nullptr;
  if (!ex || ex->op != "Expand" || !e->dimsKnown || e->dims.size() != 5) return nullptr;
  const Tensor* u = ex->inputs[0];
  const Layer* un = u ? u->producer : nullptr;
  if (!un || (un->op != "Unsqueeze" && un->op != "Reshape") || !u->dimsKnown || !un->inputs[0]) return nullptr;
  Tensor* x = un->inputs[0];
  const Dims &td = t->dims, &ed = e->dims, &ud = u->dims, &xd = x->dims;
  // Head counts and sizes must be known; batch and sequence may be dynamic (-1 == -1: the same
  // symbolic dim, as everywhere in this pass).
  if (!x->dimsKnown || xd.size() != 4 || xd[1] <= 0 || xd[3] <= 0 || x->type != t->type) return nullptr;
  if (ud != Dims{xd[0], xd[1], 1, xd[2], xd[3]} || ed != Dims{xd[0], xd[1], ed[2], xd[2], xd[3]} || ed[2] < 2) return nullptr;
  if (td != Dims{xd[0], xd[1] * ed[2], xd[2], xd[3]}) return nullptr;
  *n = ed[2];
  return x;
}

//! GQA/MQA written out: when K and V are both repeat_kv of tensors with fewer heads (LLaMA,
//! Qwen2, Mistral exports), the attention reads those (no Expand copies; cuDNN and the flash
//! kernels map query heads to K/V heads themselves).
void takeRepeatedKv(AttentionMatch& am) {
  if (am.kPerm != std::vector<int64_t>{0, 1, 2, 3}) return;
  int64_t nk = 0, nv = 0;
  Tensor* k = repeatedKvSource(am.kRoot, &nk);
  Tensor* v = repeatedKvSource(am.v, &nv);
  if (!k || !v || nk != nv || k->dims[1] != v->dims[1]) return;
  am.kRoot = k;
  am.kDims = k->dims;
  am.v = v;
}

}  // namespace

bool matchAttention(const Network& net, Layer* sm, AttentionMatch& am, SampleDims& samples) {
  const Tensor* x = sm->inputs.empty() ? nullptr : sm->inputs[0];
  if (!x || !x->dimsKnown || x->dims.size() != 4 || !isFloatType(x->type)) return false;
  const int64_t axis = sm->attrs.getInt("axis", -1);
  if ((axis != -1 && axis != 3) || !matchScores(net, sm, am.chain)) return false;
  am.type = x->type;
  am.scores = am.chain.qk->outputs[0]->dims;
  am.scale = am.chain.scale;
  am.q = throughIdentity(peelScales(am.chain.qk->inputs[0], &am.scale));
  std::vector<int64_t> perm;  // K^T = transpose(kRoot, perm)
  am.kRoot = peelKeyTranspose(am.chain.qk->inputs[1], &am.scale, &perm);
  am.v = throughIdentity(am.chain.pv->inputs[1]);
  for (const Tensor* t : {am.q, am.kRoot, am.v})
    if (!t || !t->dimsKnown || t->dims.size() != 4 || t->type != am.type) return false;
  if (!(am.scale > 0) || !std::isfinite(am.scale)) return false;
  am.kPerm = {perm[0], perm[1], perm[3], perm[2]};  // K dim i = K^T dim swap(i)
  am.kDims = Dims(4);
  for (int i = 0; i < 4; ++i) am.kDims[i] = am.kRoot->dims[static_cast<size_t>(am.kPerm[i])];
  if (!shapesAgree(am.q->dims, am.kDims, am.v->dims, am.scores) || !shapesAgreeAtSamples(am, samples)) return false;
  takeRepeatedKv(am);
  return true;
}

}  // namespace kiln::attention_fusion
