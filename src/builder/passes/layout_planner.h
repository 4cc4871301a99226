// Physical layouts for chains of conv / pooling layers, shared by the CPU pass (oneDNN's blocked
// nChw8c / nChw16c) and the GPU pass (nhwc for cuDNN's tensor cores). Dims stay logical NCHW; a
// layer that takes part carries kiln_layout_in / kiln_layout_out (ops/conv_layout.h) and
// LayoutConvert layers sit wherever a tensor in the chosen layout meets a layer that reads plain
// NCHW, or a plain tensor meets a conv's residual slot in the chosen layout.
#pragma once
#include <functional>
#include <memory>

#include "backends/backend.h"
#include "kiln/network.h"

namespace kiln {

struct LayoutPolicy {
  int64_t block = 1;  //!< the layout chosen tensors take (layoutName(block))
  //! Whether tensor t may take the layout (its producer and readers are checked separately).
  std::function<bool(const Tensor* t)> eligible;
  //! Layers that can read X (and Conv's residual R) in the layout.
  std::function<bool(const Layer& l)> reads;
  //! Layers that can write Y in the layout.
  std::function<bool(const Layer& l)> writes;
  //! Elementwise layers that run in whatever layout their inputs have (optional): Y takes the
  //! layout when every input of Y's shape has it; the other inputs must be broadcasts whose bytes
  //! are the same in both layouts (C == 1 or H == W == 1, e.g. a squeeze-excitation scale
  //! [N, C, 1, 1] or a bias [C, 1, 1]). They keep NHWC regions whole across residual adds, gates
  //! and activation chains instead of converting around each of them.
  std::function<bool(const Layer& l)> transparent;
  //! Layers that join their inputs along the channel axis (optional; isLayoutChannelConcat): in a
  //! blocked layout their bytes are the plain concatenation's when every input's channel count is
  //! a multiple of the block (per batch, each input is one contiguous run of C_i * H * W elements
  //! in both layouts); in nhwc each pixel's channel runs are joined (the kernel reads the layout
  //! attributes). Y takes the layout when every input has it; they keep Inception/DenseNet
  //! blocks in the layout instead of converting around every Concat.
  std::function<bool(const Layer& l)> channelConcat;
  //! A layer takes part only where one of this backend's non-reference tactics supports it
  //! with the layout attributes set (else it keeps plain NCHW).
  Backend* backend = nullptr;
  //! Also create the tactic's kernel and reshape it for the layer's (static) shapes: a layer
  //! takes part only if that succeeds (GPU: cuDNN may have no engine for some NHWC problems).
  bool verify = false;
  //! Whether two tensors have the same dims at every shape (optional; default: equal IR dims,
  //! which two unknown dims would be whether or not they are the same dim).
  std::function<bool(const Tensor* a, const Tensor* b)> sameDims;
  //! Dynamic dims: sets a layer's description to the shapes to verify at (the opt shape; optional).
  std::function<void(const Layer& l, LayerDesc& d)> atOpt;
};

//! Whether some layer already carries layout attributes (the layout passes run once).
bool layoutsAssigned(const Network& net);

//! Chooses the tensors, sets the layout attributes and inserts LayoutConvert layers. Returns
//! whether anything changed (false also when layouts were assigned before).
bool assignLayouts(Network& net, const LayoutPolicy& policy);

//! Conv with one output, MaxPool / AveragePool with one output, the global pools.
bool isLayoutConv(const Layer& l);
bool isLayoutWindowPool(const Layer& l);
bool isLayoutGlobalPool(const Layer& l);
//! GroupNormalization / InstanceNormalization of a 4-D X with one output (the GPU's nhwc tactics).
bool isLayoutGroupNorm(const Layer& l);
//! A 4-D Concat along axis 1 (-3) with one output.
bool isLayoutChannelConcat(const Layer& l);

}  // namespace kiln
