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
// Interleaved pairs (GPT-J, CodeGen: rotate_every_two): the pairs are (x[2k], x[2k+1]) and
//   rotate_every_two(x) = Reshape(Concat(Unsqueeze(-x[..., 1::2], -1), Unsqueeze(x[..., 0::2], -1), -1))
// with cos / sin repeat_interleaved (pairs equal). GPT-J rotates [B, S, H, D] (before the head
// Transpose): that becomes a RotaryEmbedding of the [B, S, H*D] view with num_heads H, between two
// Reshapes; [B, H, S, D] is the op's own 4-D form. Dynamic shapes as for the half-split form (pairs
// checked at the samples, the caches c[..., 0:R:2] sliced at run time).
#include <algorithm>
#include <array>
#include <cstring>
#include <optional>

#include "builder/passes/passes.h"

namespace kiln {

namespace {

//! A Slice of `x` over its last axis: [*start, *end) clamped to the dim, its step in *step (step 1
//! required where `step` is null); false otherwise.
bool lastAxisSlice(const Layer* l, const Tensor* x, int64_t* start, int64_t* end, int64_t* stepOut = nullptr) {
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
  if ((stepOut ? step < 1 : step != 1) || (axis != -1 && axis != rank - 1)) return false;
  auto clamp = [d](int64_t v) { return v < 0 ? std::max<int64_t>(v + d, 0) : std::min(v, d); };
  *start = clamp(*start), *end = clamp(*end);
  if (stepOut) *stepOut = step;
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

//! x when `r` is rotate_every_two(x) (top of the file), its layers appended to *dead; nullptr otherwise.
Tensor* rotateEveryTwoSource(const Network& net, const Tensor* r, std::vector<Layer*>* dead) {
  Layer* flat = r->producer;
  if (!flat || flat->op != "Reshape" || flat->inputs.empty() || !flat->inputs[0]) return nullptr;
  Layer* cat = flat->inputs[0]->producer;
  if (!cat || cat->op != "Concat" || cat->inputs.size() != 2 || !cat->inputs[0] || !cat->inputs[1]) return nullptr;
  const Dims& pairs = cat->outputs[0]->dims;
  const int64_t axis = cat->attrs.getInt("axis", 0);
  if (pairs.size() != 5 || pairs[4] != 2 || (axis != -1 && axis != 4)) return nullptr;
  // An Unsqueeze (or Reshape) appending a unit axis: its input.
  auto unitAxisSource = [](Layer* u) -> Tensor* {
    if (!u || (u->op != "Unsqueeze" && u->op != "Reshape") || u->inputs.empty() || !u->inputs[0]) return nullptr;
    Dims d = u->inputs[0]->dims;
    d.push_back(1);
    return u->outputs[0]->dims == d ? u->inputs[0] : nullptr;
  };
  Layer* uOdd = cat->inputs[0]->producer;
  Layer* uEven = cat->inputs[1]->producer;
  Tensor* negated = unitAxisSource(uOdd);
  Tensor* even = unitAxisSource(uEven);
  if (!negated || !even) return nullptr;
  Layer* neg = negated->producer;
  Layer* evenSlice = even->producer;
  if (!neg || neg->op != "Neg" || neg->inputs.size() != 1 || !neg->inputs[0] || !evenSlice || evenSlice->inputs.empty()) return nullptr;
  Layer* oddSlice = neg->inputs[0]->producer;
  Tensor* x = evenSlice->inputs[0];
  if (!x || !x->dimsKnown || x->dims.size() != 4 || x->dims[3] <= 0 || x->dims[3] % 2 != 0 || r->dims != x->dims) return nullptr;
  const int64_t h = x->dims[3] / 2;
  int64_t s0 = 0, e0 = 0, st0 = 0, s1 = 0, e1 = 0, st1 = 0;
  // Starts and steps with the output widths fix the elements (0, 2, .., and 1, 3, ..).
  if (!lastAxisSlice(evenSlice, x, &s0, &e0, &st0) || !lastAxisSlice(oddSlice, x, &s1, &e1, &st1) || s0 != 0 || s1 != 1 ||
      st0 != 2 || st1 != 2 || evenSlice->outputs[0]->dims.back() != h || oddSlice->outputs[0]->dims.back() != h)
    return nullptr;
  for (const Tensor* t : {oddSlice->outputs[0], negated, uOdd->outputs[0], even, uEven->outputs[0], cat->outputs[0]})
    if (soleConsumer(net, t) == nullptr) return nullptr;
  for (Layer* l : {flat, cat, uOdd, uEven, neg, oddSlice, evenSlice}) dead->push_back(l);
  return x;
}

//! The cache [S, R/2] of an interleaved cos/sin constant whose pairs (2k, 2k+1) are equal, read
//! against x [B, S, H, R] (seqAxis 1) or [B, H, S, R] (seqAxis 2): right-aligned dims
//! [1|B, S, 1, R] or [1|B, 1, S, R], the batch rows equal. Invalid otherwise.
HostTensor pairCache(const HostTensor& c, const Dims& x, size_t seqAxis) {
  if (!c.valid() || c.type() != DataType::kFLOAT || c.dims().empty() || c.dims().size() > 4) return HostTensor();
  Dims d(4 - c.dims().size(), 1);
  d.insert(d.end(), c.dims().begin(), c.dims().end());
  const int64_t s = x[seqAxis], r = x[3], h = r / 2;
  if (d[3] != r || d[seqAxis] != s || d[3 - seqAxis] != 1 || (d[0] != 1 && d[0] != x[0])) return HostTensor();
  const float* v = c.as<float>();
  for (int64_t b = 1; b < d[0]; ++b)
    if (std::memcmp(v, v + b * s * r, static_cast<size_t>(s * r) * sizeof(float)) != 0) return HostTensor();
  HostTensor out(DataType::kFLOAT, {s, h});
  for (int64_t i = 0; i < s; ++i)
    for (int64_t k = 0; k < h; ++k) {
      const float a = v[i * r + 2 * k];
      if (std::memcmp(&a, v + i * r + 2 * k + 1, sizeof(float)) != 0) return HostTensor();
      out.as<float>()[i * h + k] = a;
    }
  return out;
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

//! Dynamic shapes: an interleaved cos / sin `c` whose pairs are equal at every sample of `sym`,
//! read against x with the sequence on `seqAxis` (pairCache), its leading dims 1 there (so that
//! its rows, viewed as [-1, R/2], are the positions).
bool pairsEqualAtSamples(const Tensor* c, const Tensor* x, SymbolicDims& sym, size_t seqAxis) {
  if (!c || c->type != DataType::kFLOAT || sym.nbSamples() < 2) return false;
  for (size_t s = 0; s < sym.nbSamples(); ++s) {
    const TensorDesc& cd = sym.at(c, s);
    const Dims& xd = sym.at(x, s).dims;
    if (!cd.value.valid() || xd.size() != 4 || !isStatic(xd) || cd.value.dims().empty()) return false;
    for (size_t k = 0; k + 2 < cd.value.dims().size(); ++k)
      if (cd.value.dims()[k] != 1 && !(k + 4 - cd.value.dims().size() == seqAxis)) return false;
    if (!pairCache(cd.value, xd, seqAxis).valid()) return false;
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

//! Run-time caches and position ids for a dynamic x (sequence on `seqAxis`): cache =
//! Reshape(c[..., :R/2], [-1, R/2]) (interleaved pairs: c[..., 0:R:2]), ids = Expand(Unsqueeze(
//! Range(0, S, 1), 0), [B, S]) from Shape(x). R: the rotated width (x's last dim by default).
std::array<Tensor*, 3> runtimeRotaryInputs(Network& net, Tensor* x, Tensor* cosT, Tensor* sinT, const std::string& base,
                                           int64_t seqAxis = 2, bool interleaved = false, int64_t rotated = 0) {
  const int64_t r = rotated ? rotated : x->dims[3], h = r / 2;
  auto cache = [&](Tensor* c, const char* what) {
    std::vector<Tensor*> in{c, int64Const(net, base + "_h0", {0}), int64Const(net, base + "_h1", {interleaved ? r : h}),
                            int64Const(net, base + "_hax", {-1})};
    if (interleaved) in.push_back(int64Const(net, base + "_hstep", {2}));
    Tensor* half = addLayerOut(net, "Slice", in, {}, base + "_" + what + "_half");
    return addLayerOut(net, "Reshape", {half, int64Const(net, base + "_cache_shape", {-1, h})}, {}, base + "_" + what + "_cache");
  };
  Tensor* shape = addLayerOut(net, "Shape", {x}, {}, base + "_shape");
  Attributes axis0;
  axis0.set("axis", int64_t(0));
  Tensor* seq = addLayerOut(net, "Gather", {shape, int64Const(net, base + "_i2", {seqAxis}, true)}, axis0, base + "_seq");
  Tensor* bs = addLayerOut(net, "Gather", {shape, int64Const(net, base + "_i02", {0, seqAxis})}, axis0, base + "_batch_seq");
  Tensor* range = addLayerOut(net, "Range", {int64Const(net, base + "_zero", {0}, true), seq, int64Const(net, base + "_one", {1}, true)},
                              {}, base + "_positions");
  Tensor* row = addLayerOut(net, "Unsqueeze", {range, int64Const(net, base + "_ax0", {0})}, {}, base + "_position_row");
  Tensor* ids = addLayerOut(net, "Expand", {row, bs}, {}, base + "_position_ids");
  return {cache(cosT, "cos"), cache(sinT, "sin"), ids};
}

//! Constant caches and position ids 0..S-1 for every batch row of a static x ([B, S]).
std::array<Tensor*, 3> constantRotaryInputs(Network& net, const HostTensor& cosC, const HostTensor& sinC, int64_t b, int64_t s,
                                            const std::string& base) {
  HostTensor pos(DataType::kINT64, {b, s});
  for (int64_t i = 0; i < b * s; ++i) pos.as<int64_t>()[i] = i % s;
  return {net.addConstant(net.uniqueName(base + "_cos_cache"), cosC), net.addConstant(net.uniqueName(base + "_sin_cache"), sinC),
          net.addConstant(net.uniqueName(base + "_position_ids"), pos)};
}

//! R when Concat `cat` (on the last axis) joins head = full[..., :R] and pass = full[..., R:] of a
//! 4-D `full` back into full's dims, 0 < R < full's last dim, pass read by `cat` only (a partial
//! rotation's two parts); 0 otherwise.
int64_t rotatedWidth(const Network& net, const Layer* cat, const Layer* head, const Layer* pass, const Tensor* full) {
  if (!full || full->dims.size() != 4 || full->dims[3] <= 0) return 0;
  const int64_t axis = cat->attrs.getInt("axis", 0), d = full->dims[3];
  int64_t s0 = 0, e0 = 0, s1 = 0, e1 = 0;
  if ((axis != -1 && axis != 3) || !lastAxisSlice(head, full, &s0, &e0) || !lastAxisSlice(pass, full, &s1, &e1)) return 0;
  if (s0 != 0 || e0 <= 0 || e0 >= d || s1 != e0 || e1 != d || soleConsumer(net, pass->outputs[0]) != cat || cat->outputs[0]->dims != full->dims)
    return 0;
  return e0;
}

//! For Mul layer `m` reading `t`: its other operand.
Tensor* mulOperand(const Layer* m, const Tensor* t) {
  return m && m->op == "Mul" && m->inputs.size() == 2 ? otherInput(m, t) : nullptr;
}

//! x * cos + rotate_every_two(x) * sin, matched by fuseOne (`dead`: the rotation's layers, the Muls
//! and the Add) -> one interleaved RotaryEmbedding; the Concat of a partial rotation with x's
//! pass-through part joins it.
bool fuseInterleaved(Network& net, Layer* add, Tensor* x, Tensor* cosT, Tensor* sinT, std::vector<Layer*> dead,
                     const InputSamples& samples) {
  if (!cosT || !sinT || x->dims.size() != 4 || x->dims[3] <= 0) return false;
  const bool dynamic = !isStatic(x->dims);
  HostTensor cosC, sinC;
  size_t seqAxis = 0;
  std::optional<SymbolicDims> sym;
  if (dynamic) sym.emplace(samples);
  for (size_t a : {size_t(2), size_t(1)}) {  // [B, H, S, R] (the op's own form), then GPT-J's [B, S, H, R]
    if (dynamic) {  // checked at the samples, the caches sliced at run time; the head count static
      if (x->dims[3 - a] <= 0 || !pairsEqualAtSamples(cosT, x, *sym, a) || !pairsEqualAtSamples(sinT, x, *sym, a)) continue;
      seqAxis = a;
      break;
    }
    cosC = pairCache(cosT->value, x->dims, a);
    sinC = pairCache(sinT->value, x->dims, a);
    if (cosC.valid() && sinC.valid()) {
      seqAxis = a;
      break;
    }
  }
  if (seqAxis == 0) return false;
  auto readOnlyByDead = [&](const Tensor* t) {
    for (Layer* c : net.consumers(t))
      if (std::find(dead.begin(), dead.end(), c) == dead.end()) return false;
    return !t->isOutput;
  };
  // Partial rotation: x = xf[..., :R] and the sum's one reader is Concat(sum, xf[..., R:], -1).
  Tensor* xf = x;
  Tensor* result = add->outputs[0];
  int64_t rotaryDim = 0;
  Layer* head = x->producer;
  Layer* cat = soleConsumer(net, result);
  if (head && !head->inputs.empty() && cat && cat->op == "Concat" && cat->inputs.size() == 2 && cat->inputs[0] == result &&
      cat->inputs[1] && cat->inputs[1]->producer) {
    Tensor* full = head->inputs[0];
    Layer* pass = cat->inputs[1]->producer;
    if (rotatedWidth(net, cat, head, pass, full) == x->dims[3]) {
      xf = full;
      result = cat->outputs[0];
      rotaryDim = x->dims[3];
      dead.push_back(cat);
      dead.push_back(pass);
      if (readOnlyByDead(x)) dead.push_back(head);
    }
  }
  const Dims& d = xf->dims;
  const int64_t b = d[0], s = d[seqAxis];
  const std::string base = add->name;
  const std::array<Tensor*, 3> caches = dynamic ? runtimeRotaryInputs(net, xf, cosT, sinT, base, static_cast<int64_t>(seqAxis), true, x->dims[3])
                                                : constantRotaryInputs(net, cosC, sinC, b, s, base);  // cos, sin, position ids
  Attributes a;
  a.set("interleaved", int64_t(1));
  if (rotaryDim) a.set("rotary_embedding_dim", rotaryDim);
  Tensor* in = xf;
  if (seqAxis == 1) {  // [B, S, H, D] -> the op's 3-D form [B, S, H*D] with num_heads H (a view each way)
    a.set("num_heads", d[2]);
    const Dims rows{b, s, d[2] * d[3]};
    const Layer* split = xf->producer;  // the head split Reshape of a [B, S, H*D] projection: read that
    if (!dynamic && split && split->op == "Reshape" && !split->inputs.empty() && split->inputs[0] && split->inputs[0]->dims == rows)
      in = split->inputs[0];
    else  // B and S copied (shape entries 0)
      in = addReshape(net, xf, {0, 0, d[2] * d[3]}, base + "_rows", rows);
  }
  Layer* rope = net.addLayer("RotaryEmbedding", {in, caches[0], caches[1], caches[2]}, 1, std::move(a), net.uniqueName(base + "_rotary"));
  if (seqAxis == 2) {
    replaceWithFused(net, rope, dead, result);
    return true;
  }
  rope->outputs[0]->type = xf->type;
  rope->outputs[0]->dims = in->dims;
  rope->outputs[0]->dimsKnown = true;
  recordStandIn(rope, std::vector<const Layer*>(dead.begin(), dead.end()));
  for (Layer* l : dead) net.removeLayer(l);
  Layer* heads = net.addLayer("Reshape", {rope->outputs[0], addShapeConstant(net, base + "_heads_shape", {0, 0, d[2], d[3]})}, 1, {},
                              net.uniqueName(base + "_heads"));
  replaceWithFused(net, heads, {}, result);
  return true;
}

bool fuseOne(Network& net, Layer* add, const InputSamples& samples) {
  if (add->op != "Add" || add->inputs.size() != 2 || !add->inputs[0] || !add->inputs[1] || add->outputs.size() != 1) return false;
  for (int first = 0; first < 2; ++first) {
    Layer* mc = add->inputs[first]->producer;        // x * cos
    Layer* ms = add->inputs[1 - first]->producer;    // rotate_half(x) * sin
    if (!mc || !ms || mc->op != "Mul" || ms->op != "Mul" || mc->inputs.size() != 2 || ms->inputs.size() != 2) continue;
    for (int r = 0; r < 2; ++r) {
      Tensor* rot = ms->inputs[r];
      std::vector<Layer*> everyTwo;
      Tensor* x = rotateHalfSource(net, rot);
      if (!x) x = rotateEveryTwoSource(net, rot, &everyTwo);
      if (!x || x->type != DataType::kFLOAT) continue;
      Tensor* cosT = mulOperand(mc, x);
      Tensor* sinT = ms->inputs[1 - r];
      if (!cosT || soleConsumer(net, mc->outputs[0]) != add || soleConsumer(net, ms->outputs[0]) != add ||
          soleConsumer(net, rot) != ms)
        continue;
      if (mc->outputs[0]->dims != x->dims || add->outputs[0]->dims != x->dims) continue;
      if (!everyTwo.empty()) {
        everyTwo.insert(everyTwo.end(), {add, mc, ms});
        if (fuseInterleaved(net, add, x, cosT, sinT, std::move(everyTwo), samples)) return true;
        continue;
      }
      const std::string base = add->name;
      std::vector<Tensor*> in{x};
      if (isStatic(x->dims)) {
        const HostTensor cosC = halfCache(cosT->value, x->dims), sinC = halfCache(sinT ? sinT->value : HostTensor(), x->dims);
        if (!cosC.valid() || !sinC.valid()) continue;
        for (Tensor* t : constantRotaryInputs(net, cosC, sinC, x->dims[0], x->dims[2], base)) in.push_back(t);
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
  const int64_t r = head ? rotatedWidth(net, cat, head, pass, x) : 0;
  if (r == 0 || r % 2 != 0) return false;
  const int64_t attrDim = rope->attrs.getInt("rotary_embedding_dim", 0);
  if (attrDim != 0 && attrDim != r) return false;
  // A dynamic rotation reads its positions off Shape(x[..., :R]) (runtimeRotaryInputs: batch and
  // sequence, dims 0 and 2). Shapes whose dims are only gathered at other axes than the last read x
  // instead (the same dims there); any other Shape keeps the slice alive. Nothing else may read it.
  bool shapesRead = false;
  std::vector<Layer*> shapes;
  for (Layer* c : net.consumers(head->outputs[0])) {
    if (c == rope) continue;
    if (c->op != "Shape" || !c->domain.empty() || c->attrs.has("start") || c->attrs.has("end")) return false;
    shapes.push_back(c);
  }
  auto notLastDim = [&](const Layer* shape) {
    for (const Layer* g : net.consumers(shape->outputs[0])) {
      std::vector<int64_t> idx;
      if (g->op != "Gather" || g->inputs.size() != 2 || g->inputs[0] != shape->outputs[0] || g->attrs.getInt("axis", 0) != 0 ||
          !constantInts(g->inputs[1], &idx))
        return false;
      for (int64_t i : idx)
        if (i == 3 || i == -1) return false;
    }
    return !shape->outputs[0]->isOutput;
  };
  if (head->outputs[0]->isOutput || soleConsumer(net, rope->outputs[0]) != cat) return false;
  Attributes a = rope->attrs;
  a.set("rotary_embedding_dim", r);
  std::vector<Tensor*> in(rope->inputs.begin(), rope->inputs.end());
  in[0] = x;
  for (Layer* c : shapes) {
    if (notLastDim(c)) c->inputs[0] = x;
    else shapesRead = true;
  }
  Layer* fused = net.addLayer("RotaryEmbedding", in, 1, std::move(a), net.uniqueName(rope->name + "_partial"));
  std::vector<Layer*> dead{cat, rope, pass};
  if (!shapesRead) dead.push_back(head);
  replaceWithFused(net, fused, dead, cat->outputs[0]);
  return true;
}

}  // namespace

bool fuseRotaryPattern(Network& net, const InputSamples& samples) {
  const bool rotations = rewriteLayers(net, [&samples](Network& n, Layer* l) { return fuseOne(n, l, samples); });
  return rewriteLayers(net, fusePartial) || rotations;
}

}  // namespace kiln
