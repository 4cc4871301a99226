// Host-side pieces shared by the depthwise conv tactics (conv_depthwise.cu, conv_depthwise_nhwc.cu,
// conv_depthwise_nchw.cu): which layers they take and the taps-major weight packing.
#pragma once
#include <cstdint>

#include "backends/backend.h"

namespace kiln::cuda {

//! The side K of a 2-D depthwise conv's square kernel (X [N, C, H, W], W [C, 1, K, K],
//! group == C, float types alike, a known fused activation, pads / strides / dilations within the
//! kernels' int geometry), or 0 when l is not one.
int64_t depthwiseSide(const LayerDesc& l);

//! Whether the tiled kernels take l: depthwise with K in {3, 5, 7}, both strides 1 or both 2,
//! dilation 1, constant weights (other geometries are left to conv_fp_depthwise and cuDNN).
bool tiledDepthwise(const LayerDesc& l);

//! Weights [C][1][K][K] as [K*K][C], packing "taps_major": a tap's channels are contiguous, for
//! the channels-last kernels' vector loads.
HostTensor tapsMajor(const HostTensor& w);

}  // namespace kiln::cuda
