// Channel shuffles as gathers (CPU). ShuffleNet's channel shuffle is exported as
// Reshape([N, g, C/g, H, W]) -> Transpose(perm swapping the two split axes) -> Reshape([N, C, H, W]),
// and the next unit splits the result in halves with Slices (or a Split): a Transpose copy, then a
// copy per Slice. The three views are one Gather of x along the channels with a constant
// permutation (output channel j = c * g + i reads input channel i * C/g + c), and a Slice / Split
// of a constant-index Gather is a Gather of the sliced indices; so a unit's shuffle and split become
// one Gather per half, each reading x once (gather_any_memcpy copies whole H*W planes), and the
// Concat before them writes nothing (its inputs are written into it: runtime/resolve.cpp).
#include <algorithm>
#include <vector>

#include "builder/passes/passes.h"

namespace kiln {

namespace {

//! The only consumer of t, if it is an `op` layer of the default domain with one output.
Layer* soleConsumerOp(const Network& net, const Tensor* t, const char* op) {
  Layer* c = soleConsumer(net, t);
  return c && c->op == op && c->domain.empty() && c->outputs.size() == 1 ? c : nullptr;
}

//! Gather(x, indices, axis) in place of `l` (the layer keeps its name and output).
void becomeGather(Network& net, Layer* l, Tensor* x, const std::vector<int64_t>& indices, int64_t axis) {
  HostTensor idx(DataType::kINT64, {static_cast<int64_t>(indices.size())});
  std::copy(indices.begin(), indices.end(), idx.as<int64_t>());
  Attributes a;
  a.set("axis", axis);
  l->op = "Gather";
  l->attrs = a;
  l->inputs = {x, net.addConstant(net.uniqueName(l->name + "_indices"), idx)};
}

//! Reshape (axis a of x split in (g, k)) -> Transpose (swapping them) -> Reshape (back to x's dims),
//! rewritten as a Gather on axis a. `r1` is the first Reshape.
bool foldShuffle(Network& net, Layer* r1) {
  if (r1->op != "Reshape" || !r1->domain.empty() || r1->inputs.empty() || r1->outputs.size() != 1) return false;
  Tensor* x = r1->inputs[0];
  if (!x || !x->dimsKnown || !isStatic(x->dims) || !r1->outputs[0]->dimsKnown) return false;
  const Dims &xd = x->dims, &sd = r1->outputs[0]->dims;
  if (sd.size() != xd.size() + 1) return false;
  size_t a = 0;  // the split axis: the first place the dims differ
  while (a < xd.size() && xd[a] == sd[a]) ++a;
  if (a >= xd.size() || sd[a] < 2 || sd[a + 1] < 2 || sd[a] * sd[a + 1] != xd[a]) return false;
  for (size_t k = a + 1; k < xd.size(); ++k)
    if (xd[k] != sd[k + 1]) return false;
  Layer* t = soleConsumerOp(net, r1->outputs[0], "Transpose");
  if (!t) return false;
  std::vector<int64_t> perm = t->attrs.getInts("perm");
  if (perm.size() != sd.size()) return false;
  for (size_t k = 0; k < perm.size(); ++k) {
    const int64_t want = k == a ? int64_t(a + 1) : k == a + 1 ? int64_t(a) : int64_t(k);
    if (perm[k] != want) return false;
  }
  Layer* r2 = soleConsumerOp(net, t->outputs[0], "Reshape");
  if (!r2 || !r2->outputs[0]->dimsKnown || r2->outputs[0]->dims != xd) return false;
  const int64_t g = sd[a], k = sd[a + 1];
  std::vector<int64_t> idx(static_cast<size_t>(g * k));
  for (int64_t c = 0; c < k; ++c)
    for (int64_t i = 0; i < g; ++i) idx[static_cast<size_t>(c * g + i)] = i * k + c;
  recordFusion(r2, r1);
  recordFusion(r2, t);
  becomeGather(net, r2, x, idx, static_cast<int64_t>(a));
  return true;
}

//! A Gather with constant 1-D indices on axis `*axis`: its indices (and x, axis).
bool constantGather(const Layer* g, Tensor** x, std::vector<int64_t>* idx, int64_t* axis) {
  if (!g || g->op != "Gather" || !g->domain.empty() || g->inputs.size() != 2 || !g->inputs[0] || !g->inputs[0]->dimsKnown)
    return false;
  if (!constantInts(g->inputs[1], idx) || g->inputs[1]->dims.size() != 1) return false;
  const int64_t rank = static_cast<int64_t>(g->inputs[0]->dims.size());
  int64_t ax = g->attrs.getInt("axis", 0);
  if (ax < 0) ax += rank;
  const int64_t dim = ax >= 0 && ax < rank ? g->inputs[0]->dims[ax] : -1;
  if (dim < 0) return false;
  for (int64_t& i : *idx) {
    if (i < -dim || i >= dim) return false;
    if (i < 0) i += dim;
  }
  *x = g->inputs[0];
  *axis = ax;
  return true;
}

//! Slice of a constant-index Gather, only along the Gather's axis, constant bounds and step ->
//! a Gather of the selected indices.
bool foldSliceOfGather(Network& net, Layer* s) {
  if (s->op != "Slice" || !s->domain.empty() || s->inputs.size() < 3 || !s->inputs[0] || s->outputs.size() != 1) return false;
  Tensor* x = nullptr;
  std::vector<int64_t> idx;
  int64_t axis = 0;
  Layer* g = s->inputs[0]->producer;
  if (!constantGather(g, &x, &idx, &axis)) return false;
  const int64_t rank = static_cast<int64_t>(s->inputs[0]->dims.size()), n = static_cast<int64_t>(idx.size());
  std::vector<int64_t> starts, ends, axes = {0}, steps = {1};
  if (!constantInts(s->inputs[1], &starts) || !constantInts(s->inputs[2], &ends) || starts.size() != 1 || ends.size() != 1)
    return false;
  if (s->inputs.size() > 3 && s->inputs[3] && (!constantInts(s->inputs[3], &axes) || axes.size() != 1)) return false;
  if (s->inputs.size() > 4 && s->inputs[4] && (!constantInts(s->inputs[4], &steps) || steps.size() != 1)) return false;
  if ((axes[0] < 0 ? axes[0] + rank : axes[0]) != axis || steps[0] <= 0) return false;
  auto clamp = [n](int64_t v) { return std::clamp(v < 0 ? v + n : v, int64_t(0), n); };
  const int64_t begin = clamp(starts[0]), end = clamp(ends[0]);
  std::vector<int64_t> picked;
  for (int64_t i = begin; i < end; i += steps[0]) picked.push_back(idx[static_cast<size_t>(i)]);
  if (picked.empty()) return false;
  recordFusion(s, g);
  becomeGather(net, s, x, picked, axis);
  return true;
}

//! Split of a constant-index Gather along its axis with constant sizes -> one Gather per output.
bool foldSplitOfGather(Network& net, Layer* s) {
  if (s->op != "Split" || !s->domain.empty() || s->inputs.empty() || !s->inputs[0]) return false;
  Tensor* x = nullptr;
  std::vector<int64_t> idx;
  int64_t axis = 0;
  Layer* g = s->inputs[0]->producer;
  if (!constantGather(g, &x, &idx, &axis)) return false;
  const int64_t rank = static_cast<int64_t>(s->inputs[0]->dims.size());
  int64_t sa = s->attrs.getInt("axis", 0);
  if ((sa < 0 ? sa + rank : sa) != axis) return false;
  // Each output's extent along the axis (the split sizes, however they were given).
  std::vector<int64_t> sizes;
  for (const Tensor* o : s->outputs) {
    if (o->isOutput) return false;
    if (!o->dimsKnown || o->dims.size() != static_cast<size_t>(rank) || o->dims[axis] < 1) return false;
    sizes.push_back(o->dims[axis]);
  }
  int64_t at = 0;
  for (int64_t n : sizes) at += n;
  if (at != static_cast<int64_t>(idx.size())) return false;
  at = 0;
  std::vector<Layer*> gathers;
  for (size_t k = 0; k < s->outputs.size(); ++k) {
    std::vector<int64_t> picked(idx.begin() + at, idx.begin() + at + sizes[k]);
    at += sizes[k];
    Layer* part = net.addLayer("Gather", {x}, 1, Attributes{}, net.uniqueName(s->name + "_" + std::to_string(k)));
    becomeGather(net, part, x, picked, axis);
    recordFusion(part, g);
    recordFusion(part, s);
    part->outputs[0]->type = s->outputs[k]->type;
    part->outputs[0]->dims = s->outputs[k]->dims;
    part->outputs[0]->dimsKnown = true;
    gathers.push_back(part);
  }
  std::vector<Tensor*> outs = s->outputs;
  net.removeLayer(s);
  for (size_t k = 0; k < outs.size(); ++k) net.replaceUses(outs[k], gathers[k]->outputs[0]);
  return true;
}

}  // namespace

bool foldChannelShuffle(Network& net) {
  bool changed = false;
  for (int i = 0; i < net.nbLayers(); ++i) changed = foldShuffle(net, net.layer(i)) || changed;
  for (int i = 0; i < net.nbLayers(); ++i) {
    Layer* l = net.layer(i);
    changed = foldSliceOfGather(net, l) || changed;
    if (l->op == "Split" && foldSplitOfGather(net, l)) {
      changed = true;
      --i;  // the Split is gone; its Gathers were appended
    }
  }
  if (changed) {
    net.topoSort();
    net.removeDeadLayers();
  }
  return changed;
}

}  // namespace kiln
