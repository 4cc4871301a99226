// Op definition for DynamicQuantizeLinear: uint8 quantization whose scale and zero point come from
// the input's own range (widened to include 0), as the ONNX function defines it:
//   scale = (max(0, max x) - min(0, min x)) / 255   (1/255 when that range is empty)
//   zero_point = rint(clamp(-min / scale, 0, 255)),  y = clamp(rint(x / scale) + zero_point, 0, 255)
// rint rounds half to even. Outputs: y, y_scale (float32 scalar), y_zero_point (uint8 scalar).
#include <algorithm>
#include <cfenv>
#include <cmath>

#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

void registerDynamicQuantizeOps(OpRegistry& r);  // called from quantize.cpp

namespace {

void inferDynamicQuantize(LayerDesc& l) {
  requireInputs(l, 1, 1);
  if (l.inputs[0].type != DataType::kFLOAT)
    opError(l, std::string("x must be float32, got ") + toString(l.inputs[0].type));
  setOutput(l, 0, DataType::kUINT8, l.inputs[0].dims);
  if (l.outputs.size() > 1) setOutput(l, 1, DataType::kFLOAT, {});
  if (l.outputs.size() > 2) setOutput(l, 2, DataType::kUINT8, {});
}

void refDynamicQuantize(const LayerDesc&, const KernelIO& io) {
  const TensorView& x = io.in[0];
  const float* xs = x.as<const float>();
  float hi = 0.f, lo = 0.f;  // the range always includes 0
  for (int64_t i = 0; i < x.count; ++i) {
    hi = std::max(hi, xs[i]);
    lo = std::min(lo, xs[i]);
  }
  const float scale = (hi == lo ? 1.f : hi - lo) / 255.f;
  const int saved = std::fegetround();
  std::fesetround(FE_TONEAREST);
  const float zp = std::nearbyint(std::clamp(0.f - lo / scale, 0.f, 255.f));
  uint8_t* y = io.out[0].as<uint8_t>();
  for (int64_t i = 0; i < x.count; ++i) {
    const float q = std::nearbyint(xs[i] / scale) + zp;
    y[i] = q > 255.f ? 255 : q >= 0.f ? static_cast<uint8_t>(q) : 0;  // NaN -> 0, never a UB cast
  }
  std::fesetround(saved);
  if (io.out.size() > 1 && io.out[1].data) *io.out[1].as<float>() = scale;
  if (io.out.size() > 2 && io.out[2].data) *io.out[2].as<uint8_t>() = static_cast<uint8_t>(zp);
}

}  // namespace

void registerDynamicQuantizeOps(OpRegistry& r) {
  OpDef d;
  d.name = "DynamicQuantizeLinear";
  d.infer = inferDynamicQuantize;
  d.ref = refDynamicQuantize;
  d.minOpset = 11;
  r.add(d);
}

}  // namespace kiln
