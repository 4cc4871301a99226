// Op definitions for the pooling family: MaxPool, AveragePool, LpPool, their Global forms, LRN.
// Shape/type inference and naive reference kernels (1..3 spatial axes for the windowed pools).
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "ops/conv_geometry.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

void requireFloatInput(const LayerDesc& l) {
  DataType t = l.inputs[0].type;
  if (!isFloat(t))
    throw UnsupportedError("layer '" + l.name + "' (" + l.op + "): type " + std::string(toString(t)) +
                           " is not supported (floating-point only)");
}

std::vector<int64_t> kernelShape(const LayerDesc& l) {
  if (!l.attrs->has("kernel_shape")) opError(l, "attribute kernel_shape is required");
  return l.attrs->getInts("kernel_shape");
}

int64_t lpOrder(const LayerDesc& l) {
  int64_t p = l.attrs->getInt("p", 2);
  if (p < 1 || p > 64) opError(l, "p must be in [1, 64], got " + std::to_string(p));
  return p;
}

Dims pooledDims(const Dims& x, const Window& w) {
  Dims out{x[0], x[1]};
  out.insert(out.end(), w.out.begin(), w.out.end());
  return out;
}

void inferWindowPool(LayerDesc& l) {
  requireInputs(l, 1, 1);
  const Dims& x = l.inputs[0].dims;
  spatialRankOf(l, x);
  DataType t = l.inputs[0].type;
  if (l.op == "MaxPool") {
    if (t == DataType::kBOOL || !(isFloat(t) || isInteger(t)))
      throw UnsupportedError("layer '" + l.name + "' (MaxPool): type " + std::string(toString(t)) + " is not supported");
    int64_t so = l.attrs->getInt("storage_order", 0);
    if (so != 0 && so != 1) opError(l, "storage_order must be 0 or 1");
    if (l.outputs.size() > 2) opError(l, "MaxPool has at most 2 outputs");
  } else {
    requireFloatInput(l);
    if (l.op == "LpPool") lpOrder(l);
    int64_t cip = l.attrs->getInt("count_include_pad", 0);
    if (cip != 0 && cip != 1) opError(l, "count_include_pad must be 0 or 1");
  }
  Window w = poolWindow(l, x, kernelShape(l));
  Dims out = pooledDims(x, w);
  setOutput(l, 0, t, out);
  if (l.op == "MaxPool" && l.outputs.size() == 2) setOutput(l, 1, DataType::kINT64, out);
}

void inferGlobalPool(LayerDesc& l) {
  requireInputs(l, 1, 1);
  const Dims& x = l.inputs[0].dims;
  if (x.size() < 3) opError(l, "X must have rank >= 3 (N, C, spatial...), got " + toString(x));
  DataType t = l.inputs[0].type;
  if (l.op == "GlobalMaxPool") {
    if (t == DataType::kBOOL || !(isFloat(t) || isInteger(t)))
      throw UnsupportedError("layer '" + l.name + "' (GlobalMaxPool): type " + std::string(toString(t)) + " is not supported");
  } else {
    requireFloatInput(l);
  }
  if (l.op == "GlobalLpPool") lpOrder(l);
  Dims out(x.size(), 1);
  out[0] = x[0];
  out[1] = x[1];
  setOutput(l, 0, t, out);
}

void inferLrn(LayerDesc& l) {
  requireInputs(l, 1, 1);
  const Dims& x = l.inputs[0].dims;
  if (x.size() < 3) opError(l, "X must have rank >= 3 (N, C, spatial...), got " + toString(x));
  requireFloatInput(l);
  int64_t size = l.attrs->getInt("size", 0);
  if (size < 1 || size > (int64_t(1) << 30)) opError(l, "attribute size must be a positive integer");
  setOutput(l, 0, l.inputs[0].type, x);
}

//! A resolved windowed pool: its 3-axis window and the number of (n, c) planes.
struct PoolPlan {
  Window3 w;
  int64_t planes = 0;
};

PoolPlan planPool(const LayerDesc& l) {
  const Dims& x = l.inputs[0].dims;
  PoolPlan p;
  p.w = toWindow3(poolWindow(l, x, kernelShape(l)));
  p.planes = x[0] * x[1];
  return p;
}

//! Calls visit(inOffset) for every in-bounds tap of the window at output position (od, oh, ow);
//! returns the number of window taps inside [-padBegin, in + padEnd) (count_include_pad).
template <typename Visit>
int64_t forWindow(const Window3& w, int64_t od, int64_t oh, int64_t ow, Visit&& visit) {
  int64_t start[3] = {od * w.stride[0] - w.padBegin[0], oh * w.stride[1] - w.padBegin[1], ow * w.stride[2] - w.padBegin[2]};
  int64_t padded[3] = {1, 1, 1};
  for (int a = 0; a < 3; ++a) {
    int64_t n = 0;
    for (int64_t k = 0; k < w.kernel[a]; ++k) {
      int64_t i = start[a] + k * w.dilation[a];
      n += i >= -w.padBegin[a] && i < w.in[a] + w.padEnd[a];
    }
    padded[a] = n;
  }
  for (int64_t kd = 0; kd < w.kernel[0]; ++kd) {
    int64_t id = start[0] + kd * w.dilation[0];
    if (id < 0 || id >= w.in[0]) continue;
    for (int64_t kh = 0; kh < w.kernel[1]; ++kh) {
      int64_t ih = start[1] + kh * w.dilation[1];
      if (ih < 0 || ih >= w.in[1]) continue;
      for (int64_t kw = 0; kw < w.kernel[2]; ++kw) {
        int64_t iw = start[2] + kw * w.dilation[2];
        if (iw < 0 || iw >= w.in[2]) continue;
        visit(id, ih, iw);
      }
    }
  }
  return padded[0] * padded[1] * padded[2];
}

//! Runs body(plane, od, oh, ow, outIndex) over all output elements, planes in parallel.
template <typename Body>
void forEachOutput(const KernelIO& io, const PoolPlan& p, Body&& body) {
  const Window3& w = p.w;
  io.pool->parallelFor(p.planes, 1, [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      int64_t o = plane * w.outSize();
      for (int64_t od = 0; od < w.out[0]; ++od)
        for (int64_t oh = 0; oh < w.out[1]; ++oh)
          for (int64_t ow = 0; ow < w.out[2]; ++ow) body(plane, od, oh, ow, o++);
    }
  });
}

template <typename T>
void maxPoolRef(const LayerDesc& l, const KernelIO& io) {
  const PoolPlan p = planPool(l);
  const Window3& w = p.w;
  const bool colMajor = l.attrs->getInt("storage_order", 0) == 1;
  const T* x = io.in[0].as<T>();
  T* y = io.out[0].as<T>();
  int64_t* indices = io.out.size() > 1 ? io.out[1].as<int64_t>() : nullptr;
  forEachOutput(io, p, [&](int64_t plane, int64_t od, int64_t oh, int64_t ow, int64_t o) {
    const T* xp = x + plane * w.inSize();
    T best{};
    int64_t bestIndex = -1;
    forWindow(w, od, oh, ow, [&](int64_t id, int64_t ih, int64_t iw) {
      T v = xp[(id * w.in[1] + ih) * w.in[2] + iw];
      // NaN wins (as in NumPy's max); `v != v` is false for integers.
      if (bestIndex < 0 || v > best || (v != v && best == best)) {
        best = v;
        bestIndex = colMajor ? id + (ih + iw * w.in[1]) * w.in[0] : (id * w.in[1] + ih) * w.in[2] + iw;
      }
    });
    y[o] = best;
    if (indices) indices[o] = bestIndex < 0 ? -1 : plane * w.inSize() + bestIndex;
  });
}

template <typename T>
void averagePoolRef(const LayerDesc& l, const KernelIO& io) {
  const PoolPlan p = planPool(l);
  const Window3& w = p.w;
  const bool includePad = l.attrs->getInt("count_include_pad", 0) == 1;
  const T* x = io.in[0].as<T>();
  T* y = io.out[0].as<T>();
  forEachOutput(io, p, [&](int64_t plane, int64_t od, int64_t oh, int64_t ow, int64_t o) {
    const T* xp = x + plane * w.inSize();
    double sum = 0;
    int64_t inside = 0;
    int64_t padded = forWindow(w, od, oh, ow, [&](int64_t id, int64_t ih, int64_t iw) {
      sum += xp[(id * w.in[1] + ih) * w.in[2] + iw];
      ++inside;
    });
    int64_t count = includePad ? padded : inside;
    y[o] = static_cast<T>(count > 0 ? sum / static_cast<double>(count) : 0.0);
  });
}

template <typename T>
void lpPoolRef(const LayerDesc& l, const KernelIO& io) {
  const PoolPlan p = planPool(l);
  const Window3& w = p.w;
  const double order = static_cast<double>(lpOrder(l));
  const T* x = io.in[0].as<T>();
  T* y = io.out[0].as<T>();
  forEachOutput(io, p, [&](int64_t plane, int64_t od, int64_t oh, int64_t ow, int64_t o) {
    const T* xp = x + plane * w.inSize();
    double sum = 0;
    forWindow(w, od, oh, ow, [&](int64_t id, int64_t ih, int64_t iw) {
      sum += std::pow(std::fabs(static_cast<double>(xp[(id * w.in[1] + ih) * w.in[2] + iw])), order);
    });
    y[o] = static_cast<T>(std::pow(sum, 1.0 / order));
  });
}

//! Reduces each (n, c) plane of X to one value: reduce(plane pointer, plane size).
template <typename T, typename Reduce>
void globalPoolRef(const LayerDesc& l, const KernelIO& io, Reduce&& reduce) {
  const Dims& x = l.inputs[0].dims;
  const int64_t planes = x[0] * x[1];
  const int64_t size = planes == 0 ? 0 : volume(x) / planes;
  const T* in = io.in[0].as<T>();
  T* y = io.out[0].as<T>();
  io.pool->parallelFor(planes, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = reduce(in + i * size, size);
  });
}

template <typename T>
void globalMaxPoolRef(const LayerDesc& l, const KernelIO& io) {
  globalPoolRef<T>(l, io, [](const T* p, int64_t n) {
    T best = n > 0 ? p[0] : T{};
    for (int64_t i = 1; i < n; ++i) best = p[i] > best || (p[i] != p[i] && best == best) ? p[i] : best;
    return best;
  });
}

template <typename T>
void globalAveragePoolRef(const LayerDesc& l, const KernelIO& io) {
  globalPoolRef<T>(l, io, [](const T* p, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += p[i];
    return static_cast<T>(n > 0 ? s / static_cast<double>(n) : 0.0);
  });
}

template <typename T>
void globalLpPoolRef(const LayerDesc& l, const KernelIO& io) {
  const double order = static_cast<double>(lpOrder(l));
  globalPoolRef<T>(l, io, [order](const T* p, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += std::pow(std::fabs(static_cast<double>(p[i])), order);
    return static_cast<T>(std::pow(s, 1.0 / order));
  });
}

//! y = x / (bias + alpha / size * sum of x^2 over the channel window) ^ beta.
template <typename T>
void lrnRef(const LayerDesc& l, const KernelIO& io) {
  const Dims& x = l.inputs[0].dims;
  const int64_t size = l.attrs->getInt("size", 1);
  const double alpha = l.attrs->getFloat("alpha", 1e-4f), beta = l.attrs->getFloat("beta", 0.75f),
               bias = l.attrs->getFloat("bias", 1.0f);
  const int64_t n = x[0], c = x[1], inner = volume(x) / std::max<int64_t>(1, n * c);
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  const T* in = io.in[0].as<T>();
  T* y = io.out[0].as<T>();
  io.pool->parallelFor(n * c, 1, [&](int64_t b, int64_t e) {
    for (int64_t nc = b; nc < e; ++nc) {
      int64_t ni = nc / c, ci = nc % c;
      int64_t lo = std::max<int64_t>(0, ci - before), hi = std::min<int64_t>(c - 1, ci + after);
      for (int64_t s = 0; s < inner; ++s) {
        double sq = 0;
        for (int64_t k = lo; k <= hi; ++k) {
          double v = in[(ni * c + k) * inner + s];
          sq += v * v;
        }
        double v = in[nc * inner + s];
        y[nc * inner + s] = static_cast<T>(v / std::pow(bias + alpha / static_cast<double>(size) * sq, beta));
      }
    }
  });
}

//! Float/double dispatch for the floating-point-only pools.
#define KILN_FLOAT_REF(NAME, IMPL)                                                                   \
  void NAME(const LayerDesc& l, const KernelIO& io) {                                                \
    dispatchType<kRefFloatTypes>(l.inputs[0].type, [&](auto tag) { IMPL<decltype(tag)>(l, io); }, l.op.c_str()); \
  }
KILN_FLOAT_REF(averagePoolEntry, averagePoolRef)
KILN_FLOAT_REF(lpPoolEntry, lpPoolRef)
KILN_FLOAT_REF(globalAveragePoolEntry, globalAveragePoolRef)
KILN_FLOAT_REF(globalLpPoolEntry, globalLpPoolRef)
KILN_FLOAT_REF(lrnEntry, lrnRef)
#undef KILN_FLOAT_REF

void maxPoolEntry(const LayerDesc& l, const KernelIO& io) {
  dispatchNumeric(l.inputs[0].type, [&](auto v) {
    using T = decltype(v);
    if constexpr (std::is_same_v<T, bool>) throw UnsupportedError("MaxPool: bool is not supported");
    else maxPoolRef<T>(l, io);
  });
}

void globalMaxPoolEntry(const LayerDesc& l, const KernelIO& io) {
  dispatchNumeric(l.inputs[0].type, [&](auto v) {
    using T = decltype(v);
    if constexpr (std::is_same_v<T, bool>) throw UnsupportedError("GlobalMaxPool: bool is not supported");
    else globalMaxPoolRef<T>(l, io);
  });
}

void addOp(OpRegistry& r, const char* name, InferFn infer, RefFn ref) {
  OpDef d;
  d.name = name;
  d.infer = infer;
  d.ref = ref;
  r.add(d);
}

}  // namespace

void registerPoolOps(OpRegistry& r) {
  // Older opsets only lack attributes whose defaults keep the old behaviour (LpPool-1's float p is
  // read as an integer by Attributes::getInt), so no normalize functions are needed.
  addOp(r, "MaxPool", inferWindowPool, maxPoolEntry);
  addOp(r, "AveragePool", inferWindowPool, averagePoolEntry);
  addOp(r, "LpPool", inferWindowPool, lpPoolEntry);
  addOp(r, "GlobalMaxPool", inferGlobalPool, globalMaxPoolEntry);
  addOp(r, "GlobalAveragePool", inferGlobalPool, globalAveragePoolEntry);
  addOp(r, "GlobalLpPool", inferGlobalPool, globalLpPoolEntry);
  addOp(r, "LRN", inferLrn, lrnEntry);
}

}  // namespace kiln
