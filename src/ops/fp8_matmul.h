// The FP8 family's shared facts (ops/fp8_matmul.cpp): what the builder passes and the GPU
// tactics read off an Fp8MatMul layer.
#pragma once
#include "ir/layer_desc.h"

namespace kiln {

//! A LayerNormalization / RMSNormalization that writes float8e4m3fn codes of Y / scale (saturating,
//! as the QuantizeLinear it absorbed; fuse_fp8_quantize.cpp): the scale (float), and which output
//! holds the codes (int; 0, the default: Y itself; 1: a second output beside a float Y, which
//! other layers read too, and then the layer has no Sum / Mean / InvStdDev output). Part of the
//! plan format like the fusion contract's names (ops/fused_attrs.h).
constexpr const char* kFp8OutScaleAttr = "kiln_fp8_out_scale";
constexpr const char* kFp8CodesOutputAttr = "kiln_fp8_codes_output";

//! The saturating float8e4m3fn code of v / scale, as ONNX's QuantizeLinear computes it (one float
//! division, one rounding to nearest even, clamped to +-448): the reference kernels' quantization.
uint8_t fp8Code(float v, float scale);

//! Throws the layer's error unless attribute `attr` is a positive finite scale.
void requireFp8Scale(const LayerDesc& l, const char* attr);

//! The output holding the codes (kFp8OutScaleAttr), or -1 when the layer writes none.
int fp8CodesOutput(const Attributes& a);

//! The layer's float type: X's type when X is float, else the `dtype` attribute (X holds
//! float8e4m3fn codes); the bias's type and Y's when `y_scale` is absent.
DataType fp8MatMulFloatType(const LayerDesc& l);

}  // namespace kiln
