#include "ops/conv_geometry.h"

#include <string>

#include "ops/op_util.h"

namespace kiln {

namespace {

// Attribute values beyond this are rejected: they cannot describe a real model and would make
// the size arithmetic overflow.
constexpr int64_t kMaxAttr = int64_t(1) << 30;

std::string str(const std::vector<int64_t>& v) { return toString(Dims(v)); }

//! Reads an int list attribute of `n` entries (default `dflt` per entry), each in [lo, kMaxAttr].
std::vector<int64_t> axisAttr(const LayerDesc& l, const char* name, size_t n, int64_t dflt, int64_t lo) {
  std::vector<int64_t> v = l.attrs->getInts(name, std::vector<int64_t>(n, dflt));
  if (v.size() != n)
    opError(l, std::string(name) + " " + str(v) + " must have " + std::to_string(n) + " entries");
  for (int64_t x : v)
    if (x < lo || x > kMaxAttr) opError(l, std::string(name) + " " + str(v) + " has an out-of-range value");
  return v;
}

//! Common part of every window: kernel, strides, dilations, explicit pads.
Window baseWindow(const LayerDesc& l, const Dims& x, const std::vector<int64_t>& kernel) {
  size_t r = x.size() - 2;
  Window w;
  w.in.assign(x.begin() + 2, x.end());
  if (kernel.size() != r)
    opError(l, "kernel " + str(kernel) + " does not match the " + std::to_string(r) + " spatial axes of X " + toString(x));
  for (int64_t k : kernel)
    if (k < 1 || k > kMaxAttr) opError(l, "invalid kernel shape " + str(kernel));
  w.kernel = kernel;
  w.stride = axisAttr(l, "strides", r, 1, 1);
  w.dilation = axisAttr(l, "dilations", r, 1, 1);
  std::vector<int64_t> pads = axisAttr(l, "pads", 2 * r, 0, 0);
  w.padBegin.assign(pads.begin(), pads.begin() + r);
  w.padEnd.assign(pads.begin() + r, pads.end());
  w.out.assign(r, -1);
  return w;
}

int64_t extent(const Window& w, size_t i) { return (w.kernel[i] - 1) * w.dilation[i] + 1; }

//! SAME_UPPER/SAME_LOWER: out = ceil(in / stride), pads split so the extra one goes last/first.
void applySamePadding(Window& w, size_t i, bool upper) {
  if (w.in[i] < 0) return;
  w.out[i] = (w.in[i] + w.stride[i] - 1) / w.stride[i];
  int64_t total = std::max<int64_t>(0, (w.out[i] - 1) * w.stride[i] + extent(w, i) - w.in[i]);
  w.padBegin[i] = upper ? total / 2 : total - total / 2;
  w.padEnd[i] = total - w.padBegin[i];
}

void checkOutput(const LayerDesc& l, const Window& w) {
  for (size_t i = 0; i < w.rank(); ++i)
    if (w.in[i] >= 0 && w.out[i] < 1)
      opError(l, "the window (kernel " + str(w.kernel) + ", dilations " + str(w.dilation) + ", pads " + str(w.padBegin) +
                     "+" + str(w.padEnd) + ") does not fit the input spatial size " + str(w.in));
}

Window slidingWindow(const LayerDesc& l, const Dims& x, const std::vector<int64_t>& kernel, bool ceilMode) {
  Window w = baseWindow(l, x, kernel);
  AutoPad ap = parseAutoPad(l);
  for (size_t i = 0; i < w.rank(); ++i) {
    if (ap == AutoPad::kSameUpper || ap == AutoPad::kSameLower) {
      applySamePadding(w, i, ap == AutoPad::kSameUpper);
      continue;
    }
    if (ap == AutoPad::kValid) w.padBegin[i] = w.padEnd[i] = 0;
    if (w.in[i] < 0) continue;
    int64_t span = w.in[i] + w.padBegin[i] + w.padEnd[i] - extent(w, i);
    if (span < 0) {
      w.out[i] = 0;
      continue;
    }
    w.out[i] = (ceilMode ? (span + w.stride[i] - 1) / w.stride[i] : span / w.stride[i]) + 1;
    // With ceil_mode the last window must still start inside the input or its begin padding.
    if (ceilMode && (w.out[i] - 1) * w.stride[i] >= w.in[i] + w.padBegin[i]) --w.out[i];
  }
  checkOutput(l, w);
  return w;
}

}  // namespace

Window3 toWindow3(const Window& w) {
  Window3 r;
  size_t off = 3 - w.rank();
  for (size_t i = 0; i < w.rank(); ++i) {
    r.in[off + i] = w.in[i];
    r.out[off + i] = w.out[i];
    r.kernel[off + i] = w.kernel[i];
    r.stride[off + i] = w.stride[i];
    r.dilation[off + i] = w.dilation[i];
    r.padBegin[off + i] = w.padBegin[i];
    r.padEnd[off + i] = w.padEnd[i];
  }
  return r;
}

AutoPad parseAutoPad(const LayerDesc& l) {
  std::string s = l.attrs->getString("auto_pad", "NOTSET");
  if (s == "NOTSET" || s.empty()) return AutoPad::kNotSet;
  if (s == "SAME_UPPER") return AutoPad::kSameUpper;
  if (s == "SAME_LOWER") return AutoPad::kSameLower;
  if (s == "VALID") return AutoPad::kValid;
  opError(l, "invalid auto_pad '" + s + "'");
}

size_t spatialRankOf(const LayerDesc& l, const Dims& x) {
  if (x.size() < 3) opError(l, "X must have rank >= 3 (N, C, spatial...), got " + toString(x));
  if (x.size() - 2 > kMaxSpatialRank)
    throw UnsupportedError("layer '" + l.name + "' (" + l.op + "): " + std::to_string(x.size() - 2) +
                           " spatial axes are not supported (at most 3)");
  return x.size() - 2;
}

Window convWindow(const LayerDesc& l, const Dims& x, const std::vector<int64_t>& kernel) {
  return slidingWindow(l, x, kernel, false);
}

Window poolWindow(const LayerDesc& l, const Dims& x, const std::vector<int64_t>& kernel) {
  int64_t ceilMode = l.attrs->getInt("ceil_mode", 0);
  if (ceilMode != 0 && ceilMode != 1) opError(l, "ceil_mode must be 0 or 1");
  return slidingWindow(l, x, kernel, ceilMode == 1);
}

Window convTransposeWindow(const LayerDesc& l, const Dims& x, const std::vector<int64_t>& kernel) {
  Window w = baseWindow(l, x, kernel);
  size_t r = w.rank();
  std::vector<int64_t> outPad = axisAttr(l, "output_padding", r, 0, 0);
  for (size_t i = 0; i < r; ++i)
    if (outPad[i] >= std::max(w.stride[i], w.dilation[i]))
      opError(l, "output_padding " + str(outPad) + " must be smaller than the stride or dilation");
  AutoPad ap = parseAutoPad(l);
  bool hasOutShape = l.attrs->has("output_shape");
  std::vector<int64_t> outShape;
  if (hasOutShape) {
    outShape = l.attrs->getInts("output_shape");
    // output_shape may include N and C; only the spatial part matters.
    if (outShape.size() == r + 2) outShape.erase(outShape.begin(), outShape.begin() + 2);
    if (outShape.size() != r) opError(l, "output_shape " + str(outShape) + " must have " + std::to_string(r) + " entries");
    for (int64_t v : outShape)
      if (v < 1 || v > kMaxAttr) opError(l, "invalid output_shape " + str(outShape));
  }
  for (size_t i = 0; i < r; ++i) {
    if (ap == AutoPad::kValid) w.padBegin[i] = w.padEnd[i] = 0;
    if (!hasOutShape && ap != AutoPad::kSameUpper && ap != AutoPad::kSameLower) {
      if (w.in[i] >= 0)
        w.out[i] = w.stride[i] * (w.in[i] - 1) + outPad[i] + extent(w, i) - w.padBegin[i] - w.padEnd[i];
      continue;
    }
    // Pads are derived from the requested output size (output_shape, or in*stride for SAME_*).
    if (hasOutShape) w.out[i] = outShape[i];
    else w.out[i] = w.in[i] < 0 ? -1 : w.in[i] * w.stride[i];
    if (w.in[i] < 0) continue;
    int64_t total = w.stride[i] * (w.in[i] - 1) + outPad[i] + extent(w, i) - w.out[i];
    if (total < 0) {
      // The requested output is larger than the full transposed result: the tail is padding
      // that receives only the bias (negative end padding).
      w.padBegin[i] = 0;
      w.padEnd[i] = total;
      continue;
    }
    bool upper = ap == AutoPad::kSameUpper;
    w.padBegin[i] = upper ? total / 2 : total - total / 2;
    w.padEnd[i] = total - w.padBegin[i];
  }
  checkOutput(l, w);
  return w;
}

ConvProblem resolveConv(const LayerDesc& l) {
  const Dims& x = l.inputs[0].dims;
  const Dims& wd = l.inputs[1].dims;
  ConvProblem p;
  p.batch = x[0];
  p.inChannels = x[1];
  p.outChannels = wd[0];
  p.group = l.attrs->getInt("group", 1);
  p.win = toWindow3(convWindow(l, x, std::vector<int64_t>(wd.begin() + 2, wd.end())));
  return p;
}

ConvProblem resolveConvTranspose(const LayerDesc& l) {
  const Dims& x = l.inputs[0].dims;
  const Dims& wd = l.inputs[1].dims;
  ConvProblem p;
  p.batch = x[0];
  p.inChannels = x[1];
  p.group = l.attrs->getInt("group", 1);
  p.outChannels = wd[1] * p.group;
  p.win = toWindow3(convTransposeWindow(l, x, std::vector<int64_t>(wd.begin() + 2, wd.end())));
  return p;
}

}  // namespace kiln
