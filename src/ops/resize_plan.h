// The sampling plan of a concrete Resize/Upsample layer (ops/resize.cpp), as the reference kernel
// computes it, for the optimized tactics (the CPU's resize_cpu.cpp, the GPU's resize_cuda.cu) so
// that their rounding and tap choices match the reference exactly.
#pragma once
#include <cstdint>
#include <vector>

#include "ir/layer_desc.h"

namespace kiln {

struct ResizeSamplingPlan {
  Dims outDims;
  //! Per axis: `taps[a]` taps per output index, their input indices and weights ([out][tap]).
  std::vector<int> taps;
  std::vector<std::vector<int64_t>> index;
  std::vector<std::vector<float>> weight;
  //! Per axis and output index: 1 where a tf_crop_and_resize output lies outside the input.
  std::vector<std::vector<uint8_t>> outside;
  bool anyOutside = false;
  double extrapolation = 0;  //!< extrapolation_value
  uint64_t extBits = 0;      //!< the same, stored in the input's element type (low bytes)
};

//! Throws kiln::Error when the scales/sizes (or roi) values are not known.
ResizeSamplingPlan resizeSamplingPlan(const LayerDesc& concrete);

}  // namespace kiln
