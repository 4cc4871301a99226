// Op definitions (shape inference + naive reference kernels + ONNX normalization): recurrent family.
// RNN, GRU and LSTM with every attribute of the latest opset: direction (forward / reverse /
// bidirectional), activations with activation_alpha / activation_beta, clip, input_forget (LSTM),
// linear_before_reset (GRU), layout 0/1, the optional inputs B, sequence_lens, initial_h,
// initial_c and P, and the optional outputs Y, Y_h, Y_c.
//
// sequence_lens: batch entry b runs only its first L_b steps (a reverse direction walks them from
// L_b - 1 down to 0); Y is zero past L_b, and Y_h / Y_c are zero when L_b == 0 (as ONNX Runtime).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "ops/op_registry.h"
#include "ops/recurrent.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

Cell cellOf(const LayerDesc& l) {
  if (l.op == "RNN") return Cell::kRnn;
  if (l.op == "GRU") return Cell::kGru;
  return Cell::kLstm;
}

//! Gates per cell (rows of W / R per direction, in units of hidden_size).
int64_t gateCount(Cell c) { return c == Cell::kRnn ? 1 : (c == Cell::kGru ? 3 : 4); }
//! Activation functions per direction: f (RNN); f, g (GRU); f, g, h (LSTM).
size_t activationCount(Cell c) { return c == Cell::kRnn ? 1 : (c == Cell::kGru ? 2 : 3); }
std::vector<std::string> defaultActivations(Cell c) {
  if (c == Cell::kRnn) return {"Tanh"};
  if (c == Cell::kGru) return {"Sigmoid", "Tanh"};
  return {"Sigmoid", "Tanh", "Tanh"};
}

// ---------------------------------------------------------------------------------------------
// Activation functions (the list the ONNX recurrent ops accept)

struct RecActDef {
  const char* name;
  RecAct kind;
  bool usesAlpha, usesBeta;
  double alpha, beta;  // defaults, as the standalone ONNX ops
};

constexpr RecActDef kRecActs[] = {
    {"relu", RecAct::kRelu, false, false, 0, 0},
    {"tanh", RecAct::kTanh, false, false, 0, 0},
    {"sigmoid", RecAct::kSigmoid, false, false, 0, 0},
    {"affine", RecAct::kAffine, true, true, 1.0, 0.0},
    {"leakyrelu", RecAct::kLeakyRelu, true, false, 0.01, 0},
    {"thresholdedrelu", RecAct::kThresholdedRelu, true, false, 1.0, 0},
    {"scaledtanh", RecAct::kScaledTanh, true, true, 1.0, 1.0},
    {"hardsigmoid", RecAct::kHardSigmoid, true, true, 0.2, 0.5},
    {"elu", RecAct::kElu, true, false, 1.0, 0},
    {"softsign", RecAct::kSoftsign, false, false, 0, 0},
    {"softplus", RecAct::kSoftplus, false, false, 0, 0},
};

std::string lowercase(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

//! Resolves the `activations` list: alphas/betas are consumed in list order by the functions
//! that take them; a function without a value left uses its op's default.
std::vector<RecActivation> parseActivations(const LayerDesc& l, Cell cell, int64_t dirs) {
  std::vector<std::string> names = l.attrs->getStrings("activations");
  const size_t perDir = activationCount(cell);
  if (names.empty()) {
    for (int64_t d = 0; d < dirs; ++d)
      for (auto& n : defaultActivations(cell)) names.push_back(n);
  }
  if (names.size() != perDir * static_cast<size_t>(dirs))
    opError(l, "activations must list " + std::to_string(perDir * dirs) + " functions, got " + std::to_string(names.size()));
  std::vector<float> alphas = l.attrs->getFloats("activation_alpha");
  std::vector<float> betas = l.attrs->getFloats("activation_beta");
  size_t ai = 0, bi = 0;
  std::vector<RecActivation> acts;
  for (const auto& n : names) {
    const RecActDef* def = nullptr;
    for (const auto& d : kRecActs)
      if (lowercase(n) == d.name) def = &d;
    if (!def) throw UnsupportedError("layer '" + l.name + "' (" + l.op + "): unsupported activation function '" + n + "'");
    RecActivation a{def->kind, def->alpha, def->beta};
    if (def->usesAlpha && ai < alphas.size()) a.alpha = alphas[ai++];
    if (def->usesBeta && bi < betas.size()) a.beta = betas[bi++];
    acts.push_back(a);
  }
  if (ai < alphas.size() || bi < betas.size())
    opError(l, "activation_alpha/activation_beta hold more values than the activation functions use");
  return acts;
}

// ---------------------------------------------------------------------------------------------
// Attributes


// ---------------------------------------------------------------------------------------------
// Shape inference

void requireDims(const LayerDesc& l, size_t i, const Dims& expected, const char* what) {
  const Dims& d = l.inputs[i].dims;
  bool ok = d.size() == expected.size();
  for (size_t k = 0; ok && k < d.size(); ++k) ok = dimsAgree(d[k], expected[k]);
  if (!ok) opError(l, std::string(what) + " has shape " + toString(d) + ", expected " + toString(expected));
}

constexpr size_t kB = 3, kSeqLens = 4, kInitialH = 5, kInitialC = 6, kP = 7;

void inferRecurrent(LayerDesc& l) {
  const Cell cell = cellOf(l);
  requireInputs(l, 3, cell == Cell::kLstm ? 8 : 6);
  RecurrentConfig c = parseRecurrentConfig(l);
  for (size_t i = 0; i < l.inputs.size(); ++i)
    if (l.present(i) && isStatic(l.inputs[i].dims)) volume(l.inputs[i].dims);
  const DataType t = l.inputs[0].type;
  if (!isFloat(t)) opError(l, std::string("X must be a floating-point tensor, got ") + toString(t));
  for (size_t i : {size_t(1), size_t(2), kB, kInitialH, kInitialC, kP})
    if (l.present(i) && l.inputs[i].type != t)
      opError(l, "input " + std::to_string(i) + " has type " + toString(l.inputs[i].type) + ", X has " + toString(t));
  const Dims& x = l.inputs[0].dims;
  const Dims& w = l.inputs[1].dims;
  const Dims& r = l.inputs[2].dims;
  if (x.size() != 3) opError(l, "X must have rank 3, got " + toString(x));
  if (w.size() != 3 || r.size() != 3) opError(l, "W and R must have rank 3, got " + toString(w) + " and " + toString(r));
  int64_t hidden = l.attrs->getInt("hidden_size", -1);
  if (l.attrs->has("hidden_size") && hidden <= 0) opError(l, "hidden_size must be positive, got " + std::to_string(hidden));
  if (hidden < 0) hidden = r[2];
  if (hidden < 0 && w[1] >= 0) hidden = w[1] / c.gates;
  if (hidden >= 0) volume({c.gates, hidden, 2});  // rejects absurd sizes before they are multiplied
  const int64_t seq = c.layout == 0 ? x[0] : x[1];
  const int64_t batch = c.layout == 0 ? x[1] : x[0];
  const int64_t gh = hidden < 0 ? -1 : c.gates * hidden;
  requireDims(l, 1, {c.dirs, gh, x[2]}, "W");
  requireDims(l, 2, {c.dirs, gh, hidden}, "R");
  if (l.present(kB)) requireDims(l, kB, {c.dirs, gh < 0 ? -1 : 2 * gh}, "B");
  if (l.present(kSeqLens)) {
    DataType st = l.inputs[kSeqLens].type;
    if (st != DataType::kINT32 && st != DataType::kINT64) opError(l, "sequence_lens must be int32 or int64");
    requireDims(l, kSeqLens, {batch}, "sequence_lens");
  }
  const Dims stateDims = c.layout == 0 ? Dims{c.dirs, batch, hidden} : Dims{batch, c.dirs, hidden};
  if (l.present(kInitialH)) requireDims(l, kInitialH, stateDims, "initial_h");
  if (cell == Cell::kLstm) {
    if (l.present(kInitialC)) requireDims(l, kInitialC, stateDims, "initial_c");
    if (l.present(kP)) requireDims(l, kP, {c.dirs, hidden < 0 ? -1 : 3 * hidden}, "P");
  }
  const size_t maxOut = cell == Cell::kLstm ? 3 : 2;
  size_t nOut = std::max<size_t>(l.outputs.size(), 1);
  if (nOut > maxOut) opError(l, "has at most " + std::to_string(maxOut) + " outputs, the layer has " + std::to_string(nOut));
  const Dims yDims = c.layout == 0 ? Dims{seq, c.dirs, batch, hidden} : Dims{batch, seq, c.dirs, hidden};
  if (isStatic(yDims)) volume(yDims);
  setOutput(l, 0, t, yDims);
  for (size_t o = 1; o < nOut; ++o) setOutput(l, o, t, stateDims);
}

// ---------------------------------------------------------------------------------------------
// Reference kernel

//! Concrete sizes and the element offsets of the layout-dependent tensors.
struct Geometry {
  int64_t seq, batch, input, hidden, dirs, layout;
  int64_t x(int64_t t, int64_t b) const { return (layout == 0 ? t * batch + b : b * seq + t) * input; }
  int64_t y(int64_t t, int64_t d, int64_t b) const {
    return (layout == 0 ? (t * dirs + d) * batch + b : (b * seq + t) * dirs + d) * hidden;
  }
  int64_t state(int64_t d, int64_t b) const { return (layout == 0 ? d * batch + b : b * dirs + d) * hidden; }
};

std::vector<int64_t> sequenceLengths(const LayerDesc& l, const KernelIO& io, const Geometry& g) {
  std::vector<int64_t> lens(static_cast<size_t>(g.batch), g.seq);
  if (io.in.size() <= kSeqLens || !io.in[kSeqLens].data) return lens;
  const TensorView& v = io.in[kSeqLens];
  for (int64_t b = 0; b < g.batch; ++b) {
    int64_t n = v.type == DataType::kINT32 ? v.as<int32_t>()[b] : v.as<int64_t>()[b];
    if (n < 0 || n > g.seq)
      opError(l, "sequence_lens[" + std::to_string(b) + "] = " + std::to_string(n) + " is outside [0, " + std::to_string(g.seq) + "]");
    lens[static_cast<size_t>(b)] = n;
  }
  return lens;
}

//! One direction's parameters, as pointers into the inputs (null when omitted).
template <typename T>
struct DirectionParams {
  const T* w = nullptr;   // [gates*hidden, input]
  const T* r = nullptr;   // [gates*hidden, hidden]
  const T* wb = nullptr;  // [gates*hidden]
  const T* rb = nullptr;  // [gates*hidden]
  const T* p = nullptr;   // [3*hidden]: peepholes i, o, f
  const RecActivation* act = nullptr;
};

//! Scratch buffers for one sequence, allocated once per call.
struct CellScratch {
  std::vector<double> h, c, pre, rh, hNew;
};

class RecurrentRunner {
 public:
  RecurrentRunner(const RecurrentConfig& cfg, const Geometry& g) : cfg_(cfg), g_(g) {}

  //! Advances the state (s.h, s.c) by one step on input row x.
  template <typename T>
  void step(const DirectionParams<T>& p, const T* x, CellScratch& s) const {
    const int64_t H = g_.hidden, I = g_.input, GH = cfg_.gates * H;
    // pre = x W^T + Wb (+ h R^T + Rb, except the GRU candidate gate which needs r first)
    for (int64_t row = 0; row < GH; ++row) {
      double acc = p.wb ? static_cast<double>(p.wb[row]) : 0.0;
      const T* wr = p.w + row * I;
      for (int64_t i = 0; i < I; ++i) acc += static_cast<double>(wr[i]) * static_cast<double>(x[i]);
      double rec = p.rb ? static_cast<double>(p.rb[row]) : 0.0;
      const T* rr = p.r + row * H;
      for (int64_t k = 0; k < H; ++k) rec += static_cast<double>(rr[k]) * s.h[k];
      s.pre[row] = acc;
      s.rh[row] = rec;
    }
    switch (cfg_.cell) {
      case Cell::kRnn: rnnStep(p, s); break;
      case Cell::kGru: gruStep(p, s); break;
      case Cell::kLstm: lstmStep(p, s); break;
    }
  }

 private:
  double clip(double v) const { return cfg_.clip > 0 ? std::clamp(v, -cfg_.clip, cfg_.clip) : v; }

  template <typename T>
  void rnnStep(const DirectionParams<T>& p, CellScratch& s) const {
    for (int64_t j = 0; j < g_.hidden; ++j) s.h[j] = p.act[0](clip(s.pre[j] + s.rh[j]));
  }

  // Gates z, r, h. linear_before_reset applies r after the recurrent product of the candidate.
  template <typename T>
  void gruStep(const DirectionParams<T>& p, CellScratch& s) const {
    const int64_t H = g_.hidden;
    const RecActivation &f = p.act[0], &gAct = p.act[1];
    std::vector<double>& z = s.c;  // LSTM's cell buffer is free here
    for (int64_t j = 0; j < H; ++j) z[j] = f(clip(s.pre[j] + s.rh[j]));
    double* rGate = s.pre.data() + H;  // r overwrites its own pre-activation
    for (int64_t j = 0; j < H; ++j) rGate[j] = f(clip(rGate[j] + s.rh[H + j]));
    for (int64_t j = 0; j < H; ++j) {
      double cand;
      if (cfg_.linearBeforeReset) {
        cand = s.pre[2 * H + j] + rGate[j] * s.rh[2 * H + j];
      } else {
        double acc = p.rb ? static_cast<double>(p.rb[2 * H + j]) : 0.0;
        const T* rr = p.r + (2 * H + j) * H;
        for (int64_t k = 0; k < H; ++k) acc += static_cast<double>(rr[k]) * (rGate[k] * s.h[k]);
        cand = s.pre[2 * H + j] + acc;
      }
      double hh = gAct(clip(cand));
      s.hNew[j] = (1.0 - z[j]) * hh + z[j] * s.h[j];
    }
    std::swap(s.h, s.hNew);
  }

  // Gates i, o, f, c; peepholes P = [Pi, Po, Pf].
  template <typename T>
  void lstmStep(const DirectionParams<T>& p, CellScratch& s) const {
    const int64_t H = g_.hidden;
    const RecActivation &f = p.act[0], &gAct = p.act[1], &hAct = p.act[2];
    auto peep = [&](int64_t k, int64_t j) { return p.p ? static_cast<double>(p.p[k * H + j]) : 0.0; };
    for (int64_t j = 0; j < H; ++j) {
      double cPrev = s.c[j];
      double i = f(clip(s.pre[j] + s.rh[j] + peep(0, j) * cPrev));
      double fg = cfg_.inputForget ? 1.0 - i : f(clip(s.pre[2 * H + j] + s.rh[2 * H + j] + peep(2, j) * cPrev));
      double cand = gAct(clip(s.pre[3 * H + j] + s.rh[3 * H + j]));
      double cNew = fg * cPrev + i * cand;
      double o = f(clip(s.pre[H + j] + s.rh[H + j] + peep(1, j) * cNew));
      s.c[j] = cNew;
      s.h[j] = o * hAct(cNew);
    }
  }

  const RecurrentConfig& cfg_;
  const Geometry& g_;
};

template <typename T>
const T* optionalInput(const KernelIO& io, size_t i) {
  return io.in.size() > i && io.in[i].data ? io.in[i].as<T>() : nullptr;
}
template <typename T>
T* optionalOutput(const KernelIO& io, size_t i) {
  return io.out.size() > i && io.out[i].data ? io.out[i].as<T>() : nullptr;
}

template <typename T>
void runRecurrent(const LayerDesc& l, const KernelIO& io) {
  const RecurrentConfig cfg = parseRecurrentConfig(l);
  const Dims& xd = io.in[0].dims;
  Geometry g{cfg.layout == 0 ? xd[0] : xd[1], cfg.layout == 0 ? xd[1] : xd[0], xd[2], io.in[2].dims[2], cfg.dirs, cfg.layout};
  const std::vector<int64_t> lens = sequenceLengths(l, io, g);
  const T* x = io.in[0].as<T>();
  const T* b = optionalInput<T>(io, kB);
  const T* h0 = optionalInput<T>(io, kInitialH);
  const T* c0 = cfg.cell == Cell::kLstm ? optionalInput<T>(io, kInitialC) : nullptr;
  const T* peep = cfg.cell == Cell::kLstm ? optionalInput<T>(io, kP) : nullptr;
  T* y = optionalOutput<T>(io, 0);
  T* yh = optionalOutput<T>(io, 1);
  T* yc = cfg.cell == Cell::kLstm ? optionalOutput<T>(io, 2) : nullptr;
  if (y) std::fill(y, y + io.out[0].count, T(0));

  const int64_t H = g.hidden, GH = cfg.gates * H;
  const size_t nActs = activationCount(cfg.cell);
  RecurrentRunner runner(cfg, g);
  CellScratch s;
  s.h.resize(H); s.c.resize(H); s.hNew.resize(H);
  s.pre.resize(GH); s.rh.resize(GH);
  for (int64_t d = 0; d < g.dirs; ++d) {
    const bool backward = cfg.reverse || d == 1;
    DirectionParams<T> p;
    p.w = io.in[1].as<T>() + d * GH * g.input;
    p.r = io.in[2].as<T>() + d * GH * H;
    if (b) { p.wb = b + d * 2 * GH; p.rb = p.wb + GH; }
    if (peep) p.p = peep + d * 3 * H;
    p.act = cfg.acts.data() + d * nActs;
    for (int64_t bi = 0; bi < g.batch; ++bi) {
      const int64_t len = lens[static_cast<size_t>(bi)];
      const int64_t so = g.state(d, bi);
      for (int64_t j = 0; j < H; ++j) {
        s.h[j] = h0 ? static_cast<double>(h0[so + j]) : 0.0;
        s.c[j] = c0 ? static_cast<double>(c0[so + j]) : 0.0;
      }
      for (int64_t k = 0; k < len; ++k) {
        const int64_t t = backward ? len - 1 - k : k;
        runner.step(p, x + g.x(t, bi), s);
        if (y)
          for (int64_t j = 0; j < H; ++j) y[g.y(t, d, bi) + j] = static_cast<T>(s.h[j]);
      }
      for (int64_t j = 0; j < H; ++j) {
        if (yh) yh[so + j] = len > 0 ? static_cast<T>(s.h[j]) : T(0);
        if (yc) yc[so + j] = len > 0 ? static_cast<T>(s.c[j]) : T(0);
      }
    }
  }
}

void refRecurrent(const LayerDesc& l, const KernelIO& io) {
  const DataType t = io.in[0].type;
  dispatchType<kRefFloatTypes>(t, [&](auto tag) { runRecurrent<decltype(tag)>(l, io); }, [&] {
    throw UnsupportedError("layer '" + l.name + "' (" + l.op + "): no CPU kernel for data type " + toString(t));
  });
}

}  // namespace

double RecActivation::operator()(double x) const {
    switch (kind) {
      case RecAct::kRelu: return x > 0 ? x : 0;
      case RecAct::kTanh: return std::tanh(x);
      case RecAct::kSigmoid: return 1.0 / (1.0 + std::exp(-x));
      case RecAct::kAffine: return alpha * x + beta;
      case RecAct::kLeakyRelu: return x >= 0 ? x : alpha * x;
      case RecAct::kThresholdedRelu: return x > alpha ? x : 0;
      case RecAct::kScaledTanh: return alpha * std::tanh(beta * x);
      case RecAct::kHardSigmoid: return std::clamp(alpha * x + beta, 0.0, 1.0);
      case RecAct::kElu: return x >= 0 ? x : alpha * (std::exp(x) - 1.0);
      case RecAct::kSoftsign: return x / (1.0 + std::fabs(x));
      case RecAct::kSoftplus: return x > 30 ? x : std::log1p(std::exp(x));
    }
    return x;
}

RecurrentConfig parseRecurrentConfig(const LayerDesc& l) {
  RecurrentConfig c;
  c.cell = cellOf(l);
  c.gates = gateCount(c.cell);
  std::string dir = l.attrs->getString("direction", "forward");
  if (dir == "bidirectional") c.dirs = 2;
  else if (dir == "reverse") c.reverse = true;
  else if (dir != "forward") opError(l, "direction must be forward, reverse or bidirectional, got '" + dir + "'");
  c.layout = l.attrs->getInt("layout", 0);
  if (c.layout != 0 && c.layout != 1) opError(l, "layout must be 0 or 1, got " + std::to_string(c.layout));
  if (l.attrs->has("clip")) {
    float clip = l.attrs->getFloat("clip", 0.f);
    if (!(clip > 0.f)) opError(l, "clip must be a positive threshold, got " + std::to_string(clip));
    c.clip = clip;
  }
  int64_t forget = l.attrs->getInt("input_forget", 0);
  if (forget != 0 && forget != 1) opError(l, "input_forget must be 0 or 1");
  c.inputForget = forget != 0;
  c.linearBeforeReset = l.attrs->getInt("linear_before_reset", 0) != 0;
  c.acts = parseActivations(l, c.cell, c.dirs);
  return c;
}


void registerRecurrentOps(OpRegistry& r) {
  for (const char* name : {"RNN", "GRU", "LSTM"}) {
    OpDef d;
    d.name = name;
    d.infer = inferRecurrent;
    d.ref = refRecurrent;
    d.minOpset = 7;  // opsets 7..22 share the attribute set (layout defaults to 0 before 14)
    r.add(d);
  }
}

}  // namespace kiln
