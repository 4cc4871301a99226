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
#include <cmath>
#include <functional>
#include <limits>

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

//! One matched attention subgraph.
struct Match {
  Layer *qk = nullptr, *softmax = nullptr, *pv = nullptr;
  std::vector<Layer*> chain;  // qk .. pv, all removed
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
bool matchScores(const Network& net, Layer* sm, Match& m) {
  m.softmax = sm;
  auto [where, isnan] = nanGuard(net, sm);
  Tensor* probs = where ? where->outputs[0] : sm->outputs[0];
  Layer* pv = soleConsumer(net, probs);
  if (!pv || pv->op != "MatMul" || pv->inputs.size() != 2 || pv->inputs[0] != probs) return false;
  m.pv = pv;
  m.chain = {pv};
  if (where) m.chain.insert(m.chain.end(), {where, isnan});
  m.chain.push_back(sm);
  Tensor* t = sm->inputs[0];
  Layer* next = sm;
  bool seenScale = false;
  for (;;) {
    Layer* l = t->producer;
    if (!l || soleConsumer(net, t) != next) return false;
    double f = 1;
    if (l->op == "MatMul" && l->inputs.size() == 2) {
      m.qk = l;
      m.chain.push_back(l);
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
    m.chain.push_back(l);
    next = l;
  }
}

bool fuseOne(Network& net, Layer* sm, const std::function<bool(const Layer&)>& supported) {
  const Tensor* x = sm->inputs.empty() ? nullptr : sm->inputs[0];
  if (!x || !x->dimsKnown || x->dims.size() != 4 || !computeType(x->type)) return false;
  const int64_t axis = sm->attrs.getInt("axis", -1);
  if (axis != -1 && axis != 3) return false;
  Match m;
  if (!matchScores(net, sm, m)) return false;
  const DataType type = x->type;
  const Dims scores = m.qk->outputs[0]->dims;  // [B, H, Sq, Skv]
  double scale = m.scale;
  Tensor* q = throughIdentity(peelScales(m.qk->inputs[0], &scale));
  std::vector<int64_t> perm;
  Tensor* kRoot = peelKeyTranspose(m.qk->inputs[1], &scale, &perm);
  Tensor* v = throughIdentity(m.pv->inputs[1]);
  for (const Tensor* t : {q, kRoot, v})
    if (!t || !t->dimsKnown || t->dims.size() != 4 || t->type != type) return false;
  if (!(scale > 0) || !std::isfinite(scale)) return false;
  // K = transpose(kRoot, kPerm) with K dim i = K^T dim swap(i).
  const std::vector<int64_t> kPerm{perm[0], perm[1], perm[3], perm[2]};
  Dims kDims(4);
  for (int i = 0; i < 4; ++i) kDims[i] = kRoot->dims[static_cast<size_t>(kPerm[i])];
  const Dims &qd = q->dims, &vd = v->dims;
  // Equal batch and head counts (no MatMul broadcasting), matching sequence and head sizes.
  for (int i = 0; i < 2; ++i)
    if (!sameDim(qd[i], kDims[i]) || !sameDim(qd[i], vd[i]) || !sameDim(qd[i], scores[i])) return false;
  if (!sameDim(qd[3], kDims[3]) || !sameDim(kDims[2], vd[2]) || !sameDim(scores[2], qd[2]) || !sameDim(scores[3], kDims[2]))
    return false;
  if (!computeType(type)) return false;
  // Masks: additive tensors of the scores' type; constant exact-causal ones become is_causal, and
  // constant all-zero ones are dropped (PyTorch's dynamo export of BERT called without an
  // attention_mask folds to Where(all true, 0, -FLT_MAX) = zeros [B, 1, S, S]: kept, it would cost
  // a B*S*S read per attention and rule out cuDNN's SDPA, which runs only without a mask).
  bool causal = false;
  const int64_t sq = scores[2], skv = scores[3];
  auto causalShape = [&](const Tensor* t) {
    return t->isConstant() && sq > 0 && skv > 0 && t->value.dims().size() >= 2 && t->value.dims()[t->value.dims().size() - 2] == sq &&
           t->value.dims().back() == skv;
  };
  std::vector<Tensor*> masks;
  for (Tensor* mk : m.masks) {
    if (!mk || mk->type != type || !mk->dimsKnown || !broadcastsTo(mk->dims, scores)) return false;
    if (allZero(mk)) continue;
    if (!causal && causalShape(mk) &&
        everyElement(mk, [](double val, int64_t i, int64_t j) { return j <= i ? val == 0 : val <= kVeryNegative; })) {
      causal = true;
      continue;
    }
    masks.push_back(mk);
  }
  Tensor* whereMask = nullptr;
  if (m.where) {
    Tensor* cond = m.where->inputs[0];
    if (!cond->dimsKnown || !broadcastsTo(cond->dims, scores)) return false;
    const bool keep = m.whereKeepsTrue;
    const double fill = m.whereFill;
    auto kept = [keep](double c) { return (c != 0) == keep; };
    bool keepsAll = cond->isConstant();
    for (int64_t i = 0; keepsAll && i < cond->value.count(); ++i) keepsAll = kept(cond->value.getDouble(i));
    if (keepsAll) {
      // masks nothing
    } else if (!causal && causalShape(cond) && everyElement(cond, [&](double c, int64_t i, int64_t j) { return kept(c) == (j <= i); })) {
      causal = true;
    } else if (cond->isConstant()) {
      // A constant mask: fine unless a query row masks every key while the fill is finite and
      // not absorbing (then the original softmax is uniform over the raw scores).
      const HostTensor& cv = cond->value;
      const int64_t cols = cv.dims().back();
      bool fullRow = false;
      for (int64_t r = 0; cols > 0 && r < cv.count() / cols; ++r) {
        bool any = false;
        for (int64_t j = 0; j < cols && !any; ++j) any = kept(cv.getDouble(r * cols + j));
        fullRow = fullRow || !any;
      }
      if (fullRow && fill > kAbsorbing) return false;
      std::vector<double> vals(static_cast<size_t>(cv.count()));
      for (int64_t i = 0; i < cv.count(); ++i) vals[static_cast<size_t>(i)] = kept(cv.getDouble(i)) ? 0.0 : fill;
      whereMask = net.addConstant(net.uniqueName(m.where->name + "_mask"), typedTensor(type, cv.dims(), vals));
    } else {
      if (fill > kAbsorbing) return false;  // a fully masked row cannot be ruled out
      Tensor* zero = net.addConstant(net.uniqueName(m.where->name + "_zero"), typedTensor(type, {}, {0.0}));
      Tensor* fillT = net.addConstant(net.uniqueName(m.where->name + "_fill"), typedTensor(type, {}, {fill}));
      whereMask = addTypedLayer(net, "Where", {cond, keep ? zero : fillT, keep ? fillT : zero}, {}, m.where->name + "_mask", type,
                                cond->dims);
    }
  }
  if (whereMask) masks.insert(masks.begin(), whereMask);
  Tensor* mask = masks.empty() ? nullptr : masks[0];
  for (size_t i = 1; i < masks.size(); ++i)
    mask = addTypedLayer(net, "Add", {mask, masks[i]}, {}, sm->name + "_mask_sum", type, broadcastDims(mask->dims, masks[i]->dims));

  Attributes a;
  a.set("scale", static_cast<float>(scale));
  if (causal) a.set("is_causal", int64_t(1));
  Tensor* y = m.pv->outputs[0];
  // The 3-D form first (no head transposes), then the 4-D one.
  Tensor *q3 = headSplitOf(q), *v3 = headSplitOf(v);
  Tensor* k3 = kPerm == std::vector<int64_t>{0, 2, 1, 3} ? mergedOf(kRoot)
               : (kPerm == std::vector<int64_t>{0, 1, 2, 3} ? headSplitOf(kRoot) : nullptr);
  std::vector<Layer*> outIdentities;  // identity layers between Y and the head merge
  auto [mergeT, mergeR] = headMergeOf(net, y, &outIdentities);
  // Strided views of the buffers the head-splitting data movement started from (ops/attention_views.h).
  StridedView qv, kv, vv;
  auto traceAll = [&] {
    return traceView(q, qv) && traceView(kRoot, kv) && traceView(v, vv) && qv.base->type == type && kv.base->type == type &&
           vv.base->type == type;
  };
  bool viewable = traceAll();
  if (viewable && qv.base == kv.base && kv.base == vv.base && sinkTransposeBelowProjection(net, qv.base)) viewable = traceAll();
  if (viewable) {  // K = transpose(kRoot, kPerm)
    StridedView p = kv;
    for (size_t i = 0; i < 4; ++i) p.sizes[i] = kv.sizes[static_cast<size_t>(kPerm[i])], p.strides[i] = kv.strides[static_cast<size_t>(kPerm[i])];
    kv = p;
    viewable = qv.strides[3] == 1 && kv.strides[3] == 1 && vv.strides[3] == 1 && (qv.copies || kv.copies || vv.copies);
  }
  if (viewable && q3 && k3 && v3 && mergeT) {
    // The standard 3-D form removes the head transposes too: views only where the 3-D tensors
    // themselves are copies (GPT-2's Split of the packed projection, ViT's unbinding).
    StridedView a3, b3, c3;
    const bool copied3d = (traceView(q3, a3) && a3.copies) || (traceView(k3, b3) && b3.copies) || (traceView(v3, c3) && c3.copies);
    viewable = copied3d;
  }
  // The output side of the view form: the data movement after the attention becomes its write.
  std::vector<Layer*> outChain;
  Tensor* outZ = nullptr;
  std::vector<int64_t> outStrides;
  const bool outViewable = viewable && traceOutputView(net, y, outChain, outZ, outStrides) && outStrides[3] == 1;
  enum Form { kViews, kFlat, kPlain };
  for (Form form : {kViews, kFlat, kPlain}) {
    if (form == kViews && !viewable) continue;
    if (form == kFlat && !(q3 && k3 && v3 && mergeT && qd[1] > 0)) continue;
    const bool merged = form == kFlat;
    const bool outView = form == kViews && outViewable;
    Tensor* k = form == kFlat ? k3 : kRoot;
    if (form == kPlain && kPerm != std::vector<int64_t>{0, 1, 2, 3}) {
      Attributes ta;
      ta.set("perm", kPerm);
      k = addTypedLayer(net, "Transpose", {kRoot}, ta, m.qk->name + "_key", type, kDims);
    }
    Attributes la = a;
    std::vector<Tensor*> inputs{form == kFlat ? q3 : q, k, form == kFlat ? v3 : v};
    if (form == kFlat) {
      la.set("q_num_heads", qd[1]);
      la.set("kv_num_heads", qd[1]);
    } else if (form == kViews) {
      inputs = {qv.base, kv.base, vv.base};
      la.set("kiln_view_dims", std::vector<int64_t>{qd[0], qd[1], qd[2], kDims[2], qd[3], vd[3]});
      auto viewAttr = [](const StridedView& w) { return std::vector<int64_t>{w.offset, w.strides[0], w.strides[1], w.strides[2]}; };
      la.set("kiln_q_view", viewAttr(qv));
      la.set("kiln_k_view", viewAttr(kv));
      la.set("kiln_v_view", viewAttr(vv));
      if (outView) {
        la.set("kiln_o_view", std::vector<int64_t>{outStrides[0], outStrides[1], outStrides[2]});
        la.set("kiln_o_dims", std::vector<int64_t>(outZ->dims.begin(), outZ->dims.end()));
      }
    }
    if (mask) inputs.push_back(mask);
    Layer* att = net.addLayer("Attention", inputs, 1, la, net.uniqueName(sm->name + "_attention"));
    for (auto it = m.chain.rbegin(); it != m.chain.rend(); ++it) recordFusion(att, *it);
    if (merged) {
      for (Layer* l : outIdentities) recordFusion(att, l);
      recordFusion(att, mergeT);
      recordFusion(att, mergeR);
    }
    if (outView)
      for (Layer* l : outChain) recordFusion(att, l);
    att->fusedOps.erase(att->fusedOps.begin());  // the synthetic Attention itself is not an original op
    Tensor* out = merged ? mergeR->outputs[0] : (outView ? outZ : y);
    att->outputs[0]->type = out->type;
    att->outputs[0]->dims = out->dims;
    att->outputs[0]->dimsKnown = true;
    if (supported && !supported(*att)) {  // no kernel for this form: try the next one
      net.removeLayer(att);
      continue;  // the mask/key layers made above are dead; removeDeadLayers drops them
    }
    net.replaceUses(out, att->outputs[0]);
    if (merged) {
      net.removeLayer(mergeR);
      net.removeLayer(mergeT);
      for (auto it = outIdentities.rbegin(); it != outIdentities.rend(); ++it) net.removeLayer(*it);
    }
    if (outView)
      for (auto it = outChain.rbegin(); it != outChain.rend(); ++it) net.removeLayer(*it);
    for (Layer* l : m.chain) net.removeLayer(l);  // pv first: each output's only reader is gone
    return true;
  }
  return false;  // no kernel for either form: keep the unfused ops
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
