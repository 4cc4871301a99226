// Op definition for EyeLike: a 2-D tensor of the input's shape with ones on diagonal k (k > 0
// above the main one) and zeros elsewhere, of type `dtype` (an ONNX code; default: the input's).
// Only the input's shape is read, so its type does not matter.
#include <cstring>

#include "core/type_dispatch.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

void registerEyeLikeOps(OpRegistry& r);  // called from shape.cpp

namespace {

void inferEyeLike(LayerDesc& l) {
  requireInputs(l, 1, 1);
  if (l.inputs[0].dims.size() != 2) opError(l, "input must be 2-D, got " + toString(l.inputs[0].dims));
  const DataType t = l.attrs->has("dtype") ? fromOnnxType(l, l.attrs->getInt("dtype", 1)) : l.inputs[0].type;
  setOutput(l, 0, t, l.inputs[0].dims);
}

void refEyeLike(const LayerDesc& l, const KernelIO& io) {
  const TensorView& y = io.out[0];
  const int64_t rows = y.dims[0], cols = y.dims[1], k = l.attrs->getInt("k", 0);
  const size_t es = elementSize(y.type);
  if (y.count) std::memset(y.data, 0, static_cast<size_t>(y.count) * es);
  // The bytes of 1 in the output type.
  uint8_t one[8] = {};
  if (y.type == DataType::kHALF) { const uint16_t h = 0x3C00; std::memcpy(one, &h, 2); }
  else if (y.type == DataType::kBF16) { const uint16_t h = 0x3F80; std::memcpy(one, &h, 2); }
  else dispatchType<kHostTypes>(y.type, [&](auto tag) { const decltype(tag) v = 1; std::memcpy(one, &v, sizeof v); }, "EyeLike");
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t c = r + k;
    if (c >= 0 && c < cols) std::memcpy(static_cast<char*>(y.data) + (r * cols + c) * static_cast<int64_t>(es), one, es);
  }
}

}  // namespace

void registerEyeLikeOps(OpRegistry& r) {
  OpDef d;
  d.name = "EyeLike";
  d.infer = inferEyeLike;
  d.ref = refEyeLike;
  d.anyType = true;  // writes half/bf16 ones itself
  d.minOpset = 9;
  r.add(d);
}

}  // namespace kiln
