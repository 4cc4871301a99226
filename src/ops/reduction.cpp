// Op definitions (shape inference + naive reference kernels + ONNX normalization): reduction family.
// ReduceMean, ReduceSum, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2, ReduceLogSum,
// ReduceLogSumExp, ReduceSumSquare in their newest form: data, optional axes input (int64),
// attributes keepdims (default 1) and noop_with_empty_axes (default 0).
// A reduction over an empty set gives the identity of the operation: 0 for sums and norms, 1 for
// products, -inf (or the lowest value) for max, +inf (or the highest value) for min, -inf for the
// log-sums and NaN (0/0) for the mean.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "kiln/network.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

enum class ReduceKind { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

struct ReduceOpInfo {
  const char* name;
  ReduceKind kind;
  int axesInputSince;  //!< the opset in which `axes` became an input
};

constexpr ReduceOpInfo kReduceOps[] = {
    {"ReduceSum", ReduceKind::kSum, 13},           {"ReduceMean", ReduceKind::kMean, 18},
    {"ReduceMax", ReduceKind::kMax, 18},           {"ReduceMin", ReduceKind::kMin, 18},
    {"ReduceProd", ReduceKind::kProd, 18},         {"ReduceL1", ReduceKind::kL1, 18},
    {"ReduceL2", ReduceKind::kL2, 18},             {"ReduceLogSum", ReduceKind::kLogSum, 18},
    {"ReduceLogSumExp", ReduceKind::kLogSumExp, 18}, {"ReduceSumSquare", ReduceKind::kSumSquare, 18},
};

const ReduceOpInfo& opInfo(const LayerDesc& l) {
  for (const auto& info : kReduceOps)
    if (l.op == info.name) return info;
  opError(l, "not a reduction op");
}

//! Which dims a layer reduces, once the axes are known.
struct ReduceAxes {
  bool noop = false;             //!< empty axes with noop_with_empty_axes: identity
  std::vector<bool> reduced;     //!< per input dim
};

//! Resolves the reduced dims from the axes values (empty: all dims, or none with noop_with_empty_axes).
ReduceAxes resolveAxes(const LayerDesc& l, const std::vector<int64_t>& axes, int64_t rank) {
  ReduceAxes r;
  r.reduced.assign(static_cast<size_t>(rank), false);
  if (axes.empty()) {
    if (l.attrs->getInt("noop_with_empty_axes", 0) != 0) r.noop = true;
    else r.reduced.assign(static_cast<size_t>(rank), true);
    return r;
  }
  for (int64_t a : axes) {
    int64_t n = normalizeAxis(l, a, rank);
    if (rank == 0) opError(l, "axis " + std::to_string(a) + " out of range for a scalar input");
    if (r.reduced[n]) opError(l, "axis " + std::to_string(a) + " appears more than once in axes");
    r.reduced[n] = true;
  }
  return r;
}

Dims reducedDims(const Dims& in, const ReduceAxes& ax, bool keepDims) {
  if (ax.noop) return in;
  Dims out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!ax.reduced[i]) out.push_back(in[i]);
    else if (keepDims) out.push_back(1);
  }
  return out;
}

bool keepDimsAttr(const LayerDesc& l) {
  int64_t k = l.attrs->getInt("keepdims", 1);
  if (k != 0 && k != 1) opError(l, "keepdims must be 0 or 1, got " + std::to_string(k));
  return k != 0;
}

void inferReduce(LayerDesc& l) {
  requireInputs(l, 1, 2);
  const ReduceOpInfo& info = opInfo(l);
  for (size_t i = 0; i < l.inputs.size(); ++i)  // absurd dims: the element count overflows
    if (l.present(i) && isStatic(l.inputs[i].dims)) volume(l.inputs[i].dims);
  DataType t = l.inputs[0].type;
  bool boolOk = info.kind == ReduceKind::kMax || info.kind == ReduceKind::kMin;
  if (t == DataType::kBOOL && !boolOk) opError(l, "bool input is not supported by this reduction");
  const Dims& x = l.inputs[0].dims;
  const int64_t rank = static_cast<int64_t>(x.size());
  const bool keepDims = keepDimsAttr(l);
  int64_t noopFlag = l.attrs->getInt("noop_with_empty_axes", 0);
  if (noopFlag != 0 && noopFlag != 1) opError(l, "noop_with_empty_axes must be 0 or 1");
  if (l.attrs->has("axes")) opError(l, "axes must be an input in this form of the op (normalize the layer)");

  if (!l.present(1)) {
    setOutput(l, 0, t, reducedDims(x, resolveAxes(l, {}, rank), keepDims));
    return;
  }
  const TensorDesc& axesDesc = l.inputs[1];
  if (axesDesc.type != DataType::kINT64 && axesDesc.type != DataType::kINT32)
    opError(l, "axes must be an int64 tensor, got " + std::string(toString(axesDesc.type)));
  if (axesDesc.dims.size() > 1) opError(l, "axes must be a 1-D tensor, got shape " + toString(axesDesc.dims));
  if (axesDesc.value.valid()) {
    setOutput(l, 0, t, reducedDims(x, resolveAxes(l, axesDesc.value.toInts(), rank), keepDims));
    return;
  }
  // Axes not known yet: keep what is certain about the output shape.
  int64_t nAxes = axesDesc.dims.empty() ? 1 : axesDesc.dims[0];
  if (nAxes == 0) {
    setOutput(l, 0, t, reducedDims(x, resolveAxes(l, {}, rank), keepDims));
  } else if (keepDims) {
    Dims out = x;
    for (auto& d : out)
      if (d != 1) d = -1;
    setOutput(l, 0, t, out);
  } else if (nAxes > 0) {
    if (nAxes > rank) opError(l, "more axes (" + std::to_string(nAxes) + ") than input dims");
    setOutput(l, 0, t, Dims(static_cast<size_t>(rank - nAxes), -1));
  } else {
    throw UnsupportedError("layer '" + l.name + "' (" + l.op +
                           "): the output rank depends on axes, whose length is not known at build time");
  }
}

//! Reads the axes at run time: from the kernel input when given, else from the known value.
std::vector<int64_t> runtimeAxes(const LayerDesc& l, const KernelIO& io) {
  if (io.in.size() < 2 || !io.in[1].data) {
    if (l.present(1) && l.inputs[1].value.valid()) return l.inputs[1].value.toInts();
    return {};
  }
  const TensorView& v = io.in[1];
  std::vector<int64_t> axes(static_cast<size_t>(v.count));
  for (int64_t i = 0; i < v.count; ++i)
    axes[i] = v.type == DataType::kINT32 ? v.as<int32_t>()[i] : v.as<int64_t>()[i];
  return axes;
}

//! Accumulator type: double for floating point, 64-bit integers for integers (exact sums).
template <typename T>
using AccumOf = std::conditional_t<std::is_floating_point_v<T>, double,
                                   std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>;

//! Reduces the `count` values read by at(k) with `kind`.
template <typename T, typename Get>
T reduceValues(ReduceKind kind, int64_t count, Get&& at) {
  using Acc = AccumOf<T>;
  constexpr bool kFloat = std::is_floating_point_v<T>;
  switch (kind) {
    case ReduceKind::kMax: {
      T m = kFloat ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
      for (int64_t k = 0; k < count; ++k) {
        T v = at(k);
        if (v > m || v != v) m = v;  // NaN propagates
        if (m != m) break;
      }
      return m;
    }
    case ReduceKind::kMin: {
      T m = kFloat ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max();
      for (int64_t k = 0; k < count; ++k) {
        T v = at(k);
        if (v < m || v != v) m = v;
        if (m != m) break;
      }
      return m;
    }
    case ReduceKind::kProd: {
      Acc p = 1;
      for (int64_t k = 0; k < count; ++k) p *= static_cast<Acc>(at(k));
      return static_cast<T>(p);
    }
    case ReduceKind::kLogSumExp: {
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t k = 0; k < count; ++k) m = std::max(m, static_cast<double>(at(k)));
      if (!std::isfinite(m)) return static_cast<T>(m);  // empty, all -inf, or +inf present
      double s = 0;
      for (int64_t k = 0; k < count; ++k) s += std::exp(static_cast<double>(at(k)) - m);
      return static_cast<T>(m + std::log(s));
    }
    default: break;
  }
  // Sums: of values, of |values| or of squares.
  Acc s = 0;
  for (int64_t k = 0; k < count; ++k) {
    Acc v = static_cast<Acc>(at(k));
    if (kind == ReduceKind::kL1) {
      if constexpr (std::is_signed_v<Acc>) v = v < 0 ? -v : v;
    } else if (kind == ReduceKind::kL2 || kind == ReduceKind::kSumSquare) {
      v = v * v;
    }
    s += v;
  }
  switch (kind) {
    case ReduceKind::kMean:
      if constexpr (kFloat) return static_cast<T>(s / static_cast<double>(count));
      else return count ? static_cast<T>(s / static_cast<Acc>(count)) : T(0);
    case ReduceKind::kL2: return static_cast<T>(std::sqrt(static_cast<double>(s)));
    case ReduceKind::kLogSum: return static_cast<T>(std::log(static_cast<double>(s)));
    default: return static_cast<T>(s);
  }
}

template <typename T>
void reduceKernel(const LayerDesc& l, const KernelIO& io, const ReduceAxes& ax) {
  const Dims& x = io.in[0].dims;
  const T* in = io.in[0].as<T>();
  T* out = io.out[0].as<T>();
  if (ax.noop) {
    std::copy(in, in + io.in[0].count, out);
    return;
  }
  // Split the input dims into kept and reduced ones, with their strides in the input.
  auto strides = rowMajorStrides(x);
  Dims keptDims, redDims;
  std::vector<int64_t> keptStrides, redStrides;
  for (size_t i = 0; i < x.size(); ++i) {
    (ax.reduced[i] ? redDims : keptDims).push_back(x[i]);
    (ax.reduced[i] ? redStrides : keptStrides).push_back(strides[i]);
  }
  const int64_t outCount = volume(keptDims), redCount = volume(redDims);
  std::vector<int64_t> redOffsets(static_cast<size_t>(redCount));  // offsets of one reduced block
  std::vector<int64_t> idx(redDims.size(), 0);
  for (int64_t r = 0; r < redCount; ++r) {
    int64_t off = 0;
    for (size_t d = 0; d < redDims.size(); ++d) off += idx[d] * redStrides[d];
    redOffsets[r] = off;
    for (size_t d = redDims.size(); d-- > 0;) {
      if (++idx[d] < redDims[d]) break;
      idx[d] = 0;
    }
  }
  const ReduceKind kind = opInfo(l).kind;
  for (int64_t o = 0; o < outCount; ++o) {
    int64_t base = 0, rest = o;
    for (size_t d = keptDims.size(); d-- > 0;) {
      base += rest % keptDims[d] * keptStrides[d];
      rest /= keptDims[d];
    }
    out[o] = reduceValues<T>(kind, redCount, [&](int64_t k) { return in[base + redOffsets[k]]; });
  }
}

void refReduce(const LayerDesc& l, const KernelIO& io) {
  ReduceAxes ax = resolveAxes(l, runtimeAxes(l, io), static_cast<int64_t>(io.in[0].dims.size()));
  DataType t = io.in[0].type;
  if (t == DataType::kHALF || t == DataType::kBF16)
    throw UnsupportedError("layer '" + l.name + "' (" + l.op + "): no CPU kernel for " + toString(t));
  dispatchNumeric(t, [&](auto v) {
    using T = decltype(v);
    if constexpr (std::is_same_v<T, bool>) {
      // Max/min of booleans are "any"/"all": computed on bytes, then clamped to 0/1 (the
      // empty-set min of bytes is 255, of booleans true).
      reduceKernel<uint8_t>(l, io, ax);
      uint8_t* out = io.out[0].as<uint8_t>();
      for (int64_t i = 0; i < io.out[0].count; ++i) out[i] = out[i] != 0;
    } else {
      reduceKernel<T>(l, io, ax);
    }
  });
}

//! Older opsets carry `axes` as an attribute; the newest form takes it as an int64 input.
void normalizeReduce(Network& net, Layer& layer, int opset) {
  int since = 18;
  for (const auto& info : kReduceOps)
    if (layer.op == info.name) since = info.axesInputSince;
  if (opset >= since) return;
  if (layer.attrs.has("axes")) {
    std::vector<int64_t> axes = layer.attrs.getInts("axes");
    HostTensor t(DataType::kINT64, {static_cast<int64_t>(axes.size())});
    std::copy(axes.begin(), axes.end(), t.as<int64_t>());
    Tensor* c = net.addConstant(net.uniqueName(layer.name + "_axes"), t);
    layer.inputs.resize(1);
    layer.inputs.push_back(c);
    layer.attrs.erase("axes");
  }
  layer.attrs.erase("noop_with_empty_axes");  // not defined before the axes input existed
}

}  // namespace

void registerReductionOps(OpRegistry& r) {
  for (const auto& info : kReduceOps) {
    OpDef d;
    d.name = info.name;
    d.infer = inferReduce;
    d.ref = refReduce;
    d.valueInputs = {1};
    d.normalize = normalizeReduce;
    r.add(std::move(d));
  }
}

}  // namespace kiln
