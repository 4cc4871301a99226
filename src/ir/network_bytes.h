// A Network as bytes: how a layer carries a subgraph (a runtime Loop's body, ops/loop.cpp) in an
// attribute (a uint8 HostTensor) that plan files store like any other. Reading checks every
// length and index, so a tampered plan gets an Error, never a crash.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kiln/network.h"

namespace kiln {

//! Tensors (name, type, dims, input/output flags, constant values, in network input and output
//! order) and layers (name, op, domain, attributes, input and output tensors) in layer order.
std::vector<uint8_t> serializeNetwork(const Network& net);
//! Rebuilds what serializeNetwork wrote into `net` (empty); throws kiln::Error on bad bytes.
void deserializeNetwork(const uint8_t* data, size_t size, Network& net);

}  // namespace kiln
