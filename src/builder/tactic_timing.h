// Tactic selection: times every tactic a backend offers for a layer at an optimization profile's
// opt shapes and records the fastest in the engine graph.
#pragma once
#include <map>

#include "backends/backend.h"
#include "kiln/builder.h"
#include "runtime/engine_graph.h"

namespace kiln {

//! Chooses every layer's tactic for optimization profile `profile` (timed at its opt shapes) and
//! stores it in EngineLayer::choices[profile] (which must exist).
void selectTactics(EngineGraph& g, Backend& backend, size_t profile, const BuilderConfig& cfg, ILogger& logger);

}  // namespace kiln
