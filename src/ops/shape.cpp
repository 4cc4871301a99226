// Op definitions (shape inference + naive reference kernels + ONNX normalization): shape family.
// Data-movement ops copy raw elements of any size (anyType); index-driven ops (Gather, Scatter,
// OneHot, NonZero, Compress) live in shape_index.cpp and are registered from here.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

void registerShapeIndexOps(OpRegistry& r);  // shape_index.cpp
void registerEyeLikeOps(OpRegistry& r);      // eye_like.cpp
void registerReverseSequenceOps(OpRegistry& r);  // reverse_sequence.cpp

namespace {

// Largest tensor (bytes) a shape may describe: beyond any machine's address space, so a larger
// static shape is an overflow or a malformed model.
constexpr int64_t kMaxTensorBytes = int64_t(1) << 48;

//! setOutput that rejects negative and absurdly large static shapes.
void setChecked(LayerDesc& l, size_t i, DataType t, const Dims& d) {
  for (int64_t x : d)
    if (x < -1) opError(l, "negative dimension in output shape " + toString(d));
  if (isStatic(d) && volume(d) > kMaxTensorBytes / static_cast<int64_t>(elementSize(t)))
    opError(l, "output shape " + toString(d) + " is too large");
  setOutput(l, i, t, d);
}

//! Product of a dim range, -1 when any dim is unknown (overflow throws).
int64_t productOrUnknown(const Dims& d, size_t begin, size_t end) {
  Dims part(d.begin() + begin, d.begin() + end);
  return isStatic(part) ? volume(part) : -1;
}

int64_t mulChecked(const LayerDesc& l, int64_t a, int64_t b) {
  if (a < 0 || b < 0) return -1;
  if (b != 0 && a > std::numeric_limits<int64_t>::max() / b) opError(l, "dimension overflows");
  return a * b;
}

//! The value of optional input i when present and known, else nullptr.
const HostTensor* valueOf(const LayerDesc& l, size_t i) {
  return l.present(i) && l.inputs[i].value.valid() ? &l.inputs[i].value : nullptr;
}

void requireIntegerInput(const LayerDesc& l, size_t i, const char* what) {
  if (l.present(i) && !isInteger(l.inputs[i].type))
    opError(l, std::string(what) + " must be an integer tensor, got " + toString(l.inputs[i].type));
}

//! Requires a present input i to be 1-D; returns its length (-1 when unknown).
int64_t vectorLength(const LayerDesc& l, size_t i, const char* what) {
  if (l.inputs[i].dims.size() != 1) opError(l, std::string(what) + " must be 1-D, got " + toString(l.inputs[i].dims));
  return l.inputs[i].dims[0];
}

//! Requires a present input i to be 1-D or a scalar (taken as one value); returns its length (-1
//! when unknown).
int64_t valuesLength(const LayerDesc& l, size_t i, const char* what) { return l.inputs[i].dims.empty() ? 1 : vectorLength(l, i, what); }

//! The length of a 1-D input whose length becomes an output rank (a shape, axes to insert):
//! bounded, so that a damaged plan or model cannot ask for a rank of 2^31 (dims are allocated).
constexpr int64_t kMaxRank = 64;
int64_t rankLength(const LayerDesc& l, size_t i, const char* what) {
  int64_t len = vectorLength(l, i, what);
  if (len > kMaxRank) opError(l, std::string(what) + " has " + std::to_string(len) + " elements; ranks above " + std::to_string(kMaxRank) + " are not supported");
  return len;
}

//! Squeeze/Unsqueeze axes: 1-D, or a scalar taken as one axis (ONNX functions such as AffineGrid's
//! expansion write `Unsqueeze(x, Constant(value_int=-1))`; ONNX Runtime and the reference evaluator
//! accept it).
int64_t axesLength(const LayerDesc& l, size_t i) { return l.inputs[i].dims.empty() ? 1 : rankLength(l, i, "axes"); }

//! Reads a kernel input as int64 values (small inputs: shapes, axes, starts...).
std::vector<int64_t> viewInts(const TensorView& v) {
  std::vector<int64_t> out(static_cast<size_t>(v.count));
  switch (v.type) {
    case DataType::kINT64: std::memcpy(out.data(), v.data, out.size() * 8); break;
    case DataType::kINT32: for (int64_t i = 0; i < v.count; ++i) out[i] = v.as<const int32_t>()[i]; break;
    default:
      dispatchNumeric(v.type, [&](auto t) {
        using T = decltype(t);
        for (int64_t i = 0; i < v.count; ++i) out[i] = static_cast<int64_t>(v.as<const T>()[i]);
      });
  }
  return out;
}

//! Calls f(U{}) with an unsigned integer type of `bytes` size: moves raw elements of any type.
template <typename F>
void dispatchBytes(size_t bytes, F&& f) {
  switch (bytes) {
    case 1: f(uint8_t{}); break;
    case 2: f(uint16_t{}); break;
    case 4: f(uint32_t{}); break;
    case 8: f(uint64_t{}); break;
    default: throw Error("unsupported element size " + std::to_string(bytes));
  }
}

//! out[i] = in[base + sum_k idx_k * inStrides[k]] for a row-major output of `outDims`.
void stridedCopy(void* dst, const void* src, size_t es, const Dims& outDims, const std::vector<int64_t>& inStrides,
                 int64_t base) {
  int64_t n = volume(outDims);
  if (n == 0) return;
  size_t rank = outDims.size();
  dispatchBytes(es, [&](auto tag) {
    using U = decltype(tag);
    const U* in = static_cast<const U*>(src) + base;
    U* out = static_cast<U*>(dst);
    if (rank == 0) {
      out[0] = in[0];
      return;
    }
    std::vector<int64_t> idx(rank, 0);
    int64_t inner = outDims[rank - 1], innerStride = inStrides[rank - 1], off = 0;
    for (int64_t o = 0; o < n; o += inner) {
      for (int64_t j = 0; j < inner; ++j) out[o + j] = in[off + j * innerStride];
      for (size_t k = rank - 1; k-- > 0;) {  // advance the outer index
        off += inStrides[k];
        if (++idx[k] < outDims[k]) break;
        off -= inStrides[k] * outDims[k];
        idx[k] = 0;
      }
    }
  });
}

void copyInput(const KernelIO& io, size_t in, size_t out) {
  size_t bytes = static_cast<size_t>(io.out[out].count) * elementSize(io.out[out].type);
  if (bytes && io.out[out].data != io.in[in].data) std::memcpy(io.out[out].data, io.in[in].data, bytes);
}

void refCopy(const LayerDesc&, const KernelIO& io) { copyInput(io, 0, 0); }

//! Builds an int64 constant for ONNX normalization (attribute -> input).
Tensor* intsConstant(Network& net, const Layer& layer, const std::string& suffix, const std::vector<int64_t>& v) {
  HostTensor t(DataType::kINT64, {static_cast<int64_t>(v.size())});
  if (!v.empty()) std::memcpy(t.data(), v.data(), v.size() * 8);
  return net.addConstant(net.uniqueName(layer.name + "_" + suffix), t);
}

//! Moves int-list attribute `attr` to input `index` (padding omitted inputs with nullptr).
void attrToInput(Network& net, Layer& layer, const std::string& attr, size_t index) {
  if (!layer.attrs.has(attr)) return;
  std::vector<int64_t> v = layer.attrs.getInts(attr);
  layer.attrs.erase(attr);
  if (layer.inputs.size() <= index) layer.inputs.resize(index + 1, nullptr);
  layer.inputs[index] = intsConstant(net, layer, attr, v);
}

//! Normalizes axes against `rank`, rejecting duplicates.
std::vector<int64_t> uniqueAxes(const LayerDesc& l, const std::vector<int64_t>& axes, int64_t rank) {
  std::vector<int64_t> out;
  for (int64_t a : axes) {
    int64_t n = normalizeAxis(l, a, rank);
    if (std::find(out.begin(), out.end(), n) != out.end()) opError(l, "axis " + std::to_string(a) + " is repeated");
    out.push_back(n);
  }
  return out;
}

// ---------------------------------------------------------------- Reshape / Flatten / Identity

void inferReshape(LayerDesc& l) {
  requireInputs(l, 2, 2);
  requireIntegerInput(l, 1, "shape");
  const Dims& in = l.inputs[0].dims;
  int64_t len = rankLength(l, 1, "shape");
  const HostTensor* shape = valueOf(l, 1);
  if (!shape) {
    if (len < 0) throw UnsupportedError("layer '" + l.name + "' (Reshape): output rank is unknown (shape of unknown length)");
    setChecked(l, 0, l.inputs[0].type, Dims(static_cast<size_t>(len), -1));
    return;
  }
  bool allowZero = l.attrs->getInt("allowzero", 0) != 0;
  Dims out = shape->toInts();
  int inferred = -1;
  bool hasZero = false;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      if (inferred >= 0) opError(l, "shape " + toString(out) + " has more than one -1");
      inferred = static_cast<int>(i);
    } else if (out[i] == 0) {
      hasZero = true;
      if (!allowZero) {
        if (i >= in.size()) opError(l, "shape " + toString(out) + " copies dim " + std::to_string(i) + " of rank-" + std::to_string(in.size()) + " input");
        out[i] = in[i];
      }
    } else if (out[i] < -1) {
      opError(l, "invalid shape value " + std::to_string(out[i]));
    }
  }
  if (allowZero && hasZero && inferred >= 0) opError(l, "allowzero shape " + toString(out) + " has both 0 and -1");
  if (inferred >= 0) {
    Dims rest = out;
    rest.erase(rest.begin() + inferred);
    if (isStatic(in) && isStatic(rest)) {
      int64_t total = volume(in), known = volume(rest);
      if (known == 0) {
        if (total != 0) opError(l, "cannot reshape " + toString(in) + " to " + toString(shape->toInts()));
        out[inferred] = 0;
      } else {
        if (total % known) opError(l, "cannot reshape " + toString(in) + " to " + toString(shape->toInts()));
        out[inferred] = total / known;
      }
    }
  } else if (isStatic(in) && isStatic(out) && volume(in) != volume(out)) {
    opError(l, "cannot reshape " + toString(in) + " (" + std::to_string(volume(in)) + " elements) to " + toString(out));
  }
  setChecked(l, 0, l.inputs[0].type, out);
}

void normalizeReshape(Network& net, Layer& layer, int opset) {
  if (opset < 5) attrToInput(net, layer, "shape", 1);
  layer.attrs.erase("consumed_inputs");
}

void inferFlatten(LayerDesc& l) {
  requireInputs(l, 1, 1);
  const Dims& in = l.inputs[0].dims;
  int64_t rank = static_cast<int64_t>(in.size()), axis = l.attrs->getInt("axis", 1);
  if (axis < -rank || axis > rank) opError(l, "axis " + std::to_string(axis) + " out of range for rank " + std::to_string(rank));
  if (axis < 0) axis += rank;
  setChecked(l, 0, l.inputs[0].type, {productOrUnknown(in, 0, axis), productOrUnknown(in, axis, in.size())});
}

void inferIdentity(LayerDesc& l) {
  requireInputs(l, 1, 1);
  setChecked(l, 0, l.inputs[0].type, l.inputs[0].dims);
}

// Dropout at inference is the identity; the optional mask is all true.
void inferDropout(LayerDesc& l) {
  requireInputs(l, 1, 3);
  if (l.outputs.size() > 2) opError(l, "has at most 2 outputs");
  const HostTensor* training = valueOf(l, 2);
  if (l.present(2) && !training)
    throw UnsupportedError("layer '" + l.name + "' (Dropout): training_mode must be a constant");
  if (training && training->count() > 0 && training->getInt(0) != 0) {
    const HostTensor* ratio = valueOf(l, 1);
    bool zeroRatio = ratio && ratio->count() > 0 && ratio->getDouble(0) == 0.0;
    if (!zeroRatio) throw UnsupportedError("layer '" + l.name + "' (Dropout): training mode (random masking) is not supported");
  }
  setChecked(l, 0, l.inputs[0].type, l.inputs[0].dims);
  if (l.outputs.size() > 1) setChecked(l, 1, DataType::kBOOL, l.inputs[0].dims);
}

void refDropout(const LayerDesc&, const KernelIO& io) {
  copyInput(io, 0, 0);
  if (io.out.size() > 1 && io.out[1].data) std::memset(io.out[1].data, 1, static_cast<size_t>(io.out[1].count));
}

void normalizeDropout(Network&, Layer& layer, int opset) {
  if (opset < 12) {  // ratio/is_test attributes only matter for training
    layer.attrs.erase("ratio");
    layer.attrs.erase("is_test");
    layer.attrs.erase("consumed_inputs");
  }
}

// ---------------------------------------------------------------- Squeeze / Unsqueeze

void inferSqueeze(LayerDesc& l) {
  requireInputs(l, 1, 2);
  const Dims& in = l.inputs[0].dims;
  int64_t rank = static_cast<int64_t>(in.size());
  if (!l.present(1)) {
    Dims out;
    for (int64_t d : in) {
      if (d < 0)
        throw UnsupportedError("layer '" + l.name + "' (Squeeze): without axes, the output rank depends on dynamic dims " + toString(in));
      if (d != 1) out.push_back(d);
    }
    setChecked(l, 0, l.inputs[0].type, out);
    return;
  }
  requireIntegerInput(l, 1, "axes");
  int64_t len = axesLength(l, 1);
  const HostTensor* axesValue = valueOf(l, 1);
  if (!axesValue) {
    if (len < 0 || len > rank) opError(l, "cannot infer the output rank: axes of unknown value and length " + std::to_string(len));
    setChecked(l, 0, l.inputs[0].type, Dims(static_cast<size_t>(rank - len), -1));
    return;
  }
  std::vector<int64_t> axes = uniqueAxes(l, axesValue->toInts(), rank);
  Dims out;
  for (int64_t i = 0; i < rank; ++i) {
    bool squeezed = std::find(axes.begin(), axes.end(), i) != axes.end();
    if (squeezed && in[i] > 1) opError(l, "cannot squeeze axis " + std::to_string(i) + " of size " + std::to_string(in[i]));
    if (squeezed && in[i] == 0) opError(l, "cannot squeeze axis " + std::to_string(i) + " of size 0");
    if (!squeezed) out.push_back(in[i]);
  }
  setChecked(l, 0, l.inputs[0].type, out);
}

void inferUnsqueeze(LayerDesc& l) {
  requireInputs(l, 2, 2);
  requireIntegerInput(l, 1, "axes");
  const Dims& in = l.inputs[0].dims;
  int64_t len = axesLength(l, 1);
  const HostTensor* axesValue = valueOf(l, 1);
  if (!axesValue) {
    if (len < 0) throw UnsupportedError("layer '" + l.name + "' (Unsqueeze): output rank is unknown (axes of unknown length)");
    setChecked(l, 0, l.inputs[0].type, Dims(in.size() + static_cast<size_t>(len), -1));
    return;
  }
  int64_t outRank = static_cast<int64_t>(in.size()) + axesValue->count();
  std::vector<int64_t> axes = uniqueAxes(l, axesValue->toInts(), outRank);
  Dims out;
  size_t next = 0;
  for (int64_t i = 0; i < outRank; ++i)
    out.push_back(std::find(axes.begin(), axes.end(), i) != axes.end() ? 1 : in[next++]);
  setChecked(l, 0, l.inputs[0].type, out);
}

void normalizeAxesAttr(Network& net, Layer& layer, int opset) {
  if (opset < 13) attrToInput(net, layer, "axes", 1);
}

// ---------------------------------------------------------------- Transpose

std::vector<int64_t> transposePerm(const LayerDesc& l, size_t rank) {
  std::vector<int64_t> perm = l.attrs->getInts("perm");
  if (perm.empty() && !l.attrs->has("perm"))
    for (size_t i = 0; i < rank; ++i) perm.push_back(static_cast<int64_t>(rank - 1 - i));
  if (perm.size() != rank) opError(l, "perm has " + std::to_string(perm.size()) + " entries for rank " + std::to_string(rank));
  std::vector<bool> seen(rank, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(rank) || seen[p]) opError(l, "perm " + toString(perm) + " is not a permutation");
    seen[p] = true;
  }
  return perm;
}

void inferTranspose(LayerDesc& l) {
  requireInputs(l, 1, 1);
  const Dims& in = l.inputs[0].dims;
  std::vector<int64_t> perm = transposePerm(l, in.size());
  Dims out;
  for (int64_t p : perm) out.push_back(in[p]);
  setChecked(l, 0, l.inputs[0].type, out);
}

void refTranspose(const LayerDesc& l, const KernelIO& io) {
  const Dims& in = io.in[0].dims;
  std::vector<int64_t> perm = transposePerm(l, in.size()), inStrides = rowMajorStrides(in), strides;
  for (int64_t p : perm) strides.push_back(inStrides[p]);
  stridedCopy(io.out[0].data, io.in[0].data, elementSize(io.in[0].type), io.out[0].dims, strides, 0);
}

// ---------------------------------------------------------------- Concat / Split

void inferConcat(LayerDesc& l) {
  if (l.inputs.empty()) opError(l, "needs at least one input");
  for (size_t i = 0; i < l.inputs.size(); ++i)
    if (!l.present(i)) opError(l, "input " + std::to_string(i) + " is missing");
  if (!l.attrs->has("axis")) opError(l, "attribute 'axis' is required");
  Dims out = l.inputs[0].dims;
  int64_t rank = static_cast<int64_t>(out.size());
  if (rank == 0) opError(l, "cannot concatenate scalars");
  int64_t axis = normalizeAxis(l, l.attrs->getInt("axis", 0), rank);
  out[axis] = 0;
  for (auto& t : l.inputs) {
    if (t.type != l.inputs[0].type) opError(l, "inputs have different types");
    if (static_cast<int64_t>(t.dims.size()) != rank) opError(l, "inputs have different ranks");
    for (int64_t k = 0; k < rank; ++k) {
      if (k == axis) {
        out[k] = out[k] < 0 || t.dims[k] < 0 ? -1 : out[k] + t.dims[k];
      } else if (out[k] < 0) {
        out[k] = t.dims[k];
      } else if (t.dims[k] >= 0 && t.dims[k] != out[k]) {
        opError(l, "input shapes " + toString(l.inputs[0].dims) + " and " + toString(t.dims) + " differ off the concat axis");
      }
    }
  }
  setChecked(l, 0, l.inputs[0].type, out);
}

void refConcat(const LayerDesc& l, const KernelIO& io) {
  const Dims& od = io.out[0].dims;
  int64_t axis = normalizeAxis(l, l.attrs->getInt("axis", 0), static_cast<int64_t>(od.size()));
  size_t es = elementSize(io.out[0].type);
  int64_t outer = productOrUnknown(od, 0, axis), inner = productOrUnknown(od, axis + 1, od.size());
  auto* dst = static_cast<uint8_t*>(io.out[0].data);
  for (int64_t o = 0; o < outer; ++o)
    for (auto& in : io.in) {
      size_t bytes = static_cast<size_t>(in.dims[axis] * inner) * es;
      if (bytes) std::memcpy(dst, static_cast<const uint8_t*>(in.data) + o * bytes, bytes);
      dst += bytes;
    }
}

void normalizeConcat(Network&, Layer& layer, int opset) {
  if (opset < 4 && !layer.attrs.has("axis")) layer.attrs.set("axis", int64_t(1));
}

//! Sizes of the Split outputs along the axis (-1 entries when unknown).
std::vector<int64_t> splitSizes(const LayerDesc& l, int64_t dim, const HostTensor* split, size_t nOut) {
  if (l.present(1)) {
    if (!split) return std::vector<int64_t>(nOut, -1);
    std::vector<int64_t> s = split->toInts();
    if (s.size() != nOut) opError(l, "split has " + std::to_string(s.size()) + " entries for " + std::to_string(nOut) + " outputs");
    int64_t sum = 0;
    for (int64_t x : s) {
      if (x < 0) opError(l, "negative split size");
      sum += x;
    }
    if (dim >= 0 && sum != dim) opError(l, "split sizes sum to " + std::to_string(sum) + ", axis has " + std::to_string(dim));
    return s;
  }
  if (l.attrs->has("num_outputs") && l.attrs->getInt("num_outputs", 0) != static_cast<int64_t>(nOut))
    opError(l, "num_outputs does not match the number of outputs");
  if (dim < 0) return std::vector<int64_t>(nOut, -1);
  int64_t n = static_cast<int64_t>(nOut);
  if (!l.attrs->has("num_outputs") && dim % n)
    opError(l, "axis of size " + std::to_string(dim) + " cannot be split evenly into " + std::to_string(n));
  int64_t chunk = (dim + n - 1) / n;  // opset 18: the last chunk may be smaller
  std::vector<int64_t> s;
  for (int64_t i = 0, left = dim; i < n; ++i) {
    s.push_back(std::min(chunk, left));
    left -= s.back();
  }
  return s;
}

void inferSplit(LayerDesc& l) {
  requireInputs(l, 1, 2);
  requireIntegerInput(l, 1, "split");
  if (l.outputs.empty()) opError(l, "has no outputs");
  const Dims& in = l.inputs[0].dims;
  int64_t axis = normalizeAxis(l, l.attrs->getInt("axis", 0), static_cast<int64_t>(in.size()));
  if (l.present(1)) vectorLength(l, 1, "split");
  std::vector<int64_t> sizes = splitSizes(l, in[axis], valueOf(l, 1), l.outputs.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    Dims d = in;
    d[axis] = sizes[i];
    setChecked(l, i, l.inputs[0].type, d);
  }
}

void refSplit(const LayerDesc& l, const KernelIO& io) {
  const Dims& id = io.in[0].dims;
  int64_t axis = normalizeAxis(l, l.attrs->getInt("axis", 0), static_cast<int64_t>(id.size()));
  size_t es = elementSize(io.in[0].type);
  int64_t outer = productOrUnknown(id, 0, axis), inner = productOrUnknown(id, axis + 1, id.size());
  const auto* src = static_cast<const uint8_t*>(io.in[0].data);
  for (int64_t o = 0; o < outer; ++o)
    for (auto& out : io.out) {
      size_t bytes = static_cast<size_t>(out.dims[axis] * inner) * es;
      if (bytes) std::memcpy(static_cast<uint8_t*>(out.data) + o * bytes, src, bytes);
      src += bytes;
    }
}

void normalizeSplit(Network& net, Layer& layer, int opset) {
  if (opset < 13) attrToInput(net, layer, "split", 1);
}

// ---------------------------------------------------------------- Slice

struct SliceAxis {
  int64_t start = 0, step = 1, size = 0;
};

//! Resolves ONNX Slice parameters against concrete dims (clamping like the spec).
std::vector<SliceAxis> slicePlan(const LayerDesc& l, const Dims& dims, const std::vector<int64_t>& starts,
                                 const std::vector<int64_t>& ends, const std::vector<int64_t>* axesIn,
                                 const std::vector<int64_t>* stepsIn) {
  int64_t rank = static_cast<int64_t>(dims.size());
  std::vector<SliceAxis> plan(rank);
  for (int64_t k = 0; k < rank; ++k) plan[k] = {0, 1, dims[k]};
  size_t n = starts.size();
  if (ends.size() != n) opError(l, "starts and ends have different lengths");
  if (axesIn && axesIn->size() != n) opError(l, "axes and starts have different lengths");
  if (stepsIn && stepsIn->size() != n) opError(l, "steps and starts have different lengths");
  std::vector<int64_t> axes;
  if (axesIn) axes = uniqueAxes(l, *axesIn, rank);
  else if (static_cast<int64_t>(n) > rank) opError(l, "more starts than input dims");
  for (size_t i = 0; i < n; ++i) {
    int64_t axis = axesIn ? axes[i] : static_cast<int64_t>(i), dim = dims[axis];
    int64_t step = stepsIn ? (*stepsIn)[i] : 1;
    if (step == 0) opError(l, "step is 0");
    int64_t start = starts[i], end = ends[i];
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    int64_t size;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      size = end > start ? (end - start + step - 1) / step : 0;
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      size = start > end ? (start - end + (-step) - 1) / (-step) : 0;
    }
    plan[axis] = {size > 0 ? start : 0, step, size};
  }
  return plan;
}

void inferSlice(LayerDesc& l) {
  requireInputs(l, 3, 5);
  for (size_t i = 1; i < l.inputs.size(); ++i) {
    requireIntegerInput(l, i, "starts/ends/axes/steps");
    // A scalar is taken as one value: torch's exporter writes Slice(x, Gather(c, i), ...) in loop
    // bodies (torchvision's MViT-v2), which PyTorch runs (ONNX Runtime refuses them).
    if (l.present(i)) valuesLength(l, i, "starts/ends/axes/steps");
  }
  const Dims& in = l.inputs[0].dims;
  const HostTensor *starts = valueOf(l, 1), *ends = valueOf(l, 2), *axes = valueOf(l, 3), *steps = valueOf(l, 4);
  bool axesKnown = !l.present(3) || axes, allKnown = starts && ends && axesKnown && (!l.present(4) || steps);
  Dims out = in;
  if (!allKnown) {
    if (!axesKnown) out.assign(in.size(), -1);
    else if (axes) for (int64_t a : uniqueAxes(l, axes->toInts(), static_cast<int64_t>(in.size()))) out[a] = -1;
    else {
      int64_t n = valuesLength(l, 1, "starts");
      if (n < 0 || n > static_cast<int64_t>(in.size())) out.assign(in.size(), -1);
      else for (int64_t a = 0; a < n; ++a) out[a] = -1;
    }
    setChecked(l, 0, l.inputs[0].type, out);
    return;
  }
  std::vector<int64_t> axesV = axes ? axes->toInts() : std::vector<int64_t>{}, stepsV = steps ? steps->toInts() : std::vector<int64_t>{};
  // Resolve against dims with unknowns replaced by a placeholder, then mark sliced unknown dims.
  Dims probe = in;
  for (auto& d : probe) d = d < 0 ? 1 : d;
  auto plan = slicePlan(l, probe, starts->toInts(), ends->toInts(), axes ? &axesV : nullptr, steps ? &stepsV : nullptr);
  size_t n = starts->count();
  for (size_t i = 0; i < n; ++i) {
    int64_t axis = axes ? normalizeAxis(l, axesV[i], static_cast<int64_t>(in.size())) : static_cast<int64_t>(i);
    out[axis] = in[axis] < 0 ? -1 : plan[axis].size;
  }
  setChecked(l, 0, l.inputs[0].type, out);
}

void refSlice(const LayerDesc& l, const KernelIO& io) {
  const Dims& in = io.in[0].dims;
  bool hasAxes = io.in.size() > 3 && io.in[3].data, hasSteps = io.in.size() > 4 && io.in[4].data;
  std::vector<int64_t> axes = hasAxes ? viewInts(io.in[3]) : std::vector<int64_t>{};
  std::vector<int64_t> steps = hasSteps ? viewInts(io.in[4]) : std::vector<int64_t>{};
  auto plan = slicePlan(l, in, viewInts(io.in[1]), viewInts(io.in[2]), hasAxes ? &axes : nullptr, hasSteps ? &steps : nullptr);
  std::vector<int64_t> inStrides = rowMajorStrides(in), strides(in.size());
  Dims outDims(in.size());
  int64_t base = 0;
  for (size_t k = 0; k < in.size(); ++k) {
    outDims[k] = plan[k].size;
    strides[k] = inStrides[k] * plan[k].step;
    base += plan[k].start * inStrides[k];
  }
  if (outDims != io.out[0].dims) opError(l, "output dims " + toString(io.out[0].dims) + " do not match the slice " + toString(outDims));
  stridedCopy(io.out[0].data, io.in[0].data, elementSize(io.in[0].type), outDims, strides, base);
}

void normalizeSlice(Network& net, Layer& layer, int opset) {
  if (opset >= 10) return;
  bool hasAxes = layer.attrs.has("axes");
  attrToInput(net, layer, "starts", 1);
  attrToInput(net, layer, "ends", 2);
  if (hasAxes) attrToInput(net, layer, "axes", 3);
}

// ---------------------------------------------------------------- Expand / Tile

void inferExpand(LayerDesc& l) {
  requireInputs(l, 2, 2);
  requireIntegerInput(l, 1, "shape");
  const Dims& in = l.inputs[0].dims;
  int64_t len = rankLength(l, 1, "shape");
  const HostTensor* shape = valueOf(l, 1);
  if (shape) {
    Dims target = shape->toInts();
    for (int64_t x : target)
      if (x < 0) opError(l, "negative value in shape " + toString(target));
    setChecked(l, 0, l.inputs[0].type, broadcastDims(l, in, target));
    return;
  }
  if (len < 0) throw UnsupportedError("layer '" + l.name + "' (Expand): output rank is unknown (shape of unknown length)");
  // Unknown shape values: input dims other than 1 survive broadcasting.
  size_t rank = std::max(in.size(), static_cast<size_t>(len));
  Dims out(rank, -1);
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i] > 1) out[rank - in.size() + i] = in[i];
  setChecked(l, 0, l.inputs[0].type, out);
}

void refExpand(const LayerDesc&, const KernelIO& io) {
  stridedCopy(io.out[0].data, io.in[0].data, elementSize(io.in[0].type), io.out[0].dims,
              broadcastStrides(io.in[0].dims, io.out[0].dims), 0);
}

void inferTile(LayerDesc& l) {
  requireInputs(l, 2, 2);
  requireIntegerInput(l, 1, "repeats");
  const Dims& in = l.inputs[0].dims;
  int64_t len = rankLength(l, 1, "repeats");
  if (len >= 0 && len != static_cast<int64_t>(in.size())) opError(l, "repeats has " + std::to_string(len) + " entries for rank " + std::to_string(in.size()));
  const HostTensor* repeats = valueOf(l, 1);
  Dims out(in.size(), -1);
  if (repeats) {
    std::vector<int64_t> r = repeats->toInts();
    for (size_t i = 0; i < in.size(); ++i) {
      if (r[i] < 0) opError(l, "negative repeat " + std::to_string(r[i]));
      out[i] = r[i] == 0 ? 0 : mulChecked(l, in[i], r[i]);
    }
  }
  setChecked(l, 0, l.inputs[0].type, out);
}

// Tile as a broadcast: the output viewed as [r0, d0, r1, d1, ...] reads the input with stride 0
// over each repeat axis.
void refTile(const LayerDesc&, const KernelIO& io) {
  const Dims& in = io.in[0].dims;
  std::vector<int64_t> inStrides = rowMajorStrides(in), strides;
  Dims view;
  for (size_t i = 0; i < in.size(); ++i) {
    view.push_back(in[i] == 0 ? 0 : io.out[0].dims[i] / in[i]);
    view.push_back(in[i]);
    strides.push_back(0);
    strides.push_back(inStrides[i]);
  }
  stridedCopy(io.out[0].data, io.in[0].data, elementSize(io.in[0].type), view, strides, 0);
}

// ---------------------------------------------------------------- Pad

enum class PadMode { kConstant, kReflect, kEdge, kWrap };

PadMode padMode(const LayerDesc& l) {
  std::string m = l.attrs->getString("mode", "constant");
  if (m == "constant") return PadMode::kConstant;
  if (m == "reflect") return PadMode::kReflect;
  if (m == "edge") return PadMode::kEdge;
  if (m == "wrap") return PadMode::kWrap;
  opError(l, "unknown pad mode '" + m + "'");
}

//! Per-axis (begin, end) pads for every input axis, from the pads and optional axes values.
std::vector<std::pair<int64_t, int64_t>> padsPerAxis(const LayerDesc& l, const std::vector<int64_t>& pads,
                                                     const std::vector<int64_t>* axesIn, int64_t rank) {
  std::vector<int64_t> axes;
  if (axesIn) axes = uniqueAxes(l, *axesIn, rank);
  else for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  if (pads.size() != 2 * axes.size()) opError(l, "pads has " + std::to_string(pads.size()) + " values for " + std::to_string(axes.size()) + " axes");
  std::vector<std::pair<int64_t, int64_t>> out(rank, {0, 0});
  for (size_t i = 0; i < axes.size(); ++i) out[axes[i]] = {pads[i], pads[i + axes.size()]};
  return out;
}

void inferPad(LayerDesc& l) {
  requireInputs(l, 2, 4);
  padMode(l);
  requireIntegerInput(l, 1, "pads");
  requireIntegerInput(l, 3, "axes");
  const Dims& in = l.inputs[0].dims;
  int64_t rank = static_cast<int64_t>(in.size());
  vectorLength(l, 1, "pads");
  if (l.present(2) && l.inputs[2].dims.size() > 1) opError(l, "constant_value must be a scalar");
  const HostTensor *pads = valueOf(l, 1), *axes = valueOf(l, 3);
  Dims out(in.size(), -1);
  if (pads && (!l.present(3) || axes)) {
    std::vector<int64_t> axesV = axes ? axes->toInts() : std::vector<int64_t>{};
    auto pa = padsPerAxis(l, pads->toInts(), axes ? &axesV : nullptr, rank);
    for (int64_t i = 0; i < rank; ++i) {
      if (in[i] < 0) continue;
      out[i] = in[i] + pa[i].first + pa[i].second;
      if (out[i] < 0) opError(l, "pads remove more than axis " + std::to_string(i) + " holds");
    }
  } else if (axes) {  // unpadded axes keep their size
    for (int64_t i = 0; i < rank; ++i) out[i] = in[i];
    for (int64_t a : uniqueAxes(l, axes->toInts(), rank)) out[a] = -1;
  }
  setChecked(l, 0, l.inputs[0].type, out);
}

//! Writes `value` (of type `from`, one element) converted to `to` into dst (elementSize(to) bytes).
void convertScalar(const void* value, DataType from, DataType to, void* dst) {
  if (from == to) {
    std::memcpy(dst, value, elementSize(to));
    return;
  }
  HostTensor src(from, {1});
  std::memcpy(src.data(), value, elementSize(from));
  double v = src.getDouble(0);
  switch (to) {
    case DataType::kHALF: { uint16_t h = floatToHalf(static_cast<float>(v)); std::memcpy(dst, &h, 2); return; }
    case DataType::kBF16: { uint16_t h = floatToBf16(static_cast<float>(v)); std::memcpy(dst, &h, 2); return; }
    default: dispatchNumeric(to, [&](auto t) { using T = decltype(t); T x = static_cast<T>(v); std::memcpy(dst, &x, sizeof(T)); });
  }
}

//! Source index along one axis for output position o (-1: the constant), after cropping.
int64_t padSource(PadMode mode, int64_t o, int64_t before, int64_t lo, int64_t m) {
  int64_t c = o - std::max<int64_t>(before, 0);
  if (c >= 0 && c < m) return lo + c;
  switch (mode) {
    case PadMode::kConstant: return -1;
    case PadMode::kEdge: return lo + (c < 0 ? 0 : m - 1);
    case PadMode::kWrap: return lo + ((c % m) + m) % m;
    case PadMode::kReflect: {
      if (m == 1) return lo;
      int64_t period = 2 * (m - 1), p = ((c % period) + period) % period;
      return lo + (p < m ? p : period - p);
    }
  }
  return -1;
}

void refPad(const LayerDesc& l, const KernelIO& io) {
  const Dims& in = io.in[0].dims;
  int64_t rank = static_cast<int64_t>(in.size());
  PadMode mode = padMode(l);
  std::vector<int64_t> axes;
  bool hasAxes = io.in.size() > 3 && io.in[3].data;
  if (hasAxes) axes = viewInts(io.in[3]);
  auto pa = padsPerAxis(l, viewInts(io.in[1]), hasAxes ? &axes : nullptr, rank);
  size_t es = elementSize(io.in[0].type);
  uint64_t fill = 0;
  if (io.in.size() > 2 && io.in[2].data && io.in[2].count > 0) convertScalar(io.in[2].data, io.in[2].type, io.in[0].type, &fill);
  // Per-axis source tables (crop negative pads first, then pad like the ONNX reference).
  std::vector<std::vector<int64_t>> source(rank);
  for (int64_t k = 0; k < rank; ++k) {
    int64_t before = pa[k].first, after = pa[k].second;
    int64_t lo = std::max<int64_t>(0, -before), m = in[k] - lo - std::max<int64_t>(0, -after);
    int64_t outDim = io.out[0].dims[k];
    if (m <= 0 && mode != PadMode::kConstant && outDim > 0) opError(l, "cannot pad an empty axis in mode '" + l.attrs->getString("mode", "") + "'");
    for (int64_t o = 0; o < outDim; ++o) source[k].push_back(padSource(mode, o, before, lo, m));
  }
  std::vector<int64_t> strides = rowMajorStrides(in);
  int64_t n = io.out[0].count;
  std::vector<int64_t> idx(rank, 0);
  const auto* src = static_cast<const uint8_t*>(io.in[0].data);
  auto* dst = static_cast<uint8_t*>(io.out[0].data);
  for (int64_t o = 0; o < n; ++o) {
    int64_t off = 0;
    bool constant = false;
    for (int64_t k = 0; k < rank; ++k) {
      int64_t s = source[k][idx[k]];
      if (s < 0) constant = true;
      off += s * strides[k];
    }
    std::memcpy(dst + o * es, constant ? reinterpret_cast<const uint8_t*>(&fill) : src + off * es, es);
    for (int64_t k = rank; k-- > 0;) {
      if (++idx[k] < io.out[0].dims[k]) break;
      idx[k] = 0;
    }
  }
}

//! Tile before opset 6 takes (input, tiles, axis): `tiles` copies along one axis. Both must be
//! constants; they become the repeats vector of the newer form (the input's rank is known:
//! pre-opset-7 models are shape-inferred while importing).
void normalizeTile(Network& net, Layer& layer, int opset) {
  if (opset >= 6) return;
  std::string where = "layer '" + layer.name + "' (Tile-" + std::to_string(opset) + ")";
  if (layer.inputs.size() != 3 || !layer.inputs[0] || !layer.inputs[1] || !layer.inputs[2])
    throw Error(where + ": expects inputs (input, tiles, axis)");
  Tensor *x = layer.inputs[0], *tiles = layer.inputs[1], *axis = layer.inputs[2];
  if (!tiles->isConstant() || !axis->isConstant() || tiles->value.count() != 1 || axis->value.count() != 1)
    throw UnsupportedError(where + ": tiles and axis must be constant scalars");
  if (!x->dimsKnown) throw UnsupportedError(where + ": the input's rank is unknown at import time");
  const int64_t rank = static_cast<int64_t>(x->dims.size());
  int64_t a = axis->value.getInt(0);
  if (a < 0) a += rank;
  if (a < 0 || a >= rank) throw Error(where + ": axis " + std::to_string(axis->value.getInt(0)) + " is out of range");
  HostTensor repeats(DataType::kINT64, {rank});
  for (int64_t i = 0; i < rank; ++i) repeats.as<int64_t>()[i] = i == a ? tiles->value.getInt(0) : 1;
  layer.inputs.resize(2);
  layer.inputs[1] = net.addConstant(layer.name + "_repeats", repeats);
}

void normalizePad(Network& net, Layer& layer, int opset) {
  if (opset >= 11) return;
  if (layer.attrs.has("paddings")) {  // opset 1 name
    layer.attrs.set("pads", layer.attrs.getInts("paddings"));
    layer.attrs.erase("paddings");
  }
  float value = layer.attrs.getFloat("value", 0.f);
  layer.attrs.erase("value");
  attrToInput(net, layer, "pads", 1);
  HostTensor v(DataType::kFLOAT, {});
  *v.as<float>() = value;  // converted to the data type by the kernel
  layer.inputs.resize(std::max<size_t>(layer.inputs.size(), 3), nullptr);
  layer.inputs[2] = net.addConstant(net.uniqueName(layer.name + "_value"), v);
}

// ---------------------------------------------------------------- Shape / Size / ConstantOfShape / Range

std::pair<int64_t, int64_t> shapeRange(const LayerDesc& l, int64_t rank) {
  int64_t start = l.attrs->getInt("start", 0), end = l.attrs->getInt("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  return {start, std::max(start, end)};
}

void inferShape(LayerDesc& l) {
  requireInputs(l, 1, 1);
  const Dims& in = l.inputs[0].dims;
  auto [start, end] = shapeRange(l, static_cast<int64_t>(in.size()));
  setChecked(l, 0, DataType::kINT64, {end - start});
  Dims part(in.begin() + start, in.begin() + end);
  if (isStatic(part)) {  // the value is known even when other dims are dynamic
    HostTensor v(DataType::kINT64, {end - start});
    for (int64_t i = 0; i < end - start; ++i) v.as<int64_t>()[i] = part[i];
    l.outputs[0].value = v;
  }
}

void refShape(const LayerDesc& l, const KernelIO& io) {
  const Dims& in = io.in[0].dims;
  auto [start, end] = shapeRange(l, static_cast<int64_t>(in.size()));
  for (int64_t i = start; i < end; ++i) io.out[0].as<int64_t>()[i - start] = in[i];
}

void inferSize(LayerDesc& l) {
  requireInputs(l, 1, 1);
  setChecked(l, 0, DataType::kINT64, {});
  if (isStatic(l.inputs[0].dims)) {
    HostTensor v(DataType::kINT64, {});
    *v.as<int64_t>() = volume(l.inputs[0].dims);
    l.outputs[0].value = v;
  }
}

void refSize(const LayerDesc&, const KernelIO& io) { *io.out[0].as<int64_t>() = volume(io.in[0].dims); }

HostTensor constantOfShapeValue(const LayerDesc& l) {
  const HostTensor* v = l.attrs->getTensor("value");
  if (!v) return HostTensor(DataType::kFLOAT, {1});
  if (v->count() != 1) opError(l, "value must hold exactly one element");
  return *v;
}

void inferConstantOfShape(LayerDesc& l) {
  requireInputs(l, 1, 1);
  requireIntegerInput(l, 0, "shape");
  int64_t len = rankLength(l, 0, "shape");
  DataType t = constantOfShapeValue(l).type();
  if (const HostTensor* shape = valueOf(l, 0)) {
    Dims d = shape->toInts();
    for (int64_t x : d)
      if (x < 0) opError(l, "negative value in shape " + toString(d));
    setChecked(l, 0, t, d);
    return;
  }
  if (len < 0) throw UnsupportedError("layer '" + l.name + "' (ConstantOfShape): output rank is unknown");
  setChecked(l, 0, t, Dims(static_cast<size_t>(len), -1));
}

void refConstantOfShape(const LayerDesc& l, const KernelIO& io) {
  HostTensor v = constantOfShapeValue(l);
  size_t es = elementSize(v.type());
  auto* dst = static_cast<uint8_t*>(io.out[0].data);
  for (int64_t i = 0; i < io.out[0].count; ++i) std::memcpy(dst + i * es, v.data(), es);
}

bool rangeType(DataType t) {
  return t == DataType::kFLOAT || t == DataType::kHALF || t == DataType::kBF16 || t == DataType::kDOUBLE || t == DataType::kINT16 || t == DataType::kINT32 || t == DataType::kINT64;
}

//! Number of Range elements: max(ceil((limit - start) / delta), 0).
int64_t rangeLength(const LayerDesc& l, const HostTensor& start, const HostTensor& limit, const HostTensor& delta) {
  if (isInteger(start.type())) {
    int64_t s = start.getInt(0), e = limit.getInt(0), d = delta.getInt(0);
    if (d == 0) opError(l, "delta is 0");
    long double span = static_cast<long double>(e) - static_cast<long double>(s);
    long double n = std::ceil(span / static_cast<long double>(d));
    if (n > static_cast<long double>(kMaxTensorBytes)) opError(l, "range is too long");
    return n > 0 ? static_cast<int64_t>(n) : 0;
  }
  double s = start.getDouble(0), e = limit.getDouble(0), d = delta.getDouble(0);
  if (d == 0.0 || !std::isfinite(s) || !std::isfinite(e) || !std::isfinite(d)) opError(l, "start/limit/delta must be finite and delta non-zero");
  double n = std::ceil((e - s) / d);
  if (n > static_cast<double>(kMaxTensorBytes)) opError(l, "range is too long");
  return n > 0 ? static_cast<int64_t>(n) : 0;
}

void inferRange(LayerDesc& l) {
  requireInputs(l, 3, 3);
  DataType t = l.inputs[0].type;
  if (!rangeType(t)) opError(l, std::string("unsupported type ") + toString(t));
  for (size_t i = 0; i < 3; ++i) {
    if (l.inputs[i].type != t) opError(l, "start, limit and delta must have the same type");
    if (!(l.inputs[i].dims.empty() || l.inputs[i].dims == Dims{1})) opError(l, "start, limit and delta must be scalars");
  }
  const HostTensor *s = valueOf(l, 0), *e = valueOf(l, 1), *d = valueOf(l, 2);
  setChecked(l, 0, t, {s && e && d ? rangeLength(l, *s, *e, *d) : -1});
}

void refRange(const LayerDesc&, const KernelIO& io) {
  DataType t = io.out[0].type;
  if (t == DataType::kHALF || t == DataType::kBF16) {  // computed in float, like a cast-around
    auto toFloat = [&](const TensorView& v) { uint16_t h = *v.as<const uint16_t>(); return t == DataType::kHALF ? halfToFloat(h) : bf16ToFloat(h); };
    float start = toFloat(io.in[0]), delta = toFloat(io.in[2]);
    auto* out = io.out[0].as<uint16_t>();
    for (int64_t i = 0; i < io.out[0].count; ++i) {
      float v = start + static_cast<float>(i) * delta;
      out[i] = t == DataType::kHALF ? floatToHalf(v) : floatToBf16(v);
    }
    return;
  }
  dispatchNumeric(t, [&](auto tag) {
    using T = decltype(tag);
    T start = *io.in[0].as<const T>(), delta = *io.in[2].as<const T>();
    T* out = io.out[0].as<T>();
    for (int64_t i = 0; i < io.out[0].count; ++i) out[i] = static_cast<T>(start + static_cast<T>(i) * delta);
  });
}

// ---------------------------------------------------------------- Trilu

void inferTrilu(LayerDesc& l) {
  requireInputs(l, 1, 2);
  requireIntegerInput(l, 1, "k");
  if (l.inputs[0].dims.size() < 2) opError(l, "input must have rank >= 2");
  if (l.present(1) && !l.inputs[1].dims.empty() && l.inputs[1].dims != Dims{1}) opError(l, "k must be a scalar");
  setChecked(l, 0, l.inputs[0].type, l.inputs[0].dims);
}

void refTrilu(const LayerDesc& l, const KernelIO& io) {
  const Dims& d = io.in[0].dims;
  int64_t rows = d[d.size() - 2], cols = d[d.size() - 1], k = 0;
  if (io.in.size() > 1 && io.in[1].data) k = viewInts(io.in[1]).at(0);
  bool upper = l.attrs->getInt("upper", 1) != 0;
  size_t es = elementSize(io.in[0].type);
  int64_t matrices = rows * cols == 0 ? 0 : io.in[0].count / (rows * cols);
  const auto* src = static_cast<const uint8_t*>(io.in[0].data);
  auto* dst = static_cast<uint8_t*>(io.out[0].data);
  for (int64_t m = 0; m < matrices; ++m)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        size_t off = static_cast<size_t>((m * rows + i) * cols + j) * es;
        bool keep = upper ? j - i >= k : j - i <= k;
        if (keep) std::memmove(dst + off, src + off, es);
        else std::memset(dst + off, 0, es);  // zero bits are zero in every type
      }
}

OpDef dataMovement(const std::string& name, InferFn infer, RefFn ref, std::vector<int> valueInputs = {}) {
  OpDef d;
  d.name = name;
  d.infer = infer;
  d.ref = ref;
  d.valueInputs = std::move(valueInputs);
  d.anyType = true;
  return d;
}

}  // namespace

void registerShapeOps(OpRegistry& r) {
  registerEyeLikeOps(r);
  registerReverseSequenceOps(r);
  OpDef reshape = dataMovement("Reshape", inferReshape, refCopy, {1});
  reshape.normalize = normalizeReshape;
  r.add(reshape);
  r.add(dataMovement("Flatten", inferFlatten, refCopy));
  r.add(dataMovement("Identity", inferIdentity, refCopy));
  OpDef dropout = dataMovement("Dropout", inferDropout, refDropout, {1, 2});
  dropout.normalize = normalizeDropout;
  r.add(dropout);
  OpDef squeeze = dataMovement("Squeeze", inferSqueeze, refCopy, {1});
  squeeze.normalize = normalizeAxesAttr;
  r.add(squeeze);
  OpDef unsqueeze = dataMovement("Unsqueeze", inferUnsqueeze, refCopy, {1});
  unsqueeze.normalize = normalizeAxesAttr;
  r.add(unsqueeze);
  r.add(dataMovement("Transpose", inferTranspose, refTranspose));
  OpDef concat = dataMovement("Concat", inferConcat, refConcat);
  concat.normalize = normalizeConcat;
  r.add(concat);
  OpDef split = dataMovement("Split", inferSplit, refSplit, {1});
  split.normalize = normalizeSplit;
  r.add(split);
  OpDef slice = dataMovement("Slice", inferSlice, refSlice, {1, 2, 3, 4});
  slice.normalize = normalizeSlice;
  r.add(slice);
  OpDef expand = dataMovement("Expand", inferExpand, refExpand, {1});
  expand.minOpset = 8;
  r.add(expand);
  OpDef tile = dataMovement("Tile", inferTile, refTile, {1});
  tile.normalize = normalizeTile;
  r.add(tile);
  OpDef pad = dataMovement("Pad", inferPad, refPad, {1, 3});
  pad.normalize = normalizePad;
  r.add(pad);
  r.add(dataMovement("Shape", inferShape, refShape));
  r.add(dataMovement("Size", inferSize, refSize));
  OpDef constantOfShape = dataMovement("ConstantOfShape", inferConstantOfShape, refConstantOfShape, {0});
  constantOfShape.minOpset = 9;
  r.add(constantOfShape);
  OpDef range = dataMovement("Range", inferRange, refRange, {0, 1, 2});
  range.anyType = false;  // arithmetic: half/bf16 are computed in float (by casts or by the ref)
  range.minOpset = 11;
  r.add(range);
  OpDef trilu = dataMovement("Trilu", inferTrilu, refTrilu);
  trilu.minOpset = 14;
  r.add(trilu);
  registerShapeIndexOps(r);
}

}  // namespace kiln
