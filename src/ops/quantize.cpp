// Op definitions (shape inference + reference kernels): QuantizeLinear and DequantizeLinear, the
// Q/DQ pair through which ONNX expresses INT8 (and INT16) models. Per-tensor, per-axis and
// blocked (opset 21 block_size) scales and zero points; integer types int8/uint8/int16/uint16,
// int4/uint4/int2/uint2 (DequantizeLinear also int32), and the narrow floats (float8 kinds,
// float4e2m1), which round to nearest even and saturate unless `saturate` = 0 (float8 only).
//
// Arithmetic follows the ONNX reference evaluator (numpy): QuantizeLinear divides in the input's
// type (float16 / bfloat16 quotients rounded to that type, int32 inputs in double), rounds half to
// even, adds the zero point and saturates; DequantizeLinear computes (x - zero_point) * scale in
// float32 and rounds to the output type.
#include <algorithm>
#include <cfenv>
#include <cmath>

#include "core/type_dispatch.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"
#include "ops/qlinear.h"
#include "ops/quantize.h"

namespace kiln {

void registerDynamicQuantizeOps(OpRegistry& r);  // dynamic_quantize.cpp

namespace {

bool isQuantInt(DataType t) {
  return t == DataType::kINT8 || t == DataType::kUINT8 || t == DataType::kINT16 || t == DataType::kUINT16 ||
         t == DataType::kINT4 || t == DataType::kUINT4 || t == DataType::kINT2 || t == DataType::kUINT2;
}
//! float8e8m0 is no quantized type (ONNX allows it only as a scale, which kiln does not take).
bool isQuantType(DataType t) { return isQuantInt(t) || (isNarrowFloat(t) && t != DataType::kFP8E8M0); }


[[noreturn]] void unsupportedType(const LayerDesc& l, const std::string& what, DataType t) {
  throw UnsupportedError("layer '" + l.name + "' (" + l.op + "): " + what + " of type " + toString(t) + " is not supported");
}


void writeInt(const TensorView& v, int64_t i, int64_t q) {
  switch (v.type) {
    case DataType::kINT8: case DataType::kINT4: case DataType::kINT2: v.as<int8_t>()[i] = static_cast<int8_t>(q); break;
    case DataType::kUINT8: case DataType::kUINT4: case DataType::kUINT2: v.as<uint8_t>()[i] = static_cast<uint8_t>(q); break;
    case DataType::kINT16: v.as<int16_t>()[i] = static_cast<int16_t>(q); break;
    case DataType::kUINT16: v.as<uint16_t>()[i] = static_cast<uint16_t>(q); break;
    default: break;
  }
}


// ---- QuantizeLinear -------------------------------------------------------------------------------

DataType quantizeOutputType(const LayerDesc& l) {
  if (l.present(2)) {
    const DataType z = l.inputs[2].type;
    if (l.attrs->has("output_dtype") && fromOnnxType(l, l.attrs->getInt("output_dtype", 0)) != z)
      opError(l, "output_dtype differs from the zero point's type");
    return z;
  }
  return l.attrs->has("output_dtype") ? fromOnnxType(l, l.attrs->getInt("output_dtype", 0)) : DataType::kUINT8;
}

void inferQuantize(LayerDesc& l) {
  requireInputs(l, 2, 3);
  const DataType x = l.inputs[0].type, s = l.inputs[1].type;
  if (!isFloatType(x) && x != DataType::kINT32) unsupportedType(l, "input", x);
  if (!isFloatType(s)) unsupportedType(l, "y_scale", s);
  const DataType out = quantizeOutputType(l);
  if (!isQuantType(out)) unsupportedType(l, "quantized output", out);
  quantIndex(l, l.inputs[0].dims, l.inputs[1].dims, "y_scale");
  if (l.present(2)) quantIndex(l, l.inputs[0].dims, l.inputs[2].dims, "y_zero_point");
  setOutput(l, 0, out, l.inputs[0].dims);
}

void refQuantize(const LayerDesc& l, const KernelIO& io) {
  const TensorView &x = io.in[0], &s = io.in[1], &y = io.out[0];
  const QuantIndex si = quantIndex(l, x.dims, s.dims, "y_scale");
  const bool hasZp = io.in.size() > 2 && io.in[2].data;
  const QuantIndex zi = hasZp ? quantIndex(l, x.dims, io.in[2].dims, "y_zero_point") : QuantIndex{};
  int64_t lo, hi;
  quantRange(y.type, lo, hi);
  const DataType div = quantizeDivisionType(l);
  const bool narrowFloat = isNarrowFloat(y.type);
  const bool saturate = l.attrs->getInt("saturate", 1) != 0;
  const int saved = std::fegetround();
  std::fesetround(FE_TONEAREST);
  for (int64_t i = 0; i < x.count; ++i) {
    double v;
    if (x.type == DataType::kINT32) {
      v = static_cast<double>(x.as<const int32_t>()[i]) / static_cast<double>(quantReadFloat(s, si(i)));
    } else {
      float q = quantReadFloat(x, i) / quantReadFloat(s, si(i));
      if (div == DataType::kHALF) q = halfToFloat(floatToHalf(q));
      else if (div == DataType::kBF16) q = bf16ToFloat(floatToBf16(q));
      v = q;
    }
    if (narrowFloat) {  // (x / scale + zero_point) rounded once to the narrow float
      if (hasZp) v += narrowToFloat(y.type, io.in[2].as<const uint8_t>()[zi(i)]);
      y.as<uint8_t>()[i] = floatToNarrow(y.type, v, saturate);
      continue;
    }
    // NaN quantizes to the zero point (ONNX leaves it open; ORT's MLAS gives the same for the usual
    // zero points), not to whatever a float-to-int conversion of NaN happens to give.
    int64_t r = std::isnan(v) ? 0 : static_cast<int64_t>(std::nearbyint(std::clamp(v, -1e18, 1e18)));
    if (hasZp) r += quantReadInt(io.in[2], zi(i));
    writeInt(y, i, std::clamp(r, lo, hi));
  }
  std::fesetround(saved);
}

// ---- DequantizeLinear -----------------------------------------------------------------------------

void inferDequantize(LayerDesc& l) {
  requireInputs(l, 2, 3);
  const DataType x = l.inputs[0].type, s = l.inputs[1].type;
  if (!isQuantType(x) && x != DataType::kINT32) unsupportedType(l, "input", x);
  if (!isFloatType(s)) unsupportedType(l, "x_scale", s);
  if (l.present(2) && l.inputs[2].type != x) opError(l, "x_zero_point's type differs from the input's");
  quantIndex(l, l.inputs[0].dims, l.inputs[1].dims, "x_scale");
  if (l.present(2)) quantIndex(l, l.inputs[0].dims, l.inputs[2].dims, "x_zero_point");
  DataType out = l.attrs->has("output_dtype") ? fromOnnxType(l, l.attrs->getInt("output_dtype", 0)) : s;
  if (!isFloatType(out)) unsupportedType(l, "output", out);
  setOutput(l, 0, out, l.inputs[0].dims);
}

void refDequantize(const LayerDesc& l, const KernelIO& io) {
  const TensorView &x = io.in[0], &s = io.in[1], &y = io.out[0];
  const QuantIndex si = quantIndex(l, x.dims, s.dims, "x_scale");
  const bool hasZp = io.in.size() > 2 && io.in[2].data;
  const QuantIndex zi = hasZp ? quantIndex(l, x.dims, io.in[2].dims, "x_zero_point") : QuantIndex{};
  const bool narrowFloat = isNarrowFloat(x.type);
  auto read = [&](const TensorView& v, int64_t i) {
    return narrowFloat ? narrowToFloat(v.type, v.as<const uint8_t>()[i]) : static_cast<float>(quantReadInt(v, i));
  };
  for (int64_t i = 0; i < x.count; ++i) {
    float d = read(x, i);
    if (hasZp) d -= read(io.in[2], zi(i));
    quantWriteFloat(y, i, d * quantReadFloat(s, si(i)));
  }
}

}  // namespace

float quantReadFloat(const TensorView& v, int64_t i) {
  switch (v.type) {
    case DataType::kHALF: return halfToFloat(v.as<const uint16_t>()[i]);
    case DataType::kBF16: return bf16ToFloat(v.as<const uint16_t>()[i]);
    default: return v.as<const float>()[i];
  }
}

void quantWriteFloat(const TensorView& v, int64_t i, float f) {
  switch (v.type) {
    case DataType::kHALF: v.as<uint16_t>()[i] = floatToHalf(f); break;
    case DataType::kBF16: v.as<uint16_t>()[i] = floatToBf16(f); break;
    default: v.as<float>()[i] = f;
  }
}

int64_t quantReadInt(const TensorView& v, int64_t i) {
  switch (v.type) {
    case DataType::kINT8: case DataType::kINT4: case DataType::kINT2: return v.as<const int8_t>()[i];
    case DataType::kUINT8: case DataType::kUINT4: case DataType::kUINT2: return v.as<const uint8_t>()[i];
    case DataType::kINT16: return v.as<const int16_t>()[i];
    case DataType::kUINT16: return v.as<const uint16_t>()[i];
    case DataType::kINT32: return v.as<const int32_t>()[i];
    default: return 0;
  }
}

QuantIndex quantIndex(const LayerDesc& l, const Dims& x, const Dims& s, const char* what) {
  QuantIndex q;
  const int64_t block = l.attrs->getInt("block_size", 0);
  if (block < 0) opError(l, "block_size must be >= 0");
  const int64_t rank = static_cast<int64_t>(x.size());
  int64_t sCount = 1;
  for (int64_t d : s) sCount = d < 0 ? -1 : sCount * d;
  if (block == 0 && (s.empty() || (s.size() == 1 && sCount == 1))) return q;  // per tensor
  if (rank == 0) opError(l, std::string(what) + " must be a scalar for a scalar input");
  const int64_t axis = normalizeAxis(l, l.attrs->getInt("axis", 1), rank);
  q.axisDim = x[axis];
  q.inner = 1;
  for (int64_t k = axis + 1; k < rank; ++k) q.inner = x[k] < 0 || q.inner < 0 ? -1 : q.inner * x[k];
  if (block == 0) {
    if (s.size() != 1) opError(l, std::string(what) + " must be a scalar or 1-D (per-axis), got " + toString(s));
    if (s[0] >= 0 && x[axis] >= 0 && s[0] != x[axis])
      opError(l, std::string(what) + " has " + std::to_string(s[0]) + " values for an axis of size " + std::to_string(x[axis]));
    q.mode = QuantIndex::kAxis;
    return q;
  }
  if (static_cast<int64_t>(s.size()) != rank)
    opError(l, std::string(what) + " must have the input's rank for blocked quantization, got " + toString(s));
  for (int64_t k = 0; k < rank; ++k) {
    if (s[k] < 0 || x[k] < 0) continue;
    const int64_t want = k == axis ? (x[k] + block - 1) / block : x[k];
    if (s[k] != want)
      opError(l, std::string(what) + " shape " + toString(s) + " does not block input " + toString(x) + " by " + std::to_string(block));
  }
  q.mode = QuantIndex::kBlocked;
  q.block = block;
  q.scaleAxisDim = s[axis];
  return q;
}

void quantRange(DataType t, int64_t& lo, int64_t& hi) {
  switch (t) {
    case DataType::kINT8: lo = -128, hi = 127; break;
    case DataType::kUINT8: lo = 0, hi = 255; break;
    case DataType::kINT16: lo = -32768, hi = 32767; break;
    case DataType::kUINT16: lo = 0, hi = 65535; break;
    case DataType::kINT4: lo = -8, hi = 7; break;
    case DataType::kUINT4: lo = 0, hi = 15; break;
    case DataType::kINT2: lo = -2, hi = 1; break;
    case DataType::kUINT2: lo = 0, hi = 3; break;
    default: lo = hi = 0;
  }
}

DataType quantizeDivisionType(const LayerDesc& l) {
  if (l.attrs->has("precision")) return fromOnnxType(l, l.attrs->getInt("precision", 1));
  return l.inputs[0].type == l.inputs[1].type ? l.inputs[0].type : DataType::kFLOAT;
}

void registerQuantizeOps(OpRegistry& r) {
  OpDef q;
  q.name = "QuantizeLinear";
  q.infer = inferQuantize;
  q.ref = refQuantize;
  q.anyType = true;  // float16/bfloat16 handled in the kernel (numpy's rounding of the quotient)
  q.minOpset = 10;
  r.add(q);
  OpDef dq;
  dq.name = "DequantizeLinear";
  dq.infer = inferDequantize;
  dq.ref = refDequantize;
  dq.anyType = true;
  dq.minOpset = 10;
  r.add(dq);
  registerQLinearOps(r);
  registerDynamicQuantizeOps(r);
}

}  // namespace kiln
