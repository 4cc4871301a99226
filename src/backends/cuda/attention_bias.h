// A constant attn_mask as cuDNN SDPA's additive bias (attention_cudnn.cpp), host code. cuDNN adds
// the bias to the scaled scores and takes the softmax; where every key of a query row is hidden,
// what it writes is not what kiln's kernels write (zeros, as the reference and the exporters'
// NaN guard), so the bias is taken only when no row can be fully hidden: a build-time constant
// checked row by row. Runtime masks (padding masks from the inputs) stay with the flash kernels.
#pragma once
#include "kiln/types.h"

namespace kiln::cuda {

//! A mask value at or below this hides its key (as the attention fusion's kVeryNegative): a row
//! needs a key above it to count as open.
constexpr double kSdpaHiddenKey = -1e4;

//! Dims of the dense bias for a mask of dims `mask` (rank 1..4, broadcast to `target` = [B, H,
//! Sq, Skv]): [B or 1, H or 1, Sq, Skv], keeping the mask's batch and head broadcasts.
Dims sdpaBiasDims(const Dims& mask, const Dims& target);

//! True when `mask` (bool: true = attend; float: additive; keys at or past its last dim hidden)
//! broadcasts to `target` and leaves every query row a key above kSdpaHiddenKey, among keys
//! j <= i when `causal` (ONNX's top-left frontier).
bool sdpaMaskLeavesRowsOpen(const HostTensor& mask, const Dims& target, bool causal);

//! The dense bias (sdpaBiasDims) in `type` (float16/bfloat16): the mask's values, -inf for bool
//! false and for keys past the mask's length.
HostTensor denseSdpaBias(const HostTensor& mask, const Dims& target, DataType type);

}  // namespace kiln::cuda
