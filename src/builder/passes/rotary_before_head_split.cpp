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
// data movement again and the fusion reads the 3-D tensors in place. Static dims only; GPU builds
// (the attention fusion is GPU-only), before that fusion.
#include "builder/passes/passes.h"

namespace kiln {

namespace {

//! x3 ([B, S, H*D], static) when `t` ([B, H, S, D]) is Transpose(Reshape(x3), perm 0,2,1,3) and
//! each step's output is read by the next only; else null.
Tensor* headSplitSource(const Network& net, const Tensor* t) {
  const Layer* tr = t->producer;
  if (!tr || tr->op != "Transpose" || !tr->domain.empty() || tr->inputs.size() != 1 || !tr->inputs[0]) return nullptr;
  if (tr->attrs.getInts("perm", {}) != std::vector<int64_t>{0, 2, 1, 3} || soleConsumer(net, t) == nullptr) return nullptr;
  Tensor* x4 = tr->inputs[0];
  const Layer* rs = x4->producer;
  if (!rs || rs->op != "Reshape" || !rs->domain.empty() || rs->inputs.empty() || !rs->inputs[0] || soleConsumer(net, x4) != tr)
    return nullptr;
  Tensor* x3 = rs->inputs[0];
  if (!x3->dimsKnown || !x4->dimsKnown || x3->type != t->type || x3->dims.size() != 3 || x4->dims.size() != 4) return nullptr;
  const Dims &d3 = x3->dims, &d4 = x4->dims;
  if (!isStatic(d3) || !isStatic(d4)) return nullptr;
  return d3[0] == d4[0] && d3[1] == d4[1] && d3[2] == d4[2] * d4[3] ? x3 : nullptr;
}

bool moveOne(Network& net, Layer* rope) {
  if (rope->op != "RotaryEmbedding" || !rope->domain.empty() || rope->inputs.size() < 3 || rope->outputs.size() != 1 ||
      !rope->inputs[0] || rope->attrs.has("num_heads"))
    return false;
  Tensor* t = rope->inputs[0];
  if (!t->dimsKnown || t->dims.size() != 4 || !isStatic(t->dims) || soleConsumer(net, t) != rope) return false;
  Tensor* x3 = headSplitSource(net, t);
  Tensor* y = rope->outputs[0];
  if (!x3 || y->isOutput || !y->dimsKnown || y->dims != t->dims) return false;
  const Dims& d = t->dims;  // [B, H, S, D]
  const Layer *tr = t->producer, *rs = tr->inputs[0]->producer;
  // Each new layer stands for an original one (its precision constraint and --dumpLayerInfo record).
  auto takeOver = [](Tensor* made, const Layer* original) {
    recordFusion(made->producer, original);
    made->producer->fusedOps.erase(made->producer->fusedOps.begin());  // the new layer itself is not an original op
  };
  Attributes a = rope->attrs;
  a.set("num_heads", d[1]);
  std::vector<Tensor*> in = rope->inputs;
  in[0] = x3;
  Tensor* r3 = addTypedLayer(net, "RotaryEmbedding", in, a, rope->name + "_sequence_first", y->type, x3->dims);
  takeOver(r3, rope);
  const Dims split4{d[0], d[2], d[1], d[3]};
  Tensor* r4 = addTypedLayer(net, "Reshape", {r3, addShapeConstant(net, rope->name + "_heads_shape", split4)}, {}, rs->name + "_moved",
                             y->type, split4);
  takeOver(r4, rs);
  Tensor* split = addTypedLayer(net, "Transpose", {r4}, tr->attrs, tr->name + "_moved", y->type, d);
  takeOver(split, tr);
  net.replaceUses(y, split);  // the old rotary, Transpose and Reshape are dead now
  return true;
}

}  // namespace

bool rotaryBeforeHeadSplit(Network& net) {
  bool changed = false;
  const size_t count = net.layers().size();  // the layers this pass adds need no visit
  for (size_t i = 0; i < count; ++i)
    if (moveOne(net, net.layer(static_cast<int>(i)))) changed = true;
  if (changed) net.removeDeadLayers();  // the builder sorts the new layers after the pass
  return changed;
}

}  // namespace kiln
