// Op definitions (shape inference + naive reference kernels): the smaller ops registered with the
// attention family: LpNormalization, MeanVarianceNormalization and Det.
#include <algorithm>
#include <cmath>
#include <set>

#include "ops/det_lu.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

[[noreturn]] void unsupported(const LayerDesc& l, const std::string& msg) {
  throw UnsupportedError("layer '" + l.name + "' (" + l.op + "): " + msg);
}

void requireFloat(const LayerDesc& l) {
  if (!isFloat(l.inputs[0].type)) opError(l, std::string("input must be a floating-point tensor, got ") + toString(l.inputs[0].type));
  if (isStatic(l.inputs[0].dims)) volume(l.inputs[0].dims);
}

//! Calls f(T{}) for float32/float64 (half/bf16 are computed in float32 by the builder).
template <typename F>
void dispatchFloat(const LayerDesc& l, DataType t, F&& f) {
  if (t == DataType::kFLOAT) f(float{});
  else if (t == DataType::kDOUBLE) f(double{});
  else unsupported(l, std::string("no CPU kernel for data type ") + toString(t));
}

int64_t product(const Dims& d, size_t from, size_t to) { return volume(Dims(d.begin() + from, d.begin() + to)); }

// ---------------------------------------------------------------------------------------------
// LpNormalization: x / ||x||_p along one axis (p = 1 or 2); a zero norm gives zeros.

void inferLpNorm(LayerDesc& l) {
  requireInputs(l, 1, 1);
  requireFloat(l);
  const int64_t rank = static_cast<int64_t>(l.inputs[0].dims.size());
  if (rank == 0) opError(l, "input must have rank >= 1");
  normalizeAxis(l, l.attrs->getInt("axis", -1), rank);
  int64_t p = l.attrs->getInt("p", 2);
  if (p != 1 && p != 2) opError(l, "p must be 1 or 2, got " + std::to_string(p));
  setOutput(l, 0, l.inputs[0].type, l.inputs[0].dims);
}

void refLpNorm(const LayerDesc& l, const KernelIO& io) {
  const Dims& d = io.in[0].dims;
  const size_t axis = static_cast<size_t>(normalizeAxis(l, l.attrs->getInt("axis", -1), static_cast<int64_t>(d.size())));
  const bool l1 = l.attrs->getInt("p", 2) == 1;
  const int64_t outer = product(d, 0, axis), n = d[axis], inner = product(d, axis + 1, d.size());
  dispatchFloat(l, io.in[0].type, [&](auto z) {
    using T = decltype(z);
    const T* x = io.in[0].as<T>();
    T* y = io.out[0].as<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t base = o * n * inner + i;
        double acc = 0;
        for (int64_t k = 0; k < n; ++k) {
          double v = x[base + k * inner];
          acc += l1 ? std::fabs(v) : v * v;
        }
        const double norm = l1 ? acc : std::sqrt(acc);
        for (int64_t k = 0; k < n; ++k) y[base + k * inner] = norm == 0 ? T(0) : static_cast<T>(x[base + k * inner] / norm);
      }
  });
}

// ---------------------------------------------------------------------------------------------
// MeanVarianceNormalization: (X - E[X]) / (sqrt(Var[X]) + 1e-9) over `axes` (the ONNX function).

std::vector<bool> mvnReduced(const LayerDesc& l, int64_t rank) {
  std::vector<int64_t> axes = l.attrs->getInts("axes", {0, 2, 3});
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  for (int64_t a : axes) {
    size_t k = static_cast<size_t>(normalizeAxis(l, a, rank));
    if (reduced[k]) opError(l, "axes lists axis " + std::to_string(a) + " twice");
    reduced[k] = true;
  }
  return reduced;
}

void inferMvn(LayerDesc& l) {
  requireInputs(l, 1, 1);
  requireFloat(l);
  mvnReduced(l, static_cast<int64_t>(l.inputs[0].dims.size()));
  setOutput(l, 0, l.inputs[0].type, l.inputs[0].dims);
}

void refMvn(const LayerDesc& l, const KernelIO& io) {
  const Dims& d = io.in[0].dims;
  const std::vector<bool> reduced = mvnReduced(l, static_cast<int64_t>(d.size()));
  // Each element's statistics group: its linear index over the kept dims.
  Dims kept;
  for (size_t k = 0; k < d.size(); ++k) kept.push_back(reduced[k] ? 1 : d[k]);
  const std::vector<int64_t> groupStride = broadcastStrides(kept, d);
  const int64_t count = io.in[0].count, groups = volume(kept);
  const int64_t perGroup = groups == 0 ? 0 : count / groups;
  auto groupOf = [&](int64_t linear) {
    int64_t g = 0;
    for (size_t k = d.size(); k-- > 0;) {
      g += (linear % d[k]) * groupStride[k];
      linear /= d[k];
    }
    return g;
  };
  dispatchFloat(l, io.in[0].type, [&](auto z) {
    using T = decltype(z);
    const T* x = io.in[0].as<T>();
    T* y = io.out[0].as<T>();
    std::vector<double> mean(static_cast<size_t>(groups), 0.0), var(static_cast<size_t>(groups), 0.0);
    std::vector<int64_t> group(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) mean[group[i] = groupOf(i)] += x[i];
    for (auto& m : mean) m /= static_cast<double>(perGroup);
    for (int64_t i = 0; i < count; ++i) {
      double dv = x[i] - mean[group[i]];
      var[group[i]] += dv * dv;
    }
    for (int64_t i = 0; i < count; ++i) {
      const double sd = std::sqrt(var[group[i]] / static_cast<double>(perGroup));
      y[i] = static_cast<T>((x[i] - mean[group[i]]) / (sd + 1e-9));
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Det: determinants of the trailing M x M matrices (LU with partial pivoting, in double).

void inferDet(LayerDesc& l) {
  requireInputs(l, 1, 1);
  requireFloat(l);
  const Dims& x = l.inputs[0].dims;
  if (x.size() < 2) opError(l, "input must have rank >= 2, got " + toString(x));
  const int64_t m = x[x.size() - 2], n = x[x.size() - 1];
  if (m >= 0 && n >= 0 && m != n) opError(l, "matrices must be square, got " + toString(x));
  setOutput(l, 0, l.inputs[0].type, Dims(x.begin(), x.end() - 2));
}

void refDet(const LayerDesc& l, const KernelIO& io) {
  const Dims& d = io.in[0].dims;
  const int64_t n = d.back(), mats = product(d, 0, d.size() - 2);
  dispatchFloat(l, io.in[0].type, [&](auto z) {
    using T = decltype(z);
    const T* x = io.in[0].as<T>();
    T* y = io.out[0].as<T>();
    std::vector<double> a(static_cast<size_t>(n * n));
    for (int64_t m = 0; m < mats; ++m) {
      std::copy(x + m * n * n, x + (m + 1) * n * n, a.begin());
      y[m] = static_cast<T>(luDeterminant(a.data(), n));
    }
  });
}

}  // namespace

void registerAttentionNormOps(OpRegistry& r) {
  OpDef lp;
  lp.name = "LpNormalization";
  lp.infer = inferLpNorm;
  lp.ref = refLpNorm;
  r.add(lp);

  OpDef mvn;
  mvn.name = "MeanVarianceNormalization";
  mvn.infer = inferMvn;
  mvn.ref = refMvn;
  mvn.minOpset = 9;
  r.add(mvn);

  OpDef det;
  det.name = "Det";
  det.infer = inferDet;
  det.ref = refDet;
  det.minOpset = 11;
  r.add(det);
}

}  // namespace kiln
