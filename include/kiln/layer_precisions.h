// Per-layer precision constraints by layer name (trtexec's --layerPrecisions; Python's
// BuilderConfig(layer_precisions=...)).
#pragma once
#include <map>
#include <string>

#include "kiln/network.h"

namespace kiln {

//! Sets the precision constraint of each named layer of `network` ("*": every layer; a named
//! entry overrides it). The builder honours them under BuilderFlag::kOBEY_PRECISION_CONSTRAINTS.
//! A name no layer has throws kiln::Error naming a few layers that exist (layers are named after
//! the ONNX nodes).
void setLayerPrecisions(Network& network, const std::map<std::string, DataType>& precisions);

}  // namespace kiln
