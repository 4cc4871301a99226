// Shape resolution and memory planning for an engine graph.
#include <algorithm>

#include "ops/op_registry.h"
#include "runtime/engine_graph.h"

namespace kiln {

namespace {
constexpr int64_t kMaxHostEvalElements = int64_t(1) << 16;  // shape-sized values only
}

LayerDesc buildTimeDesc(const EngineGraph& g, size_t i) {
  const EngineLayer& l = g.layers[i];
  LayerDesc d;
  d.name = l.name;
  d.op = l.op;
  d.domain = l.domain;
  d.attrs = &l.attrs;
  for (int t : l.inputs) {
    d.inputPresent.push_back(t >= 0);
    TensorDesc td;
    if (t >= 0) {
      td.type = g.tensors[t].type;
      td.dims = g.tensors[t].dims;
      td.value = g.tensors[t].value;
    }
    d.inputs.push_back(td);
  }
  for (int t : l.outputs) d.outputs.push_back(TensorDesc{g.tensors[t].type, g.tensors[t].dims, {}});
  return d;
}

ResolvedShapes resolveShapes(const EngineGraph& g, const std::map<int, Dims>& inputDims) {
  ResolvedShapes r;
  r.tensors.resize(g.tensors.size());
  for (size_t i = 0; i < g.tensors.size(); ++i) {
    r.tensors[i].type = g.tensors[i].type;
    r.tensors[i].dims = g.tensors[i].dims;
    r.tensors[i].value = g.tensors[i].value;
  }
  for (int in : g.inputs) {
    const EngineTensor& t = g.tensors[in];
    auto it = inputDims.find(in);
    Dims d = it != inputDims.end() ? it->second : t.dims;
    if (d.size() != t.dims.size())
      throw Error("input '" + t.name + "': rank " + std::to_string(d.size()) + " given, the network has rank " +
                  std::to_string(t.dims.size()) + " " + toString(t.dims));
    for (size_t k = 0; k < d.size(); ++k) {
      if (d[k] < 0) throw Error("input '" + t.name + "': shape " + toString(d) + " is not fully specified");
      if (t.dims[k] >= 0 && d[k] != t.dims[k])
        throw Error("input '" + t.name + "': shape " + toString(d) + " does not match the network's " + toString(t.dims));
    }
    auto p = g.profile.find(in);
    if (p != g.profile.end())
      for (size_t k = 0; k < d.size(); ++k)
        if (d[k] < p->second.min[k] || d[k] > p->second.max[k])
          throw Error("input '" + t.name + "': shape " + toString(d) + " is outside the optimization profile (min " +
                      toString(p->second.min) + ", max " + toString(p->second.max) + ")");
    volume(d);
    r.tensors[in].dims = d;
  }
  r.hostEvaluated.assign(g.layers.size(), false);
  r.layers.resize(g.layers.size());
  for (size_t i = 0; i < g.layers.size(); ++i) {
    const EngineLayer& l = g.layers[i];
    LayerDesc d;
    d.name = l.name;
    d.op = l.op;
    d.domain = l.domain;
    d.attrs = &l.attrs;
    for (int t : l.inputs) {
      d.inputPresent.push_back(t >= 0);
      d.inputs.push_back(t >= 0 ? r.tensors[t] : TensorDesc{});
    }
    d.outputs.resize(l.outputs.size());
    inferLayer(d);
    if (d.outputs.size() != l.outputs.size()) throw Error("layer '" + l.name + "': output count changed");
    const OpDef* def = OpRegistry::instance().find(l.op);
    bool known = true;
    for (auto& o : d.outputs) {
      if (!isStatic(o.dims)) throw Error("layer '" + l.name + "': output shape " + toString(o.dims) + " is unresolved");
      volume(o.dims);
      known = known && o.value.valid();
    }
    if (!known && def && def->foldable && allInputsKnown(d)) {
      bool small = true;
      for (auto& o : d.outputs) small = small && volume(o.dims) <= kMaxHostEvalElements;
      if (small) {
        evaluateOnHost(d);
        known = true;
      }
    }
    r.hostEvaluated[i] = known;
    for (size_t k = 0; k < l.outputs.size(); ++k) {
      TensorDesc& td = r.tensors[l.outputs[k]];
      if (td.type != d.outputs[k].type)
        throw Error("layer '" + l.name + "': output type changed from " + toString(td.type) + " to " + toString(d.outputs[k].type));
      td.dims = d.outputs[k].dims;
      td.value = d.outputs[k].value;
    }
    r.layers[i] = std::move(d);
  }
  return r;
}

MemoryPlan planMemory(const EngineGraph& g, const ResolvedShapes& r) {
  // Lifetimes in layer steps; tensors read by runtime layers but computed on the host (shape
  // values) live for the whole run.
  const size_t n = g.tensors.size();
  std::vector<int> first(n, -1), last(n, -1);
  for (size_t i = 0; i < g.layers.size(); ++i) {
    const EngineLayer& l = g.layers[i];
    if (r.hostEvaluated[i]) continue;
    for (int t : l.outputs) if (first[t] < 0) first[t] = static_cast<int>(i);
    for (int t : l.inputs)
      if (t >= 0) {
        if (first[t] < 0) first[t] = 0;  // host-known value read by a runtime layer
        last[t] = static_cast<int>(i);
      }
  }
  struct Item { int t; size_t bytes; };
  std::vector<Item> items;
  for (size_t t = 0; t < n; ++t) {
    const EngineTensor& et = g.tensors[t];
    if (et.isInput || et.isOutput || et.value.valid() || first[t] < 0) continue;
    if (last[t] < first[t]) last[t] = first[t];  // produced but unused (extra outputs)
    size_t bytes = static_cast<size_t>(volume(r.tensors[t].dims)) * elementSize(r.tensors[t].type);
    items.push_back({static_cast<int>(t), (bytes + 63) / 64 * 64});
  }
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.bytes > b.bytes; });
  MemoryPlan p;
  p.offsets.assign(n, -1);
  struct Placed { size_t off, bytes; int first, last; };
  std::vector<Placed> placed;
  for (const Item& it : items) {
    // Best fit: lowest offset that does not overlap any live-overlapping placed tensor.
    std::vector<std::pair<size_t, size_t>> busy;
    for (const Placed& q : placed)
      if (!(q.last < first[it.t] || last[it.t] < q.first)) busy.emplace_back(q.off, q.off + q.bytes);
    std::sort(busy.begin(), busy.end());
    size_t off = 0;
    for (auto& [b, e] : busy) {
      if (off + it.bytes <= b) break;
      off = std::max(off, e);
    }
    placed.push_back({off, it.bytes, first[it.t], last[it.t]});
    p.offsets[it.t] = static_cast<int64_t>(off);
    p.arenaBytes = std::max(p.arenaBytes, off + it.bytes);
  }
  return p;
}

}  // namespace kiln
