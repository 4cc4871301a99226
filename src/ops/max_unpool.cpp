// Op definition for MaxUnpool (opsets 9, 11, 22): the partial inverse of MaxPool. X (N, C, spatial...)
// and I (MaxPool's indices, same shape) scatter X into zeros: I[i] is a flat index into the
// unpooled tensor of the default shape, spatial (in - 1) * stride - pad_begin - pad_end + kernel.
// output_shape (an optional value input) may ask for a larger tensor: the default-shaped block
// then sits at its start, the rest is zero (as the ONNX reference does). Moves raw elements of X,
// so any element type.
#include <cstring>
#include <vector>

#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

// The unpooled shape of x from the attributes (-1 where x's dim is unknown).
Dims defaultUnpooledShape(const LayerDesc& l, const Dims& x) {
  const size_t s = x.size() - 2;
  const std::vector<int64_t> kernel = l.attrs->getInts("kernel_shape");
  if (kernel.size() != s) opError(l, "kernel_shape must have " + std::to_string(s) + " values (one per spatial axis)");
  const std::vector<int64_t> strides = l.attrs->getInts("strides", std::vector<int64_t>(s, 1));
  const std::vector<int64_t> pads = l.attrs->getInts("pads", std::vector<int64_t>(2 * s, 0));
  if (strides.size() != s || pads.size() != 2 * s) opError(l, "strides and pads must have one and two values per spatial axis");
  Dims out{x[0], x[1]};
  for (size_t a = 0; a < s; ++a) {
    if (kernel[a] < 1 || strides[a] < 1 || pads[a] < 0 || pads[s + a] < 0) opError(l, "invalid kernel_shape, strides or pads");
    const int64_t d = x[2 + a] < 0 ? -1 : (x[2 + a] - 1) * strides[a] - pads[a] - pads[s + a] + kernel[a];
    if (x[2 + a] >= 0 && d < 1) opError(l, "the unpooled size of spatial axis " + std::to_string(a) + " is " + std::to_string(d));
    out.push_back(d);
  }
  return out;
}

void inferMaxUnpool(LayerDesc& l) {
  requireInputs(l, 2, 3);
  const Dims &x = l.inputs[0].dims, &ind = l.inputs[1].dims;
  if (x.size() < 3) opError(l, "X must have rank 3 or more (N, C, spatial...), got " + toString(x));
  if (l.inputs[1].type != DataType::kINT64) opError(l, "I must be int64");
  if (ind.size() != x.size()) opError(l, "I " + toString(ind) + " must have X's shape " + toString(x));
  for (size_t a = 0; a < x.size(); ++a)
    if (x[a] >= 0 && ind[a] >= 0 && x[a] != ind[a]) opError(l, "I " + toString(ind) + " must have X's shape " + toString(x));
  Dims out = defaultUnpooledShape(l, x);
  if (l.present(2)) {
    const TensorDesc& s = l.inputs[2];
    if (s.type != DataType::kINT64 || s.dims.size() != 1) opError(l, "output_shape must be a 1-D int64 tensor");
    if (s.dims[0] >= 0 && s.dims[0] != static_cast<int64_t>(x.size())) opError(l, "output_shape must have X's rank");
    if (!s.value.valid()) {
      out.assign(x.size(), -1);
    } else {
      const std::vector<int64_t> v = s.value.toInts();
      for (size_t a = 0; a < out.size(); ++a) {
        if (out[a] >= 0 && v[a] < out[a])
          opError(l, "output_shape " + toString(Dims(v)) + " is smaller than the unpooled shape " + toString(out));
        out[a] = v[a];
      }
    }
  }
  setOutput(l, 0, l.inputs[0].type, out);
}

void refMaxUnpool(const LayerDesc& l, const KernelIO& io) {
  const TensorView &x = io.in[0], &y = io.out[0];
  const int64_t* ind = io.in[1].as<const int64_t>();
  const Dims inner = defaultUnpooledShape(l, x.dims), &out = y.dims;
  const int64_t innerCount = volume(inner);
  const std::vector<int64_t> outStride = rowMajorStrides(out);
  const size_t es = elementSize(x.type);
  if (y.count) std::memset(y.data, 0, static_cast<size_t>(y.count) * es);
  for (int64_t i = 0; i < x.count; ++i) {
    int64_t flat = ind[i];
    if (flat < 0 || flat >= innerCount)
      opError(l, "index " + std::to_string(flat) + " is outside the unpooled tensor of " + std::to_string(innerCount) + " elements");
    int64_t at = 0;  // the same position in the (possibly larger) output
    for (size_t a = inner.size(); a-- > 0;) {
      at += (flat % inner[a]) * outStride[a];
      flat /= inner[a];
    }
    std::memcpy(static_cast<uint8_t*>(y.data) + at * static_cast<int64_t>(es), static_cast<const uint8_t*>(x.data) + i * static_cast<int64_t>(es), es);
  }
}

}  // namespace

void registerMaxUnpoolOps(OpRegistry& r) {
  OpDef d;
  d.name = "MaxUnpool";
  d.infer = inferMaxUnpool;
  d.ref = refMaxUnpool;
  d.valueInputs = {2};
  d.anyType = true;
  d.minOpset = 9;
  r.add(d);
}

}  // namespace kiln
