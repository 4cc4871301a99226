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
// returns the 3-D tensors (q_num_heads, kv_num_heads): the kernel reads the heads in place
// through strides, so the four head transposes (a copy each) disappear. K and V written out as
// transformers' repeat_kv (Expand of fewer heads) are read before it: GQA/MQA.
// Steps: fuse_attention_match.cpp (matcher), fuse_attention_masks.cpp (mask canonicalizer), this
// file (rewriter); fuse_attention_steps.h joins them.
#include <array>
#include <cmath>
#include <functional>
#include <optional>
#include <tuple>

#include "builder/passes/fuse_attention_steps.h"
#include "builder/passes/passes.h"
#include "builder/passes/view_exprs.h"
#include "builder/passes/view_trace.h"
#include "ops/attention_config.h"

namespace kiln {

namespace attention_fusion {

namespace {

TensorDesc ownDesc(const Tensor* t) {
  TensorDesc d;
  d.type = t->type;
  d.dims = t->dimsKnown || t->isConstant() ? t->dims : Dims{-1};  // unknown rank: not static
  if (t->isConstant()) d.value = t->value;
  return d;
}

}  // namespace

bool holdsAtEveryShape(const AttentionMatch& am, const Tensor* t, SampleDims& samples,
                       const std::function<bool(const DescOf& desc, const Dims& scores)>& check) {
  if (isStatic(am.scores) && t->dimsKnown && isStatic(t->dims)) return check(ownDesc, am.scores);
  SymbolicDims* sym = samples.sym();
  if (!sym || sym->nbSamples() < 2) return false;
  const Tensor* scores = am.chain.qk->outputs[0];
  for (size_t s = 0; s < sym->nbSamples(); ++s)
    if (!check([sym, s](const Tensor* x) { return sym->at(x, s); }, sym->at(scores, s).dims)) return false;
  return true;
}

Dims broadcastOf(const Dims& a, const Dims& b) {
  Dims r(std::max(a.size(), b.size()), 1);
  for (size_t k = 0; k < r.size(); ++k) {
    const int64_t x = k < a.size() ? a[a.size() - 1 - k] : 1, y = k < b.size() ? b[b.size() - 1 - k] : 1;
    r[r.size() - 1 - k] = x == 1 ? y : x;
  }
  return r;
}

}  // namespace attention_fusion

namespace {

using namespace attention_fusion;  // the pass's own steps

//! Whether dim ka of a and dim kb of b are the same dim: equal static values or, both unknown, equal
//! at every sample shape of the profiles (symbolic_dims.h); without samples (the pass run alone)
//! two unknown dims are trusted to be one. (Defensive: today a head split whose batch or sequence
//! dim is not the input's comes from a run-time Reshape target, which leaves the head dims unknown
//! too, so the forms that compare them are not reached.)
class DimCompare {
 public:
  explicit DimCompare(SampleDims& samples) : samples_(samples) {}
  bool same(const Tensor* a, size_t ka, const Tensor* b, size_t kb) {
    const int64_t x = a->dims[ka], y = b->dims[kb];
    if (x >= 0 || y >= 0 || samples_.empty()) return x == y;
    return samples_.sym()->sameDim(a, ka, b, kb);
  }

 private:
  SampleDims& samples_;
};

//! x3 when `t4` ([B, S, H, D], dims known) is Reshape(x3) with x3 = [B, S, H*D]; else nullptr.
Tensor* mergedOf(Tensor* t4, DimCompare& dims) {
  const Layer* r = t4 ? t4->producer : nullptr;
  if (!r || r->op != "Reshape" || r->inputs.empty() || !r->inputs[0] || !t4->dimsKnown || t4->dims.size() != 4) return nullptr;
  Tensor* x = r->inputs[0];
  const Dims &d = t4->dims, &xd = x->dims;
  if (!x->dimsKnown || xd.size() != 3 || d[2] <= 0 || d[3] <= 0 || xd[2] != d[2] * d[3]) return nullptr;
  return dims.same(x, 0, t4, 0) && dims.same(x, 1, t4, 1) && x->type == t4->type ? x : nullptr;
}

//! x3 when `t` ([B, H, S, D]) is Transpose(perm 0,2,1,3) of a head split of x3 ([B, S, H*D]), or
//! one head: t = [B, 1, S, D] an Unsqueeze / Reshape of x3 = [B, S, D] (MQA's K and V, GPTBigCode).
Tensor* headSplitOf(Tensor* t, DimCompare& dims) {
  const Layer* l = t ? t->producer : nullptr;
  if (l && (l->op == "Unsqueeze" || l->op == "Reshape") && !l->inputs.empty() && l->inputs[0] && t->dimsKnown && t->dims.size() == 4 &&
      t->dims[1] == 1) {
    Tensor* x = l->inputs[0];
    const bool one = x->dimsKnown && x->dims.size() == 3 && x->type == t->type && x->dims[2] == t->dims[3] && t->dims[3] > 0 &&
                     dims.same(x, 0, t, 0) && dims.same(x, 1, t, 2);
    return one ? x : nullptr;
  }
  if (!l || l->op != "Transpose" || l->inputs.empty() || l->attrs.getInts("perm", {}) != std::vector<int64_t>{0, 2, 1, 3}) return nullptr;
  return mergedOf(l->inputs[0], dims);
}

//! The layers merging heads back when y ([B, H, S, Dv]) is only read by Transpose(0,2,1,3)
//! whose output is only read by a Reshape to [B, S, H*Dv]; else {nullptr, nullptr}.
std::pair<Layer*, Layer*> headMergeOf(const Network& net, Tensor* y, std::vector<Layer*>* identities, DimCompare& dims) {
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
      !dims.same(o, 0, t->outputs[0], 0) || !dims.same(o, 1, t->outputs[0], 1))
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
  StridedView qv, kv, vv;  // at the first sample (their bases are the layer's inputs)
  std::vector<Layer*> outChain;
  Tensor* outZ = nullptr;
  // The views at each sample shape (one for a static attention) and, for a dynamic one, the
  // expressions that give them at any shape (ops/attention_views.h: kiln_view_exprs).
  std::vector<QkvViews> views;
  std::vector<int64_t> viewExprs;
};

void findHeadForm(const Network& net, const AttentionMatch& am, AttentionForms& f, SampleDims& samples) {
  DimCompare dims(samples);
  f.q3 = headSplitOf(am.q, dims);
  f.v3 = headSplitOf(am.v, dims);
  f.k3 = am.kPerm == std::vector<int64_t>{0, 2, 1, 3} ? mergedOf(am.kRoot, dims)
         : (am.kPerm == std::vector<int64_t>{0, 1, 2, 3} ? headSplitOf(am.kRoot, dims) : nullptr);
  std::tie(f.mergeT, f.mergeR) = headMergeOf(net, am.chain.pv->outputs[0], &f.outIdentities, dims);
}

bool knownStatic(const Tensor* t) { return t->dimsKnown && isStatic(t->dims); }

//! The dims the view traces run at: the tensors' own when the attention's are static, else each
//! sample shape of the dynamic network (symbolic_dims.h); empty when there are none.
std::vector<DimsOf> traceDims(const AttentionMatch& am, SymbolicDims* sym) {
  if (knownStatic(am.q) && knownStatic(am.kRoot) && knownStatic(am.v) && knownStatic(am.chain.pv->outputs[0])) return {staticDimsOf};
  std::vector<DimsOf> out;
  for (size_t s = 0; sym && sym->nbSamples() >= 2 && s < sym->nbSamples(); ++s)
    out.push_back([sym, s](const Tensor* t) -> const Dims* { return &sym->at(t, s).dims; });
  return out;
}

//! Q, K (permuted to [B, H, S, D]) and V as views at one set of dims.
bool traceQkv(const AttentionMatch& am, const DimsOf& dims, StridedView& q, StridedView& k, StridedView& v) {
  if (!traceView(am.q, q, dims) || !traceView(am.kRoot, k, dims) || !traceView(am.v, v, dims)) return false;
  if (q.base->type != am.type || k.base->type != am.type || v.base->type != am.type) return false;
  StridedView p = k;
  for (size_t i = 0; i < 4; ++i) {
    const size_t from = static_cast<size_t>(am.kPerm[i]);
    p.sizes[i] = k.sizes[from], p.strides[i] = k.strides[from];
  }
  k = p;
  return true;
}

//! The stored views at one set of dims (the output view when `outStrides` is given).
QkvViews viewsAt(const AttentionMatch& am, const DimsOf& dims, const StridedView& qv, const StridedView& kv, const StridedView& vv,
                 const Tensor* outZ, const std::vector<int64_t>* outStrides) {
  const Dims &qd = *dims(am.q), &vd = *dims(am.v);
  QkvViews w;
  w.b = qd[0], w.h = qd[1], w.sq = qd[2], w.skv = kv.sizes[2], w.d = qd[3], w.dv = vd[3];
  auto viewOf = [](const StridedView& s) { return std::array<int64_t, 4>{s.offset, s.strides[0], s.strides[1], s.strides[2]}; };
  w.q = viewOf(qv), w.k = viewOf(kv), w.v = viewOf(vv);
  if (outStrides) {
    w.outView = true;
    w.o = {(*outStrides)[0], (*outStrides)[1], (*outStrides)[2]};
    w.oDims = *dims(outZ);
  }
  return w;
}

//! Traces the view form at every sample (may move a Transpose below a packed projection first, so
//! the views absorb it); views are taken only where they remove a copy the 3-D form would not.
void findViewForm(Network& net, const AttentionMatch& am, AttentionForms& f, SampleDims& samples) {
  if (am.kDims[1] > 0 && am.q->dims[1] > 0 && am.kDims[1] != am.q->dims[1]) return;  // GQA: the views have one head count
  std::vector<DimsOf> dims = traceDims(am, samples.sym());
  std::vector<std::array<StridedView, 3>> at;
  auto traceAll = [&] {
    at.assign(dims.size(), {});
    for (size_t s = 0; s < dims.size(); ++s) {
      if (!traceQkv(am, dims[s], at[s][0], at[s][1], at[s][2])) return false;
      for (size_t i = 0; i < 3; ++i)
        if (at[s][i].base != at[0][i].base) return false;
    }
    if (dims.empty()) return false;
    f.qv = at[0][0], f.kv = at[0][1], f.vv = at[0][2];
    return true;
  };
  f.viewable = traceAll();
  if (f.viewable && f.qv.base == f.kv.base && f.kv.base == f.vv.base && sinkTransposeBelowProjection(net, f.qv.base)) {
    samples.reset();  // the network changed: the sample dims are worked out afresh
    f.viewable = traceAll();
  }
  for (size_t s = 0; f.viewable && s < dims.size(); ++s) {
    const auto& [q, k, v] = at[s];
    f.viewable = q.strides[3] == 1 && k.strides[3] == 1 && v.strides[3] == 1 && q.sizes[1] == k.sizes[1] &&
                 q.sizes[1] == v.sizes[1];  // GQA: the views have one head count
  }
  f.viewable = f.viewable && (f.qv.copies || f.kv.copies || f.vv.copies);
  if (f.viewable && f.q3 && f.k3 && f.v3 && f.mergeT) {
    // The standard 3-D form removes the head transposes too: views only where the 3-D tensors
    // themselves are copies (GPT-2's Split of the packed projection, ViT's unbinding).
    StridedView a3, b3, c3;
    f.viewable = (traceView(f.q3, a3, dims[0]) && a3.copies) || (traceView(f.k3, b3, dims[0]) && b3.copies) ||
                 (traceView(f.v3, c3, dims[0]) && c3.copies);
  }
  if (!f.viewable) return;
  // The write through the data movement after Y: the same layers at every sample.
  std::vector<std::vector<int64_t>> outStrides(dims.size());
  f.outViewable = true;
  for (size_t s = 0; f.outViewable && s < dims.size(); ++s) {
    std::vector<Layer*> chain;
    Tensor* z = nullptr;
    f.outViewable = traceOutputView(net, am.chain.pv->outputs[0], chain, z, outStrides[s], dims[s]) && outStrides[s][3] == 1 &&
                    (s == 0 || (chain == f.outChain && z == f.outZ));
    if (s == 0) f.outChain = chain, f.outZ = z;
  }
  f.views.clear();
  std::vector<std::array<Dims, 4>> refs;
  for (size_t s = 0; s < dims.size(); ++s) {
    const auto& [q, k, v] = at[s];
    f.views.push_back(viewsAt(am, dims[s], q, k, v, f.outZ, f.outViewable ? &outStrides[s] : nullptr));
    refs.push_back({*dims[s](q.base), *dims[s](k.base), *dims[s](v.base), f.outViewable ? *dims[s](f.outZ) : Dims{}});
  }
  f.viewExprs.clear();
  if (dims.size() > 1) f.viewable = fitViewExprs(f.views, refs, f.viewExprs);
}

enum class AttentionForm { kViews, kFlat, kPlain };

bool formApplies(const AttentionMatch& am, const AttentionForms& f, AttentionForm form) {
  if (form == AttentionForm::kViews) return f.viewable;
  if (form == AttentionForm::kFlat) return f.q3 && f.k3 && f.v3 && f.mergeT && am.q->dims[1] > 0;
  return true;
}

//! The Attention layer of one form, its output typed like the tensor it will replace (*out).
Layer* addAttentionLayer(Network& net, const AttentionMatch& am, const CanonicalMask& cm, const AttentionForms& f,
                         AttentionForm form, const Layer* sm, Tensor** out) {
  const bool merged = form == AttentionForm::kFlat, outView = form == AttentionForm::kViews && f.outViewable;
  Attributes a;
  a.set("scale", static_cast<float>(am.scale));
  if (am.chain.softcap > 0) a.set("softcap", static_cast<float>(am.chain.softcap));
  if (cm.causal) a.set("is_causal", int64_t(1));
  if (std::isfinite(cm.maskFill)) a.set(kAttentionMaskFillAttr, static_cast<float>(cm.maskFill));
  if (cm.bias) a.set(kAttentionMaskBiasAttr, int64_t(1));
  if (cm.period > 0) a.set(kAttentionMaskPeriodAttr, cm.period);
  Tensor* k = merged ? f.k3 : am.kRoot;
  if (form == AttentionForm::kPlain && am.kPerm != std::vector<int64_t>{0, 1, 2, 3}) {
    Attributes ta;
    ta.set("perm", am.kPerm);
    k = addTypedLayer(net, "Transpose", {am.kRoot}, ta, am.chain.qk->name + "_key", am.type, am.kDims);
  }
  std::vector<Tensor*> inputs{merged ? f.q3 : am.q, k, merged ? f.v3 : am.v};
  if (merged) {
    a.set("q_num_heads", am.q->dims[1]);
    a.set("kv_num_heads", am.kDims[1]);
  } else if (form == AttentionForm::kViews) {
    inputs = {f.qv.base, f.kv.base, f.vv.base};
    QkvViews w = f.views[0];
    if (!outView) w.outView = false, w.oDims.clear();
    if (f.viewExprs.empty()) {
      setQkvViews(a, w);
    } else {  // dynamic shapes: the values resolve from the input dims at run time
      std::vector<int64_t> e = f.viewExprs;
      if (!outView) e.resize(viewValues(w).size() * kViewExprInts);
      setQkvViews(a, constantViewValues(w, e));
      setQkvViewExprs(a, e);
    }
  }
  if (cm.mask) inputs.push_back(cm.mask);
  Layer* att = net.addLayer("Attention", inputs, 1, a, net.uniqueName(sm->name + "_attention"));
  std::vector<const Layer*> originals(am.chain.layers.rbegin(), am.chain.layers.rend());
  if (merged) {
    originals.insert(originals.end(), f.outIdentities.begin(), f.outIdentities.end());
    originals.push_back(f.mergeT);
    originals.push_back(f.mergeR);
  }
  if (outView) originals.insert(originals.end(), f.outChain.begin(), f.outChain.end());
  recordStandIn(att, originals);
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

bool fuseOne(Network& net, Layer* sm, const std::function<bool(const Layer&)>& supported, SampleDims& samples) {
  AttentionMatch am;
  CanonicalMask cm;
  if (!matchAttention(net, sm, am, samples)) return false;
  if (Tensor* hs = am.chain.headScale) {  // scores * c[h] = (Q * c[h]) K^T: Q scaled per head first
    if (am.q->dims[1] != hs->value.count()) return false;
    Tensor* c = net.addConstant(net.uniqueName(hs->name + "_per_head"), hs->value.reshaped({1, am.q->dims[1], 1, 1}));
    am.q = addTypedLayer(net, "Mul", {am.q, c}, {},
                         am.chain.qk->name + "_head_scaled_query", am.type, am.q->dims);
  }
  if (!canonicalizeMasks(net, am, sm, cm, samples)) return false;
  if (cm.period == 0) compactKeyPaddingMask(net, am, cm, samples);  // dense runtime mask -> is_causal + key flags, when provable
  if (const double c = am.chain.clampFloor; c != 0 && cm.mask && static_cast<float>(cm.maskFill) != static_cast<float>(c))
    return false;  // a fully masked row would differ (ScoreChain::clampFloor); the helper layers made are dead
  cm.bias = maskIsBoundedBias(am, cm, samples);  // a runtime bias cuDNN's SDPA may take
  AttentionForms forms;
  findHeadForm(net, am, forms, samples);  // the 3-D form first (no head transposes), then the views
  findViewForm(net, am, forms, samples);
  return rewriteAttention(net, am, cm, forms, sm, supported);
}

}  // namespace

bool fuseAttention(Network& net, const std::function<bool(const Layer&)>& supported, const InputSamples& samples) {
  SampleDims dims(samples);
  bool changed = false;
  for (size_t i = 0; i < net.layers().size(); ++i) {
    Layer* sm = net.layer(static_cast<int>(i));
    if (sm->op != "Softmax" || !fuseOne(net, sm, supported, dims)) continue;
    net.topoSort();
    changed = true;
    i = 0;
  }
  // Scales and transposes that only fed the fused MatMuls, and helper layers of rejected fusions.
  net.removeDeadLayers();
  return changed;
}

}  // namespace kiln