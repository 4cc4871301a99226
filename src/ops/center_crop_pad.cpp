// Op definition for CenterCropPad (opset 18): each axis in `axes` (default: all) is cropped or
// zero-padded to shape[i], centred: a crop drops floor((dim - s) / 2) elements at the start (the
// extra one of an odd difference at the end), a pad adds floor((s - dim) / 2) zeros at the start
// and the rest at the end. `shape` is a value input (it sets the output shape). Moves raw
// elements, so any element type.
#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

// The target size of every axis of `in` (-1 where unknown), from the shape input and axes.
Dims centerCropPadTarget(const LayerDesc& l, const Dims& in) {
  const int64_t rank = static_cast<int64_t>(in.size());
  std::vector<int64_t> axes = l.attrs->getInts("axes");
  if (!l.attrs->has("axes"))
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t& a : axes) {
    a = normalizeAxis(l, a, rank);
    if (seen[a]) opError(l, "axis " + std::to_string(a) + " is repeated in axes");
    seen[a] = true;
  }
  const Dims& shapeDims = l.inputs[1].dims;
  if (shapeDims.size() != 1) opError(l, "shape must be rank 1, got " + toString(shapeDims));
  if (shapeDims[0] >= 0 && shapeDims[0] != static_cast<int64_t>(axes.size()))
    opError(l, "shape has " + std::to_string(shapeDims[0]) + " values for " + std::to_string(axes.size()) + " axes");
  Dims out = in;
  const HostTensor& v = l.inputs[1].value;
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t s = v.valid() ? v.getInt(static_cast<int64_t>(i)) : -1;
    if (v.valid() && s < 0) opError(l, "shape values must not be negative, got " + std::to_string(s));
    out[axes[i]] = s;
  }
  return out;
}

void inferCenterCropPad(LayerDesc& l) {
  requireInputs(l, 2, 2);
  if (l.inputs[1].type != DataType::kINT64 && l.inputs[1].type != DataType::kINT32)
    opError(l, "shape must be int32 or int64");
  setOutput(l, 0, l.inputs[0].type, centerCropPadTarget(l, l.inputs[0].dims));
}

void refCenterCropPad(const LayerDesc&, const KernelIO& io) {
  const TensorView &x = io.in[0], &y = io.out[0];
  const Dims &in = x.dims, &out = y.dims;
  const size_t rank = in.size(), es = elementSize(x.type);
  if (y.count) std::memset(y.data, 0, static_cast<size_t>(y.count) * es);
  if (y.count == 0 || x.count == 0) return;
  if (rank == 0) {  // a scalar: nothing to crop or pad
    std::memcpy(y.data, x.data, es);
    return;
  }
  // Per axis: the first input index copied, the first output index written, and how many.
  std::vector<int64_t> inStart(rank), outStart(rank), len(rank);
  for (size_t a = 0; a < rank; ++a) {
    const int64_t d = in[a], s = out[a];
    inStart[a] = s < d ? (d - s) / 2 : 0;
    outStart[a] = s > d ? (s - d) / 2 : 0;
    len[a] = std::min(d, s);
  }
  const std::vector<int64_t> inStride = rowMajorStrides(in), outStride = rowMajorStrides(out);
  const int64_t rowBytes = len[rank - 1] * static_cast<int64_t>(es);
  const Dims rows(len.begin(), len.end() - 1);
  const int64_t nRows = volume(rows);
  const uint8_t* src = static_cast<const uint8_t*>(x.data);
  uint8_t* dst = static_cast<uint8_t*>(y.data);
  std::vector<int64_t> idx(rank, 0);
  for (int64_t r = 0; r < nRows; ++r) {
    for (int64_t q = r, a = static_cast<int64_t>(rank) - 2; a >= 0; --a) idx[a] = q % len[a], q /= len[a];
    int64_t si = inStart[rank - 1], di = outStart[rank - 1];
    for (size_t a = 0; a + 1 < rank; ++a) si += (inStart[a] + idx[a]) * inStride[a], di += (outStart[a] + idx[a]) * outStride[a];
    std::memcpy(dst + di * static_cast<int64_t>(es), src + si * static_cast<int64_t>(es), static_cast<size_t>(rowBytes));
  }
}

}  // namespace

void registerCenterCropPadOps(OpRegistry& r) {
  OpDef d;
  d.name = "CenterCropPad";
  d.infer = inferCenterCropPad;
  d.ref = refCenterCropPad;
  d.valueInputs = {1};
  d.anyType = true;
  d.minOpset = 18;
  r.add(d);
}

}  // namespace kiln
