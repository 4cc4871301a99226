// A tensor as a strided view of an earlier tensor's buffer, traced through the data-movement
// layers exporters put between a projection and attention (head splits, packed QKV unbinding), so
// that a kernel can read the earlier buffer in place (builder/passes/fuse_attention.cpp).
#pragma once
#include <functional>
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

//! A tensor's dims as a trace sees them: its own (static) dims, or its dims at one sample shape of a
//! dynamic network (SymbolicDims::at). Null or negative entries: not known there.
using DimsOf = std::function<const Dims*(const Tensor*)>;
//! The tensor's own dims when they are known.
const Dims* staticDimsOf(const Tensor* t);

//! Traces `t` up through layers with known shapes (`dims`) that only move data (Reshape, Flatten,
//! Squeeze, Unsqueeze, Identity, one-input Concat, Transpose, Gather of one constant index, Split,
//! Slice with step 1) to the first tensor produced by anything else (or a network input). False
//! when a step is not a strided view (e.g. a Reshape merging dims that are not contiguous).
bool traceView(Tensor* t, StridedView& v, const DimsOf& dims = staticDimsOf);

//! The other direction, for a layer's output `y`: follows its readers while each is the only reader
//! and only moves data (Transpose, Reshape, Flatten, Squeeze, Unsqueeze, Identity, one-input
//! Concat; known `dims`), and finds the longest such chain whose last tensor `z` holds y's elements
//! as a strided view. Returns the chain's layers (from y on), z, and y's strides in z (false when
//! no layer can be absorbed).
bool traceOutputView(const Network& net, Tensor* y, std::vector<Layer*>& layers, Tensor*& z, std::vector<int64_t>& strides,
                     const DimsOf& dims = staticDimsOf);

}  // namespace kiln
