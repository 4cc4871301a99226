// A Split over the head axis of a head reshape, as fused-QKV exports write it (Falcon / MQA: the
// projection [B, S, (H + 2) * D] viewed as [B, S, H + 2, D] and split into H, 1, 1 heads), becomes
// the Split of the 3-D projection over its last axis (sizes times D) followed by one head Reshape
// per part:
//   x3 [B, S, G*D] -> Reshape [B, S, G, D] -> Split(axis 2, g_i)
// becomes
//   x3 -> Split(axis 2, g_i * D) -> Reshape [B, S, g_i, D] each.
// The same elements move (one copy either way); what changes is that each part is now the head
// split of a [B, S, g_i * D] tensor, the form the rotary move and the attention fusion's 3-D form
// take (rotary_before_head_split.cpp, fuse_attention.cpp), so the head Transposes around the
// attention go. A dynamic batch and sequence where the profiles' samples prove them carried through
// the view; GPU builds (the forms it feeds are GPU fusions), before the rotary move.
#include "builder/passes/passes.h"

namespace kiln {

namespace {

bool moveOne(Network& net, Layer* split, SymbolicDims* sym) {
  if (split->op != "Split" || !split->domain.empty() || split->inputs.empty() || !split->inputs[0] || split->outputs.size() < 2)
    return false;
  Tensor* x4 = split->inputs[0];
  Layer* rs = x4->producer;
  if (!rs || rs->op != "Reshape" || !rs->domain.empty() || rs->inputs.empty() || !rs->inputs[0] || soleConsumer(net, x4) != split ||
      x4->isOutput)
    return false;
  Tensor* x3 = rs->inputs[0];
  if (!x3->dimsKnown || !x4->dimsKnown || x3->dims.size() != 3 || x4->dims.size() != 4) return false;
  const int64_t axis = split->attrs.getInt("axis", 0);
  if (axis != 2 && axis != -2) return false;
  const Dims &d3 = x3->dims, &d4 = x4->dims;
  const int64_t g = d4[2], d = d4[3];
  if (g <= 0 || d <= 0 || d3[2] != g * d) return false;
  // B and S carried through: static, or proved at the profiles' samples (two -1s need not be the
  // same dim); the new head Reshapes copy them (shape entries 0).
  if (!batchAndSequenceAgree(x3, x4, sym)) return false;
  std::vector<int64_t> sizes;
  for (const Tensor* o : split->outputs) {
    if (!o || !o->dimsKnown || o->dims.size() != 4 || o->dims[2] <= 0 || o->isOutput) return false;
    sizes.push_back(o->dims[2] * d);
  }
  const std::vector<Tensor*> flat = addLastAxisSplit(net, x3, sizes, split->name + "_flat");
  std::vector<Tensor*> parts;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const Tensor* old = split->outputs[i];
    parts.push_back(addReshape(net, flat[i], {0, 0, old->dims[2], d}, split->name + "_heads", old->dims));
  }
  recordStandIn(flat[0]->producer, {split, rs});
  for (size_t i = 0; i < parts.size(); ++i) net.replaceUses(split->outputs[i], parts[i]);
  net.removeLayer(split);
  net.removeLayer(rs);
  net.topoSort();
  return true;
}

//! Split(Unsqueeze(x, a), axis != a) -> the Split of x, each part unsqueezed after it (GPTBigCode's
//! fused Q / KV projection: Unsqueeze [B, 1, S, E + 2D], Split on the last axis). A Reshape reading a
//! part (Q's head split) reads the 3-D part instead, so the head split is one of a 3-D tensor, and
//! one-head parts (K, V) are Unsqueezes of 3-D tensors: both forms the 3-D attention takes. Static.
bool splitBeforeUnsqueeze(Network& net, Layer* split) {
  if (split->op != "Split" || !split->domain.empty() || split->inputs.empty() || !split->inputs[0] || split->outputs.size() < 2)
    return false;
  Tensor* u = split->inputs[0];
  const Layer* un = u->producer;
  if (!un || un->op != "Unsqueeze" || un->inputs.empty() || !un->inputs[0] || soleConsumer(net, u) != split || u->isOutput) return false;
  std::vector<int64_t> axes = un->attrs.getInts("axes");
  if (un->inputs.size() > 1 && un->inputs[1] && !constantInts(un->inputs[1], &axes)) return false;
  Tensor* x = un->inputs[0];
  if (axes.size() != 1 || !x->dimsKnown || !u->dimsKnown || !isStatic(u->dims)) return false;
  const int64_t r = static_cast<int64_t>(u->dims.size());
  int64_t a = axes[0] < 0 ? axes[0] + r : axes[0], s = split->attrs.getInt("axis", 0);
  if (s < 0) s += r;
  if (a < 0 || a >= r || s < 0 || s >= r || s == a) return false;
  for (const Tensor* o : split->outputs)
    if (!o || !o->dimsKnown || o->isOutput) return false;
  Attributes sa = split->attrs;
  sa.set("axis", s - (s > a ? 1 : 0));
  std::vector<Tensor*> in = split->inputs;
  in[0] = x;
  Layer* s3 = net.addLayer("Split", in, static_cast<int>(split->outputs.size()), sa, net.uniqueName(split->name + "_squeezed"));
  recordStandIn(s3, {split});
  for (size_t i = 0; i < split->outputs.size(); ++i) {
    Tensor* o = split->outputs[i];
    Tensor* p = s3->outputs[i];
    p->type = o->type;
    p->dims = o->dims;
    p->dims.erase(p->dims.begin() + a);
    p->dimsKnown = true;
    Tensor* unsqueezed = nullptr;
    for (Layer* c : net.consumers(o)) {
      const bool reshape = c->op == "Reshape" && c->inputs[0] == o && c->outputs[0]->dimsKnown && isStatic(c->outputs[0]->dims);
      if (reshape) {  // a static shape: 0 / -1 entries would read other dims now
        c->inputs[0] = p;
        c->inputs[1] = addShapeConstant(net, c->name + "_shape", c->outputs[0]->dims);
        continue;
      }
      if (!unsqueezed)
        unsqueezed = addReshape(net, p, o->dims, split->name + "_part");
      for (Tensor*& t : c->inputs)
        if (t == o) t = unsqueezed;
    }
  }
  net.removeLayer(split);
  net.topoSort();
  return true;
}

}  // namespace

bool splitBeforeHeadReshape(Network& net, const InputSamples& samples) {
  return rewriteLayers(net, samples, [](Network& n, Layer* l, SymbolicDims& sym) { return moveOne(n, l, &sym) || splitBeforeUnsqueeze(n, l); });
}

}  // namespace kiln
