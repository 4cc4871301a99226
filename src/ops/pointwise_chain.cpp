// PointwiseChain (kiln-internal): a chain of float32 elementwise ops fused into one layer, so
// that the data makes one trip through memory. Produced by the fuse_pointwise pass.
//   inputs:  x (the chain's input, whose shape is the output's), then one extra operand per binary
//            step (broadcastable to x's shape without changing it)
//   attrs:   steps (op names), operand (per step: input index of its extra operand, or -1),
//            swapped (per step: 1 when the chain value is the right operand: c - v, c / v, c ^ v),
//            alpha / beta (per step: activation parameters)
#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/activation.h"
#include "ops/fused_attrs.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"
#include "ops/pointwise_chain.h"

namespace kiln {

namespace {

constexpr int64_t kChunk = 2048;

bool binaryStep(const std::string& op) {
  return op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Pow" || op == "Max" || op == "Min";
}

}  // namespace

bool isChainableOp(const std::string& op) {
  static const char* kOps[] = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Relu", "LeakyRelu", "Sigmoid", "Tanh",
                               "HardSwish", "HardSigmoid", "Elu", "Softplus", "Gelu", "Erf", "Sqrt", "Exp", "Log", "Neg",
                               "Abs", "Reciprocal", "Floor", "Ceil", "Clip"};
  for (const char* k : kOps)
    if (op == k) return true;
  return false;
}

PointwiseProgram compilePointwise(const Attributes& a, size_t nbInputs) {
  PointwiseProgram p;
  const PointwiseChainAttrs c = pointwiseChainAttrs(a);
  const std::vector<std::string>& steps = c.steps;
  const std::vector<int64_t> &operand = c.operand, &swapped = c.swapped;
  const std::vector<float> &alpha = c.alpha, &beta = c.beta;
  if (steps.empty() || operand.size() != steps.size() || swapped.size() != steps.size() || alpha.size() != steps.size() ||
      beta.size() != steps.size())
    throw Error("PointwiseChain: inconsistent step attributes");
  for (size_t i = 0; i < steps.size(); ++i) {
    PointwiseStep s;
    s.op = steps[i];
    if (!isChainableOp(s.op)) throw Error("PointwiseChain: unknown step '" + s.op + "'");
    s.operand = static_cast<int>(operand[i]);
    s.swapped = swapped[i] != 0;
    s.alpha = alpha[i];
    s.beta = beta[i];
    if (binaryStep(s.op) != (s.operand >= 0)) throw Error("PointwiseChain: step '" + s.op + "' has a wrong operand");
    if (s.operand >= static_cast<int>(nbInputs) || s.operand == 0) throw Error("PointwiseChain: operand index out of range");
    // Activation steps (a Gelu step's alpha != 0 means the tanh approximation).
    const std::string kind = s.op == "Gelu" ? (s.alpha != 0.f ? "GeluTanh" : "Gelu") : s.op;
    if (activationKindOf(kind, &s.act.kind)) {  // s.op is chainable: never "GeluTanh" itself
      s.act.alpha = s.alpha;
      s.act.beta = s.beta;
      s.isActivation = true;
    }
    p.steps.push_back(s);
  }
  return p;
}

namespace {

// Applies one unary step to v[0..n).
void unaryStep(const PointwiseStep& s, float* v, int64_t n, ActivationFn activation) {
  if (s.isActivation) {
    activation(s.act, v, n);
    return;
  }
  const std::string& op = s.op;
  if (op == "Erf") for (int64_t i = 0; i < n; ++i) v[i] = std::erf(v[i]);
  else if (op == "Sqrt") for (int64_t i = 0; i < n; ++i) v[i] = std::sqrt(v[i]);
  else if (op == "Exp") for (int64_t i = 0; i < n; ++i) v[i] = std::exp(v[i]);
  else if (op == "Log") for (int64_t i = 0; i < n; ++i) v[i] = std::log(v[i]);
  else if (op == "Neg") for (int64_t i = 0; i < n; ++i) v[i] = -v[i];
  else if (op == "Abs") for (int64_t i = 0; i < n; ++i) v[i] = std::fabs(v[i]);
  else if (op == "Reciprocal") for (int64_t i = 0; i < n; ++i) v[i] = 1.f / v[i];
  else if (op == "Floor") for (int64_t i = 0; i < n; ++i) v[i] = std::floor(v[i]);
  else if (op == "Ceil") for (int64_t i = 0; i < n; ++i) v[i] = std::ceil(v[i]);
}

template <typename F>
void binaryLoop(float* v, const float* o, int64_t n, bool swapped, F f) {
  if (swapped) for (int64_t i = 0; i < n; ++i) v[i] = f(o[i], v[i]);
  else for (int64_t i = 0; i < n; ++i) v[i] = f(v[i], o[i]);
}

void binaryStepApply(const PointwiseStep& s, float* v, const float* o, int64_t n) {
  const std::string& op = s.op;
  if (op == "Add") binaryLoop(v, o, n, false, [](float a, float b) { return a + b; });
  else if (op == "Mul") binaryLoop(v, o, n, false, [](float a, float b) { return a * b; });
  else if (op == "Sub") binaryLoop(v, o, n, s.swapped, [](float a, float b) { return a - b; });
  else if (op == "Div") binaryLoop(v, o, n, s.swapped, [](float a, float b) { return a / b; });
  else if (op == "Pow") binaryLoop(v, o, n, s.swapped, [](float a, float b) { return std::pow(a, b); });
  else if (op == "Max") binaryLoop(v, o, n, false, [](float a, float b) { return std::isnan(a) || a > b ? a : b; });
  else if (op == "Min") binaryLoop(v, o, n, false, [](float a, float b) { return std::isnan(a) || a < b ? a : b; });
}

// dst[0..len) = elements [from, from + len) of src[0..period) repeated: the part up to a period
// boundary, one period, then doubling copies of what is written (each a whole number of periods).
void copyPeriodic(const float* src, int64_t period, int64_t from, int64_t len, float* dst) {
  int64_t j = 0;
  if (const int64_t q = from % period; q != 0) {
    j = std::min(period - q, len);
    std::memcpy(dst, src + q, static_cast<size_t>(j) * sizeof(float));
  }
  if (j >= len) return;
  float* p = dst + j;
  const int64_t rest = len - j, first = std::min(period, rest);
  std::memcpy(p, src, static_cast<size_t>(first) * sizeof(float));
  for (int64_t k = first; k < rest; k *= 2) std::memcpy(p + k, p, static_cast<size_t>(std::min(k, rest - k)) * sizeof(float));
}

// Gathers operand values for output elements [begin, begin+n) into dst (broadcast).
void gatherOperand(const TensorView& t, const Dims& outDims, const std::vector<int64_t>& strides, int64_t begin, int64_t n,
                   float* dst) {
  const float* src = t.as<float>();
  if (t.count == 1) {
    for (int64_t i = 0; i < n; ++i) dst[i] = src[0];
    return;
  }
  if (t.dims == outDims) {
    std::memcpy(dst, src + begin, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  const size_t r = outDims.size();
  std::vector<int64_t> idx(r);
  int64_t rem = begin;
  for (size_t d = r; d-- > 0;) {
    idx[d] = rem % outDims[d];
    rem /= outDims[d];
  }
  // Innermost dims the operand is constant along (a per-channel [C, 1, 1] scale over an NCHW
  // plane) or contiguous along (a [H, W] operand repeated over channels): whole runs at once, a
  // fill or a copy, instead of an index step per element (BatchNorm + ReLU chains of DenseNet).
  // A copied run may repeat over the dims just outside it (a per-channel operand of a blocked
  // nChw8c tensor: its 8 values repeated over every pixel): one run of `repeats` periods, written
  // by doubling copies.
  size_t zeroFrom = r, copyFrom = r;
  int64_t zeroRun = 1, copyRun = 1;
  while (zeroFrom > 0 && strides[zeroFrom - 1] == 0) zeroRun *= outDims[--zeroFrom];
  while (copyFrom > 0 && strides[copyFrom - 1] == copyRun) copyRun *= outDims[--copyFrom];
  size_t repeatFrom = copyFrom;
  int64_t repeats = 1;
  while (repeatFrom > 0 && strides[repeatFrom - 1] == 0) repeats *= outDims[--repeatFrom];
  const bool fill = zeroRun >= copyRun * repeats;
  const int64_t run = fill ? zeroRun : copyRun * repeats;
  const size_t inner = fill ? zeroFrom : repeatFrom;
  if (run >= 8) {
    int64_t off = 0;
    for (size_t d = 0; d < inner; ++d) off += idx[d] * strides[d];
    int64_t within = 0;  // begin's position inside its run
    for (size_t d = inner; d < r; ++d) within = within * outDims[d] + idx[d];
    for (int64_t i = 0; i < n;) {
      const int64_t len = std::min(run - within, n - i);
      if (fill) std::fill(dst + i, dst + i + len, src[off]);
      else copyPeriodic(src + off, copyRun, within, len, dst + i);
      i += len;
      within = 0;
      for (size_t d = inner; d-- > 0;) {  // the next run: odometer over the outer dims
        off += strides[d];
        if (++idx[d] < outDims[d]) break;
        off -= strides[d] * outDims[d];
        idx[d] = 0;
      }
    }
    return;
  }
  int64_t off = 0;
  for (size_t d = 0; d < r; ++d) off += idx[d] * strides[d];
  for (int64_t i = 0; i < n; ++i) {
    dst[i] = src[off];
    for (size_t d = r; d-- > 0;) {  // odometer increment
      off += strides[d];
      if (++idx[d] < outDims[d]) break;
      off -= strides[d] * outDims[d];
      idx[d] = 0;
    }
  }
}

}  // namespace

void runPointwise(const PointwiseProgram& p, const KernelIO& io, ActivationFn activation) {
  const TensorView& x = io.in[0];
  const TensorView& y = io.out[0];
  std::vector<std::vector<int64_t>> strides(io.in.size());
  for (size_t k = 1; k < io.in.size(); ++k) strides[k] = broadcastStrides(io.in[k].dims, y.dims);
  auto body = [&](int64_t cb, int64_t ce) {
    alignas(64) float operand[kChunk];
    for (int64_t c = cb; c < ce; ++c) {
      const int64_t begin = c * kChunk, n = std::min(kChunk, y.count - begin);
      float* v = y.as<float>() + begin;
      if (v != x.as<float>() + begin) std::memcpy(v, x.as<float>() + begin, static_cast<size_t>(n) * sizeof(float));
      for (const PointwiseStep& s : p.steps) {
        if (s.operand < 0) {
          unaryStep(s, v, n, activation);
          continue;
        }
        gatherOperand(io.in[s.operand], y.dims, strides[s.operand], begin, n, operand);
        binaryStepApply(s, v, operand, n);
      }
    }
  };
  const int64_t chunks = (y.count + kChunk - 1) / kChunk;
  if (io.pool) io.pool->parallelFor(chunks, 1, body);
  else body(0, chunks);
}

namespace {

void inferChain(LayerDesc& l) {
  if (l.inputs.empty() || !l.present(0)) opError(l, "needs an input");
  // One float type throughout (float32, or float16/bfloat16 after --fp16/--bf16: the CPU computes
  // those in float32 through Cast layers; the GPU kernel decides what it runs natively).
  const DataType t = l.inputs[0].type;
  if (t != DataType::kFLOAT && t != DataType::kHALF && t != DataType::kBF16) opError(l, "inputs must be float32, float16 or bfloat16");
  for (size_t i = 0; i < l.inputs.size(); ++i)
    if (!l.present(i) || l.inputs[i].type != t) opError(l, "all inputs must have the same float type");
  compilePointwise(*l.attrs, l.inputs.size());
  for (size_t i = 1; i < l.inputs.size(); ++i)
    if (broadcastDims(l, l.inputs[0].dims, l.inputs[i].dims) != l.inputs[0].dims)
      opError(l, "operand " + std::to_string(i) + " must broadcast to the chain's shape");
  setOutput(l, 0, t, l.inputs[0].dims);
}

// One step on one element, by the ONNX formula (c: the chain's value, o: the step's operand).
float referenceStep(const PointwiseStep& s, float c, float o) {
  if (s.isActivation) return s.act(c);  // Activation::operator(): scalar, in ops/activation.h
  const std::string& op = s.op;
  const float a = s.swapped ? o : c, b = s.swapped ? c : o;  // a OP b
  if (op == "Add") return c + o;
  if (op == "Mul") return c * o;
  if (op == "Sub") return a - b;
  if (op == "Div") return a / b;
  if (op == "Pow") return std::pow(a, b);
  if (op == "Max") return std::isnan(c) || std::isnan(o) ? std::nanf("") : (c > o ? c : o);
  if (op == "Min") return std::isnan(c) || std::isnan(o) ? std::nanf("") : (c < o ? c : o);
  if (op == "Erf") return std::erf(c);
  if (op == "Sqrt") return std::sqrt(c);
  if (op == "Exp") return std::exp(c);
  if (op == "Log") return std::log(c);
  if (op == "Neg") return -c;
  if (op == "Abs") return std::fabs(c);
  if (op == "Reciprocal") return 1.f / c;
  if (op == "Floor") return std::floor(c);
  if (op == "Ceil") return std::ceil(c);
  throw Error("PointwiseChain: no reference for step '" + op + "'");
}

// The reference: plain scalar code, one output element at a time, sharing nothing with the
// tactics (no chunks, no SIMD activations), so that they are checked against something else.
void refChain(const LayerDesc& l, const KernelIO& io) {
  const PointwiseProgram p = compilePointwise(*l.attrs, l.inputs.size());
  const TensorView& x = io.in[0];
  const TensorView& y = io.out[0];
  const size_t rank = y.dims.size();
  std::vector<std::vector<int64_t>> strides(io.in.size());
  for (size_t k = 1; k < io.in.size(); ++k) strides[k] = broadcastStrides(io.in[k].dims, y.dims);
  std::vector<int64_t> idx(rank);
  for (int64_t i = 0; i < y.count; ++i) {
    int64_t rem = i;
    for (size_t d = rank; d-- > 0;) {
      idx[d] = rem % y.dims[d];
      rem /= y.dims[d];
    }
    float v = x.as<float>()[i];
    for (const PointwiseStep& s : p.steps) {
      float o = 0.f;
      if (s.operand >= 0) {
        int64_t off = 0;
        for (size_t d = 0; d < rank; ++d) off += idx[d] * strides[s.operand][d];
        o = io.in[s.operand].as<float>()[off];
      }
      v = referenceStep(s, v, o);
    }
    y.as<float>()[i] = v;
  }
}

}  // namespace

void registerFusedOps(OpRegistry& r) {
  OpDef d;
  d.name = "PointwiseChain";
  d.infer = inferChain;
  d.ref = refChain;
  d.onnx = false;
  r.add(d);
}

}  // namespace kiln
