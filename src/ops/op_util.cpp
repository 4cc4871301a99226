#include "core/type_dispatch.h"
#include "ops/op_util.h"

namespace kiln {

void opError(const LayerDesc& l, const std::string& msg) {
  throw Error("layer '" + l.name + "' (" + l.op + "): " + msg);
}

void requireInputs(const LayerDesc& l, size_t minIn, size_t maxIn) {
  size_t n = l.inputs.size();
  if (n < minIn || n > maxIn)
    opError(l, "expects " + std::to_string(minIn) + (minIn == maxIn ? "" : ".." + std::to_string(maxIn)) +
                   " inputs, got " + std::to_string(n));
  for (size_t i = 0; i < minIn; ++i)
    if (!l.present(i)) opError(l, "required input " + std::to_string(i) + " is missing");
}

int64_t normalizeAxis(const LayerDesc& l, int64_t axis, int64_t rank) {
  if (axis < -rank || (axis >= rank && !(rank == 0 && axis == 0)))
    opError(l, "axis " + std::to_string(axis) + " out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

Dims broadcastDims(const LayerDesc& l, const Dims& a, const Dims& b) {
  size_t r = std::max(a.size(), b.size());
  Dims out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t x = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t y = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (x == y) out[i] = x;
    else if (x == 1) out[i] = y;
    else if (y == 1) out[i] = x;
    else if (x < 0 || y < 0) out[i] = x < 0 ? y : x;  // unknown vs known: the known one (or 1)
    else opError(l, "shapes " + toString(a) + " and " + toString(b) + " cannot be broadcast");
  }
  return out;
}

std::vector<int64_t> rowMajorStrides(const Dims& d) {
  std::vector<int64_t> s(d.size());
  int64_t acc = 1;
  for (size_t i = d.size(); i-- > 0;) {
    s[i] = acc;
    acc *= d[i];
  }
  return s;
}

std::vector<int64_t> broadcastStrides(const Dims& from, const Dims& to) {
  std::vector<int64_t> s(to.size(), 0);
  auto fs = rowMajorStrides(from);
  size_t off = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) s[off + i] = from[i] == 1 ? 0 : fs[i];
  return s;
}

const HostTensor& knownValue(const LayerDesc& l, size_t i) {
  if (!l.present(i) || !l.inputs[i].value.valid())
    opError(l, "input " + std::to_string(i) + " must be a constant or computable from shapes");
  return l.inputs[i].value;
}

void setOutput(LayerDesc& l, size_t i, DataType t, const Dims& d) {
  if (l.outputs.size() <= i) l.outputs.resize(i + 1);
  l.outputs[i].type = t;
  l.outputs[i].dims = d;
}


void widenToFloat(const TensorView& v, float* dst) {
  const uint16_t* s = v.as<uint16_t>();
  for (int64_t i = 0; i < v.count; ++i) dst[i] = v.type == DataType::kHALF ? halfToFloat(s[i]) : bf16ToFloat(s[i]);
}

void narrowFromFloat(const float* src, const TensorView& v) {
  uint16_t* d = v.as<uint16_t>();
  for (int64_t i = 0; i < v.count; ++i) d[i] = v.type == DataType::kHALF ? floatToHalf(src[i]) : floatToBf16(src[i]);
}

}  // namespace kiln
