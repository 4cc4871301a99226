// Op definitions (shape inference + naive reference kernels + ONNX normalization): matmul family.
// MatMul (numpy batching, 1-D operands; fused form: 3rd input = bias over the last dim, plus
// kiln_activation, and a 4th input of the output's shape that multiplies the activated result, a
// gated linear unit's gate: SwiGLU's silu(x W_gate) * up), Gemm (+ kiln_activation), Einsum (general equations), MatMulInteger.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kiln/network.h"
#include "ops/activation.h"
#include "ops/fused_attrs.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

// ---------------------------------------------------------------------------------------------
// Shared helpers

//! Accumulator type of the reference kernels: double for floats, wrapping 64-bit for integers
//! (integer overflow wraps like the narrower type would, without undefined behaviour).
template <typename T>
using AccOf = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;

template <typename T>
T fromAcc(AccOf<T> v) {
  return static_cast<T>(v);
}

//! The types the reference kernels compute (float16/bfloat16 run as float32: the builder casts).
constexpr uint32_t kMatMulRefTypes = kRefFloatTypes | typeBit(DataType::kINT32) | typeBit(DataType::kINT64) |
                                     typeBit(DataType::kUINT32) | typeBit(DataType::kUINT64);

bool isMatMulType(DataType t) { return inTypeSet(kMatMulRefTypes | kFloatTypes, t); }

//! Checks the fused activation attributes: a known name, and only on float outputs.
void checkFusedActivation(const LayerDesc& l, DataType t) {
  Activation act = fusedActivation(*l.attrs);
  if (act.kind != ActKind::kNone && !isFloat(t))
    opError(l, std::string("fused activation needs a float type, got ") + toString(t));
}

//! Applies the fused activation to a float/double buffer.
template <typename T>
void activateBuffer(const Activation& act, T* y, int64_t n) {
  if (act.kind == ActKind::kNone) return;
  if constexpr (std::is_floating_point_v<T>)
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>(act(static_cast<float>(y[i])));
}

//! Output batch index -> element offset of an operand whose batch dims broadcast to `batch`.
struct BatchIndexer {
  Dims batch;                    // output batch dims
  std::vector<int64_t> strides;  // operand batch strides in matrices (0 on broadcast dims)
  BatchIndexer(const Dims& operandBatch, const Dims& outBatch) : batch(outBatch) {
    strides = broadcastStrides(operandBatch, outBatch);
  }
  int64_t matrixIndex(int64_t flat) const {
    int64_t off = 0;
    for (size_t d = batch.size(); d-- > 0;) {
      off += (flat % batch[d]) * strides[d];
      flat /= batch[d];
    }
    return off;
  }
};

//! MatMul geometry: 1-D operands promoted (A: [K] -> [1,K], B: [K] -> [K,1]), batch broadcast.
struct MatMulGeometry {
  Dims aBatch, bBatch, batch;
  int64_t M = 0, N = 0, K = 0;
  Dims out;
};

MatMulGeometry matmulGeometry(const LayerDesc& l, const Dims& a, const Dims& b) {
  if (a.empty() || b.empty()) opError(l, "MatMul operands must have rank >= 1 (got " + toString(a) + " and " + toString(b) + ")");
  MatMulGeometry g;
  bool aVec = a.size() == 1, bVec = b.size() == 1;
  g.M = aVec ? 1 : a[a.size() - 2];
  int64_t ka = a.back();
  int64_t kb = bVec ? b[0] : b[b.size() - 2];
  g.N = bVec ? 1 : b.back();
  if (ka >= 0 && kb >= 0 && ka != kb)
    opError(l, "inner dimensions differ: A " + toString(a) + " and B " + toString(b));
  g.K = ka >= 0 ? ka : kb;
  g.aBatch.assign(a.begin(), a.end() - (aVec ? 1 : 2));
  g.bBatch.assign(b.begin(), b.end() - (bVec ? 1 : 2));
  g.batch = broadcastDims(l, g.aBatch, g.bBatch);
  g.out = g.batch;
  if (!aVec) g.out.push_back(g.M);
  if (!bVec) g.out.push_back(g.N);
  return g;
}

//! Checks that `bias` broadcasts to `out` without changing it (unidirectional broadcast).
void checkUnidirectional(const LayerDesc& l, const Dims& bias, const Dims& out, const char* what) {
  if (bias.size() > out.size()) opError(l, std::string(what) + " " + toString(bias) + " has more dims than the output " + toString(out));
  for (size_t i = 0; i < bias.size(); ++i) {
    int64_t b = bias[i], o = out[out.size() - bias.size() + i];
    if (b >= 0 && o >= 0 && b != 1 && b != o)
      opError(l, std::string(what) + " " + toString(bias) + " does not broadcast to the output " + toString(out));
  }
}

//! Adds a bias broadcast to the output's shape, then applies the activation (fused epilogue).
template <typename T>
void addBiasAndActivate(const TensorView* bias, const Activation& act, T* y, const Dims& outDims) {
  int64_t n = volume(outDims);
  if (bias && bias->data) {
    const T* b = bias->as<const T>();
    auto bs = broadcastStrides(bias->dims, outDims);
    auto os = rowMajorStrides(outDims);
    for (int64_t i = 0; i < n; ++i) {
      int64_t off = 0, rem = i;
      for (size_t d = 0; d < outDims.size(); ++d) {
        off += (rem / os[d]) * bs[d];
        rem %= os[d];
      }
      y[i] = static_cast<T>(y[i] + b[off]);
    }
  }
  activateBuffer(act, y, n);
}

// ---------------------------------------------------------------------------------------------
// MatMul (fused: optional 3rd input = bias; kiln_activation; optional 4th input = a multiplier of
// the output's shape: Y = act(A @ B + bias) * G)

void inferMatMul(LayerDesc& l) {
  requireInputs(l, 2, 4);
  DataType t = l.inputs[0].type;
  if (l.inputs[1].type != t) opError(l, std::string("A and B types differ: ") + toString(t) + " vs " + toString(l.inputs[1].type));
  if (!isMatMulType(t)) opError(l, std::string("unsupported data type ") + toString(t));
  MatMulGeometry g = matmulGeometry(l, l.inputs[0].dims, l.inputs[1].dims);
  if (l.present(2)) {
    if (l.inputs[2].type != t) opError(l, "fused bias type differs from A's type");
    checkUnidirectional(l, l.inputs[2].dims, g.out, "fused bias");
  }
  if (l.present(3)) {
    const Dims& m = l.inputs[3].dims;
    if (l.inputs[3].type != t) opError(l, "fused multiplier type differs from A's type");
    bool same = m.size() == g.out.size();
    for (size_t i = 0; same && i < m.size(); ++i) same = m[i] < 0 || g.out[i] < 0 || m[i] == g.out[i];
    if (!same) opError(l, "fused multiplier " + toString(m) + " does not have the output's shape " + toString(g.out));
  }
  checkFusedActivation(l, t);
  setOutput(l, 0, t, g.out);
}

template <typename T>
void matmulRefTyped(const LayerDesc& l, const KernelIO& io) {
  MatMulGeometry g = matmulGeometry(l, io.in[0].dims, io.in[1].dims);
  const T* A = io.in[0].as<const T>();
  const T* B = io.in[1].as<const T>();
  T* Y = io.out[0].as<T>();
  BatchIndexer ai(g.aBatch, g.batch), bi(g.bBatch, g.batch);
  int64_t batches = volume(g.batch);
  for (int64_t bt = 0; bt < batches; ++bt) {
    const T* a = A + ai.matrixIndex(bt) * g.M * g.K;
    const T* b = B + bi.matrixIndex(bt) * g.K * g.N;
    T* y = Y + bt * g.M * g.N;
    for (int64_t i = 0; i < g.M; ++i)
      for (int64_t j = 0; j < g.N; ++j) {
        AccOf<T> acc = 0;
        for (int64_t k = 0; k < g.K; ++k)
          acc += static_cast<AccOf<T>>(a[i * g.K + k]) * static_cast<AccOf<T>>(b[k * g.N + j]);
        y[i * g.N + j] = fromAcc<T>(acc);
      }
  }
  const TensorView* bias = io.in.size() > 2 ? &io.in[2] : nullptr;
  addBiasAndActivate(bias, fusedActivation(*l.attrs), Y, io.out[0].dims);
  if (io.in.size() > 3 && io.in[3].data) {
    if (io.in[3].dims != io.out[0].dims) opError(l, "fused multiplier " + toString(io.in[3].dims) + " is not of the output's shape " + toString(io.out[0].dims));
    const T* m = io.in[3].as<const T>();
    const int64_t n = volume(io.out[0].dims);
    for (int64_t i = 0; i < n; ++i) Y[i] = static_cast<T>(static_cast<AccOf<T>>(Y[i]) * static_cast<AccOf<T>>(m[i]));
  }
}

void matmulRef(const LayerDesc& l, const KernelIO& io) {
  dispatchType<kMatMulRefTypes>(io.in[0].type, [&](auto tag) { matmulRefTyped<decltype(tag)>(l, io); }, [&] {
    opError(l, std::string("no reference kernel for type ") + toString(io.in[0].type));
  });
}

// ---------------------------------------------------------------------------------------------
// Gemm: Y = alpha * op(A) * op(B) + beta * C (+ kiln_activation)

struct GemmGeometry {
  int64_t M, N, K;
  bool transA, transB;
};

GemmGeometry gemmGeometry(const LayerDesc& l, const Dims& a, const Dims& b) {
  if (a.size() != 2 || b.size() != 2) opError(l, "A and B must be 2-D, got " + toString(a) + " and " + toString(b));
  int64_t ta = l.attrs->getInt("transA", 0), tb = l.attrs->getInt("transB", 0);
  if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1)) opError(l, "transA/transB must be 0 or 1");
  GemmGeometry g{ta ? a[1] : a[0], tb ? b[0] : b[1], ta ? a[0] : a[1], ta == 1, tb == 1};
  int64_t kb = tb ? b[1] : b[0];
  if (g.K >= 0 && kb >= 0 && g.K != kb)
    opError(l, "inner dimensions differ: op(A) is " + std::to_string(g.M) + "x" + std::to_string(g.K) + ", op(B) is " +
                   std::to_string(kb) + "x" + std::to_string(g.N));
  if (g.K < 0) g.K = kb;
  return g;
}

void inferGemm(LayerDesc& l) {
  requireInputs(l, 2, 3);
  DataType t = l.inputs[0].type;
  if (l.inputs[1].type != t) opError(l, "A and B types differ");
  if (!isMatMulType(t)) opError(l, std::string("unsupported data type ") + toString(t));
  GemmGeometry g = gemmGeometry(l, l.inputs[0].dims, l.inputs[1].dims);
  if (l.present(2)) {
    if (l.inputs[2].type != t) opError(l, "C's type differs from A's type");
    if (l.inputs[2].dims.size() > 2) opError(l, "C must have rank <= 2, got " + toString(l.inputs[2].dims));
    checkUnidirectional(l, l.inputs[2].dims, {g.M, g.N}, "C");
  }
  checkFusedActivation(l, t);
  setOutput(l, 0, t, {g.M, g.N});
}

template <typename T>
void gemmRefTyped(const LayerDesc& l, const KernelIO& io) {
  GemmGeometry g = gemmGeometry(l, io.in[0].dims, io.in[1].dims);
  double alpha = l.attrs->getFloat("alpha", 1.f), beta = l.attrs->getFloat("beta", 1.f);
  const T* A = io.in[0].as<const T>();
  const T* B = io.in[1].as<const T>();
  T* Y = io.out[0].as<T>();
  bool hasC = io.in.size() > 2 && io.in[2].data;
  std::vector<int64_t> cs = hasC ? broadcastStrides(io.in[2].dims, {g.M, g.N}) : std::vector<int64_t>{0, 0};
  for (int64_t i = 0; i < g.M; ++i)
    for (int64_t j = 0; j < g.N; ++j) {
      AccOf<T> acc = 0;
      for (int64_t k = 0; k < g.K; ++k) {
        T a = g.transA ? A[k * g.M + i] : A[i * g.K + k];
        T b = g.transB ? B[j * g.K + k] : B[k * g.N + j];
        acc += static_cast<AccOf<T>>(a) * static_cast<AccOf<T>>(b);
      }
      double v;
      if constexpr (std::is_floating_point_v<T>) v = alpha * acc;
      else v = alpha * static_cast<double>(static_cast<T>(acc));
      if (hasC) v += beta * static_cast<double>(io.in[2].as<const T>()[i * cs[0] + j * cs[1]]);
      Y[i * g.N + j] = static_cast<T>(v);
    }
  activateBuffer(fusedActivation(*l.attrs), Y, g.M * g.N);
}

void gemmRef(const LayerDesc& l, const KernelIO& io) {
  dispatchType<kMatMulRefTypes>(io.in[0].type, [&](auto tag) { gemmRefTyped<decltype(tag)>(l, io); }, [&] {
    opError(l, std::string("no reference kernel for type ") + toString(io.in[0].type));
  });
}

//! Gemm-1/6 had a `broadcast` attribute; since opset 7 broadcasting of C is always on.
void normalizeGemm(Network&, Layer& layer, int) { layer.attrs.erase("broadcast"); }

// ---------------------------------------------------------------------------------------------
// Einsum

//! A parsed equation. Labels: letters 'A'..'Z' -> 0..25, 'a'..'z' -> 26..51 (ASCII order, as
//! numpy orders implicit outputs); ellipsis dim e (of the broadcast ellipsis) -> 52 + e.
struct EinsumSpec {
  std::vector<std::vector<int>> inLabels;  // per input, per dim
  std::vector<int> outLabels;
};

constexpr int kEllipsisLabel = 52;

int letterLabel(char c) { return c >= 'a' ? 26 + (c - 'a') : c - 'A'; }

struct EinsumTerm {
  std::vector<int> letters;  // labels in order, -1 marking the ellipsis position
  bool hasEllipsis = false;
};

EinsumTerm parseTerm(const LayerDesc& l, const std::string& s) {
  EinsumTerm t;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      t.letters.push_back(letterLabel(c));
    } else if (c == '.') {
      if (s.compare(i, 3, "...") != 0 || t.hasEllipsis) opError(l, "malformed ellipsis in equation term '" + s + "'");
      t.hasEllipsis = true;
      t.letters.push_back(-1);
      i += 2;
    } else {
      opError(l, std::string("invalid character '") + c + "' in equation");
    }
  }
  return t;
}

//! Parses the equation against the input ranks. Throws on any inconsistency.
EinsumSpec parseEinsum(const LayerDesc& l, const std::vector<size_t>& ranks) {
  std::string eq;
  for (char c : l.attrs->getString("equation", "")) if (c != ' ') eq += c;
  if (eq.empty()) opError(l, "attribute 'equation' is missing or empty");
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != ranks.size())
    opError(l, "equation has " + std::to_string(terms.size()) + " input terms but the op has " + std::to_string(ranks.size()) + " inputs");
  EinsumSpec spec;
  int ellipsisRank = 0;
  std::vector<EinsumTerm> parsed;
  for (size_t i = 0; i < terms.size(); ++i) {
    EinsumTerm t = parseTerm(l, terms[i]);
    int letters = static_cast<int>(t.letters.size()) - (t.hasEllipsis ? 1 : 0);
    int rank = static_cast<int>(ranks[i]);
    if (t.hasEllipsis ? letters > rank : letters != rank)
      opError(l, "equation term '" + terms[i] + "' does not match input " + std::to_string(i) + " of rank " + std::to_string(rank));
    if (t.hasEllipsis) ellipsisRank = std::max(ellipsisRank, rank - letters);
    parsed.push_back(t);
  }
  int count[kEllipsisLabel] = {};
  for (size_t i = 0; i < parsed.size(); ++i) {
    std::vector<int> labels;
    int letters = static_cast<int>(parsed[i].letters.size()) - (parsed[i].hasEllipsis ? 1 : 0);
    int own = static_cast<int>(ranks[i]) - letters;  // this input's ellipsis dims, right-aligned
    for (int lab : parsed[i].letters) {
      if (lab >= 0) { labels.push_back(lab); ++count[lab]; continue; }
      for (int e = 0; e < own; ++e) labels.push_back(kEllipsisLabel + ellipsisRank - own + e);
    }
    spec.inLabels.push_back(labels);
  }
  if (arrow == std::string::npos) {  // implicit: ellipsis dims, then letters used once, sorted
    for (int e = 0; e < ellipsisRank; ++e) spec.outLabels.push_back(kEllipsisLabel + e);
    for (int lab = 0; lab < kEllipsisLabel; ++lab)
      if (count[lab] == 1) spec.outLabels.push_back(lab);
    return spec;
  }
  EinsumTerm out = parseTerm(l, eq.substr(arrow + 2));
  bool seen[kEllipsisLabel] = {};
  for (int lab : out.letters) {
    if (lab < 0) {
      for (int e = 0; e < ellipsisRank; ++e) spec.outLabels.push_back(kEllipsisLabel + e);
      continue;
    }
    if (count[lab] == 0) opError(l, "output label does not appear in any input term");
    if (seen[lab]) opError(l, "output label repeated in the equation's output");
    seen[lab] = true;
    spec.outLabels.push_back(lab);
  }
  if (!out.hasEllipsis && ellipsisRank > 0)
    opError(l, "the equation's output needs '...' since the inputs have broadcast (ellipsis) dims");
  return spec;
}

std::vector<size_t> inputRanks(const LayerDesc& l, const std::vector<Dims>& dims) {
  std::vector<size_t> r;
  for (auto& d : dims) r.push_back(d.size());
  return r;
}

//! Size of every label (index: label id), with numpy broadcasting of size-1 dims. -1 = unknown.
std::vector<int64_t> labelSizes(const LayerDesc& l, const EinsumSpec& s, const std::vector<Dims>& dims) {
  size_t labels = kEllipsisLabel;
  for (auto& in : s.inLabels)
    for (int lab : in) labels = std::max(labels, static_cast<size_t>(lab) + 1);
  std::vector<int64_t> size(labels, 1);
  std::vector<bool> unknown(size.size(), false);
  for (size_t i = 0; i < dims.size(); ++i)
    for (size_t d = 0; d < dims[i].size(); ++d) {
      int lab = s.inLabels[i][d];
      int64_t v = dims[i][d];
      if (v < 0) { unknown[lab] = true; continue; }
      if (v == 1) continue;
      if (size[lab] != 1 && size[lab] != v)
        opError(l, "an equation label has inconsistent sizes " + std::to_string(size[lab]) + " and " + std::to_string(v));
      size[lab] = v;
    }
  for (size_t lab = 0; lab < size.size(); ++lab)
    if (unknown[lab] && size[lab] == 1) size[lab] = -1;
  return size;
}

std::vector<Dims> inputDims(const LayerDesc& l) {
  std::vector<Dims> d;
  for (auto& t : l.inputs) d.push_back(t.dims);
  return d;
}

}  // namespace

EinsumLoops planEinsumLoops(const LayerDesc& l, const std::vector<Dims>& dims) {
  EinsumSpec s = parseEinsum(l, inputRanks(l, dims));
  auto size = labelSizes(l, s, dims);
  EinsumLoops p;
  // Loop labels: output labels, then the summed ones.
  std::vector<int> loop = s.outLabels;
  std::vector<bool> inLoop(size.size(), false);
  for (int lab : loop) inLoop[lab] = true;
  for (auto& labels : s.inLabels)
    for (int lab : labels)
      if (!inLoop[lab]) { inLoop[lab] = true; loop.push_back(lab); }
  for (int lab : loop) p.loopDims.push_back(size[lab]);
  volume(p.loopDims);  // throws if the iteration space overflows
  p.outputLoops = s.outLabels.size();
  // Stride of each loop label in each input: repeated labels (diagonals) add up; size-1 dims broadcast.
  p.strides.assign(dims.size(), std::vector<int64_t>(loop.size(), 0));
  for (size_t i = 0; i < dims.size(); ++i) {
    auto rs = rowMajorStrides(dims[i]);
    for (size_t d = 0; d < dims[i].size(); ++d) {
      if (dims[i][d] == 1) continue;
      size_t pos = std::find(loop.begin(), loop.end(), s.inLabels[i][d]) - loop.begin();
      p.strides[i][pos] += rs[d];
    }
  }
  return p;
}

namespace {

void inferEinsum(LayerDesc& l) {
  if (l.inputs.empty()) opError(l, "expects at least one input");
  for (size_t i = 0; i < l.inputs.size(); ++i) {
    if (!l.present(i)) opError(l, "input " + std::to_string(i) + " is missing");
    if (l.inputs[i].type != l.inputs[0].type) opError(l, "inputs have different types");
  }
  DataType t = l.inputs[0].type;
  if (t == DataType::kBOOL) opError(l, "bool inputs are not supported");
  auto dims = inputDims(l);
  EinsumSpec s = parseEinsum(l, inputRanks(l, dims));
  auto size = labelSizes(l, s, dims);
  Dims out;
  for (int lab : s.outLabels) out.push_back(size[lab]);
  setOutput(l, 0, t, out);
}

template <typename T>
void einsumRefTyped(const LayerDesc& l, const KernelIO& io) {
  std::vector<Dims> dims;
  for (auto& v : io.in) dims.push_back(v.dims);
  const EinsumLoops p = planEinsumLoops(l, dims);
  const size_t nOut = p.outputLoops, nIn = io.in.size(), nLoop = p.loopDims.size();
  Dims outDims(p.loopDims.begin(), p.loopDims.begin() + nOut), sumDims(p.loopDims.begin() + nOut, p.loopDims.end());
  int64_t outCount = volume(outDims), sumCount = volume(sumDims);
  T* Y = io.out[0].as<T>();
  std::vector<int64_t> idx(nLoop, 0);
  for (int64_t o = 0; o < outCount; ++o) {
    int64_t rem = o;
    for (size_t d = nOut; d-- > 0;) { idx[d] = rem % p.loopDims[d]; rem /= p.loopDims[d]; }
    AccOf<T> acc = 0;
    for (int64_t sIdx = 0; sIdx < sumCount; ++sIdx) {
      int64_t r = sIdx;
      for (size_t d = nLoop; d-- > nOut;) { idx[d] = r % p.loopDims[d]; r /= p.loopDims[d]; }
      AccOf<T> prod = 1;
      for (size_t i = 0; i < nIn; ++i) {
        int64_t off = 0;
        for (size_t d = 0; d < nLoop; ++d) off += idx[d] * p.strides[i][d];
        prod *= static_cast<AccOf<T>>(io.in[i].as<const T>()[off]);
      }
      acc += prod;
    }
    Y[o] = fromAcc<T>(acc);
  }
}

void einsumRef(const LayerDesc& l, const KernelIO& io) {
  dispatchNumeric(io.in[0].type, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) opError(l, "bool inputs are not supported");
    else einsumRefTyped<T>(l, io);
  });
}

// ---------------------------------------------------------------------------------------------
// MatMulInteger: int32 Y = (A - a_zero_point) @ (B - b_zero_point), int8/uint8 inputs.

bool isByteInt(DataType t) { return t == DataType::kINT8 || t == DataType::kUINT8; }

void inferMatMulInteger(LayerDesc& l) {
  requireInputs(l, 2, 4);
  if (!isByteInt(l.inputs[0].type) || !isByteInt(l.inputs[1].type)) opError(l, "A and B must be int8 or uint8");
  MatMulGeometry g = matmulGeometry(l, l.inputs[0].dims, l.inputs[1].dims);
  for (size_t z = 2; z < 4; ++z) {
    if (!l.present(z)) continue;
    if (l.inputs[z].type != l.inputs[z - 2].type) opError(l, "a zero point's type differs from its operand's type");
    const Dims& zd = l.inputs[z].dims;
    int64_t want = z == 2 ? g.M : g.N;
    bool ok = zd.empty() || (zd.size() == 1 && (zd[0] == 1 || zd[0] < 0 || want < 0 || zd[0] == want));
    if (!ok) opError(l, "zero point must be a scalar or a 1-D tensor of " + std::string(z == 2 ? "M" : "N") + " values, got " + toString(zd));
  }
  setOutput(l, 0, DataType::kINT32, g.out);
}

int32_t byteAt(const TensorView& v, int64_t i) {
  return v.type == DataType::kINT8 ? static_cast<int32_t>(v.as<const int8_t>()[i]) : static_cast<int32_t>(v.as<const uint8_t>()[i]);
}

void matmulIntegerRef(const LayerDesc& l, const KernelIO& io) {
  MatMulGeometry g = matmulGeometry(l, io.in[0].dims, io.in[1].dims);
  auto zeroPoint = [&](size_t z, int64_t i) -> int32_t {
    if (io.in.size() <= z || !io.in[z].data) return 0;
    return byteAt(io.in[z], io.in[z].count == 1 ? 0 : i);
  };
  int32_t* Y = io.out[0].as<int32_t>();
  BatchIndexer ai(g.aBatch, g.batch), bi(g.bBatch, g.batch);
  int64_t batches = volume(g.batch);
  for (int64_t bt = 0; bt < batches; ++bt) {
    int64_t aOff = ai.matrixIndex(bt) * g.M * g.K, bOff = bi.matrixIndex(bt) * g.K * g.N;
    for (int64_t i = 0; i < g.M; ++i)
      for (int64_t j = 0; j < g.N; ++j) {
        int64_t acc = 0;
        for (int64_t k = 0; k < g.K; ++k)
          acc += int64_t(byteAt(io.in[0], aOff + i * g.K + k) - zeroPoint(2, i)) *
                 (byteAt(io.in[1], bOff + k * g.N + j) - zeroPoint(3, j));
        Y[bt * g.M * g.N + i * g.N + j] = static_cast<int32_t>(acc);
      }
  }
}

}  // namespace

void registerMatMulOps(OpRegistry& r) {
  OpDef matmul;
  matmul.name = "MatMul";
  matmul.infer = inferMatMul;
  matmul.ref = matmulRef;
  r.add(matmul);

  OpDef gemm;
  gemm.name = "Gemm";
  gemm.infer = inferGemm;
  gemm.ref = gemmRef;
  gemm.normalize = normalizeGemm;
  r.add(gemm);

  OpDef einsum;
  einsum.name = "Einsum";
  einsum.infer = inferEinsum;
  einsum.ref = einsumRef;
  einsum.minOpset = 12;
  r.add(einsum);

  OpDef mmi;
  mmi.name = "MatMulInteger";
  mmi.infer = inferMatMulInteger;
  mmi.ref = matmulIntegerRef;
  mmi.minOpset = 10;
  r.add(mmi);
}

}  // namespace kiln
