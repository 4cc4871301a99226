// Shape resolution and memory planning for an engine graph.
#include <algorithm>
#include <set>

#include "ops/fused_attrs.h"
#include "ops/layout_transpose.h"
#include "ops/op_registry.h"
#include "runtime/engine_graph.h"

namespace kiln {

namespace {
constexpr int64_t kMaxHostEvalElements = int64_t(1) << 16;  // shape-sized values only
}

namespace {
//! Whether tensor t may share another tensor's memory: an arena tensor (not an engine input or
//! output, not a constant or host value).
//! A layer computed on the host by its shape inference (OpDef::inferComputesValues: NonZero,
//! Unique, a run-time Loop) is resolved only once its outputs' values are: a Loop whose outputs
//! have static dims still waits for its inputs' values, since no kernel runs it.
bool awaitsValues(const OpDef* def, const LayerDesc& d) {
  if (!def || !def->inferComputesValues) return false;
  for (const auto& o : d.outputs)
    if (!o.value.valid()) return true;
  return false;
}

bool arenaTensor(const EngineGraph& g, const ResolvedShapes& r, int t) {
  const EngineTensor& e = g.tensors[t];
  return !e.isInput && !e.isOutput && !e.value.valid() && !r.tensors[t].value.valid();
}

//! Concat without copies (CPU): where every input of a Concat is one contiguous run of its output
//! (nothing but size-1 dims before the axis: batch 1 along the channels, ShuffleNet / Inception /
//! DenseNet blocks; in the CPU's blocked layouts too, whose channel counts are multiples of the
//! block), each input becomes a slice of the output (`parent`, byte `offset`): its producer writes
//! straight into the Concat's output and the Concat runs nothing. An input qualifies when it is an
//! arena tensor written by a layer that runs (not a view or a slice of something else already)
//! and read only once by this Concat.
void markConcatSlices(const EngineGraph& g, ResolvedShapes& r, std::vector<int>& parent, std::vector<int64_t>& offset) {
  for (size_t i = 0; i < g.layers.size(); ++i) {
    const EngineLayer& l = g.layers[i];
    if (l.op != "Concat" || r.skipped(i) || l.outputs.size() != 1 || l.inputs.empty()) continue;
    const int dst = l.outputs[0];
    if (!arenaTensor(g, r, dst) || parent[dst] >= 0) continue;
    const Dims& od = r.tensors[dst].dims;
    int64_t axis = r.layers[i].attrs ? r.layers[i].attrs->getInt("axis", 0) : 0;
    if (axis < 0) axis += static_cast<int64_t>(od.size());
    if (axis < 0 || axis >= static_cast<int64_t>(od.size())) continue;
    bool ok = true;
    for (int64_t k = 0; k < axis; ++k) ok = ok && od[k] == 1;
    std::vector<int> seen;
    for (int t : l.inputs) {
      ok = ok && t >= 0 && arenaTensor(g, r, t) && parent[t] < 0 && r.tensors[t].type == r.tensors[dst].type &&
           std::find(seen.begin(), seen.end(), t) == seen.end();
      if (!ok) break;
      seen.push_back(t);
      int producer = -1;  // a layer that runs writes it (not a view, a host value or an engine input)
      for (size_t p = 0; p < i && producer < 0; ++p)
        for (int o : g.layers[p].outputs)
          if (o == t) producer = static_cast<int>(p);
      ok = producer >= 0 && !r.skipped(static_cast<size_t>(producer));
    }
    if (!ok) continue;
    int64_t at = 0;
    for (int t : l.inputs) {
      parent[t] = dst;
      offset[t] = at;
      at += volume(r.tensors[t].dims) * static_cast<int64_t>(elementSize(r.tensors[t].type));
    }
    r.aliased[i] = true;
  }
}

//! A Transpose that moves only size-1 axes (SegFormer's [1, L, 1, D] -> [1, 1, L, D] head split
//! with one head): the elements keep their order, so the output is a view of the input.
bool orderKeepingTranspose(const EngineLayer& l, const Dims& in) {
  if (l.op != "Transpose" || !isStatic(in) || hasLayouts(l.attrs)) return false;  // logical order = byte order
  std::vector<int64_t> perm = l.attrs.getInts("perm");
  if (perm.empty())
    for (size_t k = in.size(); k-- > 0;) perm.push_back(static_cast<int64_t>(k));
  if (perm.size() != in.size()) return false;
  int64_t last = -1;
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(in.size())) return false;
    if (in[p] == 1) continue;
    if (p < last) return false;
    last = p;
  }
  return true;
}

// View ops become aliases when both sides live in the arena (not user buffers or constants); so do
// Transposes that the GPU layout pass made byte copies (ops/layout_transpose.h) or that move only
// size-1 axes, and, on the CPU,
// the inputs of Concats that need no copy (markConcatSlices). `slices`: whether Concat inputs may
// become slices (every dim static and no data-dependent rounds: a slice and its Concat must be
// planned in one arena).
void markAliases(const EngineGraph& g, ResolvedShapes& r, bool slices) {
  static const char* kViewOps[] = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"};
  r.aliased.assign(g.layers.size(), false);
  r.aliasOf.assign(g.tensors.size(), -1);
  r.aliasOffset.assign(g.tensors.size(), 0);
  std::vector<int> parent(g.tensors.size(), -1);
  std::vector<int64_t> offset(g.tensors.size(), 0);
  for (size_t i = 0; i < g.layers.size(); ++i) {
    const EngineLayer& l = g.layers[i];
    if (r.hostEvaluated[i] || l.outputs.size() != 1 || l.inputs.empty() || l.inputs[0] < 0) continue;
    bool view = false;
    for (const char* op : kViewOps) view = view || l.op == op;
    int src = l.inputs[0], dst = l.outputs[0];
    view = view || (l.op == "Transpose" && (isLayoutCopyTranspose(l.attrs, r.tensors[src].dims.size()) ||
                                            orderKeepingTranspose(l, r.tensors[src].dims)));
    if (!view) continue;
    const EngineTensor &s = g.tensors[src], &d = g.tensors[dst];
    if (s.isInput || s.isOutput || s.value.valid() || r.tensors[src].value.valid() || d.isOutput) continue;
    if (r.tensors[src].type != r.tensors[dst].type) continue;
    r.aliased[i] = true;
    parent[dst] = src;
  }
  if (slices && g.device == DeviceType::kCPU) {
    bool allStatic = true;
    for (const TensorDesc& t : r.tensors) allStatic = allStatic && isStatic(t.dims);
    if (allStatic) markConcatSlices(g, r, parent, offset);
  }
  // Each tensor's root (the tensor that owns the memory) and its byte offset in it.
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    int root = static_cast<int>(t);
    int64_t at = 0;
    while (parent[root] >= 0) {
      at += offset[root];
      root = parent[root];
    }
    if (root != static_cast<int>(t)) {
      r.aliasOf[t] = root;
      r.aliasOffset[t] = at;
    }
  }
}
}  // namespace

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

int64_t tacticBucketSize(const LayerDesc& concrete) {
  int64_t size = 0;
  auto add = [&](const TensorDesc& t) {
    if (t.value.valid() || !isStatic(t.dims)) return;  // weights and shape values do not grow with the profile
    const int64_t v = volume(t.dims);
    size = v > INT64_MAX - size ? INT64_MAX : size + v;
  };
  for (size_t k = 0; k < concrete.inputs.size(); ++k)
    if (concrete.present(k)) add(concrete.inputs[k]);
  for (const TensorDesc& o : concrete.outputs) add(o);
  return size;
}

std::vector<int> hostValueInputs(const EngineGraph& g) {
  // Walk back from every value input through its producers: whatever it depends on must be known.
  std::vector<int> producer(g.tensors.size(), -1);
  for (size_t i = 0; i < g.layers.size(); ++i)
    for (int t : g.layers[i].outputs) producer[t] = static_cast<int>(i);
  std::vector<bool> needed(g.tensors.size(), false);
  std::vector<int> stack;
  for (const EngineLayer& l : g.layers) {
    const OpDef* def = OpRegistry::instance().find(l.op);
    if (!def || def->dataDependentShape) continue;  // data, read back when computed (context.cpp)
    for (int k : def->valueInputs)
      if (k < static_cast<int>(l.inputs.size()) && l.inputs[k] >= 0) stack.push_back(l.inputs[k]);
  }
  while (!stack.empty()) {
    int t = stack.back();
    stack.pop_back();
    if (needed[t] || g.tensors[t].value.valid()) continue;
    needed[t] = true;
    if (producer[t] >= 0)
      for (int in : g.layers[producer[t]].inputs)
        if (in >= 0) {
          // Shape-like ops read only dims, not data: their inputs need no host value.
          const std::string& op = g.layers[producer[t]].op;
          if (op == "Shape" || op == "Size") continue;
          stack.push_back(in);
        }
  }
  std::vector<int> out;
  for (int in : g.inputs)
    if (needed[in]) out.push_back(in);
  return out;
}

namespace {
// " k" when `profile` is the graph's profile k and the graph has several, else "".
std::string profileName(const EngineGraph& g, const ProfileRanges* profile) {
  for (size_t k = 0; g.profiles.size() > 1 && k < g.profiles.size(); ++k)
    if (&g.profiles[k] == profile) return " " + std::to_string(k);
  return "";
}
}  // namespace

std::map<int, Dims> optDims(const EngineGraph& g, size_t p) {
  std::map<int, Dims> opt;
  for (auto& [t, r] : g.profiles.at(p)) opt[t] = r.opt;
  return opt;
}

ResolvedShapes resolveShapes(const EngineGraph& g, const std::map<int, Dims>& inputDims, const ProfileRanges* profile,
                             const std::map<int, HostTensor>* inputValues, bool lenient,
                             const std::map<int, HostTensor>* fetched) {
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
    auto p = profile ? profile->find(in) : ProfileRanges::const_iterator{};
    if (profile && p != profile->end())
      for (size_t k = 0; k < d.size(); ++k)
        if (d[k] < p->second.min[k] || d[k] > p->second.max[k])
          throw Error("input '" + t.name + "': shape " + toString(d) + " is outside the optimization profile" + profileName(g, profile) +
                      " (min " + toString(p->second.min) + ", max " + toString(p->second.max) + ")" +
                      (g.profiles.size() > 1 ? "; the engine has " + std::to_string(g.profiles.size()) +
                                                   " profiles: select another (setOptimizationProfile, --useProfile)"
                                             : std::string()));
    volume(d);
    r.tensors[in].dims = d;
    if (inputValues) {
      auto v = inputValues->find(in);
      if (v != inputValues->end()) r.tensors[in].value = v->second;
    }
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
    if (fetched && def) {
      // Data-dependent: values read back at run time complete what the layer lacks. Only layers
      // unresolved without them, so a layer resolves the same way in every round.
      bool unresolved = awaitsValues(def, d);
      for (auto& o : d.outputs) unresolved = unresolved || !isStatic(o.dims);
      bool added = false;
      for (int k : def->valueInputs) {
        if (!unresolved || k >= static_cast<int>(l.inputs.size()) || l.inputs[k] < 0 || d.inputs[k].value.valid()) continue;
        auto f = fetched->find(l.inputs[k]);
        if (f == fetched->end() || f->second.dims() != d.inputs[k].dims) continue;
        d.inputs[k].value = f->second;
        added = true;
      }
      if (added) {
        for (auto& o : d.outputs) o = TensorDesc{};
        inferLayer(d);
      }
    }
    bool known = true;
    bool resolved = true;
    for (auto& o : d.outputs) {
      if (!isStatic(o.dims)) {
        if (!lenient) throw Error("layer '" + l.name + "': output shape " + toString(o.dims) + " is unresolved");
        resolved = false;
        continue;
      }
      volume(o.dims);
      known = known && o.value.valid();
    }
    if (resolved && !known && def && def->foldable && allInputsKnown(d)) {
      bool small = true;
      for (auto& o : d.outputs) small = small && volume(o.dims) <= kMaxHostEvalElements;
      if (small) {
        evaluateOnHost(d);
        known = true;
      }
    }
    r.hostEvaluated[i] = resolved && known;
    for (size_t k = 0; k < l.outputs.size(); ++k) {
      TensorDesc& td = r.tensors[l.outputs[k]];
      if (td.type != d.outputs[k].type)
        throw Error("layer '" + l.name + "': output type changed from " + toString(td.type) + " to " + toString(d.outputs[k].type));
      td.dims = d.outputs[k].dims;
      td.value = d.outputs[k].value;
    }
    r.layers[i] = std::move(d);
  }
  markAliases(g, r, fetched == nullptr);
  return r;
}

bool layerResolved(const ResolvedShapes& r, size_t i) {
  const LayerDesc& d = r.layers[i];
  for (const auto& o : d.outputs)
    if (!isStatic(o.dims)) return false;
  if (awaitsValues(OpRegistry::instance().find(d.op), d)) return false;
  for (size_t k = 0; k < d.inputs.size(); ++k)  // Shape of a data-dependent tensor has static dims, not its value
    if (d.present(k) && !isStatic(d.inputs[k].dims)) return false;
  return true;
}

std::vector<int> missingValueInputs(const EngineGraph& g, const ResolvedShapes& r, size_t i) {
  std::vector<int> out;
  if (layerResolved(r, i)) return out;
  const EngineLayer& l = g.layers[i];
  const OpDef* def = OpRegistry::instance().find(l.op);
  if (!def) return out;
  for (int k : def->valueInputs)
    if (k < static_cast<int>(l.inputs.size()) && l.inputs[k] >= 0 && !r.tensors[l.inputs[k]].value.valid() &&
        isStatic(r.tensors[l.inputs[k]].dims))
      out.push_back(l.inputs[k]);
  return out;
}

void checkPlanShapes(const EngineGraph& g) {
  std::set<std::map<int, Dims>> seen;  // profiles with the same opt shapes check once
  for (size_t p = 0; p < g.profiles.size(); ++p) {
    std::map<int, Dims> opt = optDims(g, p);
    if (!seen.insert(opt).second) continue;
    ResolvedShapes r = resolveShapes(g, opt, &g.profiles[p], nullptr, /*lenient=*/true);
    for (size_t t = 0; t < g.tensors.size(); ++t) {
      const Dims &stored = g.tensors[t].dims, &got = r.tensors[t].dims;
      bool same = stored.size() == got.size();
      for (size_t k = 0; same && k < stored.size(); ++k) same = stored[k] < 0 || got[k] < 0 || stored[k] == got[k];
      if (!same)
        throw Error("corrupt plan: tensor '" + g.tensors[t].name + "' is stored with dims " + toString(stored) +
                    " but the layers that compute it give " + toString(got) + "; rebuild the engine");
    }
  }
}

}  // namespace kiln
