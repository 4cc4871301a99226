// A tensor as a strided view of an earlier tensor's buffer, traced through the data-movement
// layers exporters put between a projection and attention (head splits, packed QKV unbinding), so
// that a kernel can read the earlier buffer in place (builder/passes/fuse_attention.cpp).
#pragma once
#include <vector>

#include "kiln/network.h"

namespace kiln {

//! Element (i0, .., in-1) of the traced tensor is base[offset + sum_k i_k * strides[k]].
struct StridedView {
  Tensor* base = nullptr;
  int64_t offset = 0;
  Dims sizes;
  std::vector<int64_t> strides;
  bool copies = false;  //!< the chain holds a layer that copies (Transpose, Gather, Split, Slice)
};

//! Traces `t` up through layers with static shapes that only move data (Reshape, Flatten,
//! Squeeze, Unsqueeze, Identity, one-input Concat, Transpose, Gather of one constant index, Split,
//! Slice with step 1) to the first tensor produced by anything else (or a network input). False
//! when a step is not a strided view (e.g. a Reshape merging dims that are not contiguous).
bool traceView(Tensor* t, StridedView& v);

//! The other direction, for a layer's output `y`: follows its readers while each is the only reader
//! and only moves data (Transpose, Reshape, Flatten, Squeeze, Unsqueeze, Identity, one-input
//! Concat; static dims), and finds the longest such chain whose last tensor `z` holds y's elements
//! as a strided view. Returns the chain's layers (from y on), z, and y's strides in z (false when
//! no layer can be absorbed).
bool traceOutputView(const Network& net, Tensor* y, std::vector<Layer*>& layers, Tensor*& z, std::vector<int64_t>& strides);

}  // namespace kiln
