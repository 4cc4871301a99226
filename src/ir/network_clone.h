// A deep copy of a Network (layers, tensor names, attributes, constraints); constant values share
// their buffers, which no pass writes in place. The builder calibrates on a copy, since building
// an engine consumes the network it is given.
#pragma once
#include <memory>

#include "kiln/network.h"

namespace kiln {

//! `src` must be topologically sorted. Throws kiln::Error if a layer reads a tensor that no
//! earlier layer, input or constant provides.
std::unique_ptr<Network> cloneNetwork(const Network& src);

}  // namespace kiln
