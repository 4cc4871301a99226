// The FP8 family's shared facts (ops/fp8_matmul.cpp): what the builder passes and the GPU
// tactics read off an Fp8MatMul layer.
#pragma once
#include "ir/layer_desc.h"

namespace kiln {

//! A LayerNormalization / RMSNormalization that writes its Y as float8e4m3fn codes of Y / scale
//! (saturating, as the QuantizeLinear it absorbed; fuse_fp8_quantize.cpp): float attribute, part
//! of the plan format like the fusion contract's names (ops/fused_attrs.h).
constexpr const char* kFp8OutScaleAttr = "kiln_fp8_out_scale";

//! The layer's float type: X's type when X is float, else the `dtype` attribute (X holds
//! float8e4m3fn codes); the bias's type and Y's when `y_scale` is absent.
DataType fp8MatMulFloatType(const LayerDesc& l);

}  // namespace kiln
