// Explicit quantization (lower_qdq.cpp): Q/DQ patterns -> QLinearConv / QLinearMatMul, and
// DQ/Q pairs dropped around MaxPool and data movement. A header of its own so that the pass list
// (passes.h) need not change for it.
#pragma once
#include <functional>

#include "ir/layer_desc.h"
#include "kiln/network.h"

namespace kiln {

//! Rewrites the Q/DQ patterns of QDQ models (ONNX Runtime's quantize_static) into integer layers.
//! `supported` says whether the target backend runs a candidate layer (types as rewritten); a
//! rewrite it refuses is not made. Must run before folded layers are removed (it reads the int8
//! inputs of the weights' DequantizeLinear layers). Throws kiln::Error on a zero, negative or
//! NaN scale of a layer it rewrites.
bool lowerQdq(Network& net, const std::function<bool(const LayerDesc&)>& supported);

//! [R, C] -> [C, R] of a 2-D tensor of one-byte elements (int8 / uint8 / float8 weights: Gemm's transB).
HostTensor transposed2d(const HostTensor& w);

//! FP8 (lower_qdq_fp8.cpp; lowerQdq runs it): MatMul / Gemm between per-tensor float8e4m3fn Q/DQ
//! (activations) and DQ'd float8e4m3fn constant weights, with a constant bias row, -> Fp8MatMul.
bool lowerFp8Qdq(Network& net, const std::function<bool(const LayerDesc&)>& supported);

}  // namespace kiln
