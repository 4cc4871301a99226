// Unique (opset 11): the distinct elements of X (or distinct slices along `axis`), sorted or in
// order of first occurrence, with first-occurrence indices, inverse indices and counts.
// Registered from registerUniqueOps. The output size depends on the data: shape inference
// computes every output once X is known (OpDef::inferComputesValues), so at run time the context
// reads X back and the layer is evaluated on the host on every backend.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

struct UniqueGeometry {
  bool flat = true;
  int64_t axis = 0, outer = 1, len = 1, inner = 1;  //!< slice k holds x[o, k, i] for o < outer, i < inner
};

UniqueGeometry uniqueGeometry(const LayerDesc& l, const Dims& x) {
  UniqueGeometry g;
  g.flat = !l.attrs->has("axis");
  if (g.flat) {
    g.len = isStatic(x) ? volume(x) : -1;
    return g;
  }
  g.axis = normalizeAxis(l, l.attrs->getInt("axis", 0), static_cast<int64_t>(x.size()));
  g.len = x[g.axis];
  for (int64_t d = 0; d < g.axis; ++d) g.outer = x[d] < 0 || g.outer < 0 ? -1 : g.outer * x[d];
  for (size_t d = g.axis + 1; d < x.size(); ++d) g.inner = x[d] < 0 || g.inner < 0 ? -1 : g.inner * x[d];
  return g;
}

struct UniqueResult {
  std::vector<int64_t> firsts;   //!< per unique slice, in output order: its first occurrence
  std::vector<int64_t> inverse;  //!< per input slice: its unique slice
  std::vector<int64_t> counts;
};

template <typename T>
UniqueResult uniqueSlices(const T* x, const UniqueGeometry& g, bool sorted) {
  // Slices compare lexicographically over (outer, inner), as NumPy's unique with an axis.
  auto less = [&](int64_t a, int64_t b) {
    for (int64_t o = 0; o < g.outer; ++o)
      for (int64_t i = 0; i < g.inner; ++i) {
        const T va = x[(o * g.len + a) * g.inner + i], vb = x[(o * g.len + b) * g.inner + i];
        if (va < vb) return true;
        if (vb < va) return false;
      }
    return false;
  };
  std::vector<int64_t> order(static_cast<size_t>(g.len));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), less);  // equal slices keep index order: the first comes first
  UniqueResult r;
  r.inverse.assign(order.size(), 0);
  std::vector<int64_t> groupOf(order.size());
  for (size_t k = 0; k < order.size(); ++k) {
    if (k == 0 || less(order[k - 1], order[k])) {
      r.firsts.push_back(order[k]);
      r.counts.push_back(0);
    }
    groupOf[k] = static_cast<int64_t>(r.firsts.size()) - 1;
    ++r.counts.back();
  }
  std::vector<int64_t> rank(r.firsts.size());  // output position of each sorted group
  std::iota(rank.begin(), rank.end(), 0);
  if (!sorted) {  // groups in order of first occurrence
    std::vector<int64_t> byFirst(r.firsts.size());
    std::iota(byFirst.begin(), byFirst.end(), 0);
    std::sort(byFirst.begin(), byFirst.end(), [&](int64_t a, int64_t b) { return r.firsts[a] < r.firsts[b]; });
    std::vector<int64_t> firsts(r.firsts.size()), counts(r.counts.size());
    for (size_t p = 0; p < byFirst.size(); ++p) {
      rank[byFirst[p]] = static_cast<int64_t>(p);
      firsts[p] = r.firsts[byFirst[p]];
      counts[p] = r.counts[byFirst[p]];
    }
    r.firsts = std::move(firsts);
    r.counts = std::move(counts);
  }
  for (size_t k = 0; k < order.size(); ++k) r.inverse[order[k]] = rank[groupOf[k]];
  return r;
}

void checkUniqueInputs(const LayerDesc& l) {
  requireInputs(l, 1, 1);
  const int64_t sorted = l.attrs->getInt("sorted", 1);
  if (sorted != 0 && sorted != 1) opError(l, "sorted must be 0 or 1, got " + std::to_string(sorted));
  // float16/bfloat16 compute in float32 (the builder casts around the layer); the rest need a host kernel
  if (l.inputs[0].type == DataType::kBOOL || isHalfType(l.inputs[0].type)) return;
  dispatchNumeric(l.inputs[0].type, [](auto) {});  // throws for types without a host kernel
}

HostTensor int64Vector(const std::vector<int64_t>& v) {
  HostTensor t(DataType::kINT64, {static_cast<int64_t>(v.size())});
  if (!v.empty()) std::memcpy(t.data(), v.data(), v.size() * sizeof(int64_t));
  return t;
}

void inferUnique(LayerDesc& l) {
  checkUniqueInputs(l);
  const Dims& x = l.inputs[0].dims;
  const UniqueGeometry g = uniqueGeometry(l, x);
  const DataType type = l.inputs[0].type;
  const size_t outs = l.outputs.size();
  if (outs < 1 || outs > 4) opError(l, "Unique has 1 to 4 outputs");
  if (!l.inputs[0].value.valid()) {  // data-dependent: known once X is
    Dims y = g.flat ? Dims{-1} : x;
    if (!g.flat) y[g.axis] = -1;
    setOutput(l, 0, type, y);
    if (outs > 1) setOutput(l, 1, DataType::kINT64, {-1});
    if (outs > 2) setOutput(l, 2, DataType::kINT64, {g.len});
    if (outs > 3) setOutput(l, 3, DataType::kINT64, {-1});
    return;
  }
  const HostTensor& xv = l.inputs[0].value;
  UniqueResult r;
  auto run = [&](auto t) {
    using T = decltype(t);
    r = uniqueSlices<T>(static_cast<const T*>(xv.data()), g, l.attrs->getInt("sorted", 1) == 1);
  };
  if (type == DataType::kBOOL) {
    run(uint8_t{});
  } else if (isHalfType(type)) {
    // float16/bfloat16 read back on the GPU (the CPU builder casts around the layer): compare the
    // values widened to float (exact), copy the elements as they are.
    std::vector<float> wide(static_cast<size_t>(xv.count()));
    widenToFloat(TensorView{const_cast<void*>(xv.data()), type, xv.dims(), xv.count()}, wide.data());
    r = uniqueSlices<float>(wide.data(), g, l.attrs->getInt("sorted", 1) == 1);
  } else {
    dispatchNumeric(type, run);
  }
  const int64_t u = static_cast<int64_t>(r.firsts.size());
  Dims yd = g.flat ? Dims{u} : x;
  if (!g.flat) yd[g.axis] = u;
  HostTensor y(type, yd);
  const size_t es = elementSize(type), row = static_cast<size_t>(g.inner) * es;
  const auto* src = static_cast<const uint8_t*>(xv.data());
  auto* dst = static_cast<uint8_t*>(y.data());
  for (int64_t o = 0; o < g.outer; ++o)
    for (int64_t k = 0; k < u; ++k)
      std::memcpy(dst + (o * u + k) * row, src + (o * g.len + r.firsts[k]) * row, row);
  const HostTensor values[4] = {y, int64Vector(r.firsts), int64Vector(r.inverse), int64Vector(r.counts)};
  for (size_t k = 0; k < outs; ++k) {
    setOutput(l, k, values[k].type(), values[k].dims());
    l.outputs[k].value = values[k];
  }
}

// Runs only where the runtime resolved the shapes to this very data: copies what inference computed.
void refUnique(const LayerDesc& l, const KernelIO& io) {
  LayerDesc d = l;
  d.inputs[0].value = HostTensor(io.in[0].type, io.in[0].dims);
  std::memcpy(d.inputs[0].value.data(), io.in[0].data, d.inputs[0].value.bytes());
  inferUnique(d);
  for (size_t k = 0; k < io.out.size(); ++k) {
    if (io.out[k].count != d.outputs[k].value.count())
      throw UnsupportedError("layer '" + l.name + "' (Unique): output shape depends on the data and was not resolved to it");
    std::memcpy(io.out[k].data, d.outputs[k].value.data(), d.outputs[k].value.bytes());
  }
}

}  // namespace

void registerUniqueOps(OpRegistry& r) {
  OpDef d;
  d.name = "Unique";
  d.infer = inferUnique;
  d.ref = refUnique;
  d.valueInputs = {0};
  d.dataDependentShape = true;
  d.inferComputesValues = true;
  d.minOpset = 11;
  r.add(d);
}

}  // namespace kiln
