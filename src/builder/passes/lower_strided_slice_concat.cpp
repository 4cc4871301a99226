// Concat of strided Slices that together take every phase of one tensor (a space-to-depth) ->
// Reshape + Transpose + Reshape. Swin's patch merging exports x[:, 0::2, 0::2], x[:, 1::2, 0::2],
// x[:, 0::2, 1::2], x[:, 1::2, 1::2] concatenated on channels (6 Slices and a Concat per stage,
// 21 layers in Swin-T), YOLOv5's Focus the same on NCHW's H and W. Each piece is a phase
// (o_1, .., o_m) of strides (s_1, .., s_m) over m axes; when the pieces are every phase once, in
// a mixed-radix order of some order of those axes, the Concat equals splitting each strided
// axis d into [d / s, s], moving the s dims (in that order) in front of the Concat's axis, and
// merging: one copy (a Transpose, which later passes may turn into a row Gather) instead of a
// copy per Slice plus the Concat's, and one launch instead of seven. Static dims, but for dynamic
// ones (a dynamic batch) in front of every axis the rewrite touches.
#include <algorithm>
#include <map>
#include <vector>

#include "builder/passes/passes.h"

namespace kiln {

namespace {

struct Phase {
  Tensor* root = nullptr;
  std::map<int64_t, std::pair<int64_t, int64_t>> axes;  // axis -> (offset, stride); stride > 1
  std::vector<const Layer*> slices;
};

//! The phase `t` is of its root: a chain of constant Slices, each axis sliced at most once, each
//! slice [o, end of the axis) with step s > 1, o < s and s dividing the axis; a step-1 slice of
//! a whole axis is allowed (a no-op). False for anything else.
bool phaseOf(const Tensor* t, Phase* ph) {
  while (t && t->producer && t->producer->op == "Slice" && t->producer->domain.empty()) {
    const Layer* s = t->producer;
    if (s->inputs.size() < 3 || !s->inputs[0] || !s->inputs[0]->dimsKnown) return false;
    const Dims& xd = s->inputs[0]->dims;
    const int64_t rank = static_cast<int64_t>(xd.size());
    std::vector<int64_t> starts, ends, axes, steps;
    if (!constantSliceArgs(s, &starts, &ends, &axes, &steps)) return false;
    for (size_t k = 0; k < starts.size(); ++k) {
      const int64_t axis = axes[k] < 0 ? axes[k] + rank : axes[k];
      if (axis < 0 || axis >= rank || xd[axis] <= 0) return false;
      const int64_t dim = xd[axis], step = steps[k];
      const int64_t begin = std::clamp(starts[k] < 0 ? starts[k] + dim : starts[k], int64_t(0), dim);
      const int64_t end = std::clamp(ends[k] < 0 ? ends[k] + dim : ends[k], int64_t(0), dim);
      if (step < 1 || end != dim || begin >= step || dim % step != 0 || ph->axes.count(axis)) return false;
      if (step == 1) continue;  // the whole axis
      ph->axes[axis] = {begin, step};
    }
    ph->slices.push_back(s);
    t = s->inputs[0];
  }
  ph->root = const_cast<Tensor*>(t);
  return !ph->axes.empty() && t && t->dimsKnown;  // dynamic dims: checked by the caller
}

//! The order of `axes` (most significant first) in which piece i's offsets are the mixed-radix
//! digits of i, or empty.
std::vector<int64_t> mixedRadixOrder(const std::vector<Phase>& pieces, std::vector<int64_t> axes) {
  std::sort(axes.begin(), axes.end());
  do {
    bool ok = true;
    for (size_t i = 0; i < pieces.size() && ok; ++i) {
      int64_t rest = static_cast<int64_t>(i);
      for (auto a = axes.rbegin(); a != axes.rend() && ok; ++a) {
        const auto& [offset, stride] = pieces[i].axes.at(*a);
        ok = rest % stride == offset;
        rest /= stride;
      }
    }
    if (ok) return axes;
  } while (std::next_permutation(axes.begin(), axes.end()));
  return {};
}

}  // namespace

bool lowerStridedSliceConcat(Network& net) {
  bool changed = false;
  for (int i = 0; i < net.nbLayers(); ++i) {
    Layer* cat = net.layer(i);
    if (cat->op != "Concat" || !cat->domain.empty() || cat->inputs.size() < 2 || cat->outputs.size() != 1) continue;
    std::vector<Phase> pieces(cat->inputs.size());
    bool match = true;
    for (size_t k = 0; k < pieces.size() && match; ++k)
      match = phaseOf(cat->inputs[k], &pieces[k]) && pieces[k].root == pieces[0].root;
    if (!match) continue;
    Tensor* x = pieces[0].root;
    const Dims& xd = x->dims;
    const int64_t rank = static_cast<int64_t>(xd.size());
    int64_t axis = cat->attrs.getInt("axis", 0);
    if (axis < 0) axis += rank;
    std::vector<int64_t> strided;
    int64_t phases = 1;
    for (const auto& [a, os] : pieces[0].axes) {
      strided.push_back(a);
      phases *= os.second;
    }
    // The same strides on the same axes (not the Concat's) in every piece, every phase once.
    for (const Phase& p : pieces) {
      match = match && p.axes.size() == strided.size() && !p.axes.count(axis);
      for (int64_t a : strided) match = match && p.axes.count(a) && p.axes.at(a).second == pieces[0].axes.at(a).second;
    }
    if (!match || axis < 0 || axis >= rank || phases != static_cast<int64_t>(pieces.size())) continue;
    // Dynamic dims (a dynamic batch) only in front of the Concat's axis and every strided axis:
    // there the split, the Transpose and the output keep them at the same index, so both
    // Reshapes copy them (0) from their inputs.
    const int64_t lead = std::min(axis, strided.front());
    bool dynamicOk = xd[axis] > 0;
    for (int64_t d = 0; d < rank; ++d) dynamicOk = dynamicOk && (xd[d] > 0 || (xd[d] < 0 && d < lead));
    const Tensor* y = cat->outputs[0];
    if (!dynamicOk || !y->dimsKnown || y->dims.size() != xd.size()) continue;
    for (int64_t d = 0; d < rank; ++d) dynamicOk = dynamicOk && (y->dims[d] > 0 || (y->dims[d] < 0 && d < lead));
    if (!dynamicOk) continue;
    const std::vector<int64_t> order = mixedRadixOrder(pieces, strided);
    if (order.empty()) continue;

    // x split: each strided axis d -> [d / s, s]; the output before merging: the s dims in
    // `order` just before the Concat's axis, each strided axis as d / s.
    std::vector<int64_t> split, perm, quotient(rank), phaseDim(rank, -1);
    for (int64_t d = 0; d < rank; ++d) {
      const auto it = pieces[0].axes.find(d);
      quotient[d] = static_cast<int64_t>(split.size());
      if (it == pieces[0].axes.end()) {
        split.push_back(xd[d] < 0 ? 0 : xd[d]);  // 0: Reshape copies the (dynamic) dim
      } else {
        split.push_back(xd[d] / it->second.second);
        phaseDim[d] = static_cast<int64_t>(split.size());
        split.push_back(it->second.second);
      }
    }
    for (int64_t d = 0; d < rank; ++d) {
      if (d == axis)
        for (int64_t a : order) perm.push_back(phaseDim[a]);
      perm.push_back(quotient[d]);
    }
    Dims out = y->dims;
    for (int64_t& d : out) d = d < 0 ? 0 : d;
    Layer* in = net.addLayer("Reshape", {x, addShapeConstant(net, cat->name + "_phases_shape", split)}, 1, Attributes{},
                             net.uniqueName(cat->name + "_phases"));
    Attributes ta;
    ta.set("perm", perm);
    Layer* move = net.addLayer("Transpose", {in->outputs[0]}, 1, ta, net.uniqueName(cat->name + "_phases_to_axis"));
    for (Layer* l : {in, move}) recordFusion(l, cat);
    for (const Phase& p : pieces)
      for (const Layer* s : p.slices) recordFusion(move, s);
    // The Concat becomes the final Reshape (its output, perhaps a network output, stays).
    cat->op = "Reshape";
    cat->attrs = Attributes{};
    cat->inputs = {move->outputs[0], addShapeConstant(net, cat->name + "_shape", out)};
    changed = true;
  }
  return changed;
}

}  // namespace kiln
