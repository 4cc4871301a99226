// Spatial geometry of Conv, ConvTranspose and the pooling ops: attribute parsing, validation and
// output-size/padding rules (ONNX semantics). Shared by the reference kernels (ops/conv_pool.cpp)
// and the optimized CPU tactics, so that every implementation agrees on pads and output sizes.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "ir/layer_desc.h"

namespace kiln {

enum class AutoPad { kNotSet, kSameUpper, kSameLower, kValid };

//! Per-spatial-axis window parameters. Vectors have one entry per spatial axis; dims may be -1
//! (unknown) in `in`/`out` at build time.
struct Window {
  std::vector<int64_t> in, out, kernel, stride, dilation, padBegin, padEnd;
  size_t rank() const { return in.size(); }
};

//! The same window with exactly 3 spatial axes (leading axes of size 1 added), so that kernels
//! can loop over (D, H, W) whatever the layer's spatial rank.
struct Window3 {
  std::array<int64_t, 3> in{1, 1, 1}, out{1, 1, 1}, kernel{1, 1, 1}, stride{1, 1, 1}, dilation{1, 1, 1},
      padBegin{0, 0, 0}, padEnd{0, 0, 0};
  int64_t inSize() const { return in[0] * in[1] * in[2]; }
  int64_t outSize() const { return out[0] * out[1] * out[2]; }
  int64_t kernelSize() const { return kernel[0] * kernel[1] * kernel[2]; }
};
Window3 toWindow3(const Window& w);

//! Most spatial axes the conv/pool kernels handle.
constexpr size_t kMaxSpatialRank = 3;

AutoPad parseAutoPad(const LayerDesc& l);

//! Validates that X has rank 3..5 (1..3 spatial axes); returns the spatial rank.
size_t spatialRankOf(const LayerDesc& l, const Dims& x);

//! Conv: output size per axis (explicit pads, or auto_pad). `kernel` from W (or kernel_shape).
Window convWindow(const LayerDesc& l, const Dims& x, const std::vector<int64_t>& kernel);
//! Pooling (MaxPool/AveragePool/LpPool): like Conv, plus ceil_mode.
Window poolWindow(const LayerDesc& l, const Dims& x, const std::vector<int64_t>& kernel);
//! ConvTranspose: output_padding, output_shape, auto_pad. `out` is the output spatial size.
Window convTransposeWindow(const LayerDesc& l, const Dims& x, const std::vector<int64_t>& kernel);

//! A fully resolved Conv/ConvTranspose problem (concrete dims only).
struct ConvProblem {
  int64_t batch = 0, inChannels = 0, outChannels = 0, group = 1;
  Window3 win;
  int64_t inChannelsPerGroup() const { return inChannels / group; }
  int64_t outChannelsPerGroup() const { return outChannels / group; }
};
//! Resolves a concrete Conv layer (inputs X, W with known dims).
ConvProblem resolveConv(const LayerDesc& l);
//! Resolves a concrete ConvTranspose layer.
ConvProblem resolveConvTranspose(const LayerDesc& l);

}  // namespace kiln
