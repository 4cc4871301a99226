// RotaryEmbedding of a head split -> RotaryEmbedding of the 3-D projection, split after it:
//   x3 [B, S, H*D] -> Reshape [B, S, H, D] -> Transpose(0, 2, 1, 3) -> RotaryEmbedding [B, H, S, D]
// becomes
//   x3 -> RotaryEmbedding(num_heads = H) [B, S, H*D] -> Reshape [B, S, H, D] -> Transpose(0, 2, 1, 3).
// ONNX's RotaryEmbedding takes both forms with the same caches and position ids (a position per
// batch row and sequence index, rotated per head), so no value changes. Why: LLaMA / Qwen2 / Mistral
// exports rotate Q and K after the head transpose, which hid Q and K from the attention fusion's
// 3-D form (fuse_attention.cpp: Q, K, V head splits of [B, S, H*D] tensors), and with GQA the view
// form does not apply either (one head count), so every layer kept its Q, K and V head transposes
// (a copy each; 7-9% of Qwen2 / LLaMA in the H100 / H200 zoo profiles). Moved, the split is plain
// data movement again and the fusion reads the 3-D tensors in place. Dynamic exports too: H and D
// static, B and S equal at every sample shape (symbolic_dims.h). GPU builds (the attention fusion is
// GPU-only), before that fusion.
#include "builder/passes/passes.h"
#include "builder/passes/symbolic_dims.h"

namespace kiln {

namespace {

//! Whether `rope` is t's only reader besides Shape layers (a dynamic export's rotation takes its
//! positions from Shape(t); they keep reading t, whose copy the shape pass later turns into a
//! Shape upstream, and can read nothing after the moved rotation: its positions come from them).
bool readByRopeAndShapes(const Network& net, const Tensor* t, const Layer* rope) {
  if (t->isOutput) return false;
  bool rotated = false;
  for (const Layer* c : net.consumers(t)) {
    if (c == rope) rotated = true;
    else if (c->op != "Shape" || !c->domain.empty()) return false;
  }
  return rotated;
}

//! x3 ([B, S, H*D], H*D static) when `t` ([B, H, S, D]) is Transpose(Reshape(x3), perm 0,2,1,3)
//! with H and D static, B and S carried through (symbolically where dynamic), and the Reshape's
//! output read by the Transpose only; else null.
Tensor* headSplitSource(const Network& net, const Tensor* t, SymbolicDims* sym) {
  const Layer* tr = t->producer;
  if (!tr || tr->op != "Transpose" || !tr->domain.empty() || tr->inputs.size() != 1 || !tr->inputs[0]) return nullptr;
  if (tr->attrs.getInts("perm", {}) != std::vector<int64_t>{0, 2, 1, 3}) return nullptr;
  Tensor* x4 = tr->inputs[0];
  const Layer* rs = x4->producer;
  if (!rs || rs->op != "Reshape" || !rs->domain.empty() || rs->inputs.empty() || !rs->inputs[0] || soleConsumer(net, x4) != tr)
    return nullptr;
  Tensor* x3 = rs->inputs[0];
  if (!x3->dimsKnown || !x4->dimsKnown || x3->type != t->type || x3->dims.size() != 3 || x4->dims.size() != 4) return nullptr;
  const Dims &d3 = x3->dims, &d4 = x4->dims;
  if (d4[2] <= 0 || d4[3] <= 0 || d3[2] != d4[2] * d4[3]) return nullptr;
  return batchAndSequenceAgree(x3, x4, sym) ? x3 : nullptr;
}

//! Qwen3 / OLMo-2 / Persimmon normalize each head of Q and K before the head transpose:
//! Transpose(N(Reshape(x3)), 0,2,1,3) with N an RMSNormalization over D. N's output [B, S, H, D] is
//! as much the head split of a 3-D tensor as the projection was, so a view pair goes between it and
//! the Transpose (Reshape to [B, S, H*D] and back), carrying B and S by construction; returns that
//! [B, S, H*D] view. Any producer other than a Reshape (headSplitSource's case); H and D static, B and
//! S copied (dynamic exports too). Null, adding nothing, where it does not apply.
Tensor* exposeHeadSplit(Network& net, const Tensor* t) {
  Layer* tr = t->producer;
  if (!tr || tr->op != "Transpose" || !tr->domain.empty() || tr->inputs.size() != 1 || !tr->inputs[0] ||
      tr->attrs.getInts("perm", {}) != std::vector<int64_t>{0, 2, 1, 3})
    return nullptr;
  Tensor* x4 = tr->inputs[0];
  const Layer* p = x4->producer;
  if (!p || p->op == "Reshape" || soleConsumer(net, x4) != tr || x4->isOutput || !x4->dimsKnown || x4->dims.size() != 4 ||
      x4->dims[2] <= 0 || x4->dims[3] <= 0 || x4->type != t->type)
    return nullptr;
  // B and S copied (shape entries 0): a dynamic batch and sequence pass through both views.
  const Dims& d = x4->dims;
  const Dims rows{d[0], d[1], d[2] * d[3]};
  Tensor* x3 = addReshape(net, x4, {0, 0, d[2] * d[3]}, p->name + "_rows", rows);
  tr->inputs[0] = addReshape(net, x3, {0, 0, d[2], d[3]}, p->name + "_heads", d);
  return x3;
}

bool moveOne(Network& net, Layer* rope, SymbolicDims* sym) {
  if (rope->op != "RotaryEmbedding" || !rope->domain.empty() || rope->inputs.size() < 3 || rope->outputs.size() != 1 ||
      !rope->inputs[0] || rope->attrs.has("num_heads"))
    return false;
  Tensor* t = rope->inputs[0];
  Tensor* y = rope->outputs[0];
  if (!t->dimsKnown || t->dims.size() != 4 || !readByRopeAndShapes(net, t, rope) || y->isOutput || !y->dimsKnown || y->dims.size() != 4)
    return false;
  Tensor* x3 = headSplitSource(net, t, sym);
  if (!x3) x3 = exposeHeadSplit(net, t);  // the move's first change: made only where the move follows
  if (!x3) return false;
  const Dims& d = t->dims;  // [B, H, S, D]; H and D static
  const Layer *tr = t->producer, *rs = tr->inputs[0]->producer;
  Attributes a = rope->attrs;
  a.set("num_heads", d[1]);
  std::vector<Tensor*> in = rope->inputs;
  in[0] = x3;
  // Each new layer stands for its original (addStandIn: precision constraint, --dumpLayerInfo record).
  Tensor* r3 = addStandIn(net, rope, "RotaryEmbedding", in, a, rope->name + "_sequence_first", y->type, x3->dims);
  // [0, 0, H, D]: B and S copied from the rotated tensor, so one shape serves every run shape.
  Tensor* r4 = addStandIn(net, rs, "Reshape", {r3, addShapeConstant(net, rope->name + "_heads_shape", Dims{0, 0, d[1], d[3]})}, {},
                          rs->name + "_moved", y->type, tr->inputs[0]->dims);
  Tensor* split = addStandIn(net, tr, "Transpose", {r4}, tr->attrs, tr->name + "_moved", y->type, d);
  net.replaceUses(y, split);  // the old rotary is dead now, the old split too unless a Shape reads it
  return true;
}

}  // namespace

bool rotaryBeforeHeadSplit(Network& net, const InputSamples& samples) {
  bool changed = false;
  // Queried only for tensors the rewrites leave as they are (each move adds layers and rewires the
  // readers of a rotation's output), so one set of sample dims serves the whole pass.
  SymbolicDims sym(samples);
  const size_t count = net.layers().size();  // the layers this pass adds need no visit
  for (size_t i = 0; i < count; ++i)
    if (moveOne(net, net.layer(static_cast<int>(i)), &sym)) changed = true;
  if (changed) net.removeDeadLayers();  // the builder sorts the new layers after the pass
  return changed;
}

}  // namespace kiln
