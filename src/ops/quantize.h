// QuantizeLinear / DequantizeLinear geometry shared by the CPU reference (ops/quantize.cpp) and
// the CUDA kernel (backends/cuda/quantize_cuda.cu): where an element finds its scale and zero
// point, the integer range of a quantized type, and the type QuantizeLinear divides in.
#pragma once
#include <cstdint>

#include "core/host_device.h"
#include "ir/layer_desc.h"

namespace kiln {

//! Where element i of x finds its scale / zero point.
struct QuantIndex {
  enum Mode : int { kTensor = 0, kAxis = 1, kBlocked = 2 };
  int mode = kTensor;
  int64_t axisDim = 1, inner = 1, block = 0, scaleAxisDim = 1;
  KILN_HOST_DEVICE int64_t operator()(int64_t i) const {
    if (mode == kTensor) return 0;
    const int64_t c = (i / inner) % axisDim;
    if (mode == kAxis) return c;
    const int64_t outer = i / (inner * axisDim), in = i % inner;
    return (outer * scaleAxisDim + c / block) * inner + in;
  }
};

//! Checks a scale's (or zero point's) dims `s` against x's and the layer's axis / block_size
//! attributes; throws kiln::Error naming `what` when they do not fit.
QuantIndex quantIndex(const LayerDesc& l, const Dims& x, const Dims& s, const char* what);
//! Element i of a float32 / float16 / bfloat16 view as float.
float quantReadFloat(const TensorView& v, int64_t i);
//! Writes f to element i of a float32 / float16 / bfloat16 view (rounded to nearest even).
void quantWriteFloat(const TensorView& v, int64_t i, float f);
//! Element i of an int8 / uint8 / int16 / uint16 / int32 / int4 / uint4 / int2 / uint2 view (0 for other types).
int64_t quantReadInt(const TensorView& v, int64_t i);
//! [lo, hi] of int8 / uint8 / int16 / uint16 / int4 / uint4 / int2 / uint2 (0, 0 for other types).
void quantRange(DataType t, int64_t& lo, int64_t& hi);
//! The type QuantizeLinear's x / scale quotient is rounded to: the `precision` attribute, else
//! numpy's promotion (x's type when x and the scale share it, else float32).
DataType quantizeDivisionType(const LayerDesc& l);

}  // namespace kiln
