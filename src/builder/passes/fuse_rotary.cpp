// Rotary position embedding as transformers' apply_rotary_pos_emb writes it (LLaMA, Qwen2, Mistral,
// Phi, GPT-NeoX exports),
//   y = x * cos + rotate_half(x) * sin,   rotate_half(x) = Concat(-x[..., D/2:], x[..., :D/2], -1)
// with x [B, H, S, D] and cos/sin constants [.., S, D] whose two halves are equal (cat(freqs, freqs)),
// becomes one RotaryEmbedding layer (ONNX opset 23, half-split pairs): one pass over x instead of
// two Slices, a Neg, a Concat, two Muls and an Add (seven kernels and their tensors per Q and K).
// The caches are the first halves as [S, D/2], read at position_ids = 0..S-1 (a constant [B, S]).
// Dynamic exports compute cos/sin from the sequence length: there the caches must have equal halves
// at every sample shape of the profiles (symbolic_dims.h), they are sliced to their first half at
// run time, and the position ids are Range(0, S) expanded to [B, S] from x's shape (shape layers
// the context computes on the host when shapes change).
// Partial rotation (Phi, GPT-NeoX / Pythia, StableLM: rotary_pct < 1): the exporter slices x into
// x[..., :R] and x[..., R:], rotates the first and concatenates the two; once the rotation of the
// first part is a RotaryEmbedding, Concat(RotaryEmbedding(x[..., :R]), x[..., R:]) becomes one
// RotaryEmbedding of x with rotary_embedding_dim = R (the op passes the rest through).
#include <algorithm>
#include <array>
#include <cstring>

#include "builder/passes/passes.h"

namespace kiln {

namespace {

//! A Slice of `x` over its last axis with step 1: [*start, *end) clamped to the dim; false otherwise.
bool lastAxisSlice(const Layer* l, const Tensor* x, int64_t* start, int64_t* end) {
  if (!l || l->op != "Slice" || l->inputs.size() < 3 || l->inputs[0] != x || l->outputs.size() != 1) return false;
  const int64_t d = x->dims.back(), rank = static_cast<int64_t>(x->dims.size());
  auto one = [](const Tensor* t, int64_t* v) {
    if (!t || !t->isConstant() || !isInteger(t->type) || t->value.count() != 1) return false;
    *v = t->value.getInt(0);
    return true;
  };
  int64_t axis = -1, step = 1;
  if (!one(l->inputs[1], start) || !one(l->inputs[2], end)) return false;
  if (l->inputs.size() > 3 && l->inputs[3] && !one(l->inputs[3], &axis)) return false;
  if (l->inputs.size() > 4 && l->inputs[4] && !one(l->inputs[4], &step)) return false;
  if (step != 1 || (axis != -1 && axis != rank - 1)) return false;
  auto clamp = [d](int64_t v) { return v < 0 ? std::max<int64_t>(v + d, 0) : std::min(v, d); };
  *start = clamp(*start), *end = clamp(*end);
  return true;
}

//! x when `r` is rotate_half(x): Concat(Neg(x[..., h:]), x[..., :h], axis -1), h = D / 2.
Tensor* rotateHalfSource(const Network& net, const Tensor* r) {
  const Layer* cat = r->producer;
  if (!cat || cat->op != "Concat" || cat->inputs.size() != 2 || !cat->inputs[0] || !cat->inputs[1]) return nullptr;
  const Layer* neg = cat->inputs[0]->producer;
  const Layer* lo = cat->inputs[1]->producer;
  if (!neg || neg->op != "Neg" || neg->inputs.size() != 1 || !neg->inputs[0] || !lo) return nullptr;
  const Layer* hi = neg->inputs[0]->producer;
  Tensor* x = lo->inputs.empty() ? nullptr : lo->inputs[0];
  if (!x || !x->dimsKnown || x->dims.size() != 4 || x->dims[1] <= 0 || x->dims[3] <= 0 || x->dims[3] % 2 != 0) return nullptr;
  const int64_t axis = cat->attrs.getInt("axis", 0);
  if (axis != -1 && axis != 3) return nullptr;
  const int64_t h = x->dims[3] / 2;
  int64_t s0 = 0, e0 = 0, s1 = 0, e1 = 0;
  if (!lastAxisSlice(hi, x, &s0, &e0) || !lastAxisSlice(lo, x, &s1, &e1) || s0 != h || e0 != 2 * h || s1 != 0 || e1 != h)
    return nullptr;
  for (const Tensor* t : {hi->outputs[0], neg->outputs[0], lo->outputs[0]})
    if (soleConsumer(net, t) == nullptr) return nullptr;
  return x;
}

//! The cache [S, D/2] of a cos/sin constant [1.., S, D] (any leading 1s) whose halves are equal;
//! invalid otherwise.
HostTensor halfCache(const HostTensor& c, const Dims& x) {
  if (!c.valid() || c.type() != DataType::kFLOAT || c.dims().size() < 2 || c.dims().size() > 4) return HostTensor();
  const Dims& d = c.dims();
  for (size_t k = 0; k + 2 < d.size(); ++k)
    if (d[k] != 1) return HostTensor();
  const int64_t s = x[2], dim = x[3], h = dim / 2;
  if (d[d.size() - 2] != s || d.back() != dim) return HostTensor();
  const float* v = c.as<float>();
  HostTensor out(DataType::kFLOAT, {s, h});
  for (int64_t i = 0; i < s; ++i) {
    if (std::memcmp(v + i * dim, v + i * dim + h, static_cast<size_t>(h) * sizeof(float)) != 0) return HostTensor();
    std::memcpy(out.as<float>() + i * h, v + i * dim, static_cast<size_t>(h) * sizeof(float));
  }
  return out;
}

//! Dynamic shapes: cos/sin `c` is [1.., S, D] with equal halves at every sample of `sym` (x's dims there).
bool halvesEqualAtSamples(const Tensor* c, const Tensor* x, SymbolicDims& sym) {
  if (!c || c->type != DataType::kFLOAT || sym.nbSamples() < 2) return false;
  for (size_t s = 0; s < sym.nbSamples(); ++s) {
    const TensorDesc& cd = sym.at(c, s);
    const Dims& xd = sym.at(x, s).dims;
    if (!cd.value.valid() || xd.size() != 4 || !isStatic(xd)) return false;
    if (!halfCache(cd.value, xd).valid()) return false;
  }
  return true;
}

Tensor* addLayerOut(Network& net, const std::string& op, const std::vector<Tensor*>& in, Attributes a, const std::string& name) {
  return net.addLayer(op, in, 1, std::move(a), net.uniqueName(name))->outputs[0];
}

Tensor* int64Const(Network& net, const std::string& name, const std::vector<int64_t>& v, bool scalar = false) {
  HostTensor t(DataType::kINT64, scalar ? Dims{} : Dims{static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.as<int64_t>()[i] = v[i];
  return net.addConstant(net.uniqueName(name), t);
}

//! Run-time caches and position ids for a dynamic x: cache = Reshape(c[..., :D/2], [-1, D/2]),
//! ids = Expand(Unsqueeze(Range(0, S, 1), 0), [B, S]) from Shape(x).
std::array<Tensor*, 3> runtimeRotaryInputs(Network& net, Tensor* x, Tensor* cosT, Tensor* sinT, const std::string& base) {
  const int64_t h = x->dims[3] / 2;
  auto cache = [&](Tensor* c, const char* what) {
    Tensor* half = addLayerOut(net, "Slice", {c, int64Const(net, base + "_h0", {0}), int64Const(net, base + "_h1", {h}),
                                              int64Const(net, base + "_hax", {-1})}, {}, base + "_" + what + "_half");
    return addLayerOut(net, "Reshape", {half, int64Const(net, base + "_cache_shape", {-1, h})}, {}, base + "_" + what + "_cache");
  };
  Tensor* shape = addLayerOut(net, "Shape", {x}, {}, base + "_shape");
  Attributes axis0;
  axis0.set("axis", int64_t(0));
  Tensor* seq = addLayerOut(net, "Gather", {shape, int64Const(net, base + "_i2", {2}, true)}, axis0, base + "_seq");
  Tensor* bs = addLayerOut(net, "Gather", {shape, int64Const(net, base + "_i02", {0, 2})}, axis0, base + "_batch_seq");
  Tensor* range = addLayerOut(net, "Range", {int64Const(net, base + "_zero", {0}, true), seq, int64Const(net, base + "_one", {1}, true)},
                              {}, base + "_positions");
  Tensor* row = addLayerOut(net, "Unsqueeze", {range, int64Const(net, base + "_ax0", {0})}, {}, base + "_position_row");
  Tensor* ids = addLayerOut(net, "Expand", {row, bs}, {}, base + "_position_ids");
  return {cache(cosT, "cos"), cache(sinT, "sin"), ids};
}

//! For Mul layer `m` reading `t`: its other operand.
Tensor* mulOperand(const Layer* m, const Tensor* t) {
  return m && m->op == "Mul" && m->inputs.size() == 2 ? otherInput(m, t) : nullptr;
}

bool fuseOne(Network& net, Layer* add, const InputSamples& samples) {
  if (add->op != "Add" || add->inputs.size() != 2 || !add->inputs[0] || !add->inputs[1] || add->outputs.size() != 1) return false;
  for (int first = 0; first < 2; ++first) {
    Layer* mc = add->inputs[first]->producer;        // x * cos
    Layer* ms = add->inputs[1 - first]->producer;    // rotate_half(x) * sin
    if (!mc || !ms || mc->op != "Mul" || ms->op != "Mul" || mc->inputs.size() != 2 || ms->inputs.size() != 2) continue;
    for (int r = 0; r < 2; ++r) {
      Tensor* rot = ms->inputs[r];
      Tensor* x = rotateHalfSource(net, rot);
      if (!x || x->type != DataType::kFLOAT) continue;
      Tensor* cosT = mulOperand(mc, x);
      Tensor* sinT = ms->inputs[1 - r];
      if (!cosT || soleConsumer(net, mc->outputs[0]) != add || soleConsumer(net, ms->outputs[0]) != add ||
          soleConsumer(net, rot) != ms)
        continue;
      if (mc->outputs[0]->dims != x->dims || add->outputs[0]->dims != x->dims) continue;
      const std::string base = add->name;
      std::vector<Tensor*> in{x};
      if (isStatic(x->dims)) {
        const HostTensor cosC = halfCache(cosT->value, x->dims), sinC = halfCache(sinT ? sinT->value : HostTensor(), x->dims);
        if (!cosC.valid() || !sinC.valid()) continue;
        const int64_t b = x->dims[0], s = x->dims[2];
        HostTensor pos(DataType::kINT64, {b, s});
        for (int64_t i = 0; i < b * s; ++i) pos.as<int64_t>()[i] = i % s;
        in.push_back(net.addConstant(net.uniqueName(base + "_cos_cache"), cosC));
        in.push_back(net.addConstant(net.uniqueName(base + "_sin_cache"), sinC));
        in.push_back(net.addConstant(net.uniqueName(base + "_position_ids"), pos));
      } else {
        SymbolicDims sym(samples);
        if (!halvesEqualAtSamples(cosT, x, sym) || !halvesEqualAtSamples(sinT, x, sym)) continue;
        for (Tensor* t : runtimeRotaryInputs(net, x, cosT, sinT, base)) in.push_back(t);
      }
      Layer* rope = net.addLayer("RotaryEmbedding", in, 1, {}, net.uniqueName(base + "_rotary"));
      Layer* cat = rot->producer;
      Layer* neg = cat->inputs[0]->producer;
      std::vector<Layer*> dead{add, ms, mc, cat, neg, neg->inputs[0]->producer, cat->inputs[1]->producer};
      replaceWithFused(net, rope, dead, add->outputs[0]);
      return true;
    }
  }
  return false;
}

//! Concat(RotaryEmbedding(x[..., :R]), x[..., R:], axis -1) of a 4-D x -> RotaryEmbedding(x) with
//! rotary_embedding_dim R (top of the file).
bool fusePartial(Network& net, Layer* cat) {
  if (cat->op != "Concat" || cat->inputs.size() != 2 || !cat->inputs[0] || !cat->inputs[1] || cat->outputs.size() != 1) return false;
  Layer* rope = cat->inputs[0]->producer;
  Layer* pass = cat->inputs[1]->producer;
  if (!rope || rope->op != "RotaryEmbedding" || rope->inputs.empty() || !rope->inputs[0] || rope->attrs.has("num_heads") || !pass ||
      pass->inputs.empty())
    return false;
  Layer* head = rope->inputs[0]->producer;
  Tensor* x = pass->inputs[0];
  if (!head || !x || x->dims.size() != 4 || x->dims[3] <= 0) return false;
  const int64_t axis = cat->attrs.getInt("axis", 0), d = x->dims[3];
  int64_t s0 = 0, e0 = 0, s1 = 0, e1 = 0;
  if ((axis != -1 && axis != 3) || !lastAxisSlice(head, x, &s0, &e0) || !lastAxisSlice(pass, x, &s1, &e1)) return false;
  const int64_t r = e0;
  if (s0 != 0 || r <= 0 || r >= d || r % 2 != 0 || s1 != r || e1 != d) return false;
  const int64_t attrDim = rope->attrs.getInt("rotary_embedding_dim", 0);
  if (attrDim != 0 && attrDim != r) return false;
  if (soleConsumer(net, head->outputs[0]) != rope || soleConsumer(net, rope->outputs[0]) != cat ||
      soleConsumer(net, pass->outputs[0]) != cat || cat->outputs[0]->dims != x->dims)
    return false;
  Attributes a = rope->attrs;
  a.set("rotary_embedding_dim", r);
  std::vector<Tensor*> in(rope->inputs.begin(), rope->inputs.end());
  in[0] = x;
  Layer* fused = net.addLayer("RotaryEmbedding", in, 1, std::move(a), net.uniqueName(rope->name + "_partial"));
  replaceWithFused(net, fused, {cat, rope, head, pass}, cat->outputs[0]);
  return true;
}

}  // namespace

bool fuseRotaryPattern(Network& net, const InputSamples& samples) {
  bool changed = false;
  for (size_t i = 0; i < net.layers().size(); ++i) {
    if (!fuseOne(net, net.layer(static_cast<int>(i)), samples)) continue;
    changed = true;
    i = 0;  // replaceWithFused re-sorted the layers
  }
  for (size_t i = 0; i < net.layers().size(); ++i) {
    if (!fusePartial(net, net.layer(static_cast<int>(i)))) continue;
    changed = true;
    i = 0;
  }
  return changed;
}

}  // namespace kiln
