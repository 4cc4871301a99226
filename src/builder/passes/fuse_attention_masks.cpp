// Attention fusion, step 2: the mask canonicalizer (fuse_attention_steps.h). The additive masks
// and the Where of the score chain become one additive mask and is_causal; constant masks that
// mask nothing are dropped. A mask that is a constant up to broadcasting (Expand of a constant,
// and Where / Cast over one) counts as that smaller constant: above the builder's fold limit
// transformers' causal masks stay such layers (GPT-2 at batch 32: Expand to [32, 1, 512, 512]).
#include <algorithm>
#include <cstring>
#include <limits>

#include <optional>

#include "builder/passes/fuse_attention_steps.h"
#include "builder/passes/passes.h"
#include "core/type_dispatch.h"

namespace kiln::attention_fusion {

namespace {

// Fill values at or below this absorb any finite logit (x + c == c in float and half).
constexpr double kAbsorbing = -1e30;

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

//! For a [.., Sq, Skv] value: whether pred(value, i, j) holds for every element of every
//! [Sq, Skv] slice. Leading dims may exceed 1: exporters expand a causal mask to the batch
//! (transformers 5.17's GPT-2 at batch 8: [8, 1, S, S], folded to a constant).
template <typename Pred>
bool everyElement(const HostTensor& v, Pred pred) {
  const Dims& d = v.dims();
  if (d.size() < 2) return false;
  const int64_t rows = d[d.size() - 2], cols = d.back();
  const int64_t slice = rows * cols;
  if (slice <= 0) return false;
  for (int64_t base = 0; base < v.count(); base += slice)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        if (!pred(v.getDouble(base + i * cols + j), i, j)) return false;
  return true;
}

//! Every element is zero (an additive mask that masks nothing).
bool allZero(const HostTensor& v) {
  for (int64_t i = 0; i < v.count(); ++i)
    if (v.getDouble(i) != 0) return false;
  return true;
}

//! `v` as a tensor of type `t` (a float type or bool; invalid for others).
HostTensor typedTensor(DataType t, const Dims& d, const std::vector<double>& v) {
  if (t != DataType::kBOOL && !isFloatType(t)) return HostTensor();
  HostTensor h(t, d);
  for (size_t i = 0; i < v.size(); ++i) {
    const float f = static_cast<float>(v[i]);
    if (t == DataType::kBOOL) h.as<uint8_t>()[i] = v[i] != 0;
    else if (t == DataType::kFLOAT) h.as<float>()[i] = f;
    else if (t == DataType::kHALF) h.as<uint16_t>()[i] = floatToHalf(f);
    else h.as<uint16_t>()[i] = floatToBf16(f);
  }
  return h;
}

//! The value of `t` when it is a constant up to broadcasting, at that constant's own (smaller)
//! dims; invalid otherwise. Followed: identity layers and Expand (they only repeat values along
//! broadcast dims, which the attention broadcasts anyway), Cast, and Where(c, a, b) with scalar
//! constants a and b. Masks are small graphs: the walk stops after a few layers.
HostTensor broadcastSource(const Tensor* t, int depth = 0) {
  if (!t) return HostTensor();
  if (t->isConstant()) return t->value;
  const Layer* l = t->producer;
  if (!l || depth > 8 || l->inputs.empty() || !l->inputs[0] || l->outputs.size() != 1) return HostTensor();
  if (isIdentityLayer(l) || (l->op == "Expand" && l->inputs.size() == 2)) return broadcastSource(l->inputs[0], depth + 1);
  double a = 0, b = 0;
  const bool where = l->op == "Where" && l->inputs.size() == 3 && scalarValue(l->inputs[1], &a) && scalarValue(l->inputs[2], &b);
  if (!where && l->op != "Cast") return HostTensor();
  const HostTensor x = broadcastSource(l->inputs[0], depth + 1);
  if (!x.valid()) return HostTensor();
  std::vector<double> v(static_cast<size_t>(x.count()));
  for (int64_t i = 0; i < x.count(); ++i) v[static_cast<size_t>(i)] = where ? (x.getDouble(i) != 0 ? a : b) : x.getDouble(i);
  return typedTensor(t->type, x.dims(), v);
}

//! `t`'s broadcast source (see broadcastSource) when it broadcasts to the scores too.
HostTensor maskSource(const Tensor* t, const Dims& scores) {
  HostTensor v = broadcastSource(t);
  return v.valid() && broadcastsTo(v.dims(), scores) ? v : HostTensor();
}

//! A value whose last two dims are the scores' [Sq, Skv] (a candidate causal mask).
bool causalShaped(const HostTensor& v, const Dims& scores) {
  const int64_t sq = scores[2], skv = scores[3];
  const Dims& d = v.dims();
  return sq > 0 && skv > 0 && d.size() >= 2 && d[d.size() - 2] == sq && d.back() == skv;
}

//! `m` broadcasts to the scores: by its static dims, or, for a dynamic network whose static dims
//! cannot tell (a mask Expand-ed to a shape computed from Shape ops), at every sample shape.
bool maskBroadcasts(const Tensor* m, const AttentionMatch& am, SymbolicDims* sym) {
  if (m->dimsKnown && broadcastsTo(m->dims, am.scores)) return true;
  if (!sym || sym->nbSamples() < 2) return false;
  const Tensor* scores = am.chain.qk->outputs[0];
  for (size_t s = 0; s < sym->nbSamples(); ++s) {
    const Dims &md = sym->at(m, s).dims, &sd = sym->at(scores, s).dims;
    if (!isStatic(md) || !isStatic(sd) || sd.size() != 4 || !broadcastsTo(md, sd)) return false;
  }
  return true;
}

//! `v` at the smallest dims it broadcasts from: an axis (but the last) whose slices are all equal
//! becomes 1. A mask folded at a fixed shape is often expanded to the batch (an SDPA-path T5
//! export: Where(all-true [B, 1, S, S], position bias [1, H, S, S], min) folds to [B, H, S, S]).
HostTensor broadcastReduced(const HostTensor& v) {
  if (!v.valid() || v.dims().size() < 2) return v;
  HostTensor r = v;
  const size_t es = elementSize(v.type());
  for (size_t k = 0; k + 1 < r.dims().size(); ++k) {
    const Dims& d = r.dims();
    if (d[k] <= 1) continue;
    int64_t outer = 1, inner = 1;
    for (size_t i = 0; i < k; ++i) outer *= d[i];
    for (size_t i = k + 1; i < d.size(); ++i) inner *= d[i];
    const auto* b = static_cast<const uint8_t*>(r.data());
    const size_t row = static_cast<size_t>(inner) * es;
    bool equal = true;
    for (int64_t o = 0; equal && o < outer; ++o)
      for (int64_t j = 1; equal && j < d[k]; ++j)
        equal = std::memcmp(b + (o * d[k] + j) * row, b + o * d[k] * row, row) == 0;
    if (!equal) continue;
    Dims nd = d;
    nd[k] = 1;
    HostTensor x(r.type(), nd);
    for (int64_t o = 0; o < outer; ++o) std::memcpy(static_cast<uint8_t*>(x.data()) + o * row, b + o * d[k] * row, row);
    r = x;
  }
  return r;
}

//! A constant mask that is a bias plus the causal pattern (every element above the diagonal
//! <= kVeryNegative, and each row's largest element on or below it >= kRowOpen, so those above add
//! exactly 0 to the softmax): the bias alone (zeros above the diagonal), to go with is_causal,
//! which lets the kernels skip the tiles above it. T5's decoder folded at a fixed shape: relative
//! position bias + causal mask. Invalid otherwise.
constexpr double kRowOpen = -1e3;
HostTensor causalPart(const HostTensor& v) {
  const Dims& d = v.dims();
  const int64_t rows = d[d.size() - 2], cols = d.back();
  std::vector<double> vals(static_cast<size_t>(v.count()));
  for (int64_t base = 0; base < v.count(); base += rows * cols)
    for (int64_t i = 0; i < rows; ++i) {
      double rowMax = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < cols; ++j) {
        const int64_t x = base + i * cols + j;
        const double e = v.getDouble(x);
        if (j > i && !(e <= kVeryNegative)) return HostTensor();
        if (j <= i) rowMax = std::max(rowMax, e);
        vals[static_cast<size_t>(x)] = j > i ? 0.0 : e;
      }
      if (!(rowMax >= kRowOpen)) return HostTensor();
    }
  return typedTensor(v.type(), d, vals);
}

//! An additive mask the layer keeps, with its broadcast source when it has one (then the
//! smaller constant replaces the mask's own layers).
struct KeptMask {
  Tensor* t;
  HostTensor source;
};

//! Additive masks of the scores' type: (broadcast-)constant exact-causal ones become is_causal,
//! and all-zero ones are dropped (PyTorch's dynamo export of BERT called without an
//! attention_mask folds to Where(all true, 0, -FLT_MAX) = zeros [B, 1, S, S]: kept, it would cost
//! a B*S*S read per attention and rule out cuDNN's SDPA without a mask).
bool keepAdditiveMasks(const AttentionMatch& am, CanonicalMask& cm, std::vector<KeptMask>& kept, SymbolicDims* sym) {
  for (Tensor* mk : am.chain.masks) {
    if (!mk || mk->type != am.type || !mk->dimsKnown || !maskBroadcasts(mk, am, sym)) return false;
    HostTensor v = maskSource(mk, am.scores);
    if (v.valid() && allZero(v)) continue;
    if (v.valid() && !cm.causal && causalShaped(v, am.scores) &&
        everyElement(v, [](double val, int64_t i, int64_t j) { return j <= i ? val == 0 : val <= kVeryNegative; })) {
      cm.causal = true;
      continue;
    }
    bool changed = false;
    if (v.valid() && !cm.causal && causalShaped(v, am.scores)) {
      HostTensor lower = causalPart(v);
      if (lower.valid()) cm.causal = changed = true, v = lower;
    }
    HostTensor source = broadcastReduced(v);
    const bool useSource = source.valid() && (!mk->isConstant() || changed || source.dims() != mk->dims);
    kept.push_back({mk, useSource ? source : HostTensor()});
  }
  return true;
}

//! The constant `source` of runtime mask `t`, made once per network (the exporters compute one
//! mask and add it in every layer): an earlier one of the same name and contents is reused.
Tensor* sourceConstant(Network& net, const Tensor* t, const HostTensor& source) {
  const std::string name = t->name + "_broadcast_source";
  Tensor* c = net.findTensor(name);
  if (c && c->isConstant() && c->type == source.type() && c->dims == source.dims() && c->value.bytes() == source.bytes() &&
      std::memcmp(c->value.data(), source.data(), source.bytes()) == 0)
    return c;
  return net.addConstant(c ? net.uniqueName(name) : name, source);
}

bool keptBy(double cond, bool keepsTrue) { return (cond != 0) == keepsTrue; }

//! A constant Where condition `cv` as a constant additive mask; false when a query row masks
//! every key while the fill is finite and not absorbing (then the original softmax is uniform
//! over the raw scores, which the kernels do not compute).
bool constantWhereMask(Network& net, const AttentionMatch& am, const HostTensor& cv, Tensor** mask) {
  const Layer* where = am.chain.where;
  const bool keep = am.chain.whereKeepsTrue;
  const int64_t cols = cv.dims().empty() ? 1 : cv.dims().back();
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
//! masks nothing or is causal, which sets cm.causal); false when it cannot be taken. A condition
//! that is a constant up to broadcasting is read as that constant.
bool whereAsMask(Network& net, const AttentionMatch& am, CanonicalMask& cm, Tensor** mask, SymbolicDims* sym) {
  const Layer* where = am.chain.where;
  if (!where) return true;
  Tensor* cond = where->inputs[0];
  if (!cond->dimsKnown || !maskBroadcasts(cond, am, sym)) return false;
  const bool keep = am.chain.whereKeepsTrue;
  const HostTensor cv = maskSource(cond, am.scores);
  bool keepsAll = cv.valid();
  for (int64_t i = 0; keepsAll && i < cv.count(); ++i) keepsAll = keptBy(cv.getDouble(i), keep);
  if (keepsAll) return true;  // masks nothing
  if (cv.valid() && !cm.causal && causalShaped(cv, am.scores) &&
      everyElement(cv, [&](double c, int64_t i, int64_t j) { return keptBy(c, keep) == (j <= i); })) {
    cm.causal = true;
    return true;
  }
  if (cv.valid()) return constantWhereMask(net, am, cv, mask);
  if (am.chain.whereFill > kAbsorbing) return false;  // a fully masked row cannot be ruled out
  Tensor* zero = net.addConstant(net.uniqueName(where->name + "_zero"), typedTensor(am.type, {}, {0.0}));
  Tensor* fillT = net.addConstant(net.uniqueName(where->name + "_fill"), typedTensor(am.type, {}, {am.chain.whereFill}));
  *mask = addTypedLayer(net, "Where", {cond, keep ? zero : fillT, keep ? fillT : zero}, {}, where->name + "_mask", am.type,
                        cond->dims);
  return true;
}

//! Runtime mask `m` read through Where layers whose condition is a value of the shapes alone (SDPA-
//! path exports mask the position bias, Where(mask, bias, finfo.min), with a mask of the shapes
//! alone for an ids-only call): all true at every sample, Where(c, x, y) is x; true exactly on and
//! below the diagonal with y a masking scalar, x and is_causal (every row keeps key 0, so the fill
//! never decides a row). Expand and identity layers between are looked through (the scores
//! broadcast). Returns m itself when no Where was peeled.
Tensor* peelShapeOnlyWhere(const AttentionMatch& am, Tensor* m, SampleDims& samples, bool* causal) {
  SymbolicDims* sym = samples.sym();
  Tensor* out = m;
  bool outCausal = false, isCausal = false;
  for (int depth = 0; depth < 8; ++depth) {
    const Layer* l = m->producer;
    if (!l || l->outputs.size() != 1 || l->inputs.empty() || !l->inputs[0]) break;
    const bool where = l->op == "Where" && l->inputs.size() == 3 && l->inputs[1];
    if (!where && !isIdentityLayer(l) && !(l->op == "Expand" && l->inputs.size() == 2)) break;
    if (where) {
      std::vector<ShapeOnlyValue> cv;
      if (!shapeOnlyValues(am, l->inputs[0], samples, cv) || cv.empty()) break;
      bool allTrue = true, lower = true;
      for (const ShapeOnlyValue& c : cv) {
        const Dims& d = c.value.dims();
        const int64_t rows = d.size() >= 2 ? d[d.size() - 2] : 1, cols = d.empty() ? 1 : d.back();
        lower = lower && rows == c.scores[2] && cols == c.scores[3];
        for (int64_t x = 0; x < c.value.count(); ++x) {
          const bool kept = c.value.getDouble(x) != 0, below = x % cols <= (x / cols) % rows;
          allTrue = allTrue && kept;
          lower = lower && kept == below;
        }
      }
      double fill = 0;
      if (!allTrue && !(lower && scalarValue(l->inputs[2], &fill) && fill <= kVeryNegative)) break;
      isCausal = isCausal || !allTrue;
    }
    Tensor* next = where ? l->inputs[1] : l->inputs[0];
    if (next->type != am.type || !next->dimsKnown || !maskBroadcasts(next, am, sym)) break;
    m = next;
    if (where) out = m, outCausal = isCausal;
  }
  *causal = outCausal;
  return out;
}

//! With other masks beside it (or is_causal), a runtime mask that is the causal pattern or nothing
//! (maskIsPatternOnly) is dropped, is_causal standing for the pattern: T5's dynamic export adds its
//! position bias and a shape-only mask (and a zero bias of run-time dims in layers without one)
//! to the scores, which the sum would turn into a [B, H, Sq, Skv] bias read in every layer. A lone
//! mask is left to compactKeyPaddingMask, which also finds padding flags.
void dropPatternOnlyMasks(const AttentionMatch& am, CanonicalMask& cm, std::vector<KeptMask>& kept, bool whereMask,
                          SampleDims& samples) {
  if (kept.size() + (whereMask ? 1 : 0) < 2 && !cm.causal) return;
  for (size_t i = 0; i < kept.size();) {
    bool causal = false;
    if (kept[i].source.valid() || !maskIsPatternOnly(am, kept[i].t, samples, &causal)) {
      ++i;
      continue;
    }
    cm.causal = cm.causal || causal;
    kept.erase(kept.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

//! The shifted-window mask of the chain (ScoreChain::windowMask) at its 4-D dims: a constant
//! shares the value; a runtime mask gets a Reshape.
Tensor* windowMask4d(Network& net, const ScoreChain& c) {
  Tensor* m = c.windowMask;
  if (m->dims == c.windowMaskDims) return m;
  if (m->isConstant()) return net.addConstant(net.uniqueName(m->name + "_windows"), m->value.reshaped(c.windowMaskDims));
  return addReshape(net, m, c.windowMaskDims, m->name + "_windows");
}

}  // namespace

bool canonicalizeMasks(Network& net, const AttentionMatch& am, const Layer* sm, CanonicalMask& cm, SampleDims& samples) {
  std::vector<KeptMask> kept;
  Tensor* whereMask = nullptr;
  SymbolicDims* at = samples.sym();
  // A batch-periodic window mask goes with masks that do not vary over the batch only (checked
  // before anything is added to the network).
  if (am.chain.windowPeriod > 0 && am.chain.where) return false;
  if (!keepAdditiveMasks(am, cm, kept, at)) return false;
  for (const KeptMask& k : kept) {
    const Dims& d = k.source.valid() ? k.source.dims() : k.t->dims;
    if (am.chain.windowPeriod > 0 && d.size() == 4 && d[0] != 1) return false;
  }
  if (!whereAsMask(net, am, cm, &whereMask, at)) return false;
  for (KeptMask& k : kept) {
    bool causal = false;
    if (!k.source.valid() && !k.t->isConstant() && am.chain.windowPeriod == 0) k.t = peelShapeOnlyWhere(am, k.t, samples, &causal);
    cm.causal = cm.causal || causal;
  }
  dropPatternOnlyMasks(am, cm, kept, whereMask != nullptr, samples);
  std::vector<Tensor*> masks;
  if (whereMask) masks.push_back(whereMask);
  for (const KeptMask& k : kept) masks.push_back(k.source.valid() ? sourceConstant(net, k.t, k.source) : k.t);
  if (am.chain.windowMask) {
    masks.push_back(windowMask4d(net, am.chain));
    cm.period = am.chain.windowPeriod;
  }
  cm.mask = masks.empty() ? nullptr : masks[0];
  for (size_t i = 1; i < masks.size(); ++i)
    cm.mask = addTypedLayer(net, "Add", {cm.mask, masks[i]}, {}, sm->name + "_mask_sum", am.type,
                            broadcastOf(cm.mask->dims, masks[i]->dims));
  return true;
}

}  // namespace kiln::attention_fusion
