// Op definitions (shape inference + naive reference kernels + ONNX normalization): resize family.
// Resize (and the legacy Upsample) are computed as separable sampling: along every axis each
// output index reads a few input indices ("taps") with weights; an output element is the sum of
// the products over axes. The same taps drive the optimized CPU tactic (resize_cpu.cpp).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "ops/op_registry.h"
#include "ops/op_util.h"
#include "ops/resize_plan.h"

namespace kiln {

namespace {

enum class InterpMode { kNearest, kLinear, kCubic };
enum class CoordMode {
  kHalfPixel, kHalfPixelSymmetric, kPytorchHalfPixel, kAlignCorners, kAsymmetric, kTfCropAndResize,
  kTfHalfPixelForNN,  // Resize-11 only; kept so that opset-11 models still import
};
enum class NearestMode { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };
enum class AspectPolicy { kStretch, kNotLarger, kNotSmaller };

//! Where a resize-like op keeps its inputs (Upsample has no roi and no sizes).
struct ResizeInputs {
  int roi = -1, scales = -1, sizes = -1;
};

struct ResizeAttrs {
  InterpMode mode = InterpMode::kNearest;
  CoordMode coord = CoordMode::kHalfPixel;
  NearestMode nearest = NearestMode::kRoundPreferFloor;
  double cubicA = -0.75;
  bool excludeOutside = false;
  double extrapolation = 0.0;
  bool antialias = false;
  AspectPolicy policy = AspectPolicy::kStretch;
  std::vector<int64_t> axes;  //!< normalized; all axes when the attribute is absent
  ResizeInputs in;
};

bool isUpsample(const LayerDesc& l) { return l.op == "Upsample"; }

InterpMode parseMode(const LayerDesc& l) {
  std::string m = l.attrs->getString("mode", "nearest");
  if (m == "nearest") return InterpMode::kNearest;
  if (m == "linear") return InterpMode::kLinear;
  if (m == "cubic" && !isUpsample(l)) return InterpMode::kCubic;
  opError(l, "unknown mode '" + m + "'");
}

CoordMode parseCoordMode(const LayerDesc& l) {
  std::string m = l.attrs->getString("coordinate_transformation_mode", "half_pixel");
  if (m == "half_pixel") return CoordMode::kHalfPixel;
  if (m == "half_pixel_symmetric") return CoordMode::kHalfPixelSymmetric;
  if (m == "pytorch_half_pixel") return CoordMode::kPytorchHalfPixel;
  if (m == "align_corners") return CoordMode::kAlignCorners;
  if (m == "asymmetric") return CoordMode::kAsymmetric;
  if (m == "tf_crop_and_resize") return CoordMode::kTfCropAndResize;
  if (m == "tf_half_pixel_for_nn") return CoordMode::kTfHalfPixelForNN;
  opError(l, "unknown coordinate_transformation_mode '" + m + "'");
}

NearestMode parseNearestMode(const LayerDesc& l) {
  std::string m = l.attrs->getString("nearest_mode", "round_prefer_floor");
  if (m == "round_prefer_floor") return NearestMode::kRoundPreferFloor;
  if (m == "round_prefer_ceil") return NearestMode::kRoundPreferCeil;
  if (m == "floor") return NearestMode::kFloor;
  if (m == "ceil") return NearestMode::kCeil;
  opError(l, "unknown nearest_mode '" + m + "'");
}

AspectPolicy parsePolicy(const LayerDesc& l) {
  std::string p = l.attrs->getString("keep_aspect_ratio_policy", "stretch");
  if (p == "stretch") return AspectPolicy::kStretch;
  if (p == "not_larger") return AspectPolicy::kNotLarger;
  if (p == "not_smaller") return AspectPolicy::kNotSmaller;
  opError(l, "unknown keep_aspect_ratio_policy '" + p + "'");
}

ResizeAttrs parseAttrs(const LayerDesc& l) {
  ResizeAttrs a;
  const int64_t rank = static_cast<int64_t>(l.inputs[0].dims.size());
  if (rank < 1) opError(l, "input X must have rank >= 1");
  a.mode = parseMode(l);
  if (isUpsample(l)) {
    // Upsample (and Resize-10, normalized into attributes) sample at x_out / scale, floor rounding.
    a.coord = CoordMode::kAsymmetric;
    a.nearest = NearestMode::kFloor;
    a.in.scales = 1;
  } else {
    a.coord = parseCoordMode(l);
    a.nearest = parseNearestMode(l);
    a.cubicA = l.attrs->getFloat("cubic_coeff_a", -0.75f);
    a.excludeOutside = l.attrs->getInt("exclude_outside", 0) != 0;
    a.extrapolation = l.attrs->getFloat("extrapolation_value", 0.f);
    a.antialias = l.attrs->getInt("antialias", 0) != 0;
    a.policy = parsePolicy(l);
    a.in = ResizeInputs{1, 2, 3};
  }
  std::vector<int64_t> axes = l.attrs->getInts("axes");
  if (axes.empty()) {
    for (int64_t i = 0; i < rank; ++i) a.axes.push_back(i);
  } else {
    std::set<int64_t> seen;
    for (int64_t ax : axes) {
      int64_t n = normalizeAxis(l, ax, rank);
      if (!seen.insert(n).second) opError(l, "axes contains axis " + std::to_string(n) + " twice");
      a.axes.push_back(n);
    }
  }
  return a;
}

//! True when input i is omitted or provably has no elements (old opsets pass empty tensors).
bool emptyInput(const LayerDesc& l, int i) {
  if (i < 0 || !l.present(static_cast<size_t>(i))) return true;
  const TensorDesc& t = l.inputs[i];
  if (t.value.valid()) return t.value.count() == 0;
  return t.dims.size() == 1 && t.dims[0] == 0;
}

//! Checks a 1-D scales/sizes/roi input has `expected` elements (when its dims are known).
void checkVectorInput(const LayerDesc& l, int i, const char* what, int64_t expected) {
  const Dims& d = l.inputs[i].dims;
  if (d.size() != 1) opError(l, std::string(what) + " must be a 1-D tensor, got dims " + toString(d));
  if (d[0] >= 0 && d[0] != expected)
    opError(l, std::string(what) + " has " + std::to_string(d[0]) + " elements, expected " + std::to_string(expected));
}

//! The output dims (-1 where unknown) and the per-axis scale factors used by the coordinate
//! transformation (NaN where unknown).
struct ResizeGeometry {
  Dims outDims;
  std::vector<double> scales;
};

constexpr double kMaxDim = 4.0e15;  // far beyond any real tensor, far below int64 overflow

int64_t checkedOutputDim(const LayerDesc& l, double v) {
  if (!(v >= 0.0) || v > kMaxDim) opError(l, "output dimension " + std::to_string(v) + " is out of range");
  return static_cast<int64_t>(v);
}

ResizeGeometry computeGeometry(const LayerDesc& l, const ResizeAttrs& a) {
  const Dims& in = l.inputs[0].dims;
  const size_t rank = in.size();
  const int64_t nAxes = static_cast<int64_t>(a.axes.size());
  ResizeGeometry g;
  g.outDims = in;
  g.scales.assign(rank, 1.0);

  bool useScales = !emptyInput(l, a.in.scales);
  bool useSizes = !emptyInput(l, a.in.sizes);
  if (useScales && useSizes) opError(l, "only one of scales and sizes may be given");
  if (!useScales && !useSizes) opError(l, "one of scales and sizes must be given");
  const int src = useScales ? a.in.scales : a.in.sizes;
  checkVectorInput(l, src, useScales ? "scales" : "sizes", nAxes);
  if (useSizes && l.inputs[src].type != DataType::kINT64) opError(l, "sizes must be int64");
  if (useScales && !isFloat(l.inputs[src].type)) opError(l, "scales must be a float tensor");

  const HostTensor& v = l.inputs[src].value;
  if (!v.valid()) {  // values unknown at build time: the rank is all we know
    for (int64_t ax : a.axes) {
      g.outDims[ax] = -1;
      g.scales[ax] = std::numeric_limits<double>::quiet_NaN();
    }
    return g;
  }
  if (v.count() != nAxes)
    opError(l, std::string(useScales ? "scales" : "sizes") + " has " + std::to_string(v.count()) +
                   " elements, expected " + std::to_string(nAxes));

  if (useScales) {
    for (int64_t i = 0; i < nAxes; ++i) {
      double s = v.getDouble(i);
      if (!(s > 0.0) || !std::isfinite(s)) opError(l, "scales must be positive and finite, got " + std::to_string(s));
      int64_t ax = a.axes[i];
      g.scales[ax] = s;
      g.outDims[ax] = in[ax] < 0 ? -1 : checkedOutputDim(l, std::floor(s * static_cast<double>(in[ax])));
    }
    return g;
  }

  for (int64_t i = 0; i < nAxes; ++i)
    if (v.getInt(i) < 0) opError(l, "sizes must be non-negative, got " + std::to_string(v.getInt(i)));
  if (a.policy == AspectPolicy::kStretch) {
    for (int64_t i = 0; i < nAxes; ++i) {
      int64_t ax = a.axes[i];
      g.outDims[ax] = v.getInt(i);
      g.scales[ax] = in[ax] < 0 ? std::numeric_limits<double>::quiet_NaN()
                                : static_cast<double>(v.getInt(i)) / static_cast<double>(in[ax]);
    }
    return g;
  }
  // keep_aspect_ratio_policy: one scale for all axes (the smallest or the largest ratio).
  bool known = true;
  for (int64_t ax : a.axes) known = known && in[ax] > 0;
  double scale = a.policy == AspectPolicy::kNotLarger ? std::numeric_limits<double>::infinity() : 0.0;
  for (int64_t i = 0; i < nAxes && known; ++i) {
    double r = static_cast<double>(v.getInt(i)) / static_cast<double>(in[a.axes[i]]);
    scale = a.policy == AspectPolicy::kNotLarger ? std::min(scale, r) : std::max(scale, r);
  }
  for (int64_t ax : a.axes) {
    g.scales[ax] = known ? scale : std::numeric_limits<double>::quiet_NaN();
    g.outDims[ax] = known ? checkedOutputDim(l, std::floor(scale * static_cast<double>(in[ax]) + 0.5)) : -1;
  }
  return g;
}

void checkRoiInput(const LayerDesc& l, const ResizeAttrs& a) {
  if (a.coord != CoordMode::kTfCropAndResize) return;
  if (emptyInput(l, a.in.roi)) opError(l, "coordinate_transformation_mode tf_crop_and_resize needs the roi input");
  checkVectorInput(l, a.in.roi, "roi", 2 * static_cast<int64_t>(a.axes.size()));
}

void inferResize(LayerDesc& l) {
  requireInputs(l, 1, isUpsample(l) ? 2 : 4);
  ResizeAttrs a = parseAttrs(l);
  checkRoiInput(l, a);
  DataType t = l.inputs[0].type;
  if (a.mode != InterpMode::kNearest && t == DataType::kBOOL)
    throw UnsupportedError("linear/cubic Resize of bool tensors is not supported");
  ResizeGeometry g = computeGeometry(l, a);
  if (isStatic(g.outDims)) volume(g.outDims);  // throws on overflow
  setOutput(l, 0, t, g.outDims);
}

// ---- Sampling taps ----------------------------------------------------------------------------

//! Taps along one axis: `count` per output index; `outside[o]` marks tf_crop_and_resize outputs
//! whose source coordinate lies outside the input (they get extrapolation_value).
struct AxisTaps {
  int count = 1;
  std::vector<int64_t> index;
  std::vector<double> weight;
  std::vector<uint8_t> outside;
};

//! Maps output index y to a (fractional) input coordinate, as the ONNX specification defines.
double sourceCoordinate(CoordMode mode, double y, double scale, int64_t inSize, int64_t outSize,
                        double roiStart, double roiEnd) {
  const double inW = static_cast<double>(inSize);
  const double outW = scale * inW;  // the "ideal" output length (not rounded)
  switch (mode) {
    case CoordMode::kHalfPixel: return (y + 0.5) / scale - 0.5;
    case CoordMode::kHalfPixelSymmetric: {
      double adjustment = static_cast<double>(outSize) / outW;
      double offset = inW / 2.0 * (1.0 - adjustment);
      return offset + (y + 0.5) / scale - 0.5;
    }
    case CoordMode::kPytorchHalfPixel: return outW == 1.0 ? -0.5 : (y + 0.5) / scale - 0.5;
    case CoordMode::kAlignCorners: return outW == 1.0 ? 0.0 : y * (inW - 1.0) / (outW - 1.0);
    case CoordMode::kAsymmetric: return y / scale;
    case CoordMode::kTfHalfPixelForNN: return (y + 0.5) / scale;
    case CoordMode::kTfCropAndResize: {
      double x = outW == 1.0 ? (roiEnd - roiStart) * (inW - 1.0) / 2.0
                             : y * (roiEnd - roiStart) * (inW - 1.0) / (outW - 1.0);
      return x + roiStart * (inW - 1.0);
    }
  }
  return 0.0;
}

int64_t nearestIndex(NearestMode mode, double x) {
  double base = std::floor(x);
  double frac = x - base;
  auto b = static_cast<int64_t>(base);
  if (frac == 0.0) return b;
  switch (mode) {
    case NearestMode::kRoundPreferFloor: return frac <= 0.5 ? b : b + 1;
    case NearestMode::kRoundPreferCeil: return frac < 0.5 ? b : b + 1;
    case NearestMode::kFloor: return b;
    case NearestMode::kCeil: return b + 1;
  }
  return b;
}

double cubicKernel(double x, double A) {
  x = std::fabs(x);
  if (x <= 1.0) return ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0;
  if (x < 2.0) return ((A * x - 5.0 * A) * x + 8.0 * A) * x - 4.0 * A;
  return 0.0;
}

double linearKernel(double x) { return std::max(0.0, 1.0 - std::fabs(x)); }

//! Weight of tap k (relative to the input index left of x) for x at `ratio` in (0, 1]. The plain
//! filters use the distances 1+r, r, 1-r, (1-r)+1 spelled as the ONNX reference spells them, so
//! results agree to the last bit where rounding to integers makes that visible.
double filterWeight(const ResizeAttrs& a, int64_t k, double ratio, double s) {
  if (!a.antialias) {
    if (a.mode == InterpMode::kLinear) return k == 0 ? 1.0 - ratio : ratio;
    return cubicKernel(k <= 0 ? ratio - static_cast<double>(k) : (1.0 - ratio) + static_cast<double>(k - 1), a.cubicA);
  }
  double arg = (static_cast<double>(k) - ratio) * s;
  return a.mode == InterpMode::kLinear ? linearKernel(arg) : cubicKernel(arg, a.cubicA);
}

//! Appends the linear/cubic taps of coordinate x. The filter has support radius 1 (linear) or 2
//! (cubic); with antialias and downscaling it is stretched by 1/scale and normalized.
void appendFilterTaps(const ResizeAttrs& a, double x, double scale, int64_t inSize, AxisTaps& t) {
  const double radius = a.mode == InterpMode::kLinear ? 1.0 : 2.0;
  const double s = a.antialias ? std::min(scale, 1.0) : 1.0;
  const auto first = static_cast<int64_t>(std::floor(-radius / s) + 1.0);
  // Taps are relative to the input index left of x (an exact integer x counts as the right end
  // of the interval [x-1, x]).
  double base = std::floor(x);
  double ratio = x - base;
  if (ratio == 0.0) {
    base -= 1.0;
    ratio = 1.0;
  }
  const auto b = static_cast<int64_t>(base);
  double sum = 0.0, inside = 0.0;
  const size_t begin = t.index.size();
  for (int64_t k = first; k <= 1 - first; ++k) {
    double w = filterWeight(a, k, ratio, s);
    int64_t idx = b + k;
    sum += w;
    if (a.excludeOutside && (idx < 0 || idx >= inSize)) w = 0.0;
    inside += w;
    t.index.push_back(std::clamp<int64_t>(idx, 0, inSize - 1));
    t.weight.push_back(w);
  }
  double norm = a.excludeOutside ? inside : (a.antialias ? sum : 1.0);
  if (norm != 0.0 && norm != 1.0)
    for (size_t i = begin; i < t.weight.size(); ++i) t.weight[i] /= norm;
}

AxisTaps computeAxisTaps(const ResizeAttrs& a, int64_t inSize, int64_t outSize, double scale, double roiStart,
                         double roiEnd) {
  AxisTaps t;
  t.outside.assign(outSize, 0);
  if (a.mode == InterpMode::kNearest) {
    t.count = 1;
  } else {
    const double radius = a.mode == InterpMode::kLinear ? 1.0 : 2.0;
    const double s = a.antialias ? std::min(scale, 1.0) : 1.0;
    t.count = static_cast<int>(2 - 2 * static_cast<int64_t>(std::floor(-radius / s) + 1.0));
  }
  t.index.reserve(outSize * t.count);
  t.weight.reserve(outSize * t.count);
  for (int64_t o = 0; o < outSize; ++o) {
    double x = sourceCoordinate(a.coord, static_cast<double>(o), scale, inSize, outSize, roiStart, roiEnd);
    if (a.coord == CoordMode::kTfCropAndResize && (x < 0.0 || x > static_cast<double>(inSize - 1)))
      t.outside[o] = 1;
    if (a.mode == InterpMode::kNearest) {
      t.index.push_back(std::clamp<int64_t>(nearestIndex(a.nearest, x), 0, inSize - 1));
      t.weight.push_back(1.0);
    } else {
      appendFilterTaps(a, x, scale, inSize, t);
    }
  }
  return t;
}

//! An identity axis (not resized) reads input index o for output index o.
AxisTaps identityTaps(int64_t size) {
  AxisTaps t;
  t.count = 1;
  t.outside.assign(size, 0);
  t.weight.assign(size, 1.0);
  for (int64_t o = 0; o < size; ++o) t.index.push_back(o);
  return t;
}

//! A copy of `l` where value inputs without a value take it from the kernel's buffers.
LayerDesc withRuntimeValues(const LayerDesc& l, const KernelIO& io, std::initializer_list<int> inputs) {
  LayerDesc c = l;
  for (int i : inputs) {
    if (i < 0 || !c.present(i) || c.inputs[i].value.valid() || static_cast<size_t>(i) >= io.in.size()) continue;
    const TensorView& v = io.in[i];
    HostTensor t(v.type, v.dims);
    if (t.bytes()) std::memcpy(t.data(), v.data, t.bytes());
    c.inputs[i].value = t;
  }
  return c;
}

//! The taps of every axis of a concrete resize layer, plus its output dims.
struct ResizeSampling {
  Dims outDims;
  std::vector<AxisTaps> axes;
  std::vector<bool> resized;  //!< axes listed in `axes` (the others are copied)
  double extrapolation = 0.0;
};

ResizeSampling computeSampling(const LayerDesc& concrete) {
  ResizeAttrs a = parseAttrs(concrete);
  checkRoiInput(concrete, a);
  ResizeGeometry g = computeGeometry(concrete, a);
  const Dims& in = concrete.inputs[0].dims;
  if (!isStatic(in) || !isStatic(g.outDims)) opError(concrete, "the scales/sizes values are not known");
  ResizeSampling s;
  s.outDims = g.outDims;
  s.extrapolation = a.extrapolation;
  std::vector<double> roi;
  if (a.coord == CoordMode::kTfCropAndResize) {
    const HostTensor& r = knownValue(concrete, a.in.roi);
    for (int64_t i = 0; i < r.count(); ++i) roi.push_back(r.getDouble(i));
  }
  const size_t nAxes = a.axes.size();
  s.resized.assign(in.size(), false);
  for (size_t i = 0; i < nAxes; ++i) s.resized[a.axes[i]] = true;
  s.axes.resize(in.size());
  for (size_t ax = 0; ax < in.size(); ++ax) {
    if (!s.resized[ax]) {
      s.axes[ax] = identityTaps(in[ax]);
      continue;
    }
    if (in[ax] == 0 && g.outDims[ax] > 0) opError(concrete, "cannot resize an empty axis to a non-empty one");
    double roiStart = 0.0, roiEnd = 1.0;
    if (!roi.empty()) {
      size_t pos = std::find(a.axes.begin(), a.axes.end(), static_cast<int64_t>(ax)) - a.axes.begin();
      roiStart = roi[pos];
      roiEnd = roi[nAxes + pos];
    }
    s.axes[ax] = computeAxisTaps(a, in[ax], g.outDims[ax], g.scales[ax], roiStart, roiEnd);
  }
  return s;
}

// ---- Reference kernel -------------------------------------------------------------------------

template <typename T>
T fromDouble(double v) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    // Integers: round half to even, then saturate (as ONNX's reference does).
    double r = std::nearbyint(v);
    constexpr double lo = static_cast<double>(std::numeric_limits<T>::lowest());
    constexpr double hi = static_cast<double>(std::numeric_limits<T>::max());
    if (!(r >= lo)) return std::numeric_limits<T>::lowest();
    if (r >= hi) return std::numeric_limits<T>::max();
    return static_cast<T>(r);
  }
}

//! Nearest: every output element copies one input element (exact for any type).
template <typename T>
void nearestRef(const ResizeSampling& s, const Dims& inDims, const T* in, T* out) {
  const size_t rank = inDims.size();
  const std::vector<int64_t> inStrides = rowMajorStrides(inDims);
  const int64_t total = volume(s.outDims);
  std::vector<int64_t> pos(rank, 0);
  for (int64_t e = 0; e < total; ++e) {
    bool outside = false;
    int64_t off = 0;
    for (size_t ax = 0; ax < rank; ++ax) {
      outside = outside || s.axes[ax].outside[pos[ax]];
      off += s.axes[ax].index[pos[ax]] * inStrides[ax];
    }
    out[e] = outside ? fromDouble<T>(s.extrapolation) : in[off];
    for (size_t ax = rank; ax > 0 && ++pos[ax - 1] == s.outDims[ax - 1];) pos[--ax] = 0;
  }
}

//! Resamples one axis of `src` (dims `d`, in double) into `dst`; updates d[axis].
void filterAxis(const AxisTaps& t, size_t axis, Dims& d, const std::vector<double>& src, std::vector<double>& dst,
                double extrapolation) {
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < axis; ++i) outer *= d[i];
  for (size_t i = axis + 1; i < d.size(); ++i) inner *= d[i];
  const int64_t inLen = d[axis], outLen = static_cast<int64_t>(t.outside.size());
  dst.assign(static_cast<size_t>(outer * outLen * inner), 0.0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t y = 0; y < outLen; ++y) {
      double* row = dst.data() + (o * outLen + y) * inner;
      if (t.outside[y]) {
        std::fill(row, row + inner, extrapolation);
        continue;
      }
      for (int k = 0; k < t.count; ++k) {
        const double w = t.weight[y * t.count + k];
        const double* srcRow = src.data() + (o * inLen + t.index[y * t.count + k]) * inner;
        for (int64_t i = 0; i < inner; ++i) row[i] += srcRow[i] * w;
      }
    }
  d[axis] = outLen;
}

//! Linear/cubic: separable passes in double precision, one resized axis at a time.
template <typename T>
void filterRef(const ResizeSampling& s, const std::vector<bool>& resized, const Dims& inDims, const T* in, T* out) {
  Dims d = inDims;
  std::vector<double> cur(in, in + volume(inDims)), next;
  for (size_t ax = 0; ax < d.size(); ++ax) {
    if (!resized[ax]) continue;
    filterAxis(s.axes[ax], ax, d, cur, next, s.extrapolation);
    cur.swap(next);
  }
  for (size_t i = 0; i < cur.size(); ++i) out[i] = fromDouble<T>(cur[i]);
}

void refResize(const LayerDesc& layer, const KernelIO& io) {
  LayerDesc l = withRuntimeValues(layer, io, isUpsample(layer) ? std::initializer_list<int>{1}
                                                                 : std::initializer_list<int>{1, 2, 3});
  ResizeSampling s = computeSampling(l);
  bool nearest = parseMode(l) == InterpMode::kNearest;
  if (volume(s.outDims) == 0) return;
  dispatchNumeric(io.in[0].type, [&](auto tag) {
    using T = decltype(tag);
    if (nearest) {
      nearestRef<T>(s, io.in[0].dims, io.in[0].as<const T>(), io.out[0].as<T>());
    } else if constexpr (std::is_same_v<T, bool>) {
      throw UnsupportedError("linear/cubic Resize of bool tensors is not supported");
    } else {
      filterRef<T>(s, s.resized, io.in[0].dims, io.in[0].as<const T>(), io.out[0].as<T>());
    }
  });
}

// ---- ONNX normalization -----------------------------------------------------------------------

//! Resize-10 (X, scales) samples like Upsample: asymmetric coordinates, floor for nearest.
void normalizeResize(Network& net, Layer& layer, int opset) {
  (void)net;
  if (opset >= 11) return;
  if (layer.inputs.size() >= 2) layer.inputs.insert(layer.inputs.begin() + 1, nullptr);
  layer.attrs.set("coordinate_transformation_mode", std::string("asymmetric"));
  layer.attrs.set("nearest_mode", std::string("floor"));
}

//! Upsample-7 carries scales as an attribute; later opsets as an input.
void normalizeUpsample(Network& net, Layer& layer, int opset) {
  if (opset >= 9 || !layer.attrs.has("scales")) return;
  std::vector<float> scales = layer.attrs.getFloats("scales");
  HostTensor t(DataType::kFLOAT, {static_cast<int64_t>(scales.size())});
  std::copy(scales.begin(), scales.end(), t.as<float>());
  layer.inputs.resize(1);
  layer.inputs.push_back(net.addConstant(net.uniqueName(layer.name + "_scales"), t));
  layer.attrs.erase("scales");
}

// ---- DepthToSpace / SpaceToDepth ----------------------------------------------------------------

struct BlockAttrs {
  int64_t block = 0;
  bool crd = false;
};

BlockAttrs parseBlockAttrs(const LayerDesc& l) {
  requireInputs(l, 1, 1);
  if (l.inputs[0].dims.size() != 4) opError(l, "input must have rank 4 (N, C, H, W), got dims " + toString(l.inputs[0].dims));
  BlockAttrs b;
  b.block = l.attrs->getInt("blocksize", 0);
  if (b.block < 1 || b.block > (int64_t(1) << 20)) opError(l, "blocksize must be positive, got " + std::to_string(b.block));
  std::string mode = l.attrs->getString("mode", "DCR");
  if (mode != "DCR" && mode != "CRD") opError(l, "mode must be DCR or CRD, got '" + mode + "'");
  b.crd = mode == "CRD";
  return b;
}

void inferDepthToSpace(LayerDesc& l) {
  BlockAttrs b = parseBlockAttrs(l);
  Dims d = l.inputs[0].dims;
  const int64_t bb = b.block * b.block;
  if (d[1] >= 0 && d[1] % bb != 0)
    opError(l, "channels " + std::to_string(d[1]) + " are not divisible by blocksize^2 = " + std::to_string(bb));
  Dims o = {d[0], d[1] < 0 ? -1 : d[1] / bb, d[2] < 0 ? -1 : d[2] * b.block, d[3] < 0 ? -1 : d[3] * b.block};
  if (isStatic(o)) volume(o);
  setOutput(l, 0, l.inputs[0].type, o);
}

void inferSpaceToDepth(LayerDesc& l) {
  BlockAttrs b = parseBlockAttrs(l);
  Dims d = l.inputs[0].dims;
  for (int i = 2; i < 4; ++i)
    if (d[i] >= 0 && d[i] % b.block != 0)
      opError(l, "spatial dim " + std::to_string(d[i]) + " is not divisible by blocksize " + std::to_string(b.block));
  Dims o = {d[0], d[1] < 0 ? -1 : d[1] * b.block * b.block, d[2] < 0 ? -1 : d[2] / b.block,
            d[3] < 0 ? -1 : d[3] / b.block};
  if (isStatic(o)) volume(o);
  setOutput(l, 0, l.inputs[0].type, o);
}

//! Channel of the depth tensor holding (c, by, bx) for a depth tensor of C*b*b channels.
int64_t depthChannel(bool crd, int64_t c, int64_t by, int64_t bx, int64_t block, int64_t channels) {
  return crd ? (c * block + by) * block + bx : (by * block + bx) * channels + c;
}

//! Moves elements between the depth layout [N, C*b*b, H, W] and the space layout
//! [N, C, H*b, W*b]; `toSpace` selects the direction. Copies raw elements (any type).
void moveBlocks(const LayerDesc& l, const KernelIO& io, bool toSpace) {
  BlockAttrs b = parseBlockAttrs(l);
  const Dims& sd = toSpace ? io.out[0].dims : io.in[0].dims;  // space dims
  const int64_t n = sd[0], c = sd[1], sh = sd[2], sw = sd[3];
  const int64_t h = sh / b.block, w = sw / b.block;
  const size_t es = elementSize(io.in[0].type);
  const auto* src = static_cast<const uint8_t*>(io.in[0].data);
  auto* dst = static_cast<uint8_t*>(io.out[0].data);
  for (int64_t in = 0; in < n; ++in)
    for (int64_t ic = 0; ic < c; ++ic)
      for (int64_t y = 0; y < sh; ++y)
        for (int64_t x = 0; x < sw; ++x) {
          int64_t dc = depthChannel(b.crd, ic, y % b.block, x % b.block, b.block, c);
          int64_t depthOff = ((in * c * b.block * b.block + dc) * h + y / b.block) * w + x / b.block;
          int64_t spaceOff = ((in * c + ic) * sh + y) * sw + x;
          if (toSpace) std::memcpy(dst + spaceOff * es, src + depthOff * es, es);
          else std::memcpy(dst + depthOff * es, src + spaceOff * es, es);
        }
}

void refDepthToSpace(const LayerDesc& l, const KernelIO& io) { moveBlocks(l, io, true); }
void refSpaceToDepth(const LayerDesc& l, const KernelIO& io) { moveBlocks(l, io, false); }

}  // namespace

//! The sampling plan of ops/resize_plan.h, for the CPU (resize_cpu.cpp) and CUDA (resize_cuda.cu)
//! tactics.
ResizeSamplingPlan resizeSamplingPlan(const LayerDesc& concrete) {
  ResizeSampling s = computeSampling(concrete);
  ResizeSamplingPlan p;
  p.outDims = s.outDims;
  p.extrapolation = s.extrapolation;
  for (const AxisTaps& t : s.axes) {
    p.anyOutside = p.anyOutside || std::find(t.outside.begin(), t.outside.end(), 1) != t.outside.end();
    p.taps.push_back(t.count);
    p.index.push_back(t.index);
    p.weight.emplace_back(t.weight.begin(), t.weight.end());
    p.outside.push_back(t.outside);
  }
  const DataType t = concrete.inputs[0].type;
  if (t == DataType::kHALF || t == DataType::kBF16) {  // (dispatchNumeric has no 16-bit float types)
    const float f = static_cast<float>(s.extrapolation);
    const uint16_t h = t == DataType::kHALF ? floatToHalf(f) : floatToBf16(f);
    std::memcpy(&p.extBits, &h, sizeof(h));
  } else {
    dispatchNumeric(t, [&](auto tag) {
      using T = decltype(tag);
      const T v = fromDouble<T>(s.extrapolation);
      std::memcpy(&p.extBits, &v, sizeof(T));
    });
  }
  return p;
}

void registerResizeOps(OpRegistry& r) {
  OpDef resize;
  resize.name = "Resize";
  resize.infer = inferResize;
  resize.ref = refResize;
  // roi (1) too: tf_crop_and_resize samples by it, and the CUDA kernel's taps are planned on the host.
  resize.valueInputs = {1, 2, 3};
  resize.normalize = normalizeResize;
  resize.minOpset = 10;
  r.add(resize);

  OpDef upsample;
  upsample.name = "Upsample";
  upsample.infer = inferResize;
  upsample.ref = refResize;
  upsample.valueInputs = {1};
  upsample.normalize = normalizeUpsample;
  upsample.minOpset = 7;
  r.add(upsample);

  OpDef d2s;
  d2s.name = "DepthToSpace";
  d2s.infer = inferDepthToSpace;
  d2s.ref = refDepthToSpace;
  d2s.anyType = true;
  r.add(d2s);

  OpDef s2d;
  s2d.name = "SpaceToDepth";
  s2d.infer = inferSpaceToDepth;
  s2d.ref = refSpaceToDepth;
  s2d.anyType = true;
  r.add(s2d);
}

}  // namespace kiln
