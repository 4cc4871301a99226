// Precision constraints after the passes (--precisionConstraints=obey|prefer): each constrained
// layer of the network as given is found again in the optimized one (by name, or inside a fused
// layer) and what it computes is compared with what was asked.
#pragma once
#include <map>
#include <optional>
#include <string>

#include "kiln/builder.h"
#include "kiln/logger.h"
#include "kiln/network.h"

namespace kiln {

struct LayerConstraint {
  std::string op;
  std::optional<DataType> precision, outputType;
};

//! Float output-type constraints: the layer's output goes through a Cast to the type (and back
//! for its readers, which keep computing in their own type); a network output keeps its declared
//! type. Before the passes.
bool applyOutputTypes(Network& net);

//! The constrained layers of `net`, by name (before any pass).
std::map<std::string, LayerConstraint> collectConstraints(const Network& net);

//! `obey`: throws UnsupportedError naming the first layer that does not get its precision / output
//! type; otherwise a warning per such layer. `why` may explain a layer (e.g. implicit quantization's
//! reason for keeping it float).
void checkConstraints(const std::map<std::string, LayerConstraint>& wanted, const Network& net, DeviceType device, bool obey,
                      const std::map<std::string, std::string>& why, ILogger& log);

}  // namespace kiln
