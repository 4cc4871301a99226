// Chains of data-movement layers that only reorder rows of the last dim -> one row Gather.
// Swin's shifted windows move every token twice per block: torch.roll (two Gathers after
// lower_slice_concat) + the window partition (Reshape / Transpose / Reshape) before the QKV
// projection, and the window merge + the reverse roll after the output projection: three full
// copies each way where one does. A chain of Transpose (last axis kept last), Gather and Slice
// (not on the last axis, constant indices) and Reshape / Flatten / Squeeze / Unsqueeze (last dim
// unchanged) maps output row r (all dims but the last, flattened) to one input row; that map is
// computed here on the rows alone (the last dim never moves) and the chain becomes Reshape to
// [rows, C], Gather(axis 0) of the map, Reshape to the chain's output dims: one copy. Chains with
// fewer than two copying layers stay (one copy is already one copy). Static dims, or a dynamic
// batch (dim 0) that every layer of the chain keeps as dim 0 with the same per-image volume: the
// map is then one image's, and the Gather runs over axis 1 of [B, rows, C] (a Swin with a
// dynamic batch).
#include <algorithm>
#include <numeric>
#include <vector>

#include "builder/passes/passes.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

bool staticDims(const Tensor* t) { return t && t->dimsKnown && !t->dims.empty() && isStatic(t->dims); }

//! t's dims for the row map: its own when static; with a dynamic batch (`batched`: dim 0 unknown,
//! the rest static) one image's ([1, ..]). Empty when neither.
Dims rowDims(const Tensor* t, bool batched) {
  if (!t || !t->dimsKnown || t->dims.empty()) return {};
  if (!batched) return isStatic(t->dims) ? t->dims : Dims{};
  Dims d = t->dims;
  if (d[0] >= 0) return {};
  d[0] = 1;
  return isStatic(d) ? d : Dims{};
}

//! Rows of a tensor: its dims but the last, and for each row (row-major) the input row it holds.
struct RowMap {
  Dims dims;
  std::vector<int64_t> rows;
};

//! Selects along `axis` of m.dims the positions in `pick` (output dims given).
RowMap selectAlong(const RowMap& m, size_t axis, const std::vector<int64_t>& pick, const Dims& outDims) {
  const int64_t outer = volume(Dims(m.dims.begin(), m.dims.begin() + static_cast<std::ptrdiff_t>(axis)));
  const int64_t inner = volume(Dims(m.dims.begin() + static_cast<std::ptrdiff_t>(axis) + 1, m.dims.end()));
  const int64_t n = m.dims[axis];
  RowMap r{outDims, {}};
  r.rows.reserve(static_cast<size_t>(outer) * pick.size() * static_cast<size_t>(inner));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t p : pick)
      for (int64_t e = 0; e < inner; ++e) r.rows.push_back(m.rows[static_cast<size_t>((o * n + p) * inner + e)]);
  return r;
}

//! The row map after layer `l` (a row move), or false when `l` moves the last dim or is not one.
bool applyRowMove(const Layer* l, const RowMap& m, bool batched, RowMap* out, bool* copies) {
  const Tensor *x = l->inputs.empty() ? nullptr : l->inputs[0], *y = l->outputs.size() == 1 ? l->outputs[0] : nullptr;
  const Dims xd = rowDims(x, batched), yd = rowDims(y, batched);
  if (!l->domain.empty() || xd.empty() || yd.empty() || xd.back() != yd.back() || x->type != y->type) return false;
  if (batched && volume(xd) != volume(yd)) return false;  // dim 0 must stay the batch
  const Dims outRows(yd.begin(), yd.end() - 1);
  const size_t rank = xd.size();
  *copies = false;
  if (l->op == "Reshape" || l->op == "Flatten" || l->op == "Squeeze" || l->op == "Unsqueeze" || l->op == "Identity") {
    if (volume(outRows) != volume(m.dims)) return false;
    *out = {outRows, m.rows};
    return true;
  }
  *copies = true;
  if (l->op == "Transpose") {
    std::vector<int64_t> perm = l->attrs.getInts("perm");
    if (perm.size() != rank || perm.back() != static_cast<int64_t>(rank) - 1 || (batched && perm[0] != 0)) return false;
    const std::vector<int64_t> inStr = rowMajorStrides(m.dims);
    RowMap r{outRows, std::vector<int64_t>(static_cast<size_t>(volume(outRows)))};
    std::vector<int64_t> idx(rank - 1, 0);
    for (size_t o = 0; o < r.rows.size(); ++o) {
      int64_t src = 0;
      for (size_t k = 0; k + 1 < rank; ++k) src += idx[k] * inStr[static_cast<size_t>(perm[k])];
      r.rows[o] = m.rows[static_cast<size_t>(src)];
      for (size_t k = rank - 1; k-- > 0;)  // next output index
        if (++idx[k] < outRows[k]) break;
        else idx[k] = 0;
    }
    *out = std::move(r);
    return true;
  }
  if (l->op == "Gather" && l->inputs.size() == 2) {
    int64_t axis = l->attrs.getInt("axis", 0);
    if (axis < 0) axis += static_cast<int64_t>(rank);
    std::vector<int64_t> idx;
    if (axis < 0 || axis + 1 >= static_cast<int64_t>(rank) || (batched && axis == 0) || !constantInts(l->inputs[1], &idx)) return false;
    const int64_t n = m.dims[static_cast<size_t>(axis)];
    for (int64_t& i : idx) {
      if (i < -n || i >= n) return false;
      i = i < 0 ? i + n : i;
    }
    *out = selectAlong(m, static_cast<size_t>(axis), idx, outRows);
    return true;
  }
  if (l->op == "Slice" && l->inputs.size() >= 3) {
    std::vector<int64_t> starts, ends, axes, steps;
    if (!constantSliceArgs(l, &starts, &ends, &axes, &steps)) return false;
    RowMap cur = m;
    for (size_t k = 0; k < axes.size(); ++k) {
      int64_t a = axes[k] < 0 ? axes[k] + static_cast<int64_t>(rank) : axes[k];
      if (a < 0 || a + 1 >= static_cast<int64_t>(rank) || (batched && a == 0) || steps[k] == 0) return false;
      const int64_t n = cur.dims[static_cast<size_t>(a)], st = steps[k];
      // ONNX Slice's clamping: [0, n] for positive steps, [-1, n-1] for negative ones.
      auto clampTo = [&](int64_t v, int64_t lo, int64_t hi) { return std::clamp(v < 0 ? v + n : v, lo, hi); };
      const int64_t b = st > 0 ? clampTo(starts[k], 0, n) : clampTo(starts[k], 0, n - 1);
      const int64_t e = st > 0 ? clampTo(ends[k], 0, n) : clampTo(ends[k], -1, n - 1);
      std::vector<int64_t> pick;
      for (int64_t i = b; st > 0 ? i < e : i > e; i += st) pick.push_back(i);
      Dims d = cur.dims;
      d[static_cast<size_t>(a)] = static_cast<int64_t>(pick.size());
      cur = selectAlong(cur, static_cast<size_t>(a), pick, d);
    }
    if (cur.dims != outRows) return false;  // disagrees with the network's own inference: leave it
    *out = std::move(cur);
    return true;
  }
  return false;
}

bool isRowMoveOp(const Layer* l) {
  static const char* kOps[] = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Transpose", "Gather", "Slice"};
  return l && l->domain.empty() && std::any_of(std::begin(kOps), std::end(kOps), [&](const char* o) { return l->op == o; });
}

//! One chain, from its first layer down while each output's sole reader is a row move.
struct Chain {
  std::vector<Layer*> layers;
  RowMap map;
  int copies = 0;
  bool batched = false;  // a dynamic batch: the map is one image's
};

Chain followChain(const Network& net, Layer* first) {
  Chain c;
  const Tensor* x = first->inputs.empty() ? nullptr : first->inputs[0];
  if (!x || !x->dimsKnown || x->dims.size() < 2) return c;
  c.batched = !staticDims(x);
  const Dims xd = rowDims(x, c.batched);
  if (xd.empty() || (c.batched && x->dims.size() < 3)) return c;
  c.map.dims = Dims(xd.begin(), xd.end() - 1);
  c.map.rows.resize(static_cast<size_t>(volume(c.map.dims)));
  std::iota(c.map.rows.begin(), c.map.rows.end(), int64_t(0));
  for (Layer* l = first; l && isRowMoveOp(l);) {
    // A network output keeps its own layer (and name).
    if (l->outputs.size() != 1 || l->outputs[0]->isOutput || l->outputs[0]->dims.empty() || l->outputs[0]->dims.back() != x->dims.back())
      break;
    RowMap next;
    bool copies = false;
    if (!applyRowMove(l, c.map, c.batched, &next, &copies)) break;
    c.map = std::move(next);
    c.layers.push_back(l);
    c.copies += copies;
    l = soleConsumer(net, l->outputs[0]);
  }
  return c;
}

}  // namespace

bool composeRowMoves(Network& net) {
  bool changed = false;
  // i is not advanced past a rewrite: the chain's layers (from index i on) are removed, and the
  // layer now at i is the one that followed `first`.
  for (size_t i = 0; i < net.layers().size();) {
    Layer* first = net.layer(static_cast<int>(i++));
    if (!isRowMoveOp(first) || first->inputs.empty() || !first->inputs[0]) continue;
    const Layer* up = first->inputs[0]->producer;
    // Not the head of its chain, unless the layer above changes what dim 0 holds (a dynamic batch
    // merged with windows, [B*W, ..] -> [B, ..]): a batched chain cannot start above it.
    const Dims upIn = up && !up->inputs.empty() ? rowDims(up->inputs[0], true) : Dims{};
    const Dims upOut = rowDims(first->inputs[0], true);
    const bool batchStartsHere = !upOut.empty() && (upIn.empty() || volume(upIn) != volume(upOut));
    if (isRowMoveOp(up) && soleConsumer(net, first->inputs[0]) == first && !batchStartsHere) continue;
    Chain c = followChain(net, first);
    if (c.copies < 2) continue;
    Tensor *x = first->inputs[0], *y = c.layers.back()->outputs[0];
    const Dims xd = rowDims(x, c.batched);
    const int64_t width = xd.back(), inRows = volume(Dims(xd.begin(), xd.end() - 1));
    const int64_t outRows = static_cast<int64_t>(c.map.rows.size());
    // The map is stored in the engine (4 bytes a row) and read with the rows: rows narrower than
    // 16 bytes, or more than 16M of them, stay as they were.
    if (width * static_cast<int64_t>(elementSize(x->type)) < 16 || outRows > (int64_t(1) << 24)) continue;
    --i;  // rewritten below: look at index i again
    const bool int32 = inRows < (int64_t(1) << 31);
    HostTensor idx(int32 ? DataType::kINT32 : DataType::kINT64, {outRows});
    for (int64_t r = 0; r < outRows; ++r) {
      if (int32) idx.as<int32_t>()[r] = static_cast<int32_t>(c.map.rows[static_cast<size_t>(r)]);
      else idx.as<int64_t>()[r] = c.map.rows[static_cast<size_t>(r)];
    }
    const std::string base = c.layers.back()->name + "_rows";
    Tensor* z = nullptr;
    Layer* fused = nullptr;  // the layer that records the chain (--dumpLayerInfo)
    bool identity = outRows == inRows;
    for (int64_t r = 0; identity && r < outRows; ++r) identity = c.map.rows[static_cast<size_t>(r)] == r;
    // With a dynamic batch the shapes copy dim 0 (entry 0) and the Gather runs over axis 1.
    Dims outShape = y->dims;
    if (c.batched) outShape[0] = 0;
    auto lead = [&](Dims d) {
      if (c.batched) d.insert(d.begin(), x->dims[0]);
      return d;
    };
    auto leadShape = [&](Dims d) {
      if (c.batched) d.insert(d.begin(), 0);
      return d;
    };
    if (identity) {  // the moves cancel out: a view
      z = addReshape(net, x, outShape, base, y->dims);
      fused = z->producer;
    } else {
      Tensor* flat = addReshape(net, x, leadShape({inRows, width}), base + "_in", lead({inRows, width}));
      Attributes ga;
      ga.set("axis", int64_t(c.batched ? 1 : 0));
      Tensor* g = addTypedLayer(net, "Gather", {flat, net.addConstant(net.uniqueName(base + "_indices"), idx)}, ga, base, x->type,
                                lead({outRows, width}));
      fused = g->producer;
      z = addReshape(net, g, outShape, base + "_out", y->dims);
    }
    recordStandIn(fused, std::vector<const Layer*>(c.layers.begin(), c.layers.end()));
    net.replaceUses(y, z);
    for (auto it = c.layers.rbegin(); it != c.layers.rend(); ++it) net.removeLayer(*it);
    changed = true;
  }
  if (changed) net.removeDeadLayers();  // any layer order (it sweeps until stable); the builder sorts after the pass
  return changed;
}

}  // namespace kiln
