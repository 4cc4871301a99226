// RotaryEmbedding of one part of a packed projection -> the same op reading that part in place.
// GPT-NeoX / Pythia, Falcon, Phi and other decoders with one fused Q / K / V linear split its
// output [B, S, (H + 2 Hkv) * D] along the last axis (Split, or Slices) and rotate the Q and K
// parts; once the attention fusion reads V from the packed buffer itself (its views), the Split
// copies Q and K only to feed the two rotations. Each rotation instead reads its column range of
// the packed rows (kiln_rotary_columns = [offset, width], ops/fused_attrs.h) and the Split, read by
// nothing more, goes: one full read and write of the projection less per layer. Only where the
// backend has a kernel for the column form (`supported`); the values are the same.
#include <vector>

#include "builder/passes/passes.h"
#include "ops/fused_attrs.h"

namespace kiln {

namespace {

//! The packed tensor P and the column range of it that `x` is: x is output k of a Split of P along
//! its last axis, or a Slice of P over its last axis (step 1); P 3-D with a static last dim.
bool packedColumns(const Tensor* x, Tensor** packed, RotaryColumns* cols) {
  const Layer* l = x->producer;
  if (!l || !l->domain.empty() || l->inputs.empty() || !l->inputs[0]) return false;
  Tensor* p = l->inputs[0];
  if (!p->dimsKnown || p->dims.size() != 3 || p->dims[2] <= 0 || p->type != x->type || !x->dimsKnown || x->dims.size() != 3 ||
      x->dims[2] <= 0)
    return false;
  int64_t offset = 0;
  if (l->op == "Split") {
    int64_t axis = l->attrs.getInt("axis", 0);
    if (axis < 0) axis += 3;
    if (axis != 2) return false;
    size_t k = 0;
    while (k < l->outputs.size() && l->outputs[k] != x) {
      const Tensor* o = l->outputs[k];
      if (!o || !o->dimsKnown || o->dims.size() != 3 || o->dims[2] < 0) return false;
      offset += o->dims[2];
      ++k;
    }
    if (k == l->outputs.size()) return false;
  } else if (l->op == "Slice") {
    std::vector<int64_t> starts, ends, axes, steps;
    if (!constantSliceArgs(l, &starts, &ends, &axes, &steps) || starts.size() != 1) return false;
    if ((axes[0] != 2 && axes[0] != -1) || steps[0] != 1) return false;
    offset = starts[0] < 0 ? starts[0] + p->dims[2] : starts[0];
  } else {
    return false;
  }
  if (offset < 0 || offset + x->dims[2] > p->dims[2]) return false;
  *packed = p;
  cols->offset = offset;
  cols->width = x->dims[2];
  return true;
}

}  // namespace

bool rotaryPackedColumns(Network& net, const std::function<bool(const Layer&)>& supported) {
  bool changed = false;
  for (const auto& owned : net.layers()) {
    Layer* r = owned.get();
    if (r->op != "RotaryEmbedding" || !r->domain.empty() || r->inputs.empty() || !r->inputs[0] || r->attrs.getInt("num_heads", 0) <= 0 ||
        r->attrs.has(attr::kRotaryColumns))
      continue;
    Tensor* x = r->inputs[0];
    Tensor* packed = nullptr;
    RotaryColumns cols;
    if (!packedColumns(x, &packed, &cols)) continue;
    const Attributes before = r->attrs;
    r->inputs[0] = packed;
    setRotaryColumns(r->attrs, cols);
    if (supported && !supported(*r)) {
      r->inputs[0] = x;
      r->attrs = before;
      continue;
    }
    changed = true;
  }
  if (changed) net.removeDeadLayers();  // the Splits read by nothing now
  return changed;
}

}  // namespace kiln
