// Transposes that the GPU layout pass turns into byte copies (builder/passes/gpu_layout.cpp):
// perm [0, 2, 3, 1] of an X stored nhwc, and perm [0, 3, 1, 2] whose Y is stored nhwc. Either
// way the output's logical row-major bytes are the input's stored bytes, so the CUDA tactic
// copies and the runtime aliases the output to the input (no element moves). ConvNeXt's and
// Swin's permutes around channels-last LayerNorm/MLP blocks, SegFormer's token flattening.
#pragma once
#include <cstdint>
#include <vector>

#include "kiln/network.h"

namespace kiln {

//! Whether a Transpose of a rank-`rank` input with these attributes is such a copy.
bool isLayoutCopyTranspose(const Attributes& a, size_t rank);

//! The two permutations (rank 4) and the layout side each needs.
const std::vector<int64_t>& toChannelsLastPerm();    //!< {0, 2, 3, 1}: X stored nhwc
const std::vector<int64_t>& fromChannelsLastPerm();  //!< {0, 3, 1, 2}: Y stored nhwc

}  // namespace kiln
