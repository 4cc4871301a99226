// Memory-aware execution order (layer_order.h). The arena's lower bound is the peak of live bytes
// in execution order, so the order bounds what any placement can reach: running a branch to its
// end before starting the next, or a small reader before a big producer, frees tensors sooner.
#include "runtime/layer_order.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "backends/in_place.h"

namespace kiln {

std::vector<int> memoryAwareOrder(const EngineGraph& g, const ResolvedShapes& r) {
  const size_t nl = g.layers.size(), nt = g.tensors.size();
  auto root = [&](int t) { return r.aliasOf[t] >= 0 ? r.aliasOf[t] : t; };
  // Bytes a tensor adds to the arena (planMemory's inArena, unaligned): 0 for I/O, constants,
  // views, host values and unknown dims.
  std::vector<int64_t> bytes(nt, 0);
  for (size_t t = 0; t < nt; ++t) {
    const EngineTensor& et = g.tensors[t];
    const TensorDesc& d = r.tensors[t];
    if (et.isInput || et.isOutput || et.value.valid() || d.value.valid() || r.aliasOf[t] >= 0 || !isStatic(d.dims)) continue;
    bytes[t] = volume(d.dims) * static_cast<int64_t>(elementSize(d.type));
  }
  // Per layer: the distinct roots it reads. Per root: how many layers still have to read it.
  std::vector<int> producer(nt, -1);
  for (size_t i = 0; i < nl; ++i)
    for (int t : g.layers[i].outputs) producer[t] = static_cast<int>(i);
  std::vector<std::vector<int>> reads(nl);
  std::vector<int> readersLeft(nt, 0), waiting(nl, 0);
  std::vector<std::vector<int>> users(nl);  // layers reading an output of layer i
  for (size_t i = 0; i < nl; ++i) {
    for (int t : g.layers[i].inputs) {
      if (t < 0) continue;
      const int s = root(t);
      if (std::find(reads[i].begin(), reads[i].end(), s) == reads[i].end()) {
        reads[i].push_back(s);
        ++readersLeft[s];
      }
      const int p = producer[t];
      if (p >= 0 && std::find(users[p].begin(), users[p].end(), static_cast<int>(i)) == users[p].end()) {
        users[p].push_back(static_cast<int>(i));
        ++waiting[i];
      }
    }
  }
  // Bytes live now, and the peak so far; a layer holds its inputs and outputs at once while it
  // runs, except an in-place output (backends/in_place.h), which takes its input's bytes.
  int64_t live = 0, peak = 0;
  auto inPlaceSaving = [&](int i) -> int64_t {
    const EngineLayer& l = g.layers[i];
    const int k = inPlaceInput(l.op, l.choices.empty() ? std::string() : l.choices[0].tactic, l.inputs.size());
    if (k < 0 || l.outputs.empty() || l.inputs[k] < 0) return 0;
    const int s = root(l.inputs[k]);
    return readersLeft[s] == 1 && bytes[s] == bytes[l.outputs[0]] ? bytes[s] : 0;
  };
  std::vector<int> ready, order;
  order.reserve(nl);
  for (size_t i = 0; i < nl; ++i)
    if (waiting[i] == 0) ready.push_back(static_cast<int>(i));
  while (!ready.empty()) {
    // The layer that raises the peak least; among equals the one that adds the fewest live bytes
    // (frees the most); then the earlier in g's order.
    size_t best = 0;
    int64_t bestPeak = INT64_MAX, bestDelta = INT64_MAX, bestDuring = 0;
    for (size_t k = 0; k < ready.size(); ++k) {
      const int i = ready[k];
      int64_t out = 0, freed = 0;
      for (int t : g.layers[i].outputs) out += bytes[t];
      for (int s : reads[i])
        if (readersLeft[s] == 1) freed += bytes[s];
      const int64_t during = live + out - inPlaceSaving(i), newPeak = std::max(peak, during), delta = out - freed;
      if (newPeak < bestPeak || (newPeak == bestPeak && (delta < bestDelta || (delta == bestDelta && i < ready[best])))) {
        best = k, bestPeak = newPeak, bestDelta = delta, bestDuring = during;
      }
    }
    const int i = ready[best];
    ready.erase(ready.begin() + static_cast<std::ptrdiff_t>(best));
    order.push_back(i);
    peak = std::max(peak, bestDuring);
    live += bestDelta;
    for (int s : reads[i]) --readersLeft[s];
    for (int u : users[i])
      if (--waiting[u] == 0) ready.push_back(u);
  }
  return order;
}

void reorderLayers(EngineGraph& g, const std::vector<int>& order) {
  const size_t nl = g.layers.size();
  if (order.size() != nl) throw Error("layer order has " + std::to_string(order.size()) + " entries for " + std::to_string(nl) + " layers");
  std::vector<char> produced(g.tensors.size(), 0), placed(nl, 0);
  for (size_t i = 0; i < nl; ++i)
    for (int t : g.layers[i].outputs) produced[t] = 1;  // produced by some layer: must come first
  std::vector<EngineLayer> layers;
  layers.reserve(nl);
  for (int i : order) {
    if (i < 0 || static_cast<size_t>(i) >= nl || placed[i]) throw Error("layer order is not a permutation");
    placed[i] = 1;
    for (int t : g.layers[i].inputs)
      if (t >= 0 && produced[t] == 1)
        throw Error("layer order runs '" + g.layers[i].name + "' before the producer of '" + g.tensors[t].name + "'");
    for (int t : g.layers[i].outputs) produced[t] = 2;
    layers.push_back(g.layers[i]);
  }
  g.layers = std::move(layers);
}

namespace {

//! The arena for g as it is (streams planned): the largest over the profiles' opt shapes.
size_t arenaOf(const EngineGraph& g) {
  size_t arena = 0;
  for (size_t p = 0; p < g.profiles.size(); ++p) {
    const ResolvedShapes r = resolveShapes(g, optDims(g, p), &g.profiles[p], nullptr, /*lenient=*/true);
    arena = std::max(arena, planMemory(g, r, p).arenaBytes);
  }
  return arena;
}

size_t layersOnAuxStreams(const EngineGraph& g) {
  return static_cast<size_t>(std::count_if(g.layers.begin(), g.layers.end(), [](const EngineLayer& l) { return l.stream > 0; }));
}

}  // namespace

LayerOrderChoice chooseLayerOrder(EngineGraph& g, int maxAux) {
  LayerOrderChoice c;
  planStreams(g, maxAux);
  c.networkArena = c.memoryAwareArena = arenaOf(g);
  const ResolvedShapes r = resolveShapes(g, optDims(g, 0), &g.profiles[0], nullptr, /*lenient=*/true);
  const std::vector<int> order = memoryAwareOrder(g, r);
  bool same = true;
  for (size_t i = 0; i < order.size(); ++i) same = same && order[i] == static_cast<int>(i);
  if (same) return c;
  EngineGraph h = g;
  reorderLayers(h, order);
  planStreams(h, maxAux);
  c.memoryAwareArena = arenaOf(h);
  if (c.memoryAwareArena < c.networkArena && layersOnAuxStreams(h) == layersOnAuxStreams(g)) {
    g = std::move(h);
    c.reordered = true;
  }
  return c;
}

}  // namespace kiln
