// Tactic selection: times every tactic a backend offers for a layer at an optimization profile's
// opt shapes and records the fastest in the engine graph.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "kiln/builder.h"
#include "runtime/engine_graph.h"

namespace kiln {

//! One timed shape of a layer: its size (tacticBucketSize) and the tactic chosen there.
struct TacticPoint {
  int64_t size = 0;
  std::string tactic;
  float timeMs = -1.f;
};
//! The size buckets of a layer timed at several shapes: each point's tactic serves the sizes
//! closer (geometrically) to it than to its neighbours; neighbours with one tactic merge. Empty
//! when one tactic serves every size.
std::vector<TacticBucket> tacticBucketsFromPoints(std::vector<TacticPoint> points);

//! Chooses every layer's tactic for optimization profile `profile` (timed at its opt shapes) and
//! stores it in EngineLayer::choices[profile] (which must exist); with a dynamic profile, also
//! times them at its other shapes (BuilderConfig::setTacticShapePoints) and adds size buckets.
void selectTactics(EngineGraph& g, Backend& backend, size_t profile, const BuilderConfig& cfg, ILogger& logger);

}  // namespace kiln
