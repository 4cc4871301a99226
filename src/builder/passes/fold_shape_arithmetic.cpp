// The shape arithmetic of dynamic exports, folded at build time. A PyTorch export with dynamic
// axes computes every view's target at run time: Shape -> Gather -> Unsqueeze -> Concat ->
// Reshape (BERT's head split: [B, S, H*D] -> Concat(B, S, H, D)), Where(Equal(shape, -1), ...)
// -> Expand. Left alone, the targets are unknown to the builder, every dim after them is -1 and
// the fusions that need H and D (the attention's head form) refuse. With symbolic dims
// (symbolic_dims.h) the pass rewrites:
//   - integer tensors that have one value across the profiles (Where(Equal(B, -1), 1, B) == B
//     never holds) into constants;
//   - a Reshape target into a constant with 0 (copy the input's dim) where the output dim is the
//     input's dim at the same index, literal dims where it is constant, and at most one -1;
//   - an Expand target into a constant with 1 where the output dim is the input's dim;
//   - Reshape / Expand / Squeeze / Unsqueeze / Flatten that keep their input's symbolic dims into
//     nothing (their readers read the input),
// each only when the op's own shape inference gives the original output dims at every sample.
// The Shape/Gather/Concat chains then have no readers and go as dead code: a dynamic export
// lowers to the layers of a fixed-shape one.
#include <algorithm>

#include "builder/passes/passes.h"
#include "builder/passes/symbolic_dims.h"
#include "ops/op_registry.h"
#include "ops/shape_propagation.h"

namespace kiln {

namespace {

// Whether layer l with `target` as its input 1 infers y's dims at every sample.
bool targetReproduces(SymbolicDims& sym, const Layer* l, const HostTensor& target) {
  for (size_t s = 0; s < sym.nbSamples(); ++s) {
    LayerDesc d = describeLayer(*l);
    d.inputs[0] = sym.at(l->inputs[0], s);
    d.inputs[1] = TensorDesc{target.type(), target.dims(), target};
    for (TensorDesc& o : d.outputs) o = TensorDesc{};
    try {
      inferLayer(d);
    } catch (const std::exception&) {
      return false;
    }
    const Dims& want = sym.at(l->outputs[0], s).dims;
    if (d.outputs.size() != 1 || !isStatic(want) || d.outputs[0].dims != want) return false;
  }
  return true;
}

HostTensor int64Vector(const std::vector<int64_t>& v) {
  HostTensor t(DataType::kINT64, Dims{static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.as<int64_t>()[i] = v[i];
  return t;
}

size_t rankOf(SymbolicDims& sym, const Tensor* t) { return sym.at(t, 0).dims.size(); }

// The target that reshapes `src` to y's symbolic dims with 0 / literal dims / one -1, verified at
// every sample; empty when there is none.
HostTensor reshapeTarget(SymbolicDims& sym, Layer* l, Tensor* src) {
  const Tensor* y = l->outputs[0];
  std::vector<int64_t> target(rankOf(sym, y));
  bool inferred = false;
  for (size_t j = 0; j < target.size(); ++j) {
    const int64_t c = sym.constantDim(y, j);
    if (c > 0) target[j] = c;
    else if (j < rankOf(sym, src) && sym.sameDim(y, j, src, j)) target[j] = 0;
    else if (!inferred && c < 0) target[j] = -1, inferred = true;
    else return {};
  }
  HostTensor t = int64Vector(target);
  Tensor* x = l->inputs[0];
  l->inputs[0] = src;  // verified as it would run
  const bool ok = targetReproduces(sym, l, t);
  l->inputs[0] = x;
  return ok ? t : HostTensor();
}

bool isView(const Layer* l) {
  return l && (l->op == "Reshape" || l->op == "Flatten" || l->op == "Squeeze" || l->op == "Unsqueeze") && !l->inputs.empty() &&
         l->inputs[0] && l->outputs.size() == 1;
}

// Reshape(x, computed shape) -> Reshape(x, constant with 0 / literal dims / one -1). Where x is
// itself a view (Reshape, Flatten, Squeeze, Unsqueeze: the same elements in the same order) that
// lost a dim the target needs (transformers' mask: [B, 1, 1, S, 1] -> [B*S] -> [B, 1, 1, S]), the
// Reshape reads the view's input instead.
bool foldReshapeTarget(Network& net, SymbolicDims& sym, Layer* l) {
  if (l->inputs.size() != 2 || !l->inputs[0] || !l->inputs[1] || l->inputs[1]->isConstant() || l->attrs.getInt("allowzero", 0))
    return false;
  Tensor* src = l->inputs[0];
  for (int depth = 0; src && depth < 4; ++depth) {
    HostTensor t = reshapeTarget(sym, l, src);
    if (t.valid()) {
      l->inputs[0] = src;
      l->inputs[1] = net.addConstant(net.uniqueName(l->name + "_shape"), t);
      return true;
    }
    src = isView(src->producer) && src->producer->inputs[0]->type == src->type ? src->producer->inputs[0] : nullptr;
  }
  return false;
}

// Expand(x, computed shape) -> Expand(x, constant with 1 where x's dim is kept).
bool foldExpandTarget(Network& net, SymbolicDims& sym, Layer* l) {
  if (l->inputs.size() != 2 || !l->inputs[0] || !l->inputs[1] || l->inputs[1]->isConstant()) return false;
  const Tensor *x = l->inputs[0], *y = l->outputs[0];
  const size_t n = rankOf(sym, y), rx = rankOf(sym, x);
  if (rx > n) return false;
  std::vector<int64_t> target(n);
  for (size_t j = 0; j < n; ++j) {
    const int64_t c = sym.constantDim(y, j);
    if (j >= n - rx && sym.sameDim(y, j, x, j - (n - rx))) target[j] = 1;
    else if (c >= 0) target[j] = c;
    else return false;
  }
  HostTensor t = int64Vector(target);
  if (!targetReproduces(sym, l, t)) return false;
  l->inputs[1] = net.addConstant(net.uniqueName(l->name + "_shape"), t);
  return true;
}

// An integer output with one value at every sample -> a constant its readers read instead.
bool foldConstantValue(Network& net, SymbolicDims& sym, Tensor* o) {
  if (o->isConstant() || o->isOutput || isFloat(o->type) || net.consumers(o).empty()) return false;
  const HostTensor* v = sym.constantValue(o);
  if (!v) return false;
  net.replaceUses(o, net.addConstant(net.uniqueName(o->name + "_folded"), *v));
  return true;
}

bool keepsDims(const std::string& op) {
  return op == "Reshape" || op == "Expand" || op == "Squeeze" || op == "Unsqueeze" || op == "Flatten";
}

//! The positions of the 1-D int vector `v` (n values) that its readers use: where every reader is a
//! Gather over axis 0 with constant indices (a dynamic export's batch and sequence lookups, maybe
//! through a permuting Gather first), the positions those reach; else all n. False when an index
//! is out of range.
bool usedPositions(const Network& net, const Tensor* v, int64_t n, std::vector<bool>* used, int depth = 3) {
  used->assign(static_cast<size_t>(n), false);
  std::vector<int64_t> idx;
  for (const Layer* g : net.consumers(v)) {
    if (depth == 0 || g->op != "Gather" || !g->domain.empty() || g->inputs.size() != 2 || g->inputs[0] != v ||
        g->attrs.getInt("axis", 0) != 0 || !constantInts(g->inputs[1], &idx) || g->outputs.size() != 1 || g->outputs[0]->isOutput) {
      used->assign(static_cast<size_t>(n), true);
      return true;
    }
    std::vector<bool> below(idx.size(), true);  // a scalar index: its one value is read
    if (!g->inputs[1]->value.dims().empty() &&
        !usedPositions(net, g->outputs[0], static_cast<int64_t>(idx.size()), &below, depth - 1))
      return false;
    for (size_t j = 0; j < idx.size(); ++j) {
      const int64_t k = idx[j] < 0 ? idx[j] + n : idx[j];
      if (k < 0 || k >= n) return false;
      if (below[j]) (*used)[static_cast<size_t>(k)] = true;
    }
  }
  return true;
}

// Shape(t) with every dim of t that its readers use (in the Shape's start..end) one of the dims of
// an input x of t's producer -> those dims of Shape(x): Gather(Shape(x), dims) for the Shape, or,
// where every reader gathers constant positions, each Gather reading Shape(x) at the mapped
// positions (a head Reshape [B, S, H, D] of x [B, S, H*D] still gives B and S).
bool readShapeUpstream(Network& net, SymbolicDims& sym, Layer* l) {
  if (l->inputs.size() != 1 || !l->inputs[0] || l->outputs.size() != 1 || l->outputs[0]->isOutput || net.consumers(l->outputs[0]).empty())
    return false;
  Tensor* t = l->inputs[0];
  const Layer* p = t->producer;
  const int64_t rank = static_cast<int64_t>(rankOf(sym, t));
  auto clampAxis = [rank](int64_t a) { return std::clamp(a < 0 ? a + rank : a, int64_t(0), rank); };
  const int64_t start = clampAxis(l->attrs.getInt("start", 0)), end = clampAxis(l->attrs.getInt("end", rank));
  if (!p || start >= end) return false;
  std::vector<bool> used;
  if (!usedPositions(net, l->outputs[0], end - start, &used)) return false;
  const bool all = std::all_of(used.begin(), used.end(), [](bool u) { return u; });
  if (std::none_of(used.begin(), used.end(), [](bool u) { return u; })) return false;  // dead readers: nothing to move
  for (Tensor* x : p->inputs) {
    if (!x || x->isConstant()) continue;
    std::vector<int64_t> idx(static_cast<size_t>(end - start), -1);  // position in Shape(x) of each used dim
    const size_t rx = rankOf(sym, x);
    if (rx == 0) continue;  // a scalar has no dims to read
    bool mapped = true;
    for (int64_t k = start; k < end && mapped; ++k) {
      if (!used[static_cast<size_t>(k - start)]) continue;
      for (size_t m = 0; m < rx && idx[static_cast<size_t>(k - start)] < 0; ++m)
        if (sym.sameDim(t, static_cast<size_t>(k), x, m)) idx[static_cast<size_t>(k - start)] = static_cast<int64_t>(m);
      mapped = idx[static_cast<size_t>(k - start)] >= 0;
    }
    if (!mapped) continue;
    Tensor* sx = net.addLayer("Shape", {x}, 1, {}, net.uniqueName(l->name + "_upstream"))->outputs[0];
    if (all) {
      Attributes axis0;
      axis0.set("axis", int64_t(0));
      Layer* g = net.addLayer("Gather", {sx, net.addConstant(net.uniqueName(l->name + "_dims"), int64Vector(idx))}, 1, axis0,
                              net.uniqueName(l->name + "_gather"));
      net.replaceUses(l->outputs[0], g->outputs[0]);
      return true;
    }
    for (Layer* g : net.consumers(l->outputs[0])) {  // each a Gather of constant positions (usedPositions)
      const HostTensor& was = g->inputs[1]->value;
      HostTensor moved(DataType::kINT64, was.dims());
      for (int64_t i = 0; i < moved.count(); ++i) {
        const int64_t v = was.getInt(i), k = v < 0 ? v + (end - start) : v;
        // A position no reader reaches holds any dim of x (0): nothing reads it.
        moved.as<int64_t>()[i] = std::max<int64_t>(idx[static_cast<size_t>(k)], 0);
      }
      g->inputs[0] = sx;
      g->inputs[1] = net.addConstant(net.uniqueName(g->name + "_upstream_dims"), moved);
    }
    return true;
  }
  return false;
}

}  // namespace

bool foldShapeArithmetic(Network& net, const InputSamples& samples) {
  SymbolicDims sym(samples);
  std::vector<Layer*> layers;
  for (auto& l : net.layers()) layers.push_back(l.get());
  bool changed = false;
  for (Layer* l : layers) {
    const OpDef* def = OpRegistry::instance().find(l->op);
    if (l->domain.empty() && def && def->foldable)
      for (Tensor* o : l->outputs) changed = foldConstantValue(net, sym, o) || changed;
    if (l->op == "Reshape") changed = foldReshapeTarget(net, sym, l) || changed;
    if (l->op == "Expand") changed = foldExpandTarget(net, sym, l) || changed;
  }
  for (Layer* l : layers) {
    if (!keepsDims(l->op) || l->inputs.empty() || !l->inputs[0] || l->outputs.size() != 1) continue;
    Tensor *x = l->inputs[0], *y = l->outputs[0];
    if (y->isOutput || x->type != y->type || net.consumers(y).empty() || !sym.sameDims(x, y)) continue;
    net.replaceUses(y, x);
    changed = true;
  }
  return changed;
}

// After the fusions (whose patterns an extra Shape reader of an inner tensor would break): a layer
// read only by Shape layers is computed for its dims alone. T5 transposes K to [B, H, S, D] for
// the attention and reads key_length off it; the attention reads K in place, and that Shape alone
// kept the Transpose running on the device. Each such Shape reads the dims off the layer's input
// instead (Gather(Shape(x), dims), checked at the samples) and the layer goes as dead code.
bool readShapesUpstream(Network& net, const InputSamples& samples) {
  if (samples.empty()) return false;
  std::vector<Layer*> layers;
  for (auto& l : net.layers()) layers.push_back(l.get());
  bool changed = false;
  // Rounds until none moves: a Shape moved above a head Reshape may leave the Split before it read
  // by Shapes alone (a dynamic GPT-NeoX's run-time positions read B and S off Q's part).
  for (int round = 0; round < 8; ++round) {
    SymbolicDims sym(samples);  // per round: its memo is keyed by tensors, which removeDeadLayers frees
    bool moved = false;
    for (Layer* p : layers) {
      if (p->op == "Shape" || p->outputs.empty()) continue;
      // Every output read only by Shape layers (or by nothing), at least one read.
      std::vector<Layer*> readers;
      bool onlyShapes = true;
      for (const Tensor* o : p->outputs) {
        if (!o) continue;
        if (o->isOutput) onlyShapes = false;
        for (Layer* r : net.consumers(o)) {
          onlyShapes = onlyShapes && r->op == "Shape";
          readers.push_back(r);
        }
      }
      if (readers.empty() || !onlyShapes) continue;
      for (Layer* r : readers) moved = readShapeUpstream(net, sym, r) || moved;
    }
    if (!moved) break;
    changed = true;
    net.removeDeadLayers();  // the Shapes moved from, and what only they read
    layers.clear();
    for (auto& l : net.layers()) layers.push_back(l.get());
  }
  return changed;
}

}  // namespace kiln
