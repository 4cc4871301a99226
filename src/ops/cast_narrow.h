// Cast between the narrow types (float8, float4e2m1, int4/uint4, int2/uint2) and every other type.
#pragma once
#include "ir/layer_desc.h"

namespace kiln {

//! Whether a cast from `from` to `to` involves a narrow type (castNarrow's job).
bool isNarrowCast(DataType from, DataType to);
//! Casts `in` into `out` (same count, at least one narrow type) as ONNX Cast does. Narrow floats
//! round to nearest even with `saturate` (types.h: floatToNarrow), float8e8m0 by `rounding`
//! (floatToE8M0). Floats to int4/uint4/int2/uint2 truncate, and NaN, infinity or a truncated value
//! out of range give 0, as the ONNX reference (ml_dtypes) does, ONNX leaving it undefined; integers
//! to them keep the low bits.
void castNarrow(const TensorView& in, const TensorView& out, bool saturate, E8M0Rounding rounding = E8M0Rounding::kUp);
//! Cast-25+'s round_mode attribute ("up", the default, "down" or "nearest"): float8e8m0 targets only.
E8M0Rounding castRounding(const LayerDesc& l);
//! Casts between the 13 standard types (elementwise_cast.cpp), numpy's astype rules.
void castStandard(const TensorView& in, const TensorView& out);

}  // namespace kiln
