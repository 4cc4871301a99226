// A fused Q / K / V projection whose columns interleave the parts per head (GPT-NeoX / Pythia:
// [B, S, H * 3D] viewed as [B, S, H, 3D] and sliced into Q, K and V on the last axis, before or
// after the head Transpose) gets its weight columns (and bias) regrouped part-major, so that the
// parts are the Split of the 3-D projection:
//   y = x W (+ b) -> Reshape [B, S, H, G*D] (-> Transpose [B, H, S, G*D]) -> Slice [.., jD, (j+1)D)
// becomes
//   y' = x W' (+ b') -> Split(axis 2, G x H*D) -> part j: Reshape [B, S, H, D] (-> Transpose)
// with W' column (j, h, e) = W column (h, j, e). The same GEMM, no copy added (the Split moves
// what the Transpose and the Slices moved); each part is then the head split of a [B, S, H*D]
// tensor, the form the rotary move and the attention fusion's 3-D form take, so the head
// Transpose goes. A dynamic batch and sequence where the profiles' samples prove them carried
// through the view; GPU builds, before the rotary move.
#include <cstring>

#include "builder/passes/passes.h"

namespace kiln {

namespace {

//! The projection behind `y`: its MatMul with a constant 2-D weight [K, N] and, when y is the
//! MatMul plus a constant bias [N], that Add. False otherwise.
bool projection(const Network& net, Tensor* y, Layer** mm, Layer** add) {
  Layer* p = y->producer;
  *add = nullptr;
  if (p && p->op == "Add" && p->inputs.size() == 2) {
    for (int k = 0; k < 2; ++k) {
      Tensor* b = p->inputs[1 - k];
      Layer* m = p->inputs[k] ? p->inputs[k]->producer : nullptr;
      if (!m || m->op != "MatMul" || !b || !b->isConstant() || b->dims.size() != 1 || soleConsumer(net, p->inputs[k]) != p) continue;
      *add = p;
      p = m;
      break;
    }
    if (!*add) return false;
  }
  if (!p || p->op != "MatMul" || !p->domain.empty() || p->inputs.size() != 2 || !p->inputs[1]) return false;
  const Tensor* w = p->inputs[1];
  const int64_t n = y->dims.empty() ? -1 : y->dims.back();
  if (!w->isConstant() || !isFloat(w->type) || w->dims.size() != 2 || w->dims[1] != n) return false;
  if (*add && ((*add)->inputs[0]->type != (*add)->inputs[1]->type || otherInput(*add, p->outputs[0])->dims[0] != n)) return false;
  *mm = p;
  return true;
}

//! `v` ([.., H*G*D] along its last axis) with the last axis regrouped from (h, j, e) to (j, h, e).
HostTensor regroup(const HostTensor& v, int64_t h, int64_t g, int64_t d) {
  HostTensor out(v.type(), v.dims());
  const size_t es = elementSize(v.type()), n = static_cast<size_t>(h * g * d), rows = static_cast<size_t>(v.count()) / n;
  const auto* src = static_cast<const uint8_t*>(v.data());
  auto* dst = static_cast<uint8_t*>(out.data());
  for (size_t r = 0; r < rows; ++r)
    for (int64_t hi = 0; hi < h; ++hi)
      for (int64_t j = 0; j < g; ++j)
        std::memcpy(dst + (r * n + static_cast<size_t>((j * h + hi) * d)) * es, src + (r * n + static_cast<size_t>((hi * g + j) * d)) * es,
                    static_cast<size_t>(d) * es);
  return out;
}

bool regroupOne(Network& net, Layer* rs, SymbolicDims& sym) {
  if (rs->op != "Reshape" || !rs->domain.empty() || rs->inputs.empty() || !rs->inputs[0] || rs->outputs.size() != 1) return false;
  Tensor* y = rs->inputs[0];
  Tensor* x4 = rs->outputs[0];
  if (!y->dimsKnown || !x4->dimsKnown || y->dims.size() != 3 || x4->dims.size() != 4 || x4->dims[2] <= 0 || x4->dims[3] <= 0 ||
      y->dims[2] != x4->dims[2] * x4->dims[3] || soleConsumer(net, y) != rs || y->isOutput || x4->isOutput ||
      !batchAndSequenceAgree(y, x4, &sym))
    return false;
  Layer* mm = nullptr;
  Layer* add = nullptr;
  if (!projection(net, y, &mm, &add)) return false;
  // The slices: of x4, or of its one reader Transpose(0, 2, 1, 3).
  Layer* tr = nullptr;
  Tensor* sliced = x4;
  if (Layer* t = soleConsumer(net, x4); t && t->op == "Transpose" && t->attrs.getInts("perm") == std::vector<int64_t>{0, 2, 1, 3} &&
                                        !t->outputs[0]->isOutput) {
    tr = t;
    sliced = t->outputs[0];
  }
  const int64_t h = x4->dims[2], w = x4->dims[3];
  int64_t d = 0;
  std::vector<std::pair<Layer*, int64_t>> slices;  // slice, part
  for (Layer* c : net.consumers(sliced)) {
    std::vector<int64_t> starts, ends, axes, steps;
    if (c->op != "Slice" || c->inputs[0] != sliced || !constantSliceArgs(c, &starts, &ends, &axes, &steps) || starts.size() != 1 ||
        steps[0] != 1 || (axes[0] != -1 && axes[0] != 3) || !c->outputs[0]->dimsKnown || c->outputs[0]->isOutput)
      return false;
    const int64_t width = c->outputs[0]->dims.back(), start = starts[0] < 0 ? starts[0] + w : starts[0];
    if (width <= 0 || (d && width != d) || start < 0 || start % width != 0) return false;
    d = width;
    slices.emplace_back(c, start / width);
  }
  // Three parts or more (Q, K, V): two equal halves of each head are as likely a partial rotation's
  // rotated and passed parts (GPT-J), which the rotary fusion takes.
  if (slices.empty() || net.consumers(sliced).size() != slices.size() || w % d != 0 || w / d < 3) return false;
  const int64_t g = w / d, b = y->dims[0], s = y->dims[1];
  // The weight and bias regrouped (new constants: the old ones may be shared).
  mm->inputs[1] = net.addConstant(net.uniqueName(mm->name + "_regrouped_weight"), regroup(mm->inputs[1]->value, h, g, d));
  if (add) {
    const int k = add->inputs[0]->isConstant() ? 0 : 1;
    add->inputs[k] = net.addConstant(net.uniqueName(add->name + "_regrouped_bias"), regroup(add->inputs[k]->value, h, g, d));
  }
  // Everything the rewrite reads is queried by now: SymbolicDims is not asked about the new tensors.
  const std::vector<Tensor*> split = addLastAxisSplit(net, y, std::vector<int64_t>(static_cast<size_t>(g), h * d), rs->name + "_parts");
  recordStandIn(split[0]->producer, {rs});
  std::vector<Tensor*> parts(static_cast<size_t>(g), nullptr);
  for (auto [slice, j] : slices) {
    Tensor*& part = parts[static_cast<size_t>(j)];
    if (!part) {
      // B and S copied (shape entries 0): a dynamic batch and sequence too.
      part = addStandIn(net, rs, "Reshape", {split[static_cast<size_t>(j)], addShapeConstant(net, rs->name + "_heads", {0, 0, h, d})}, {},
                        rs->name + "_heads", y->type, {b, s, h, d});
      if (tr) {
        Attributes perm;
        perm.set("perm", std::vector<int64_t>{0, 2, 1, 3});
        part = addStandIn(net, tr, "Transpose", {part}, perm, tr->name, y->type, {b, h, s, d});
      }
    }
    net.replaceUses(slice->outputs[0], part);
    net.removeLayer(slice);
  }
  if (tr) net.removeLayer(tr);
  net.removeLayer(rs);
  net.topoSort();
  return true;
}

}  // namespace

bool regroupQkvHeads(Network& net, const InputSamples& samples) { return rewriteLayers(net, samples, regroupOne); }

}  // namespace kiln
