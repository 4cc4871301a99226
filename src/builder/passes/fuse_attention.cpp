// Scaled-dot-product attention as BERT / ViT / GPT-2 exports write it,
//   S = MatMul(Q, K^T) [Mul/Div by scalars, also on Q or K^T before the MatMul]
//       [Where(cond, S, very negative c)] [Add(mask)];  P = Softmax(S, axis=-1)
//       [P = Where(IsNaN(P), 0, P)];  Y = MatMul(P, V)
// with Q, K, V of shape [B, H, S, D] (K^T given as [B, H, D, S]: a Transpose of K, or any chain
// of Transposes of a 4-D tensor), becomes one Attention layer (ONNX opset 23: scale, is_causal,
// additive attn_mask). Constant masks that are exactly causal (0 on and below the diagonal, <= -1e4
// above it, or a bool lower triangle) become is_causal. GPU builds only (fused attention kernel).
// The NaN guard is what PyTorch's dynamo exporter writes for scaled_dot_product_attention: rows
// with every key masked by -inf become 0, which is what the fused kernels produce for them.
// When Q, K and V are all head splits of 3-D projections (Reshape [B, S, H*D] -> [B, S, H, D],
// Transpose to [B, H, S, D]) and Y is merged back the same way, the Attention layer takes and
// returns the 3-D tensors (q_num_heads = kv_num_heads = H): the kernel reads the heads in place
// through strides, so the four head transposes (a copy each) disappear.
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <tuple>

#include "builder/passes/passes.h"
#include "builder/passes/view_trace.h"

namespace kiln {

namespace {

// Masked logits at or below this are treated as -inf (exp(-1e4) underflows in float).
constexpr double kVeryNegative = -1e4;
// Fill values at or below this absorb any finite logit (x + c == c in float and half).
constexpr double kAbsorbing = -1e30;

bool computeType(DataType t) { return t == DataType::kFLOAT || t == DataType::kHALF || t == DataType::kBF16; }

bool sameDim(int64_t a, int64_t b) { return a == b; }  // -1 == -1: the same symbolic dim (trusted)

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

//! True for a layer that passes its single input on unchanged: Identity, a one-input Concat, or
//! a Reshape/Squeeze/Unsqueeze whose output dims equal its input's (GPT-2 exports all three).
bool isIdentityLayer(const Layer* l) {
  if (!l || l->inputs.empty() || !l->inputs[0] || l->outputs.size() != 1) return false;
  const Tensor *in = l->inputs[0], *out = l->outputs[0];
  if (l->op == "Identity" || (l->op == "Concat" && l->inputs.size() == 1)) return true;
  const bool view = l->op == "Reshape" || l->op == "Squeeze" || l->op == "Unsqueeze";
  return view && in->dimsKnown && out->dimsKnown && isStatic(in->dims) && in->dims == out->dims && in->type == out->type;
}

//! `t` with identity layers above it skipped.
Tensor* throughIdentity(Tensor* t) {
  while (t && isIdentityLayer(t->producer)) t = t->producer->inputs[0];
  return t;
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

//! `m` (rank <= 4) broadcasts to `target` ([B, H, Sq, Skv]) with its last dim equal to Skv.
bool broadcastsTo(const Dims& m, const Dims& target) {
  if (m.empty() || m.size() > 4) return false;
  const size_t off = 4 - m.size();
  for (size_t k = 0; k < m.size(); ++k) {
    const int64_t want = target[off + k];
    if (k + 1 == m.size() ? !sameDim(m[k], want) : !(m[k] == 1 || sameDim(m[k], want))) return false;
  }
  return true;
}

//! For a constant [.., Sq, Skv] tensor: whether pred(value, i, j) holds for every element of every
//! [Sq, Skv] slice. Leading dims may exceed 1: exporters expand a causal mask to the batch
//! (transformers 5.17's GPT-2 at batch 8: [8, 1, S, S], folded to a constant).
template <typename Pred>
bool everyElement(const Tensor* t, Pred pred) {
  const Dims& d = t->value.dims();
  if (d.size() < 2) return false;
  const int64_t rows = d[d.size() - 2], cols = d.back();
  const int64_t slice = rows * cols;
  if (slice <= 0) return false;
  for (int64_t base = 0; base < t->value.count(); base += slice)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        if (!pred(t->value.getDouble(base + i * cols + j), i, j)) return false;
  return true;
}

//! A constant whose every element is zero (an additive mask that masks nothing).
bool allZero(const Tensor* t) {
  if (!t->isConstant()) return false;
  for (int64_t i = 0; i < t->value.count(); ++i)
    if (t->value.getDouble(i) != 0) return false;
  return true;
}

HostTensor typedTensor(DataType t, const Dims& d, const std::vector<double>& v) {
  HostTensor h(t, d);
  for (size_t i = 0; i < v.size(); ++i) {
    const float f = static_cast<float>(v[i]);
    if (t == DataType::kFLOAT) h.as<float>()[i] = f;
    else if (t == DataType::kHALF) h.as<uint16_t>()[i] = floatToHalf(f);
    else h.as<uint16_t>()[i] = floatToBf16(f);
  }
  return h;
}

Dims broadcastDims(const Dims& a, const Dims& b) {
  Dims r(std::max(a.size(), b.size()), 1);
  for (size_t k = 0; k < r.size(); ++k) {
    const size_t i = r.size() - 1 - k;
    const int64_t x = k < a.size() ? a[a.size() - 1 - k] : 1, y = k < b.size() ? b[b.size() - 1 - k] : 1;
    r[i] = x == 1 ? y : x;
  }
  return r;
}

Tensor* addTypedLayer(Network& net, const std::string& op, const std::vector<Tensor*>& in, Attributes a, const std::string& name,
                      DataType type, const Dims& dims) {
  Layer* l = net.addLayer(op, in, 1, std::move(a), net.uniqueName(name));
  l->outputs[0]->type = type;
  l->outputs[0]->dims = dims;
  l->outputs[0]->dimsKnown = true;
  return l->outputs[0];
}

//! x3 when `t4` ([B, S, H, D], dims known) is Reshape(x3) with x3 = [B, S, H*D]; else nullptr.
Tensor* mergedOf(Tensor* t4) {
  const Layer* r = t4 ? t4->producer : nullptr;
  if (!r || r->op != "Reshape" || r->inputs.empty() || !r->inputs[0] || !t4->dimsKnown || t4->dims.size() != 4) return nullptr;
  Tensor* x = r->inputs[0];
  const Dims &d = t4->dims, &xd = x->dims;
  if (!x->dimsKnown || xd.size() != 3 || d[2] <= 0 || d[3] <= 0 || xd[2] != d[2] * d[3]) return nullptr;
  return sameDim(xd[0], d[0]) && sameDim(xd[1], d[1]) && x->type == t4->type ? x : nullptr;
}

//! x3 when `t` ([B, H, S, D]) is Transpose(perm 0,2,1,3) of a head split of x3 ([B, S, H*D]).
Tensor* headSplitOf(Tensor* t) {
  const Layer* l = t ? t->producer : nullptr;
  if (!l || l->op != "Transpose" || l->inputs.empty() || l->attrs.getInts("perm", {}) != std::vector<int64_t>{0, 2, 1, 3}) return nullptr;
  return mergedOf(l->inputs[0]);
}

//! The layers merging heads back when y ([B, H, S, Dv]) is only read by Transpose(0,2,1,3)
//! whose output is only read by a Reshape to [B, S, H*Dv]; else {nullptr, nullptr}.
std::pair<Layer*, Layer*> headMergeOf(const Network& net, Tensor* y, std::vector<Layer*>* identities) {
  Layer* t = soleConsumer(net, y);
  for (const Tensor* cur = y; t && isIdentityLayer(t) && t->inputs[0] == cur; t = soleConsumer(net, cur)) {
    identities->push_back(t);
    cur = t->outputs[0];
  }
  if (!t || t->op != "Transpose" || t->attrs.getInts("perm", {}) != std::vector<int64_t>{0, 2, 1, 3}) return {nullptr, nullptr};
  Layer* r = soleConsumer(net, t->outputs[0]);
  if (!r || r->op != "Reshape" || r->inputs[0] != t->outputs[0]) return {nullptr, nullptr};
  const Tensor* o = r->outputs[0];
  const Dims& d = t->outputs[0]->dims;  // [B, S, H, Dv]
  if (!o->dimsKnown || o->dims.size() != 3 || d.size() != 4 || d[2] <= 0 || d[3] <= 0 || o->dims[2] != d[2] * d[3] ||
      !sameDim(o->dims[0], d[0]) || !sameDim(o->dims[1], d[1]))
    return {nullptr, nullptr};
  return {t, r};
}

//! When `base` (a packed Q/K/V projection) is [Add(bias) of] MatMul(Transpose(x), W) with W a
//! constant matrix, a bias along the last axis only and a Transpose that keeps the last axis (ViT's
//! sequence-first attention: x [B, S, E] -> [S, B, E] -> in-projection), the projection is
//! row-wise, so it moves before the Transpose: Transpose(Add(MatMul(x, W), bias)). The attention's
//! view trace then absorbs that Transpose, and the copy of x is gone. Returns whether it moved.
bool sinkTransposeBelowProjection(Network& net, Tensor* base) {
  Layer* add = base->producer && base->producer->op == "Add" ? base->producer : nullptr;
  Tensor* mmOut = base;
  Tensor* bias = nullptr;
  if (add) {
    if (add->inputs.size() != 2) return false;
    const int c = add->inputs[0]->isConstant() ? 0 : (add->inputs[1]->isConstant() ? 1 : -1);
    if (c < 0) return false;
    bias = add->inputs[c];
    mmOut = add->inputs[1 - c];
    const Dims& bd = bias->dims;
    for (size_t i = 0; i + 1 < bd.size(); ++i)
      if (bd[i] != 1) return false;
    if (bd.empty() || bd.size() > base->dims.size() || bd.back() != base->dims.back() || soleConsumer(net, mmOut) != add) return false;
  }
  Layer* mm = mmOut->producer;
  if (!mm || mm->op != "MatMul" || mm->inputs.size() != 2 || !mm->inputs[1]->isConstant() || mm->inputs[1]->dims.size() != 2) return false;
  Tensor* tOut = mm->inputs[0];
  Layer* t = tOut->producer;
  if (!t || t->op != "Transpose" || soleConsumer(net, tOut) != mm || !t->inputs[0]->dimsKnown) return false;
  const size_t rank = tOut->dims.size();
  std::vector<int64_t> perm = t->attrs.getInts("perm", {});
  if (perm.size() != rank || rank < 2 || perm.back() != static_cast<int64_t>(rank) - 1) return false;
  Tensor* x = t->inputs[0];
  Dims pd = x->dims;
  pd.back() = mmOut->dims.back();
  Tensor* proj = addTypedLayer(net, "MatMul", {x, mm->inputs[1]}, {}, mm->name + "_unpermuted", mmOut->type, pd);
  recordFusion(proj->producer, mm);
  if (add) {
    proj = addTypedLayer(net, "Add", {proj, bias}, {}, add->name + "_unpermuted", base->type, pd);
    recordFusion(proj->producer, add);
  }
  Attributes ta;
  ta.set("perm", perm);
  Tensor* moved = addTypedLayer(net, "Transpose", {proj}, ta, t->name + "_moved", base->type, base->dims);
  net.replaceUses(base, moved);
  if (add) net.removeLayer(add);
  net.removeLayer(mm);
  net.removeLayer(t);
  net.topoSort();
  return true;
}

//! The layers from the Q K^T MatMul to the P V MatMul.
struct ScoreChain {
  Layer *qk = nullptr, *softmax = nullptr, *pv = nullptr;
  std::vector<Layer*> layers;  // qk .. pv, all removed
  double scale = 1;
  std::vector<Tensor*> masks;  // additive masks (broadcastable to the scores)
  Layer* where = nullptr;      // Where(cond, S, c) (or Where(cond, c, S) when whereKeepsTrue is false)
  bool whereKeepsTrue = true;
  double whereFill = 0;
};

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

//! Walks from Softmax up to the Q K^T MatMul; fills the chain, scale and mask parts.
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
    if (Tensor* x = scalarOperand(l, &f)) {
      m.scale *= f;
      seenScale = true;
      t = x;
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

// ---------------------------------------------------------------------------------------------
// Matcher: proves the subgraph is an attention and finds Q, K, V (changes nothing).

//! A matched attention: the score chain and Q, K = transpose(kRoot, kPerm), V.
struct AttentionMatch {
  ScoreChain chain;
  DataType type = DataType::kFLOAT;
  Dims scores;  // [B, H, Sq, Skv]
  double scale = 1;
  Tensor *q = nullptr, *kRoot = nullptr, *v = nullptr;
  std::vector<int64_t> kPerm;  // K dim i = kRoot dim kPerm[i]
  Dims kDims;
};

//! Equal batch and head counts (no MatMul broadcasting), matching sequence and head sizes.
bool shapesAgree(const AttentionMatch& am) {
  const Dims &qd = am.q->dims, &vd = am.v->dims, &kd = am.kDims, &sc = am.scores;
  for (int i = 0; i < 2; ++i)
    if (!sameDim(qd[i], kd[i]) || !sameDim(qd[i], vd[i]) || !sameDim(qd[i], sc[i])) return false;
  return sameDim(qd[3], kd[3]) && sameDim(kd[2], vd[2]) && sameDim(sc[2], qd[2]) && sameDim(sc[3], kd[2]);
}

bool matchAttention(const Network& net, Layer* sm, AttentionMatch& am) {
  const Tensor* x = sm->inputs.empty() ? nullptr : sm->inputs[0];
  if (!x || !x->dimsKnown || x->dims.size() != 4 || !computeType(x->type)) return false;
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
  return shapesAgree(am);
}

// ---------------------------------------------------------------------------------------------
// Canonicalizer: the masks as the Attention layer takes them, one additive mask and is_causal.
// Every refusal comes before the first change to the network.

struct CanonicalMask {
  bool causal = false;
  Tensor* mask = nullptr;  // additive, broadcastable to the scores; null when none
};

//! A constant whose last two dims are the scores' [Sq, Skv] (a candidate causal mask).
bool causalShaped(const Tensor* t, const Dims& scores) {
  const int64_t sq = scores[2], skv = scores[3];
  const Dims& d = t->value.dims();
  return t->isConstant() && sq > 0 && skv > 0 && d.size() >= 2 && d[d.size() - 2] == sq && d.back() == skv;
}

//! Additive masks of the scores' type: constant exact-causal ones become is_causal, and constant
//! all-zero ones are dropped (PyTorch's dynamo export of BERT called without an attention_mask
//! folds to Where(all true, 0, -FLT_MAX) = zeros [B, 1, S, S]: kept, it would cost a B*S*S read
//! per attention and rule out cuDNN's SDPA, which runs only without a mask).
bool keepAdditiveMasks(const AttentionMatch& am, CanonicalMask& cm, std::vector<Tensor*>& kept) {
  for (Tensor* mk : am.chain.masks) {
    if (!mk || mk->type != am.type || !mk->dimsKnown || !broadcastsTo(mk->dims, am.scores)) return false;
    if (allZero(mk)) continue;
    if (!cm.causal && causalShaped(mk, am.scores) &&
        everyElement(mk, [](double val, int64_t i, int64_t j) { return j <= i ? val == 0 : val <= kVeryNegative; })) {
      cm.causal = true;
      continue;
    }
    kept.push_back(mk);
  }
  return true;
}

bool keptBy(double cond, bool keepsTrue) { return (cond != 0) == keepsTrue; }

//! A constant Where condition as a constant additive mask; false when a query row masks every
//! key while the fill is finite and not absorbing (then the original softmax is uniform over the
//! raw scores, which the kernels do not compute).
bool constantWhereMask(Network& net, const AttentionMatch& am, Tensor** mask) {
  const Layer* where = am.chain.where;
  const HostTensor& cv = where->inputs[0]->value;
  const bool keep = am.chain.whereKeepsTrue;
  const int64_t cols = cv.dims().back();
  bool fullRow = false;
  for (int64_t r = 0; cols > 0 && r < cv.count() / cols; ++r) {
    bool any = false;
    for (int64_t j = 0; j < cols && !any; ++j) any = keptBy(cv.getDouble(r * cols + j), keep);
    fullRow = fullRow || !any;
  }
  if (fullRow && am.chain.whereFill > kAbsorbing) return false;
  std::vector<double> vals(static_cast<size_t>(cv.count()));
  for (int64_t i = 0; i < cv.count(); ++i) vals[static_cast<size_t>(i)] = keptBy(cv.getDouble(i), keep) ? 0.0 : am.chain.whereFill;
  *mask = net.addConstant(net.uniqueName(where->name + "_mask"), typedTensor(am.type, cv.dims(), vals));
  return true;
}

//! The Where(cond, S, fill) of the score chain as an additive mask in *mask (left null when it
//! masks nothing or is causal, which sets cm.causal); false when it cannot be taken.
bool whereAsMask(Network& net, const AttentionMatch& am, CanonicalMask& cm, Tensor** mask) {
  const Layer* where = am.chain.where;
  if (!where) return true;
  Tensor* cond = where->inputs[0];
  if (!cond->dimsKnown || !broadcastsTo(cond->dims, am.scores)) return false;
  const bool keep = am.chain.whereKeepsTrue;
  bool keepsAll = cond->isConstant();
  for (int64_t i = 0; keepsAll && i < cond->value.count(); ++i) keepsAll = keptBy(cond->value.getDouble(i), keep);
  if (keepsAll) return true;  // masks nothing
  if (!cm.causal && causalShaped(cond, am.scores) &&
      everyElement(cond, [&](double c, int64_t i, int64_t j) { return keptBy(c, keep) == (j <= i); })) {
    cm.causal = true;
    return true;
  }
  if (cond->isConstant()) return constantWhereMask(net, am, mask);
  if (am.chain.whereFill > kAbsorbing) return false;  // a fully masked row cannot be ruled out
  Tensor* zero = net.addConstant(net.uniqueName(where->name + "_zero"), typedTensor(am.type, {}, {0.0}));
  Tensor* fillT = net.addConstant(net.uniqueName(where->name + "_fill"), typedTensor(am.type, {}, {am.chain.whereFill}));
  *mask = addTypedLayer(net, "Where", {cond, keep ? zero : fillT, keep ? fillT : zero}, {}, where->name + "_mask", am.type,
                        cond->dims);
  return true;
}

bool canonicalizeMasks(Network& net, const AttentionMatch& am, const Layer* sm, CanonicalMask& cm) {
  std::vector<Tensor*> masks;
  Tensor* whereMask = nullptr;
  if (!keepAdditiveMasks(am, cm, masks) || !whereAsMask(net, am, cm, &whereMask)) return false;
  if (whereMask) masks.insert(masks.begin(), whereMask);
  cm.mask = masks.empty() ? nullptr : masks[0];
  for (size_t i = 1; i < masks.size(); ++i)
    cm.mask = addTypedLayer(net, "Add", {cm.mask, masks[i]}, {}, sm->name + "_mask_sum", am.type,
                            broadcastDims(cm.mask->dims, masks[i]->dims));
  return true;
}

// ---------------------------------------------------------------------------------------------
// Rewriter: the Attention layer in the first form a kernel supports, the matched layers removed.

//! What the forms besides the plain 4-D one need.
struct AttentionForms {
  // 3-D form: Q, K, V head splits of [B, S, H*D] tensors and Y merged back (Transpose, Reshape).
  Tensor *q3 = nullptr, *k3 = nullptr, *v3 = nullptr;
  Layer *mergeT = nullptr, *mergeR = nullptr;
  std::vector<Layer*> outIdentities;  // identity layers between Y and the head merge
  // View form: strided views of the buffers the head-splitting data movement started from
  // (ops/attention_views.h), and the data movement after Y as the kernel's strided write.
  bool viewable = false, outViewable = false;
  StridedView qv, kv, vv;
  std::vector<Layer*> outChain;
  Tensor* outZ = nullptr;
  std::vector<int64_t> outStrides;
};

void findHeadForm(const Network& net, const AttentionMatch& am, AttentionForms& f) {
  f.q3 = headSplitOf(am.q);
  f.v3 = headSplitOf(am.v);
  f.k3 = am.kPerm == std::vector<int64_t>{0, 2, 1, 3} ? mergedOf(am.kRoot)
         : (am.kPerm == std::vector<int64_t>{0, 1, 2, 3} ? headSplitOf(am.kRoot) : nullptr);
  std::tie(f.mergeT, f.mergeR) = headMergeOf(net, am.chain.pv->outputs[0], &f.outIdentities);
}

//! Traces the view form (may move a Transpose below a packed projection first, so the views
//! absorb it); views are taken only where they remove a copy the 3-D form would not.
void findViewForm(Network& net, const AttentionMatch& am, AttentionForms& f) {
  auto traceAll = [&] {
    return traceView(am.q, f.qv) && traceView(am.kRoot, f.kv) && traceView(am.v, f.vv) && f.qv.base->type == am.type &&
           f.kv.base->type == am.type && f.vv.base->type == am.type;
  };
  f.viewable = traceAll();
  if (f.viewable && f.qv.base == f.kv.base && f.kv.base == f.vv.base && sinkTransposeBelowProjection(net, f.qv.base))
    f.viewable = traceAll();
  if (f.viewable) {  // K = transpose(kRoot, kPerm)
    StridedView p = f.kv;
    for (size_t i = 0; i < 4; ++i) {
      const size_t from = static_cast<size_t>(am.kPerm[i]);
      p.sizes[i] = f.kv.sizes[from], p.strides[i] = f.kv.strides[from];
    }
    f.kv = p;
    f.viewable = f.qv.strides[3] == 1 && f.kv.strides[3] == 1 && f.vv.strides[3] == 1 && (f.qv.copies || f.kv.copies || f.vv.copies);
  }
  if (f.viewable && f.q3 && f.k3 && f.v3 && f.mergeT) {
    // The standard 3-D form removes the head transposes too: views only where the 3-D tensors
    // themselves are copies (GPT-2's Split of the packed projection, ViT's unbinding).
    StridedView a3, b3, c3;
    f.viewable = (traceView(f.q3, a3) && a3.copies) || (traceView(f.k3, b3) && b3.copies) || (traceView(f.v3, c3) && c3.copies);
  }
  f.outViewable = f.viewable && traceOutputView(net, am.chain.pv->outputs[0], f.outChain, f.outZ, f.outStrides) &&
                  f.outStrides[3] == 1;
}

enum class AttentionForm { kViews, kFlat, kPlain };

bool formApplies(const AttentionMatch& am, const AttentionForms& f, AttentionForm form) {
  if (form == AttentionForm::kViews) return f.viewable;
  if (form == AttentionForm::kFlat) return f.q3 && f.k3 && f.v3 && f.mergeT && am.q->dims[1] > 0;
  return true;
}

//! The stored views of the view form (fused_attrs.h).
QkvViews viewsOf(const AttentionMatch& am, const AttentionForms& f, bool outView) {
  const Dims &qd = am.q->dims, &vd = am.v->dims;
  QkvViews w;
  w.b = qd[0], w.h = qd[1], w.sq = qd[2], w.skv = am.kDims[2], w.d = qd[3], w.dv = vd[3];
  auto viewOf = [](const StridedView& s) { return std::array<int64_t, 4>{s.offset, s.strides[0], s.strides[1], s.strides[2]}; };
  w.q = viewOf(f.qv), w.k = viewOf(f.kv), w.v = viewOf(f.vv);
  if (outView) {
    w.outView = true;
    w.o = {f.outStrides[0], f.outStrides[1], f.outStrides[2]};
    w.oDims = f.outZ->dims;
  }
  return w;
}

//! The Attention layer of one form, its output typed like the tensor it will replace (*out).
Layer* addAttentionLayer(Network& net, const AttentionMatch& am, const CanonicalMask& cm, const AttentionForms& f,
                         AttentionForm form, const Layer* sm, Tensor** out) {
  const bool merged = form == AttentionForm::kFlat, outView = form == AttentionForm::kViews && f.outViewable;
  Attributes a;
  a.set("scale", static_cast<float>(am.scale));
  if (cm.causal) a.set("is_causal", int64_t(1));
  Tensor* k = merged ? f.k3 : am.kRoot;
  if (form == AttentionForm::kPlain && am.kPerm != std::vector<int64_t>{0, 1, 2, 3}) {
    Attributes ta;
    ta.set("perm", am.kPerm);
    k = addTypedLayer(net, "Transpose", {am.kRoot}, ta, am.chain.qk->name + "_key", am.type, am.kDims);
  }
  std::vector<Tensor*> inputs{merged ? f.q3 : am.q, k, merged ? f.v3 : am.v};
  if (merged) {
    a.set("q_num_heads", am.q->dims[1]);
    a.set("kv_num_heads", am.q->dims[1]);
  } else if (form == AttentionForm::kViews) {
    inputs = {f.qv.base, f.kv.base, f.vv.base};
    setQkvViews(a, viewsOf(am, f, outView));
  }
  if (cm.mask) inputs.push_back(cm.mask);
  Layer* att = net.addLayer("Attention", inputs, 1, a, net.uniqueName(sm->name + "_attention"));
  for (auto it = am.chain.layers.rbegin(); it != am.chain.layers.rend(); ++it) recordFusion(att, *it);
  if (merged) {
    for (Layer* l : f.outIdentities) recordFusion(att, l);
    recordFusion(att, f.mergeT);
    recordFusion(att, f.mergeR);
  }
  if (outView)
    for (Layer* l : f.outChain) recordFusion(att, l);
  att->fusedOps.erase(att->fusedOps.begin());  // the synthetic Attention itself is not an original op
  *out = merged ? f.mergeR->outputs[0] : (outView ? f.outZ : am.chain.pv->outputs[0]);
  att->outputs[0]->type = (*out)->type;
  att->outputs[0]->dims = (*out)->dims;
  att->outputs[0]->dimsKnown = true;
  return att;
}

//! Points the readers of `out` at the Attention layer and removes the layers it absorbed.
void commitAttention(Network& net, const AttentionMatch& am, const AttentionForms& f, AttentionForm form, Layer* att,
                     Tensor* out) {
  net.replaceUses(out, att->outputs[0]);
  if (form == AttentionForm::kFlat) {
    net.removeLayer(f.mergeR);
    net.removeLayer(f.mergeT);
    for (auto it = f.outIdentities.rbegin(); it != f.outIdentities.rend(); ++it) net.removeLayer(*it);
  }
  if (form == AttentionForm::kViews && f.outViewable)
    for (auto it = f.outChain.rbegin(); it != f.outChain.rend(); ++it) net.removeLayer(*it);
  for (Layer* l : am.chain.layers) net.removeLayer(l);  // pv first: each output's only reader is gone
}

bool rewriteAttention(Network& net, const AttentionMatch& am, const CanonicalMask& cm, const AttentionForms& f, const Layer* sm,
                      const std::function<bool(const Layer&)>& supported) {
  for (AttentionForm form : {AttentionForm::kViews, AttentionForm::kFlat, AttentionForm::kPlain}) {
    if (!formApplies(am, f, form)) continue;
    Tensor* out = nullptr;
    Layer* att = addAttentionLayer(net, am, cm, f, form, sm, &out);
    if (supported && !supported(*att)) {  // no kernel for this form: try the next one
      net.removeLayer(att);
      continue;  // the mask/key layers made above are dead; removeDeadLayers drops them
    }
    commitAttention(net, am, f, form, att, out);
    return true;
  }
  return false;  // no kernel for any form: keep the unfused ops
}

bool fuseOne(Network& net, Layer* sm, const std::function<bool(const Layer&)>& supported) {
  AttentionMatch am;
  CanonicalMask cm;
  if (!matchAttention(net, sm, am) || !canonicalizeMasks(net, am, sm, cm)) return false;
  AttentionForms forms;
  findHeadForm(net, am, forms);  // the 3-D form first (no head transposes), then the views
  findViewForm(net, am, forms);
  return rewriteAttention(net, am, cm, forms, sm, supported);
}

}  // namespace

bool fuseAttention(Network& net, const std::function<bool(const Layer&)>& supported) {
  bool changed = false;
  for (size_t i = 0; i < net.layers().size(); ++i) {
    Layer* sm = net.layer(static_cast<int>(i));
    if (sm->op != "Softmax" || !fuseOne(net, sm, supported)) continue;
    net.topoSort();
    changed = true;
    i = 0;
  }
  // Scales and transposes that only fed the fused MatMuls, and helper layers of rejected fusions.
  net.removeDeadLayers();
  return changed;
}

}  // namespace kiln
