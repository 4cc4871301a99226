// The engine's execution order: the network's topological order, or a memory-aware one.
#pragma once
#include <vector>

#include "runtime/engine_graph.h"

namespace kiln {

//! A topological order of g's layers chosen greedily for memory (XLA's and TVM's list scheduling):
//! among the layers whose inputs are ready, the one that raises the peak of live bytes least
//! (while it runs it holds its inputs and its outputs, unless it runs in place), then the one that
//! adds the fewest live bytes (its arena outputs minus the tensors it is the last reader of), then
//! the earlier in g's order. Sizes are r's (one set of shapes); layers computed on the host or
//! aliasing their input cost nothing; in place as profile 0's tactics allow.
std::vector<int> memoryAwareOrder(const EngineGraph& g, const ResolvedShapes& r);

//! Puts g's layers in `order` (a permutation of the layer indices that keeps every producer
//! before its readers; throws kiln::Error otherwise).
void reorderLayers(EngineGraph& g, const std::vector<int>& order);

//! What chooseLayerOrder decided: the arena (largest over the profiles' opt shapes) of each order.
struct LayerOrderChoice {
  size_t networkArena = 0, memoryAwareArena = 0;
  bool reordered = false;
};

//! Plans streams (up to `maxAux` auxiliary ones) for g's order and for the memory-aware order,
//! and keeps the memory-aware one when its arena is smaller and, with auxiliary streams, it puts
//! as many layers on them as g's order does (the same concurrency). g ends with the kept order,
//! its streams planned.
LayerOrderChoice chooseLayerOrder(EngineGraph& g, int maxAux);

}  // namespace kiln
