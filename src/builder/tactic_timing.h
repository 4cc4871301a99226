// Tactic selection: times every tactic a backend offers for a layer at the opt shapes and
// records the fastest in the engine graph.
#pragma once
#include <map>

#include "backends/backend.h"
#include "kiln/builder.h"
#include "runtime/engine_graph.h"

namespace kiln {

void selectTactics(EngineGraph& g, Backend& backend, const std::map<int, Dims>& optDims, const BuilderConfig& cfg,
                   ILogger& logger);

}  // namespace kiln
