// Attention fusion, step 2b: the key-padding analysis (fuse_attention_steps.h). transformers
// (LLaMA, Qwen2, GPT-2, BERT; masking_utils) build one dense [B, 1, Sq, Skv] additive mask per
// model from the attention_mask input: a causal or all-true constant And-ed with the per-key
// padding flags (gathered through a flattened index, reshaped to [B, 1, 1, Skv], Expand-ed), then
// Where(m, 0, finfo.min). Read per score element, that mask costs a B*Sq*Skv read per layer and
// rules out causal tile skipping. This step proves, when it can, that the dense mask M is
//     M[b, h, i, j] = k[b, j] ? T1[i, j] : T0[i, j]
// for one runtime bool tensor k of dims [B|1, (1, 1,) Skv] (the padding flags) and constants
// T1, T0, and rewrites it to is_causal + k as a bool [B|1, 1, 1, Skv] attn_mask (+ kiln_mask_fill).
//
// Proof. Walking up from M, every tensor is abstracted as (src, T1, T0): its value at x is
// k[src[x]] ? T1[x] : T0[x] (a constant has no src). The walk admits only
//  - the leaf: a runtime bool tensor shaped like k: src = its flat index, T1 = true, T0 = false
//    (any bool has only these two values, whatever computed it);
//  - constants;
//  - elementwise ops (a result element reads its operands at the broadcast position only): T1
//    and T0 are the op applied to the operands' T1 (resp. T0), and operands that depend on k must
//    read the same k element at every position (their src agree after broadcasting);
//  - data movement with constant parameters (Reshape, Flatten, Squeeze, Unsqueeze, Transpose,
//    Gather, Slice, Identity): applied to src, T1 and T0 alike (it only moves elements);
//  - Expand: skipped (it repeats along broadcast dims, which the scores broadcast anyway).
// Every value is computed with the ops' own reference kernels. At M, src must be exactly
// b * Skv + j (or j for a k without batch) at every score position, so M is the formula above.
// Then the rewrite is equivalent when T0 is one masking value c everywhere and T1 is 0 everywhere
// (key padding only) or 0 on and below the diagonal and c above it (causal + key padding):
//  - c = -inf: ONNX Attention's own semantics of a bool mask and is_causal (-inf added once);
//  - c finite with c <= kAbsorbing: s + c == c in float for every finite score |s| < 2^-24 |c|
//    (about 2e31 for finfo.min), so a row with a kept key gives masked keys probability 0 either
//    way, and a row with every key masked (left padding, an all-zero attention_mask row) is
//    uniform over all Skv keys in the original; kiln_mask_fill = c keeps exactly that: keys
//    masked by k or by is_causal take the logit s + c (c added once), so such a row stays uniform
//    over every key (ops/attention.cpp, and the CUDA kernels' fully-masked-row rule).
// Flags folded to a constant (an all-ones attention_mask built in the model) are proven as
// flags too when constants alone do not prove it (their batch would take T1 past the probe size);
// all true, the mask is the pattern alone (no mask, or is_causal).
// Anything else (other ops, two leaves, values that differ, sliding windows, sizes past
// kMaxProbeElements) keeps the dense mask.
// Dynamic networks: the proof runs at every sample shape of the profiles (symbolic_dims.h), with
// the dims and the shape-sized values (Expand targets, index ranges) of that sample; the rewrite
// is made when it holds at each with the same flags, pattern and fill. The mask's subgraph is the
// same layers at every shape, and the samples move every input dim on its own and include each
// range's ends, so a structure that holds at all of them is the export's, not a coincidence.
// At a sample, the mask may be a value of the shapes alone (a decoder given ids only: transformers'
// mask of an all-ones attention_mask made by ones_like(ids), flags Gather-ed from
// ConstantOfShape(Shape(ids))); it is then classified as it is (0 everywhere, or exact causal with
// one masking value), and a 1 x 1 sample, where both patterns are the same mask, fits either.
#include <cmath>
#include <functional>
#include <limits>
#include <map>

#include "builder/passes/fuse_attention_steps.h"
#include "builder/passes/passes.h"
#include "core/type_dispatch.h"
#include "ops/op_registry.h"
#include "ops/shape_propagation.h"

namespace kiln::attention_fusion {

namespace {

constexpr int64_t kMaxProbeElements = int64_t(1) << 22;
constexpr int kMaxDepth = 48;  // layers from the mask up to the padding flags
constexpr double kAbsorbingFill = -1e30;

//! A mask-subgraph tensor as a function of the key flags k: value[x] = k[src[x]] ? t1[x] : t0[x].
//! A constant has no src (t1 = t0 = its value). src, t1 and t0 each broadcast to the tensor's
//! dims and are kept at their own (smaller) dims: with the flags' batch in src only, T1 and T0
//! stay [1, 1, Sq, Skv] at any batch (8 x 1024 x 1024 would pass kMaxProbeElements).
struct KeyFunction {
  HostTensor src, t1, t0;
  bool dependsOnKey() const { return src.valid(); }
};

bool isElementwise(const std::string& op) {
  static const char* const kOps[] = {"Cast", "Not", "And", "Or", "Xor", "Equal", "Less", "LessOrEqual", "Greater",
                                     "GreaterOrEqual", "Where", "Add", "Sub", "Mul", "Div", "Neg", "Min", "Max", "Abs"};
  for (const char* o : kOps)
    if (op == o) return true;
  return false;
}

bool isDataMovement(const std::string& op) {
  static const char* const kOps[] = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Gather", "Slice", "Identity"};
  for (const char* o : kOps)
    if (op == o) return true;
  return false;
}

//! Runs `l`'s op on the host with `in` as its input values (the other inputs' own constants).
HostTensor evaluate(const Layer& l, const std::vector<HostTensor>& in) {
  LayerDesc d = describeLayer(l);
  for (size_t i = 0; i < in.size() && i < d.inputs.size(); ++i) {
    if (!in[i].valid()) continue;
    d.inputs[i].type = in[i].type();
    d.inputs[i].dims = in[i].dims();
    d.inputs[i].value = in[i];
  }
  inferLayer(d);
  if (d.outputs.empty() || !isStatic(d.outputs[0].dims) || volume(d.outputs[0].dims) > kMaxProbeElements) return HostTensor();
  evaluateOnHost(d);
  return d.outputs[0].value;
}

//! `t` broadcast to `dims` (numpy rules), through the Expand reference kernel.
HostTensor broadcast(const HostTensor& t, const Dims& dims) {
  if (t.dims() == dims) return t;
  if (volume(dims) > kMaxProbeElements) return HostTensor();
  HostTensor shape(DataType::kINT64, {static_cast<int64_t>(dims.size())});
  for (size_t i = 0; i < dims.size(); ++i) shape.as<int64_t>()[i] = dims[i];
  Attributes none;
  LayerDesc d;
  d.name = "key_padding_broadcast";
  d.op = "Expand";
  d.attrs = &none;
  d.inputs = {TensorDesc{t.type(), t.dims(), t}, TensorDesc{DataType::kINT64, shape.dims(), shape}};
  d.inputPresent = {true, true};
  d.outputs.resize(1);
  inferLayer(d);
  evaluateOnHost(d);
  return d.outputs[0].value;
}

bool sameInts(const HostTensor& a, const HostTensor& b) {
  if (a.count() != b.count()) return false;
  for (int64_t i = 0; i < a.count(); ++i)
    if (a.getInt(i) != b.getInt(i)) return false;
  return true;
}

//! The walk up from the mask (see the proof at the top). Fails (returns false) on anything it
//! cannot prove; every value is computed on copies, the network is not changed.
class KeyPaddingProver {
 public:
  //! constantFlags: a bool constant shaped like key flags is taken as the flags too (transformers'
  //! mask from an all-ones attention_mask folded to a constant, And-ed with the causal pattern into
  //! a [B, 1, S, S] mask above the fold limit; or, at a sample of a dynamic network, the flags'
  //! value computed from the shapes alone, at batch 1 too). The proof holds for any value of them.
  //! wantLeaf (when set): the flags the proof at another sample found; no other tensor is taken
  //! (at a degenerate sample, S = 1, the dense mask itself is shaped like flags).
  KeyPaddingProver(const Dims& scores, DescOf desc, bool constantFlags, const Tensor* wantLeaf)
      : scores_(scores), desc_(std::move(desc)), constantFlags_(constantFlags), wantLeaf_(wantLeaf) {}

  bool abstract(Tensor* t, KeyFunction& out, int depth = 0) {
    if (auto it = memo_.find(t); it != memo_.end()) return out = it->second, true;
    const TensorDesc d = desc_(t);
    if (depth > kMaxDepth || !isStatic(d.dims)) return false;
    KeyFunction f;
    const bool constantAsFlags = constantFlags_ && d.value.valid() && isKeyShaped(t, d);
    if (d.value.valid() && !constantAsFlags) {  // a constant (or, at a sample, a value of the shapes alone)
      f.t1 = f.t0 = d.value;
    } else if (isKeyShaped(t, d)) {
      if (leaf_ && leaf_ != t) return false;  // one set of key flags only
      leaf_ = t;
      f.src = HostTensor(DataType::kINT64, d.dims);
      for (int64_t i = 0; i < f.src.count(); ++i) f.src.as<int64_t>()[i] = i;
      const Dims ones(d.dims.size(), 1);  // the flag's two values, broadcast like src
      f.t1 = HostTensor(DataType::kBOOL, ones);
      f.t0 = HostTensor(DataType::kBOOL, ones);
      f.t1.as<uint8_t>()[0] = 1;
    } else if (!abstractLayer(t, f, depth)) {
      return false;
    }
    if (!f.t1.valid() || !f.t0.valid()) return false;
    memo_[t] = f;
    out = f;
    return true;
  }

  Tensor* leaf() const { return leaf_; }

 private:
  //! A runtime bool tensor of dims [B|1, Skv] up to leading 1s ([B, 1, 1, Skv] as transformers has it).
  bool isKeyShaped(const Tensor* t, const TensorDesc& desc) const {
    const Dims& d = desc.dims;
    if (wantLeaf_ && t != wantLeaf_) return false;
    if (t->type != DataType::kBOOL || d.size() < 2 || d.size() > 4 || d.back() != scores_[3]) return false;
    for (size_t i = 1; i + 1 < d.size(); ++i)
      if (d[i] != 1) return false;
    return d[0] == 1 || d[0] == scores_[0];
  }

  bool abstractLayer(Tensor* t, KeyFunction& f, int depth) {
    Layer* l = t->producer;
    if (!l || l->outputs.size() != 1 || l->inputs.empty() || !l->inputs[0]) return false;
    if (!l->domain.empty() && l->domain != "ai.onnx") return false;
    if (l->op == "ConstantOfShape") return constantOfShape(*l, t, f);
    const bool expand = l->op == "Expand" && l->inputs.size() == 2;
    if (!expand && !isElementwise(l->op) && !isDataMovement(l->op)) return false;
    std::vector<KeyFunction> in(l->inputs.size());
    for (size_t i = 0; i < l->inputs.size(); ++i) {
      if (!l->inputs[i]) continue;
      if (!abstract(l->inputs[i], in[i], depth + 1)) return false;
      if (i > 0 && !isElementwise(l->op) && in[i].dependsOnKey()) return false;  // shapes, indices: constants
    }
    if (expand) return f = in[0], true;
    try {
      return isElementwise(l->op) ? elementwise(*l, in, f) : dataMovement(*l, in, f, desc_(l->inputs[0]).dims);
    } catch (const std::exception&) {
      return false;  // a value the host cannot compute: keep the dense mask
    }
  }

  //! ConstantOfShape: its fill at dims of 1s (it broadcasts like Expand), whatever the shape (the
  //! zero position bias T5 makes for a layer without relative attention, at run-time dims).
  bool constantOfShape(const Layer& l, const Tensor* t, KeyFunction& f) {
    const HostTensor* v = l.attrs.getTensor("value");
    if (v && v->count() != 1) return false;
    const HostTensor fill = v ? *v : HostTensor(DataType::kFLOAT, {1});
    f.t1 = f.t0 = fill.reshaped(Dims(desc_(t).dims.size(), 1));
    return true;
  }

  bool elementwise(const Layer& l, const std::vector<KeyFunction>& in, KeyFunction& f) {
    std::vector<HostTensor> a1(in.size()), a0(in.size());
    for (size_t i = 0; i < in.size(); ++i) a1[i] = in[i].t1, a0[i] = in[i].t0;
    Dims common;
    std::vector<const HostTensor*> srcs;
    for (const KeyFunction& k : in)
      if (k.dependsOnKey()) srcs.push_back(&k.src), common = broadcastOf(common, k.src.dims());
    if (srcs.size() == 1) f.src = *srcs[0];  // it broadcasts to the output as the operand does
    for (size_t i = 0; srcs.size() > 1 && i < srcs.size(); ++i) {  // operands must read the same flag
      HostTensor s = broadcast(*srcs[i], common);
      if (!s.valid() || (f.src.valid() && !sameInts(f.src, s))) return false;
      f.src = s;
    }
    f.t1 = evaluate(l, a1);
    f.t0 = f.src.valid() ? evaluate(l, a0) : f.t1;
    return f.t1.valid() && f.t0.valid();
  }

  //! inDims: the real dims of the input (undo any skipped Expand first).
  bool dataMovement(const Layer& l, const std::vector<KeyFunction>& in, KeyFunction& f, const Dims& inDims) {
    auto moved = [&](const HostTensor& x) {
      std::vector<HostTensor> args(in.size());
      for (size_t i = 1; i < in.size(); ++i) args[i] = in[i].t1;
      args[0] = broadcast(x, inDims);
      return args[0].valid() ? evaluate(l, args) : HostTensor();
    };
    f.t1 = moved(in[0].t1);
    f.t0 = in[0].dependsOnKey() ? moved(in[0].t0) : f.t1;
    if (in[0].dependsOnKey()) {
      f.src = moved(in[0].src);
      if (!f.src.valid()) return false;
    }
    return f.t1.valid() && f.t0.valid();
  }

  Dims scores_;
  DescOf desc_;
  bool constantFlags_ = false;
  const Tensor* wantLeaf_ = nullptr;
  Tensor* leaf_ = nullptr;
  std::map<Tensor*, KeyFunction> memo_;
};

//! 4-D dims of `d` (leading 1s).
Dims dims4(const Dims& d) {
  Dims r(4 - std::min<size_t>(d.size(), 4), 1);
  r.insert(r.end(), d.begin(), d.end());
  return r;
}

//! The key flags' dims as the Attention layer takes them: [B|1, (1, 1,) Skv] -> [B|1, 1, 1, Skv].
Dims keyDims4(const Dims& d) { return {d.front(), 1, 1, d.back()}; }

//! What T1 must look like: 0 everywhere (key padding) or exact causal (0 at j <= i, c above).
enum class KeepPattern { kNone, kAll, kCausal };

//! src is the flat index of (b, j) in the key flags at every element (it must not broadcast over
//! keys, nor over a batch the flags have).
bool readsFlagOfBatchAndKey(const HostTensor& src, const Dims& scores, const Dims& leafDims) {
  const Dims d = dims4(src.dims()), l4 = keyDims4(leafDims);
  const int64_t B = scores[0], Skv = scores[3];
  if (d[3] != Skv || (d[0] != 1 && d[0] != B) || (l4[0] != 1 && d[0] != B)) return false;
  const int64_t inner = d[1] * d[2];
  for (int64_t b = 0; b < d[0]; ++b)
    for (int64_t r = 0; r < inner; ++r)
      for (int64_t j = 0; j < Skv; ++j)
        if (src.getInt((b * inner + r) * Skv + j) != (l4[0] == 1 ? 0 : b) * Skv + j) return false;
  return true;
}

//! T0 == c everywhere (a masking value: -inf or absorbing), T1 == 0 everywhere (kAll) or 0 on and
//! below the diagonal and c above it (kCausal); *fill = c.
//! What `t1` (broadcast over batch and heads) keeps: 0 everywhere (kAll), or 0 on and below the
//! diagonal and `c` above it (kCausal), else kNone.
KeepPattern keepPattern(const HostTensor& t1, const Dims& scores, double c) {
  const Dims d = dims4(t1.dims());
  const int64_t Sq = scores[2], Skv = scores[3];
  bool all = true, causal = d[2] == Sq && d[3] == Skv;
  for (int64_t x = 0; x < t1.count(); ++x) {
    const double v = t1.getDouble(x);
    all = all && v == 0;
    if (causal) {
      const int64_t j = x % d[3], i = (x / d[3]) % d[2];
      causal = j <= i ? v == 0 : v == c;
    }
    if (!all && !causal) return KeepPattern::kNone;
  }
  return all ? KeepPattern::kAll : KeepPattern::kCausal;
}

bool isMaskingValue(double c) { return c == -std::numeric_limits<double>::infinity() || c <= kAbsorbingFill; }

KeepPattern classify(const KeyFunction& f, const Dims& scores, double* fill) {
  if (f.t0.count() < 1) return KeepPattern::kNone;
  const double c = f.t0.getDouble(0);
  for (int64_t x = 0; x < f.t0.count(); ++x)
    if (f.t0.getDouble(x) != c) return KeepPattern::kNone;
  if (!isMaskingValue(c)) return KeepPattern::kNone;
  *fill = c;
  return keepPattern(f.t1, scores, c);
}

}  // namespace

namespace {

bool allTrue(const HostTensor& t) {
  for (int64_t i = 0; i < t.count(); ++i)
    if (t.getDouble(i) == 0) return false;
  return true;
}

//! What the proof found at one set of dims.
struct KeyPaddingProof {
  Tensor* leaf = nullptr;     //!< null: the mask is a value of the shapes alone here (no flags)
  Dims leafDims;
  bool flagsAllTrue = false;  //!< the flags' value is known (a constant) and keeps every key
  KeepPattern keep = KeepPattern::kNone;
  bool eitherPattern = false;  //!< a 1 x 1 score matrix: all-kept and causal are the same mask
  double fill = 0;
};

//! A mask known at a sample from the shapes alone (a dynamic export's causal mask And-ed with the
//! flags of an all-ones attention_mask built from the ids' shape): 0 everywhere, or 0 on and below
//! the diagonal and one masking value c above it, broadcast over batch and heads.
//! Kept at broadcast dims (the prover skips Expand), an all-zero mask may be any smaller shape.
bool classifyShapeOnlyMask(const HostTensor& v, const Dims& scores, KeyPaddingProof& p) {
  const Dims d = dims4(v.dims());
  if (v.count() < 1 || v.dims().size() > 4) return false;
  bool zero = true;
  for (int64_t x = 0; zero && x < v.count(); ++x) zero = v.getDouble(x) == 0;
  if (!zero && (d[3] != scores[3] || (d[2] != scores[2] && d[2] != 1))) return false;
  const double c = d[3] > 1 ? v.getDouble(1) : 0;  // row 0, key 1: above the diagonal
  p.keep = zero ? KeepPattern::kAll : keepPattern(v, scores, c);
  if (p.keep == KeepPattern::kNone || (p.keep == KeepPattern::kCausal && !isMaskingValue(c))) return false;
  p.leaf = nullptr;
  p.flagsAllTrue = true;
  p.fill = p.keep == KeepPattern::kAll ? 0 : c;
  return true;
}

bool proveAt(Tensor* m, const DescOf& desc, const Dims& scores, KeyPaddingProof& p, bool constantFlags,
             const Tensor* wantLeaf = nullptr) {
  if (scores.size() != 4 || !isStatic(scores)) return false;
  const TensorDesc mdesc = desc(m);
  const Dims& md = mdesc.dims;
  if (!isStatic(md) || md.size() > 4 || dims4(md)[3] != scores[3]) return false;
  p.eitherPattern = scores[2] == 1 && scores[3] == 1;
  if (mdesc.value.valid() && !m->isConstant()) return classifyShapeOnlyMask(mdesc.value, scores, p);
  KeyPaddingProver prover(scores, desc, constantFlags, wantLeaf);
  KeyFunction f;
  if (!prover.abstract(m, f)) return false;
  if (!f.dependsOnKey()) return !constantFlags && classifyShapeOnlyMask(f.t1, scores, p);  // too big for a sample's value
  if (!prover.leaf()) return false;
  p.leaf = prover.leaf();
  const TensorDesc leaf = desc(p.leaf);
  p.leafDims = leaf.dims;
  p.flagsAllTrue = leaf.value.valid() && allTrue(leaf.value);
  if (!readsFlagOfBatchAndKey(f.src, scores, p.leafDims)) return false;
  p.keep = classify(f, scores, &p.fill);
  return p.keep != KeepPattern::kNone;
}

//! The proofs for mask `m`: at the static dims, or at each of the samples; false when one fails.
bool proveEverywhere(const AttentionMatch& am, Tensor* m, SampleDims& samples, std::vector<KeyPaddingProof>& proofs) {
  if (!m || m->isConstant() || am.scores.size() != 4 || !isFloatType(m->type)) return false;
  return holdsAtEveryShape(am, m, samples, [&](const DescOf& at, const Dims& scores) {
    const Tensor* want = nullptr;  // the flags an earlier sample found
    for (const KeyPaddingProof& q : proofs)
      if (q.leaf) want = q.leaf;
    proofs.emplace_back();
    return proveAt(m, at, scores, proofs.back(), false, want) || proveAt(m, at, scores, proofs.back(), true, want);
  });
}

//! The proof the others agree with (one pattern, a 1 x 1 sample fits either; where flags were
//! found, the same flags), or null. The reference: one with a definite pattern, with flags when
//! there are. *allKept: no sample has a padded key.
const KeyPaddingProof* agreedProof(const std::vector<KeyPaddingProof>& proofs, bool* allKept) {
  if (proofs.empty()) return nullptr;
  auto rank = [](const KeyPaddingProof& q) { return (q.eitherPattern ? 0 : 2) + (q.leaf ? 1 : 0); };
  const KeyPaddingProof* p = &proofs.front();
  for (const KeyPaddingProof& q : proofs)
    if (rank(q) > rank(*p)) p = &q;
  *allKept = true;
  for (const KeyPaddingProof& q : proofs) {
    if (q.keep != p->keep && !q.eitherPattern) return nullptr;
    if (q.leaf && p->leaf && (q.leaf != p->leaf || q.fill != p->fill || q.leafDims.size() != p->leafDims.size())) return nullptr;
    *allKept = *allKept && q.flagsAllTrue;
  }
  return p;
}

//! Mask `m`'s proof at every shape (proofs: one per shape) and the one they agree with, or null.
const KeyPaddingProof* provenPattern(const AttentionMatch& am, Tensor* m, SampleDims& samples, std::vector<KeyPaddingProof>& proofs,
                                     bool* allKept) {
  return proveEverywhere(am, m, samples, proofs) ? agreedProof(proofs, allKept) : nullptr;
}

}  // namespace

bool shapeOnlyValues(const AttentionMatch& am, Tensor* t, SampleDims& samples, std::vector<ShapeOnlyValue>& values) {
  values.clear();
  if (!t || t->isConstant() || am.scores.size() != 4) return false;
  return holdsAtEveryShape(am, t, samples, [&](const DescOf& desc, const Dims& scores) {
    if (scores.size() != 4 || !isStatic(scores)) return false;
    KeyPaddingProver prover(scores, desc, false, nullptr);
    KeyFunction f;
    if (!prover.abstract(t, f) || f.dependsOnKey()) return false;
    values.push_back({f.t1, scores});
    return true;
  });
}

bool maskIsPatternOnly(const AttentionMatch& am, Tensor* m, SampleDims& samples, bool* causal) {
  std::vector<KeyPaddingProof> proofs;
  bool allKept = false;
  const KeyPaddingProof* p = provenPattern(am, m, samples, proofs, &allKept);
  if (!p || !allKept) return false;
  *causal = p->keep == KeepPattern::kCausal;
  return true;
}

bool compactKeyPaddingMask(Network& net, const AttentionMatch& am, CanonicalMask& cm, SampleDims& samples) {
  if (cm.causal) return false;
  std::vector<KeyPaddingProof> proofs;
  bool allKept = false;
  const KeyPaddingProof* p = provenPattern(am, cm.mask, samples, proofs, &allKept);
  if (!p) return false;
  if (allKept) {  // no key is padding (at any sample): the pattern alone
    cm.causal = p->keep == KeepPattern::kCausal;
    cm.mask = nullptr;
    return true;
  }
  for (const KeyPaddingProof& q : proofs)
    if (!q.leaf) return false;  // flags at some samples, none at others: keep the dense mask
  cm.causal = p->keep == KeepPattern::kCausal;
  Tensor* flags = p->leaf;
  if (flags->dims.size() != 4) {  // [B, Skv] -> [B, 1, 1, Skv]: a view (Unsqueeze: any B and Skv)
    std::vector<int64_t> axes;
    for (size_t k = flags->dims.size(); k < 4; ++k) axes.push_back(static_cast<int64_t>(k - 1));
    HostTensor at(DataType::kINT64, {static_cast<int64_t>(axes.size())});
    for (size_t i = 0; i < axes.size(); ++i) at.as<int64_t>()[i] = axes[i];
    Tensor* axesT = net.addConstant(net.uniqueName(flags->name + "_key_mask_axes"), at);
    flags = addTypedLayer(net, "Unsqueeze", {flags, axesT}, {}, flags->name + "_key_mask", DataType::kBOOL, keyDims4(flags->dims));
  }
  cm.mask = flags;
  cm.maskFill = p->fill;
  return true;
}

}  // namespace kiln::attention_fusion
