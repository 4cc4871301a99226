// Compress with a known condition (ops/shape_index.cpp): which positions it keeps, for the
// builder's lowering to Gather (builder/passes/lower_compress.cpp), validated as the op's shape
// inference and reference kernel validate them.
#pragma once
#include <cstdint>
#include <vector>

#include "ir/layer_desc.h"

namespace kiln {

struct CompressPlan {
  bool flat = false;          //!< no axis attribute: Compress works on the flattened tensor
  int64_t axis = 0;           //!< normalized (0 when flat)
  std::vector<int64_t> kept;  //!< kept positions along the axis
};

//! Throws kiln::Error when the condition's value is not known or does not fit the data.
CompressPlan compressPlan(const LayerDesc& l);

}  // namespace kiln
