// Op definitions of the shape family driven by index tensors: Gather, GatherElements, GatherND,
// ScatterND, ScatterElements, OneHot, NonZero, Compress. Registered from registerShapeOps.
//
// NonZero and Compress have data-dependent output shapes: when the data (condition) value is
// known at build time the output shape (and value) is static; otherwise the data-dependent dim
// is -1 until the execution context reads the data back at run time (runtime/context.cpp) and
// infers the layer again with it; the reference kernel refuses an output of any other size.
#include <algorithm>
#include <cstring>
#include <limits>

#include "ops/compress_plan.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

constexpr int64_t kMaxTensorBytes = int64_t(1) << 48;  // see shape.cpp

void setChecked(LayerDesc& l, size_t i, DataType t, const Dims& d) {
  for (int64_t x : d)
    if (x < -1) opError(l, "negative dimension in output shape " + toString(d));
  if (isStatic(d) && volume(d) > kMaxTensorBytes / static_cast<int64_t>(elementSize(t)))
    opError(l, "output shape " + toString(d) + " is too large");
  setOutput(l, i, t, d);
}

const HostTensor* valueOf(const LayerDesc& l, size_t i) {
  return l.present(i) && l.inputs[i].value.valid() ? &l.inputs[i].value : nullptr;
}

int64_t product(const Dims& d, size_t begin, size_t end) { return volume(Dims(d.begin() + begin, d.begin() + end)); }

void requireIndexType(const LayerDesc& l, size_t i) {
  DataType t = l.inputs[i].type;
  if (t != DataType::kINT32 && t != DataType::kINT64) opError(l, std::string("indices must be int32 or int64, got ") + toString(t));
}

int64_t indexAt(const TensorView& v, int64_t i) {
  return v.type == DataType::kINT32 ? v.as<const int32_t>()[i] : v.as<const int64_t>()[i];
}

//! Resolves a possibly negative index against `dim`; throws when out of range.
int64_t resolveIndex(const LayerDesc& l, int64_t idx, int64_t dim) {
  if (idx < -dim || idx >= dim) opError(l, "index " + std::to_string(idx) + " is out of range for a dim of size " + std::to_string(dim));
  return idx < 0 ? idx + dim : idx;
}

//! Element i of any numeric tensor as a double.
double elementAsDouble(const TensorView& v, int64_t i) {
  switch (v.type) {
    case DataType::kHALF: return halfToFloat(v.as<const uint16_t>()[i]);
    case DataType::kBF16: return bf16ToFloat(v.as<const uint16_t>()[i]);
    default: {
      double out = 0;
      dispatchNumeric(v.type, [&](auto t) { out = static_cast<double>(v.as<const decltype(t)>()[i]); });
      return out;
    }
  }
}

//! Whether element i is non-zero (-0.0 is zero; NaN is not).
bool elementNonZero(const TensorView& v, int64_t i) {
  switch (v.type) {
    case DataType::kFLOAT: return v.as<const float>()[i] != 0.f;
    case DataType::kDOUBLE: return v.as<const double>()[i] != 0.0;
    case DataType::kHALF: case DataType::kBF16: return (v.as<const uint16_t>()[i] & 0x7fff) != 0;
    default: {
      size_t es = elementSize(v.type);
      const auto* p = static_cast<const uint8_t*>(v.data) + i * es;
      for (size_t b = 0; b < es; ++b)
        if (p[b]) return true;
      return false;
    }
  }
}

TensorView viewOf(const HostTensor& t) {
  return TensorView{const_cast<void*>(t.data()), t.type(), t.dims(), t.count()};
}

// ---------------------------------------------------------------- reductions for Scatter*

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

Reduction reductionOf(const LayerDesc& l) {
  std::string r = l.attrs->getString("reduction", "none");
  if (r == "none") return Reduction::kNone;
  if (r == "add") return Reduction::kAdd;
  if (r == "mul") return Reduction::kMul;
  if (r == "max") return Reduction::kMax;
  if (r == "min") return Reduction::kMin;
  opError(l, "unknown reduction '" + r + "'");
}

template <typename T>
T reduce(Reduction r, T a, T b) {
  switch (r) {
    case Reduction::kNone: return b;
    case Reduction::kAdd: return static_cast<T>(a + b);
    case Reduction::kMul: return static_cast<T>(a * b);
    case Reduction::kMax: return a < b ? b : a;
    case Reduction::kMin: return b < a ? b : a;
  }
  return b;
}

//! dst[i] = reduce(dst[i], src[i]) for n elements of type t (half/bf16 computed in float).
void combine(Reduction r, DataType t, void* dst, const void* src, int64_t n) {
  if (r == Reduction::kNone) {
    std::memcpy(dst, src, static_cast<size_t>(n) * elementSize(t));
    return;
  }
  if (t == DataType::kHALF || t == DataType::kBF16) {
    auto* d = static_cast<uint16_t*>(dst);
    const auto* s = static_cast<const uint16_t*>(src);
    bool bf = t == DataType::kBF16;
    for (int64_t i = 0; i < n; ++i) {
      float a = bf ? bf16ToFloat(d[i]) : halfToFloat(d[i]), b = bf ? bf16ToFloat(s[i]) : halfToFloat(s[i]);
      float c = reduce(r, a, b);
      d[i] = bf ? floatToBf16(c) : floatToHalf(c);
    }
    return;
  }
  dispatchNumeric(t, [&](auto tag) {
    using T = decltype(tag);
    T* d = static_cast<T*>(dst);
    const T* s = static_cast<const T*>(src);
    for (int64_t i = 0; i < n; ++i) d[i] = reduce(r, d[i], s[i]);
  });
}

// ---------------------------------------------------------------- Gather

void inferGather(LayerDesc& l) {
  requireInputs(l, 2, 2);
  requireIndexType(l, 1);
  const Dims &data = l.inputs[0].dims, &idx = l.inputs[1].dims;
  int64_t rank = static_cast<int64_t>(data.size());
  if (rank == 0) opError(l, "data must have rank >= 1");
  int64_t axis = normalizeAxis(l, l.attrs->getInt("axis", 0), rank);
  if (const HostTensor* v = valueOf(l, 1); v && data[axis] >= 0)
    for (int64_t i = 0; i < v->count(); ++i) resolveIndex(l, v->getInt(i), data[axis]);
  Dims out(data.begin(), data.begin() + axis);
  out.insert(out.end(), idx.begin(), idx.end());
  out.insert(out.end(), data.begin() + axis + 1, data.end());
  setChecked(l, 0, l.inputs[0].type, out);
}

void refGather(const LayerDesc& l, const KernelIO& io) {
  const Dims& data = io.in[0].dims;
  int64_t axis = normalizeAxis(l, l.attrs->getInt("axis", 0), static_cast<int64_t>(data.size()));
  int64_t outer = product(data, 0, axis), dim = data[axis], inner = product(data, axis + 1, data.size());
  int64_t n = io.in[1].count;
  size_t rowBytes = static_cast<size_t>(inner) * elementSize(io.in[0].type);
  const auto* src = static_cast<const uint8_t*>(io.in[0].data);
  auto* dst = static_cast<uint8_t*>(io.out[0].data);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < n; ++j) {
      int64_t i = resolveIndex(l, indexAt(io.in[1], j), dim);
      std::memcpy(dst + (o * n + j) * rowBytes, src + (o * dim + i) * rowBytes, rowBytes);
    }
}

// ---------------------------------------------------------------- GatherElements / ScatterElements

//! Checks indices/updates against data for the *Elements ops (same rank; no dim beyond data's).
int64_t elementsAxis(const LayerDesc& l, const Dims& data, const Dims& idx) {
  int64_t rank = static_cast<int64_t>(data.size());
  if (rank == 0) opError(l, "data must have rank >= 1");
  if (static_cast<int64_t>(idx.size()) != rank) opError(l, "indices must have the rank of data");
  int64_t axis = normalizeAxis(l, l.attrs->getInt("axis", 0), rank);
  for (int64_t k = 0; k < rank; ++k)
    if (k != axis && idx[k] >= 0 && data[k] >= 0 && idx[k] > data[k])
      opError(l, "indices shape " + toString(idx) + " exceeds data shape " + toString(data) + " off the axis");
  return axis;
}

//! Visits every element of `idx` dims: f(position in indices, element offset in data).
template <typename F>
void forEachElementIndex(const LayerDesc& l, const TensorView& indices, const Dims& data, int64_t axis, F&& f) {
  const Dims& id = indices.dims;
  std::vector<int64_t> strides = rowMajorStrides(data), pos(id.size(), 0);
  for (int64_t i = 0; i < indices.count; ++i) {
    int64_t off = 0;
    for (size_t k = 0; k < id.size(); ++k)
      off += (static_cast<int64_t>(k) == axis ? resolveIndex(l, indexAt(indices, i), data[k]) : pos[k]) * strides[k];
    f(i, off);
    for (size_t k = id.size(); k-- > 0;) {
      if (++pos[k] < id[k]) break;
      pos[k] = 0;
    }
  }
}

void inferGatherElements(LayerDesc& l) {
  requireInputs(l, 2, 2);
  requireIndexType(l, 1);
  elementsAxis(l, l.inputs[0].dims, l.inputs[1].dims);
  setChecked(l, 0, l.inputs[0].type, l.inputs[1].dims);
}

void refGatherElements(const LayerDesc& l, const KernelIO& io) {
  int64_t axis = elementsAxis(l, io.in[0].dims, io.in[1].dims);
  size_t es = elementSize(io.in[0].type);
  const auto* src = static_cast<const uint8_t*>(io.in[0].data);
  auto* dst = static_cast<uint8_t*>(io.out[0].data);
  forEachElementIndex(l, io.in[1], io.in[0].dims, axis, [&](int64_t i, int64_t off) { std::memcpy(dst + i * es, src + off * es, es); });
}

void inferScatterElements(LayerDesc& l) {
  requireInputs(l, 3, 3);
  requireIndexType(l, 1);
  reductionOf(l);
  elementsAxis(l, l.inputs[0].dims, l.inputs[1].dims);
  const Dims &idx = l.inputs[1].dims, &upd = l.inputs[2].dims;
  if (l.inputs[2].type != l.inputs[0].type) opError(l, "updates must have the type of data");
  if (idx.size() != upd.size()) opError(l, "updates must have the shape of indices");
  for (size_t k = 0; k < idx.size(); ++k)
    if (idx[k] >= 0 && upd[k] >= 0 && idx[k] != upd[k]) opError(l, "updates must have the shape of indices");
  setChecked(l, 0, l.inputs[0].type, l.inputs[0].dims);
}

void refScatterElements(const LayerDesc& l, const KernelIO& io) {
  int64_t axis = elementsAxis(l, io.in[0].dims, io.in[1].dims);
  if (io.in[1].dims != io.in[2].dims) opError(l, "updates must have the shape of indices");
  Reduction r = reductionOf(l);
  DataType t = io.in[0].type;
  size_t es = elementSize(t);
  std::vector<int64_t> offsets;  // resolve (and validate) every index before writing
  forEachElementIndex(l, io.in[1], io.in[0].dims, axis, [&](int64_t, int64_t off) { offsets.push_back(off); });
  auto* dst = static_cast<uint8_t*>(io.out[0].data);
  if (dst != io.in[0].data) std::memcpy(dst, io.in[0].data, static_cast<size_t>(io.in[0].count) * es);
  const auto* upd = static_cast<const uint8_t*>(io.in[2].data);
  for (size_t i = 0; i < offsets.size(); ++i) combine(r, t, dst + offsets[i] * es, upd + i * es, 1);
}

// ---------------------------------------------------------------- GatherND / ScatterND

void inferGatherND(LayerDesc& l) {
  requireInputs(l, 2, 2);
  if (l.inputs[1].type != DataType::kINT64) opError(l, "indices must be int64");
  const Dims &data = l.inputs[0].dims, &idx = l.inputs[1].dims;
  int64_t r = static_cast<int64_t>(data.size()), q = static_cast<int64_t>(idx.size()), b = l.attrs->getInt("batch_dims", 0);
  if (r < 1 || q < 1) opError(l, "data and indices must have rank >= 1");
  if (b < 0 || b >= std::min(r, q)) opError(l, "batch_dims " + std::to_string(b) + " out of range");
  int64_t k = idx.back();
  if (k < 0) throw UnsupportedError("layer '" + l.name + "' (GatherND): the last dim of indices must be known");
  if (k < 1 || k > r - b) opError(l, "last dim of indices (" + std::to_string(k) + ") out of range");
  for (int64_t i = 0; i < b; ++i)
    if (data[i] >= 0 && idx[i] >= 0 && data[i] != idx[i]) opError(l, "batch dims of data and indices differ");
  Dims out(idx.begin(), idx.end() - 1);
  out.insert(out.end(), data.begin() + b + k, data.end());
  setChecked(l, 0, l.inputs[0].type, out);
}

//! Offsets (in elements, within one batch) addressed by each index tuple of GatherND/ScatterND.
std::vector<int64_t> tupleOffsets(const LayerDesc& l, const TensorView& indices, const Dims& data, int64_t b) {
  int64_t k = indices.dims.back();
  std::vector<int64_t> strides = rowMajorStrides(Dims(data.begin() + b, data.end()));
  std::vector<int64_t> offsets(static_cast<size_t>(indices.count / std::max<int64_t>(k, 1)));
  for (size_t t = 0; t < offsets.size(); ++t) {
    int64_t off = 0;
    for (int64_t j = 0; j < k; ++j) off += resolveIndex(l, indexAt(indices, t * k + j), data[b + j]) * strides[j];
    offsets[t] = off;
  }
  return offsets;
}

void refGatherND(const LayerDesc& l, const KernelIO& io) {
  const Dims& data = io.in[0].dims;
  int64_t b = l.attrs->getInt("batch_dims", 0), k = io.in[1].dims.back();
  std::vector<int64_t> offsets = tupleOffsets(l, io.in[1], data, b);
  int64_t batches = product(data, 0, b), batchSize = product(data, b, data.size());
  int64_t perBatch = batches ? static_cast<int64_t>(offsets.size()) / batches : 0;
  size_t sliceBytes = static_cast<size_t>(product(data, b + k, data.size())) * elementSize(io.in[0].type);
  const auto* src = static_cast<const uint8_t*>(io.in[0].data);
  auto* dst = static_cast<uint8_t*>(io.out[0].data);
  size_t es = elementSize(io.in[0].type);
  for (size_t t = 0; t < offsets.size(); ++t) {
    int64_t batch = perBatch ? static_cast<int64_t>(t) / perBatch : 0;
    std::memcpy(dst + t * sliceBytes, src + (batch * batchSize + offsets[t]) * es, sliceBytes);
  }
}

void inferScatterND(LayerDesc& l) {
  requireInputs(l, 3, 3);
  if (l.inputs[1].type != DataType::kINT64) opError(l, "indices must be int64");
  reductionOf(l);
  const Dims &data = l.inputs[0].dims, &idx = l.inputs[1].dims, &upd = l.inputs[2].dims;
  if (l.inputs[2].type != l.inputs[0].type) opError(l, "updates must have the type of data");
  int64_t r = static_cast<int64_t>(data.size()), q = static_cast<int64_t>(idx.size());
  if (r < 1 || q < 1) opError(l, "data and indices must have rank >= 1");
  int64_t k = idx.back();
  if (k > r) opError(l, "last dim of indices (" + std::to_string(k) + ") exceeds the data rank");
  if (k >= 0) {
    Dims expect(idx.begin(), idx.end() - 1);
    expect.insert(expect.end(), data.begin() + k, data.end());
    bool ok = expect.size() == upd.size();
    for (size_t i = 0; ok && i < upd.size(); ++i) ok = expect[i] < 0 || upd[i] < 0 || expect[i] == upd[i];
    if (!ok) opError(l, "updates shape " + toString(upd) + " should be " + toString(expect));
  }
  setChecked(l, 0, l.inputs[0].type, data);
}

void refScatterND(const LayerDesc& l, const KernelIO& io) {
  const Dims& data = io.in[0].dims;
  int64_t k = io.in[1].dims.back();
  std::vector<int64_t> offsets = tupleOffsets(l, io.in[1], data, 0);
  int64_t slice = product(data, k, data.size());
  if (io.in[2].count != slice * static_cast<int64_t>(offsets.size())) opError(l, "updates have the wrong size");
  DataType t = io.in[0].type;
  size_t es = elementSize(t);
  auto* dst = static_cast<uint8_t*>(io.out[0].data);
  if (dst != io.in[0].data) std::memcpy(dst, io.in[0].data, static_cast<size_t>(io.in[0].count) * es);
  const auto* upd = static_cast<const uint8_t*>(io.in[2].data);
  Reduction r = reductionOf(l);
  for (size_t i = 0; i < offsets.size(); ++i) combine(r, t, dst + offsets[i] * es, upd + i * slice * es, slice);
}

// ---------------------------------------------------------------- OneHot

int64_t oneHotAxis(const LayerDesc& l, int64_t indicesRank) {
  int64_t axis = l.attrs->getInt("axis", -1), outRank = indicesRank + 1;
  if (axis < -outRank || axis >= outRank) opError(l, "axis " + std::to_string(axis) + " out of range");
  return axis < 0 ? axis + outRank : axis;
}

int64_t oneHotDepth(const LayerDesc& l, const TensorView& depth) {
  if (depth.count != 1) opError(l, "depth must hold one value");
  double d = elementAsDouble(depth, 0);
  if (!(d >= 1) || d > static_cast<double>(kMaxTensorBytes)) opError(l, "depth must be a positive size");
  return static_cast<int64_t>(d);
}

void inferOneHot(LayerDesc& l) {
  requireInputs(l, 3, 3);
  const Dims& idx = l.inputs[0].dims;
  if (l.inputs[2].dims.size() != 1 || (l.inputs[2].dims[0] >= 0 && l.inputs[2].dims[0] != 2))
    opError(l, "values must be a 2-element vector [off, on]");
  int64_t axis = oneHotAxis(l, static_cast<int64_t>(idx.size()));
  const HostTensor* depth = valueOf(l, 1);
  Dims out = idx;
  out.insert(out.begin() + axis, depth ? oneHotDepth(l, viewOf(*depth)) : -1);
  setChecked(l, 0, l.inputs[2].type, out);
}

void refOneHot(const LayerDesc& l, const KernelIO& io) {
  const Dims& idx = io.in[0].dims;
  int64_t axis = oneHotAxis(l, static_cast<int64_t>(idx.size())), depth = oneHotDepth(l, io.in[1]);
  int64_t outer = product(idx, 0, axis), inner = product(idx, axis, idx.size());
  size_t es = elementSize(io.out[0].type);
  const auto* values = static_cast<const uint8_t*>(io.in[2].data);
  auto* dst = static_cast<uint8_t*>(io.out[0].data);
  for (int64_t i = 0; i < io.out[0].count; ++i) std::memcpy(dst + i * es, values, es);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double v = elementAsDouble(io.in[0], o * inner + i);
      if (!(v > -static_cast<double>(depth) - 1 && v < static_cast<double>(depth))) continue;  // off (also NaN)
      int64_t d = static_cast<int64_t>(v);
      if (d < 0) d += depth;
      if (d < 0 || d >= depth) continue;
      std::memcpy(dst + ((o * depth + d) * inner + i) * es, values + es, es);
    }
}

// ---------------------------------------------------------------- NonZero / Compress (data-dependent)

int64_t countNonZero(const TensorView& v) {
  int64_t n = 0;
  for (int64_t i = 0; i < v.count; ++i) n += elementNonZero(v, i);
  return n;
}

// A scalar counts as a 1-D tensor of one element (like NumPy's nonzero).
Dims nonZeroDims(const Dims& d) { return d.empty() ? Dims{1} : d; }

void refNonZero(const LayerDesc& l, const KernelIO& io) {
  const TensorView& in = io.in[0];
  Dims dims = nonZeroDims(in.dims);
  int64_t rank = static_cast<int64_t>(dims.size()), nnz = countNonZero(in);
  if (io.out[0].dims != Dims{rank, nnz})
    throw UnsupportedError("layer '" + l.name + "' (NonZero): output shape depends on the data (" + std::to_string(nnz) +
                           " non-zeros) and was not resolved to it");
  int64_t* out = io.out[0].as<int64_t>();
  std::vector<int64_t> pos(rank, 0);
  int64_t j = 0;
  for (int64_t i = 0; i < in.count; ++i) {
    if (elementNonZero(in, i)) {
      for (int64_t k = 0; k < rank; ++k) out[k * nnz + j] = pos[k];
      ++j;
    }
    for (int64_t k = rank; k-- > 0;) {
      if (++pos[k] < dims[k]) break;
      pos[k] = 0;
    }
  }
}

void inferNonZero(LayerDesc& l) {
  requireInputs(l, 1, 1);
  int64_t rank = static_cast<int64_t>(nonZeroDims(l.inputs[0].dims).size());
  const HostTensor* v = valueOf(l, 0);
  if (!v) {
    setChecked(l, 0, DataType::kINT64, {rank, -1});  // data-dependent
    return;
  }
  // Known input: compute the output now, so its shape is static.
  TensorView in = viewOf(*v);
  int64_t nnz = countNonZero(in);
  setChecked(l, 0, DataType::kINT64, {rank, nnz});
  HostTensor out(DataType::kINT64, {rank, nnz});
  KernelIO io;
  io.in.push_back(in);
  io.out.push_back(TensorView{out.data(), DataType::kINT64, out.dims(), out.count()});
  refNonZero(l, io);
  l.outputs[0].value = out;
}

//! Compress: validates the condition and returns the kept positions along the axis.
std::vector<int64_t> compressKept(const LayerDesc& l, const TensorView& cond, int64_t dim) {
  if (dim >= 0 && cond.count > dim) opError(l, "condition is longer than the compressed axis");
  std::vector<int64_t> kept;
  for (int64_t i = 0; i < cond.count; ++i)
    if (elementNonZero(cond, i)) kept.push_back(i);
  return kept;
}

int64_t compressAxis(const LayerDesc& l, const Dims& data) {
  return normalizeAxis(l, l.attrs->getInt("axis", 0), static_cast<int64_t>(data.size()));
}

void inferCompress(LayerDesc& l) {
  requireInputs(l, 2, 2);
  if (l.inputs[1].dims.size() != 1) opError(l, "condition must be 1-D");
  const Dims& data = l.inputs[0].dims;
  bool flat = !l.attrs->has("axis");
  Dims out = flat ? Dims{isStatic(data) ? volume(data) : -1} : data;
  int64_t axis = flat ? 0 : compressAxis(l, data);
  const HostTensor* cond = valueOf(l, 1);
  out[axis] = cond ? static_cast<int64_t>(compressKept(l, viewOf(*cond), out[axis]).size()) : -1;  // data-dependent
  setChecked(l, 0, l.inputs[0].type, out);
}

void refCompress(const LayerDesc& l, const KernelIO& io) {
  const Dims& data = io.in[0].dims;
  bool flat = !l.attrs->has("axis");
  Dims view = flat ? Dims{io.in[0].count} : data;
  int64_t axis = flat ? 0 : compressAxis(l, data);
  std::vector<int64_t> kept = compressKept(l, io.in[1], view[axis]);
  int64_t outer = product(view, 0, axis), inner = product(view, axis + 1, view.size());
  if (io.out[0].count != outer * static_cast<int64_t>(kept.size()) * inner)
    throw UnsupportedError("layer '" + l.name + "' (Compress): output shape depends on the condition and was not resolved to it");
  size_t rowBytes = static_cast<size_t>(inner) * elementSize(io.in[0].type);
  const auto* src = static_cast<const uint8_t*>(io.in[0].data);
  auto* dst = static_cast<uint8_t*>(io.out[0].data);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k : kept) {
      std::memcpy(dst, src + (o * view[axis] + k) * rowBytes, rowBytes);
      dst += rowBytes;
    }
}

OpDef indexOp(const std::string& name, InferFn infer, RefFn ref, int minOpset, std::vector<int> valueInputs = {}) {
  OpDef d;
  d.name = name;
  d.infer = infer;
  d.ref = ref;
  d.anyType = true;
  d.minOpset = minOpset;
  d.valueInputs = std::move(valueInputs);
  return d;
}

}  // namespace

void registerShapeIndexOps(OpRegistry& r) {
  r.add(indexOp("Gather", inferGather, refGather, 1));
  r.add(indexOp("GatherElements", inferGatherElements, refGatherElements, 11));
  r.add(indexOp("GatherND", inferGatherND, refGatherND, 11));
  r.add(indexOp("ScatterElements", inferScatterElements, refScatterElements, 11));
  // Scatter (opsets 9-10) is ScatterElements without a reduction.
  r.add(indexOp("Scatter", inferScatterElements, refScatterElements, 9));
  r.add(indexOp("ScatterND", inferScatterND, refScatterND, 11));
  r.add(indexOp("OneHot", inferOneHot, refOneHot, 9, {1}));
  // Data-dependent shapes: NonZero is computed by its shape inference once its input is known;
  // Compress's condition decides its shape (the builder lowers Compress to Gather, lower_compress.cpp).
  OpDef nonZero = indexOp("NonZero", inferNonZero, refNonZero, 9, {0});
  nonZero.dataDependentShape = nonZero.inferComputesValues = true;
  r.add(nonZero);
  OpDef compress = indexOp("Compress", inferCompress, refCompress, 9, {1});
  compress.dataDependentShape = true;
  r.add(compress);
}

CompressPlan compressPlan(const LayerDesc& l) {
  const HostTensor* cond = valueOf(l, 1);
  if (!cond) opError(l, "the condition's value is not known");
  const Dims& data = l.inputs[0].dims;
  CompressPlan p;
  p.flat = !l.attrs->has("axis");
  p.axis = p.flat ? 0 : compressAxis(l, data);
  const int64_t dim = p.flat ? (isStatic(data) ? volume(data) : -1) : data[static_cast<size_t>(p.axis)];
  p.kept = compressKept(l, viewOf(*cond), dim);
  return p;
}

}  // namespace kiln
