// Per-layer precision and output-type constraints by layer name (trtexec's --layerPrecisions /
// --layerOutputTypes; Python's BuilderConfig(layer_precisions=...)).
#pragma once
#include <map>
#include <string>

#include "kiln/network.h"

namespace kiln {

//! Sets the precision constraint of the layers `precisions` names (layers are named after the ONNX
//! nodes). A name may hold '*' wildcards ("*": every layer, "block1*": every layer whose name
//! starts so); where several entries match a layer, a name without '*' wins, then the longest
//! pattern. Types: kFLOAT, kHALF, kBF16, kINT8. The builder honours them under
//! BuilderFlag::kOBEY_PRECISION_CONSTRAINTS / kPREFER_PRECISION_CONSTRAINTS. An entry that
//! matches no layer throws kiln::Error naming a few layers that exist.
void setLayerPrecisions(Network& network, const std::map<std::string, DataType>& precisions);

//! The same for the type of each named layer's output 0 (Layer::outputType).
void setLayerOutputTypes(Network& network, const std::map<std::string, DataType>& types);

//! Whether `name` matches `pattern` ('*' matches any run of characters, itself included none).
bool matchesLayerPattern(const std::string& pattern, const std::string& name);

}  // namespace kiln
