// Op definitions (shape inference + naive reference kernels + ONNX normalization): selection family.
// ArgMax/ArgMin, TopK and CumSum all work along one axis: a tensor is viewed as
// [outer, axisLen, inner] and each (outer, inner) pair is one independent line.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

//! A tensor viewed as [outer, len, inner] around `axis`.
struct AxisView {
  int64_t outer = 1, len = 1, inner = 1;
};

AxisView viewAround(const Dims& d, int64_t axis) {
  AxisView v;
  for (int64_t i = 0; i < axis; ++i) v.outer *= d[i];
  v.len = d[axis];
  for (size_t i = axis + 1; i < d.size(); ++i) v.inner *= d[i];
  return v;
}

template <typename T>
bool isNan(T v) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
  else return false;
}

void requireNumeric(const LayerDesc& l, DataType t) {
  if (t == DataType::kBOOL) opError(l, "input must be numeric, got bool");
}

// ---- ArgMax / ArgMin --------------------------------------------------------------------------

int64_t reduceAxis(const LayerDesc& l) {
  int64_t rank = static_cast<int64_t>(l.inputs[0].dims.size());
  if (rank < 1) opError(l, "input must have rank >= 1");
  return normalizeAxis(l, l.attrs->getInt("axis", 0), rank);
}

void inferArg(LayerDesc& l) {
  requireInputs(l, 1, 1);
  requireNumeric(l, l.inputs[0].type);
  int64_t axis = reduceAxis(l);
  Dims d = l.inputs[0].dims;
  if (d[axis] == 0) opError(l, "cannot reduce an empty axis");
  if (l.attrs->getInt("keepdims", 1) != 0) d[axis] = 1;
  else d.erase(d.begin() + axis);
  setOutput(l, 0, DataType::kINT64, d);
}

//! Whether candidate v replaces the current best. NaN wins over numbers (like NumPy); among
//! equals the first index wins unless select_last_index.
template <typename T>
bool replacesBest(T v, T best, bool isMax, bool last) {
  if (isNan(best)) return last && isNan(v);
  if (isNan(v)) return true;
  if (last) return isMax ? v >= best : v <= best;
  return isMax ? v > best : v < best;
}

void refArg(const LayerDesc& l, const KernelIO& io) {
  const bool isMax = l.op == "ArgMax";
  const bool last = l.attrs->getInt("select_last_index", 0) != 0;
  AxisView v = viewAround(io.in[0].dims, reduceAxis(l));
  if (v.len == 0) opError(l, "cannot reduce an empty axis");
  int64_t* out = io.out[0].as<int64_t>();
  dispatchNumeric(io.in[0].type, [&](auto tag) {
    using T = decltype(tag);
    const T* in = io.in[0].as<const T>();
    for (int64_t o = 0; o < v.outer; ++o)
      for (int64_t i = 0; i < v.inner; ++i) {
        const T* line = in + o * v.len * v.inner + i;
        int64_t bestIdx = 0;
        for (int64_t k = 1; k < v.len; ++k)
          if (replacesBest(line[k * v.inner], line[bestIdx * v.inner], isMax, last)) bestIdx = k;
        out[o * v.inner + i] = bestIdx;
      }
  });
}

// ---- TopK -------------------------------------------------------------------------------------

int64_t topkAxis(const LayerDesc& l) {
  int64_t rank = static_cast<int64_t>(l.inputs[0].dims.size());
  if (rank < 1) opError(l, "input must have rank >= 1");
  return normalizeAxis(l, l.attrs->getInt("axis", -1), rank);
}

//! K from the K input (value known); -1 when unknown.
int64_t topkK(const LayerDesc& l) {
  const TensorDesc& k = l.inputs[1];
  if (k.type != DataType::kINT64) opError(l, "K must be int64");
  if (k.dims.size() > 1 || (k.dims.size() == 1 && k.dims[0] >= 0 && k.dims[0] != 1))
    opError(l, "K must be a 1-D tensor with one element, got dims " + toString(k.dims));
  if (!k.value.valid()) return -1;
  if (k.value.count() != 1) opError(l, "K must hold exactly one value");
  int64_t v = k.value.getInt(0);
  if (v < 0) opError(l, "K must be non-negative, got " + std::to_string(v));
  return v;
}

void inferTopK(LayerDesc& l) {
  requireInputs(l, 2, 2);
  requireNumeric(l, l.inputs[0].type);
  int64_t axis = topkAxis(l);
  int64_t k = topkK(l);
  Dims d = l.inputs[0].dims;
  if (k >= 0 && d[axis] >= 0 && k > d[axis])
    opError(l, "K = " + std::to_string(k) + " exceeds the axis length " + std::to_string(d[axis]));
  d[axis] = k;
  setOutput(l, 0, l.inputs[0].type, d);
  setOutput(l, 1, DataType::kINT64, d);
}

//! Orders (value, index) pairs: the selected extreme first, ties by lower index. NaN counts as
//! larger than every number, so the order is total.
template <typename T>
struct TopKOrder {
  bool largest;
  bool operator()(const std::pair<T, int64_t>& a, const std::pair<T, int64_t>& b) const {
    bool an = isNan(a.first), bn = isNan(b.first);
    bool aGreater = (an && !bn) || (!an && !bn && a.first > b.first);
    bool bGreater = (bn && !an) || (!an && !bn && b.first > a.first);
    if (aGreater != bGreater) return largest ? aGreater : bGreater;
    return a.second < b.second;
  }
};

void refTopK(const LayerDesc& layer, const KernelIO& io) {
  int64_t axis = topkAxis(layer);
  int64_t k = io.out[0].dims[axis];
  const bool largest = layer.attrs->getInt("largest", 1) != 0;
  AxisView v = viewAround(io.in[0].dims, axis);
  if (k > v.len) opError(layer, "K exceeds the axis length");
  int64_t* indices = io.out[1].as<int64_t>();
  dispatchNumeric(io.in[0].type, [&](auto tag) {
    using T = decltype(tag);
    const T* in = io.in[0].as<const T>();
    T* values = io.out[0].as<T>();
    std::vector<std::pair<T, int64_t>> line(v.len);
    for (int64_t o = 0; o < v.outer; ++o)
      for (int64_t i = 0; i < v.inner; ++i) {
        for (int64_t j = 0; j < v.len; ++j) line[j] = {in[(o * v.len + j) * v.inner + i], j};
        // Always sorted: valid for sorted=0 too (the order is then unspecified).
        std::partial_sort(line.begin(), line.begin() + k, line.end(), TopKOrder<T>{largest});
        for (int64_t j = 0; j < k; ++j) {
          values[(o * k + j) * v.inner + i] = line[j].first;
          indices[(o * k + j) * v.inner + i] = line[j].second;
        }
      }
  });
}

//! TopK-1 carries k as an attribute; later opsets as the K input.
void normalizeTopK(Network& net, Layer& layer, int opset) {
  if (opset >= 10 || !layer.attrs.has("k")) return;
  HostTensor k(DataType::kINT64, {1});
  k.as<int64_t>()[0] = layer.attrs.getInt("k", 0);
  layer.inputs.resize(1);
  layer.inputs.push_back(net.addConstant(net.uniqueName(layer.name + "_k"), k));
  layer.attrs.erase("k");
}

// ---- CumSum / CumProd --------------------------------------------------------------------------

//! a + b; integers wrap around (two's complement) instead of overflowing.
template <typename T>
T wrappingAdd(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}

//! a * b; integers wrap around (two's complement) instead of overflowing.
template <typename T>
T wrappingMul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return a * b;
  }
}

void checkCumSumAxisInput(const LayerDesc& l) {
  const TensorDesc& a = l.inputs[1];
  if (a.type != DataType::kINT32 && a.type != DataType::kINT64) opError(l, "axis must be int32 or int64");
  if (a.dims.size() > 1 || (a.dims.size() == 1 && a.dims[0] >= 0 && a.dims[0] != 1))
    opError(l, "axis must be a scalar, got dims " + toString(a.dims));
}

void inferCumSum(LayerDesc& l) {
  requireInputs(l, 2, 2);
  DataType t = l.inputs[0].type;
  requireNumeric(l, t);
  int64_t rank = static_cast<int64_t>(l.inputs[0].dims.size());
  if (rank < 1) opError(l, "input must have rank >= 1");
  checkCumSumAxisInput(l);
  if (l.inputs[1].value.valid()) {
    if (l.inputs[1].value.count() != 1) opError(l, "axis must hold exactly one value");
    normalizeAxis(l, l.inputs[1].value.getInt(0), rank);
  }
  setOutput(l, 0, t, l.inputs[0].dims);
}

int64_t readAxisInput(const LayerDesc& l, const KernelIO& io, int64_t rank) {
  const TensorView& a = io.in[1];
  if (a.count != 1) opError(l, "axis must hold exactly one value");
  int64_t v = a.type == DataType::kINT32 ? *a.as<const int32_t>() : *a.as<const int64_t>();
  return normalizeAxis(l, v, rank);
}

void refCumSum(const LayerDesc& l, const KernelIO& io) {
  checkCumSumAxisInput(l);
  const bool exclusive = l.attrs->getInt("exclusive", 0) != 0;
  const bool reverse = l.attrs->getInt("reverse", 0) != 0;
  const bool product = l.op == "CumProd";
  AxisView v = viewAround(io.in[0].dims, readAxisInput(l, io, static_cast<int64_t>(io.in[0].dims.size())));
  dispatchNumeric(io.in[0].type, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      opError(l, "input must be numeric, got bool");
    } else {
      const T* in = io.in[0].as<const T>();
      T* out = io.out[0].as<T>();
      for (int64_t o = 0; o < v.outer; ++o)
        for (int64_t i = 0; i < v.inner; ++i) {
          T acc = product ? T(1) : T(0);
          for (int64_t s = 0; s < v.len; ++s) {
            int64_t j = reverse ? v.len - 1 - s : s;
            int64_t off = (o * v.len + j) * v.inner + i;
            T x = in[off];
            if (exclusive) out[off] = acc;
            acc = product ? wrappingMul(acc, x) : wrappingAdd(acc, x);
            if (!exclusive) out[off] = acc;
          }
        }
    }
  });
}

}  // namespace

void registerSelectionOps(OpRegistry& r) {
  for (const char* name : {"ArgMax", "ArgMin"}) {
    OpDef d;
    d.name = name;
    d.infer = inferArg;
    d.ref = refArg;
    r.add(d);
  }

  OpDef topk;
  topk.name = "TopK";
  topk.infer = inferTopK;
  topk.ref = refTopK;
  topk.valueInputs = {1};
  topk.normalize = normalizeTopK;
  r.add(topk);

  OpDef cumsum;
  cumsum.name = "CumSum";
  cumsum.infer = inferCumSum;
  cumsum.ref = refCumSum;
  // The axis decides the kernel's geometry (a GPU kernel plans it on the host): a graph input
  // there is read like a shape tensor.
  cumsum.valueInputs = {1};
  cumsum.minOpset = 11;
  r.add(cumsum);
  OpDef cumprod = cumsum;  // same attributes and shapes (opset 26)
  cumprod.name = "CumProd";
  cumprod.minOpset = 26;
  r.add(cumprod);
}

}  // namespace kiln
