// Host-side pieces shared by the depthwise conv tactics (conv_depthwise.cu, conv_depthwise_nhwc.cu,
// conv_depthwise_nhwc_smem.cu, conv_depthwise_nchw.cu): which layers they take, the taps-major
// weight packing and the shared-memory kernel's tile plan.
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

//! Channels per block of conv_fp_depthwise_nhwc_smem (16 threads of 2 channels).
constexpr int kSliceChannels = 32;

//! conv_fp_depthwise_nhwc_smem's output tile: tileH x tileW pixels (tileW a multiple of p, the
//! pixels per thread), its input tile with the halo (inTileH x inTileW), the input tile's row pitch
//! in elements and the shared memory of tile plus float32 weights. smemBytes == 0: nothing fits.
struct DepthwiseSmemTile {
  int p = 0, tileH = 0, tileW = 0, inTileH = 0, inTileW = 0, pitch = 0, smemBytes = 0;
};

//! The tile with the fewest estimated cycles for a KxK stride-S depthwise conv with an
//! outH x outW output, elemSize-byte elements, `planes` (images x channel slices) and `sms` SMs.
DepthwiseSmemTile planDepthwiseSmemTile(int k, int stride, int outH, int outW, int elemSize, int64_t planes, int sms);

}  // namespace kiln::cuda
