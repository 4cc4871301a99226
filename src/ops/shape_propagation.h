// Shape/type propagation over a Network, folding host-computable values (constant folding and
// shape subgraphs).
#pragma once
#include <map>
#include <string>

#include "ir/layer_desc.h"
#include "kiln/network.h"

namespace kiln {

//! Builds the LayerDesc of a layer from its tensors' current types/dims/values.
LayerDesc describeLayer(const Layer& l);
//! Infers one layer's outputs from its inputs' current types/dims/values and writes them to its
//! output tensors (with `fold`, also their values when computable on the host). Throws kiln::Error.
void inferLayerInPlace(Layer& l, bool fold);
//! Infers every layer's outputs in order (the network must be topologically sorted). With
//! `fold`, outputs of foldable layers whose inputs are all known become known values.
void propagateShapes(Network& net, const std::map<std::string, Dims>* inputDims, bool fold = true);

}  // namespace kiln
