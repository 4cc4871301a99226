// Concat of constant step-1 Slices of one tensor along the Concat's axis -> one Gather with the
// concatenated index ranges. torch.roll is exported this way (Concat(Slice(x, -s..end),
// Slice(x, 0..-s)) per rolled axis; Swin's shifted windows do it on two axes, 82 Slice layers in
// Swin-T), and so are other reorderings along an axis. One Gather (a kernel every backend has)
// reads x once instead of a Slice per piece plus a Concat that reads them again; a roll over two
// axes becomes two Gathers, as the outer Concat's Slices then read the inner Gather.
#include <algorithm>
#include <vector>

#include "builder/passes/passes.h"

namespace kiln {

namespace {

//! Whether `s` is a Slice of `*x` (set when null) over only axis `axis` (of `rank`) with step 1 and
//! constant bounds: [*begin, *end) clamped to `dim` as ONNX Slice clamps them.
bool axisSlice(const Layer* s, int64_t axis, int64_t rank, int64_t dim, Tensor** x, int64_t* begin, int64_t* end) {
  if (!s || s->op != "Slice" || !s->domain.empty() || s->inputs.size() < 3 || !s->inputs[0]) return false;
  if (*x && s->inputs[0] != *x) return false;
  std::vector<int64_t> starts, ends, axes = {0}, steps = {1};
  if (!constantInts(s->inputs[1], &starts) || !constantInts(s->inputs[2], &ends) || starts.size() != 1 || ends.size() != 1)
    return false;
  if (s->inputs.size() > 3 && s->inputs[3] && (!constantInts(s->inputs[3], &axes) || axes.size() != 1)) return false;
  if (s->inputs.size() > 4 && s->inputs[4] && (!constantInts(s->inputs[4], &steps) || steps.size() != 1)) return false;
  if (steps[0] != 1 || (axes[0] < 0 ? axes[0] + rank : axes[0]) != axis) return false;
  auto clamp = [dim](int64_t v) { return std::clamp(v < 0 ? v + dim : v, int64_t(0), dim); };
  *x = s->inputs[0];
  *begin = clamp(starts[0]);
  *end = std::max(*begin, clamp(ends[0]));
  return true;
}

}  // namespace

bool lowerSliceConcat(Network& net) {
  bool changed = false;
  for (int i = 0; i < net.nbLayers(); ++i) {
    Layer* cat = net.layer(i);
    if (cat->op != "Concat" || !cat->domain.empty() || cat->inputs.size() < 2 || cat->outputs.size() != 1) continue;
    Tensor* x = nullptr;
    // x's dims are read from the first Slice's input; every piece must be a Slice of that tensor.
    const Tensor* first = cat->inputs[0];
    if (!first || !first->producer || first->producer->op != "Slice" || first->producer->inputs.empty() ||
        !first->producer->inputs[0] || !first->producer->inputs[0]->dimsKnown)
      continue;
    const Dims& xd = first->producer->inputs[0]->dims;
    const int64_t rank = static_cast<int64_t>(xd.size());
    int64_t axis = cat->attrs.getInt("axis", 0);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank || xd[axis] < 0) continue;
    std::vector<int64_t> indices;
    bool match = true;
    for (const Tensor* piece : cat->inputs) {
      int64_t begin = 0, end = 0;
      if (!piece || !axisSlice(piece->producer, axis, rank, xd[axis], &x, &begin, &end)) {
        match = false;
        break;
      }
      for (int64_t k = begin; k < end; ++k) indices.push_back(k);
    }
    // An empty result stays as it is.
    if (!match || indices.empty()) continue;
    HostTensor idx(DataType::kINT64, {static_cast<int64_t>(indices.size())});
    std::copy(indices.begin(), indices.end(), idx.as<int64_t>());
    for (const Tensor* piece : cat->inputs) recordFusion(cat, piece->producer);
    Attributes a;
    a.set("axis", axis);
    cat->op = "Gather";
    cat->attrs = a;
    cat->inputs = {x, net.addConstant(net.uniqueName(cat->name + "_indices"), idx)};
    changed = true;
  }
  return changed;
}

}  // namespace kiln
