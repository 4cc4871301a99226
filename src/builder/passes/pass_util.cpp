#include <numeric>

#include "builder/passes/passes.h"

namespace kiln {

Layer* soleConsumer(const Network& net, const Tensor* t) {
  if (t->isOutput) return nullptr;
  auto c = net.consumers(t);
  if (c.size() != 1) return nullptr;
  int uses = 0;
  for (Tensor* in : c[0]->inputs) uses += in == t;
  return uses == 1 ? c[0] : nullptr;
}

void recordFusion(Layer* into, const Layer* from) {
  // A precision constraint survives fusion; where two meet, the wider type wins (a layer pinned
  // to float32 for accuracy must not end up computing in float16 inside a fused layer).
  if (from->precision) {
    auto rank = [](DataType t) { return t == DataType::kFLOAT ? 2 : (t == DataType::kHALF || t == DataType::kBF16 ? 1 : 0); };
    if (!into->precision || rank(*from->precision) > rank(*into->precision)) into->precision = from->precision;
  }
  if (into->fusedOps.empty()) into->fusedOps.push_back(into->op + ":" + into->name);
  if (from->fusedOps.empty()) into->fusedOps.push_back(from->op + ":" + from->name);
  else into->fusedOps.insert(into->fusedOps.end(), from->fusedOps.begin(), from->fusedOps.end());
}

void recordStandIn(Layer* into, const std::vector<const Layer*>& originals) {
  if (!into->fusedOps.empty()) throw Error("internal: recordStandIn on layer '" + into->name + "' that already has fusion records");
  for (const Layer* l : originals) recordFusion(into, l);
  if (!into->fusedOps.empty()) into->fusedOps.erase(into->fusedOps.begin());  // recordFusion's record of `into` itself
}

bool scalarValue(const Tensor* t, double* v) {
  if (!t || !t->isConstant() || t->value.count() != 1 || !isFloat(t->type)) return false;
  *v = t->value.getDouble(0);
  return true;
}

bool constantInts(const Tensor* t, std::vector<int64_t>* out) {
  if (!t || !t->isConstant() || (t->type != DataType::kINT64 && t->type != DataType::kINT32)) return false;
  *out = t->value.toInts();
  return true;
}

bool constantSliceArgs(const Layer* slice, std::vector<int64_t>* starts, std::vector<int64_t>* ends, std::vector<int64_t>* axes,
                       std::vector<int64_t>* steps) {
  const auto& in = slice->inputs;
  if (in.size() < 3 || !constantInts(in[1], starts) || !constantInts(in[2], ends) || starts->size() != ends->size()) return false;
  if (in.size() > 3 && in[3]) {
    if (!constantInts(in[3], axes)) return false;
  } else {
    axes->resize(starts->size());
    std::iota(axes->begin(), axes->end(), int64_t(0));
  }
  if (in.size() > 4 && in[4]) {
    if (!constantInts(in[4], steps)) return false;
  } else {
    steps->assign(starts->size(), 1);
  }
  return axes->size() == starts->size() && steps->size() == starts->size();
}

Tensor* addTypedLayer(Network& net, const std::string& op, const std::vector<Tensor*>& in, Attributes a, const std::string& name,
                      DataType type, const Dims& dims) {
  Layer* l = net.addLayer(op, in, 1, std::move(a), net.uniqueName(name));
  l->outputs[0]->type = type;
  l->outputs[0]->dims = dims;
  l->outputs[0]->dimsKnown = true;
  return l->outputs[0];
}

Tensor* addStandIn(Network& net, const Layer* original, const std::string& op, const std::vector<Tensor*>& in, Attributes a,
                   const std::string& name, DataType type, const Dims& dims) {
  Tensor* t = addTypedLayer(net, op, in, std::move(a), name, type, dims);
  recordStandIn(t->producer, {original});
  return t;
}

Tensor* addShapeConstant(Network& net, const std::string& name, const Dims& dims) {
  HostTensor s(DataType::kINT64, {static_cast<int64_t>(dims.size())});
  for (size_t i = 0; i < dims.size(); ++i) s.as<int64_t>()[i] = dims[i];
  return net.addConstant(net.uniqueName(name), s);
}

Tensor* addReshape(Network& net, Tensor* x, const Dims& shape, const std::string& name, const Dims& dims) {
  return addTypedLayer(net, "Reshape", {x, addShapeConstant(net, name + "_shape", shape)}, {}, name, x->type, dims);
}

Tensor* otherInput(const Layer* l, const Tensor* t) {
  if (l->inputs.size() != 2) return nullptr;
  return l->inputs[0] == t ? l->inputs[1] : (l->inputs[1] == t ? l->inputs[0] : nullptr);
}

bool constantAlongAxis(const Tensor* t, size_t rank, size_t axis, int64_t k, bool broadcastOk) {
  if (!t || !t->isConstant() || t->type != DataType::kFLOAT || t->dims.size() > rank) return false;
  const size_t lead = rank - t->dims.size();  // right alignment: t's dim i is the tensor's dim lead + i
  if (lead > axis && !broadcastOk) return false;
  for (size_t i = 0; i < t->dims.size(); ++i) {
    const int64_t d = t->dims[i];
    if (d != 1 && !(lead + i == axis && d == k)) return false;
    if (lead + i == axis && d != k && !broadcastOk) return false;
  }
  return true;
}

bool meanOverLastAxis(const Layer* l) {
  if (!l || l->op != "ReduceMean" || l->attrs.getInt("keepdims", 1) != 1) return false;
  const Tensor* x = l->inputs[0];
  if (!x || x->dims.empty()) return false;
  std::vector<int64_t> axes = l->attrs.getInts("axes");
  if (l->inputs.size() > 1 && l->inputs[1]) {
    if (!l->inputs[1]->isConstant()) return false;
    axes = l->inputs[1]->value.toInts();
  }
  if (axes.size() != 1) return false;
  int64_t r = static_cast<int64_t>(x->dims.size());
  return axes[0] == -1 || axes[0] == r - 1;
}

void replaceWithFused(Network& net, Layer* fused, const std::vector<Layer*>& dead, Tensor* result) {
  recordStandIn(fused, std::vector<const Layer*>(dead.begin(), dead.end()));
  fused->outputs[0]->type = result->type;
  fused->outputs[0]->dims = result->dims;
  fused->outputs[0]->dimsKnown = true;
  for (Layer* l : dead) net.removeLayer(l);
  net.replaceUses(result, fused->outputs[0]);
  net.topoSort();
}

bool batchAndSequenceAgree(const Tensor* a, const Tensor* b, SymbolicDims* sym) {
  const Dims &da = a->dims, &db = b->dims;
  if (da.size() < 2 || db.size() < 2) return false;
  if (da[0] >= 0 && da[0] == db[0] && da[1] >= 0 && da[1] == db[1]) return true;
  return sym && sym->nbSamples() > 0 && sym->sameDim(a, 0, b, 0) && sym->sameDim(a, 1, b, 1);
}

bool rewriteLayers(Network& net, const std::function<bool(Network&, Layer*)>& rewrite) {
  bool changed = false;
  for (size_t i = 0; i < net.layers().size();) {
    if (rewrite(net, net.layer(static_cast<int>(i)))) {
      changed = true;
      i = 0;
    } else {
      ++i;
    }
  }
  return changed;
}

bool rewriteLayers(Network& net, const InputSamples& samples, const std::function<bool(Network&, Layer*, SymbolicDims&)>& rewrite) {
  bool changed = false;
  for (bool again = true; again;) {
    SymbolicDims sym(samples);
    again = false;
    for (size_t i = 0; i < net.layers().size() && !again; ++i) again = rewrite(net, net.layer(static_cast<int>(i)), sym);
    changed = changed || again;
  }
  return changed;
}

std::vector<Tensor*> addLastAxisSplit(Network& net, Tensor* x, const std::vector<int64_t>& sizes, const std::string& name) {
  HostTensor sv(DataType::kINT64, {static_cast<int64_t>(sizes.size())});
  for (size_t i = 0; i < sizes.size(); ++i) sv.as<int64_t>()[i] = sizes[i];
  Attributes a;
  a.set("axis", static_cast<int64_t>(x->dims.size()) - 1);
  Layer* split = net.addLayer("Split", {x, net.addConstant(net.uniqueName(name + "_sizes"), sv)}, static_cast<int>(sizes.size()), a,
                              net.uniqueName(name));
  for (size_t i = 0; i < sizes.size(); ++i) {
    Tensor* p = split->outputs[i];
    p->type = x->type;
    p->dims = x->dims;
    p->dims.back() = sizes[i];
    p->dimsKnown = true;
  }
  return split->outputs;
}

bool removeFoldedLayers(Network& net) {
  std::vector<Layer*> folded;
  for (auto& l : net.layers()) {
    bool all = !l->outputs.empty();
    for (Tensor* o : l->outputs) all = all && o->isConstant();
    if (all) folded.push_back(l.get());
  }
  for (Layer* l : folded) net.removeLayer(l);
  size_t before = net.layers().size();
  net.removeDeadLayers();
  return !folded.empty() || net.layers().size() != before;
}

bool tacticBuilds(const Tactic& t, const LayerDesc& build, const LayerDesc& at) {
  if (!t.create) return false;
  try {
    std::unique_ptr<KernelState> state;
    t.create(build)->reshape(at, state);
    return true;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace kiln
