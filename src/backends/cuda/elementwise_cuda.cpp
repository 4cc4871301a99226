// CUDA tactics: elementwise family (host side). Unary math/activations, Clip, broadcasting binary
// ops, variadic Sum/Mean/Max/Min, Where, Cast/CastLike, Identity and the fused PointwiseChain.
// Shapes are coalesced at reshape (Geom); the kernels live in elementwise_*.cu.
#include <map>

#include "backends/cuda/cuda_tactics.h"
#include "backends/cuda/cuda_util.h"
#include "backends/cuda/elementwise_launch.cuh"
#include "ops/cast_narrow.h"
#include "ops/conv_layout.h"
#include "ops/fused_attrs.h"
#include "ops/op_util.h"
#include "ops/pointwise_chain.h"

namespace kiln {

namespace cuda::ew {

Geom makeGeom(const Dims& out, const std::vector<Dims>& ins) {
  if (ins.size() > static_cast<size_t>(kMaxIn)) throw UnsupportedError("CUDA elementwise: too many inputs");
  Geom g;
  g.nIn = static_cast<int>(ins.size());
  g.total = volume(out);
  if (g.total == 0) {
    g.rank = 1;
    g.dims[0] = 0;
    return g;
  }
  const size_t n = ins.size();
  std::vector<std::vector<int64_t>> st(n);
  for (size_t k = 0; k < n; ++k) {
    if (ins[k].size() > out.size()) throw Error("CUDA elementwise: input rank exceeds output rank");
    st[k] = broadcastStrides(ins[k], out);
  }
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> s(n);
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1) continue;
    bool merge = !dims.empty();
    for (size_t k = 0; k < n && merge; ++k) merge = s[k].back() == st[k][d] * out[d];
    if (merge) {
      dims.back() *= out[d];
      for (size_t k = 0; k < n; ++k) s[k].back() = st[k][d];
    } else {
      dims.push_back(out[d]);
      for (size_t k = 0; k < n; ++k) s[k].push_back(st[k][d]);
    }
  }
  if (dims.empty()) {
    dims.push_back(1);
    for (size_t k = 0; k < n; ++k) s[k].push_back(0);
  }
  if (dims.size() > static_cast<size_t>(kMaxDims))
    throw UnsupportedError("CUDA elementwise: broadcast of rank " + std::to_string(dims.size()) + " after merging dims (max " +
                           std::to_string(kMaxDims) + ")");
  g.rank = static_cast<int>(dims.size());
  for (int d = 0; d < g.rank; ++d) {
    g.dims[d] = dims[static_cast<size_t>(d)];
    for (size_t k = 0; k < n; ++k) g.strides[k][d] = s[k][static_cast<size_t>(d)];
  }
  return g;
}

}  // namespace cuda::ew

namespace {

using namespace cuda::ew;

// ---------------------------------------------------------------------------------------------
// Shared helpers.

bool typeIn(uint32_t set, DataType t) { return inSet(set, t); }

bool allPresent(const LayerDesc& l) {
  if (l.inputs.empty()) return false;
  for (size_t i = 0; i < l.inputs.size(); ++i)
    if (!l.present(i)) return false;
  return true;
}

//! Channels last (gpu_layout's elementwise layers inside an NHWC region): Y and every input of
//! Y's shape are nhwc, the other inputs are broadcasts with the same bytes in both orders
//! (layoutInvariantDims), so the kernels index all of them as [N, H, W, C] tensors.
bool channelsLast(const LayerDesc& l) { return outLayoutBlock(l) == kNhwcBlock; }

//! The dims the kernels index: logical, or {N, H, W, C} for a channels-last layer.
Dims indexDims(const LayerDesc& l, const Dims& d) { return physicalDims(d, outLayoutBlock(l)); }

//! Plain layouts, or the channels-last form above (anything else is refused).
bool layoutsFit(const LayerDesc& l) { return hasPlainLayouts(l) || (channelsLast(l) && elementwiseInLayout(l)); }

//! Whether a broadcast of the layer's inputs fits the kernels (known only for static dims).
bool geomFits(const LayerDesc& l) {
  if (l.outputs.empty() || !isStatic(l.outputs[0].dims)) return true;
  std::vector<Dims> ins;
  for (size_t i = 0; i < l.inputs.size(); ++i) {
    if (!l.present(i)) continue;
    if (!isStatic(l.inputs[i].dims)) return true;
    ins.push_back(indexDims(l, l.inputs[i].dims));
  }
  try {
    makeGeom(indexDims(l, l.outputs[0].dims), ins);
    return true;
  } catch (const Error&) {
    return false;
  }
}

struct GeomState : KernelState {
  std::vector<Geom> geoms;
};

Geom geomOf(const LayerDesc& l, std::initializer_list<size_t> inputs) {
  std::vector<Dims> ins;
  for (size_t i : inputs) ins.push_back(indexDims(l, l.inputs[i].dims));
  return makeGeom(indexDims(l, l.outputs[0].dims), ins);
}

const Geom& stateGeom(KernelState* s, size_t i = 0) {
  auto* g = dynamic_cast<GeomState*>(s);
  if (!g || g->geoms.size() <= i) throw Error("CUDA elementwise: kernel executed without reshape");
  return g->geoms[i];
}

void copyAsync(const KernelIO& io) {
  const TensorView& x = io.in[0];
  const size_t bytes = static_cast<size_t>(x.count) * elementSize(x.type);
  if (bytes && x.data != io.out[0].data)
    KILN_CUDA_CHECK(cudaMemcpyAsync(io.out[0].data, x.data, bytes, cudaMemcpyDeviceToDevice, cuda::streamOf(io)));
}

// ---------------------------------------------------------------------------------------------
// Unary ops (and Clip).

const std::map<std::string, Unary>& unaryOps() {
  static const std::map<std::string, Unary> m = {
      {"Relu", Unary::kRelu}, {"LeakyRelu", Unary::kLeakyRelu}, {"Elu", Unary::kElu}, {"Selu", Unary::kSelu},
      {"Celu", Unary::kCelu}, {"Sigmoid", Unary::kSigmoid}, {"HardSigmoid", Unary::kHardSigmoid},
      {"HardSwish", Unary::kHardSwish}, {"Tanh", Unary::kTanh}, {"Softplus", Unary::kSoftplus},
      {"Softsign", Unary::kSoftsign}, {"Gelu", Unary::kGelu}, {"Erf", Unary::kErf}, {"Sqrt", Unary::kSqrt},
      {"Exp", Unary::kExp}, {"Log", Unary::kLog}, {"Neg", Unary::kNeg}, {"Abs", Unary::kAbs},
      {"Reciprocal", Unary::kReciprocal}, {"Floor", Unary::kFloor}, {"Ceil", Unary::kCeil}, {"Round", Unary::kRound},
      {"Sign", Unary::kSign}, {"Sin", Unary::kSin}, {"Cos", Unary::kCos}, {"Tan", Unary::kTan}, {"Asin", Unary::kAsin},
      {"Acos", Unary::kAcos}, {"Atan", Unary::kAtan}, {"Sinh", Unary::kSinh}, {"Cosh", Unary::kCosh},
      {"Asinh", Unary::kAsinh}, {"Acosh", Unary::kAcosh}, {"Atanh", Unary::kAtanh}, {"Mish", Unary::kMish},
      {"ThresholdedRelu", Unary::kThresholdedRelu}, {"Shrink", Unary::kShrink}, {"IsNaN", Unary::kIsNaN},
      {"IsInf", Unary::kIsInf}, {"Not", Unary::kNot}, {"BitwiseNot", Unary::kBitwiseNot}, {"Clip", Unary::kClip}};
  return m;
}

class UnaryKernel : public Kernel {
 public:
  UnaryKernel(Unary op, UnaryArgs a) : op_(op), args_(a) {}
  void execute(const KernelIO& io, KernelState*) const override {
    UnaryArgs a = args_;
    if (op_ == Unary::kClip) {  // bounds are (device) inputs: read by the kernel
      if (io.in.size() > 1 && io.in[1].data) a.p1 = io.in[1].data, a.t1 = io.in[1].type;
      if (io.in.size() > 2 && io.in[2].data) a.p2 = io.in[2].data, a.t2 = io.in[2].type;
    }
    launchUnary(op_, io.in[0].type, io.in[0].data, io.out[0].data, io.in[0].count, a, cuda::streamOf(io));
  }

 private:
  Unary op_;
  UnaryArgs args_;
};

bool unarySupports(const LayerDesc& l) {
  auto it = unaryOps().find(l.op);
  if (it == unaryOps().end() || l.inputs.empty() || !l.present(0) || !layoutsFit(l)) return false;
  const size_t maxIn = it->second == Unary::kClip ? 3 : 1;
  if (l.inputs.size() > maxIn || !typeIn(unaryTypes(it->second), l.inputs[0].type)) return false;
  for (size_t i = 1; i < l.inputs.size(); ++i)
    if (l.present(i) && !typeIn(kNumeric, l.inputs[i].type)) return false;
  return true;
}

std::unique_ptr<Kernel> unaryCreate(const LayerDesc& l) {
  Unary op = unaryOps().at(l.op);
  const Attributes& at = *l.attrs;
  UnaryArgs a;
  switch (op) {
    case Unary::kLeakyRelu: a.alpha = at.getFloat("alpha", 0.01f); break;
    case Unary::kElu: case Unary::kThresholdedRelu: a.alpha = at.getFloat("alpha", 1.f); break;
    case Unary::kCelu:
      a.alpha = at.getFloat("alpha", 1.f);
      if (a.alpha == 0.f) throw Error("layer '" + l.name + "' (Celu): alpha must not be 0");
      break;
    case Unary::kSelu:
      a.alpha = at.getFloat("alpha", 1.67326319217681884765625f);
      a.gamma = at.getFloat("gamma", 1.05070102214813232421875f);
      break;
    case Unary::kHardSigmoid: a.alpha = at.getFloat("alpha", 0.2f), a.beta = at.getFloat("beta", 0.5f); break;
    case Unary::kShrink: a.alpha = at.getFloat("lambd", 0.5f), a.beta = at.getFloat("bias", 0.f); break;
    case Unary::kIsInf:
      a.detectNeg = at.getInt("detect_negative", 1) != 0;
      a.detectPos = at.getInt("detect_positive", 1) != 0;
      break;
    case Unary::kGelu: {
      std::string m = at.getString("approximate", "none");
      if (m == "tanh") op = Unary::kGeluTanh;
      else if (m != "none") throw Error("layer '" + l.name + "' (Gelu): attribute approximate must be 'none' or 'tanh'");
      break;
    }
    default: break;
  }
  return std::make_unique<UnaryKernel>(op, a);
}

// ---------------------------------------------------------------------------------------------
// Binary ops with broadcasting.

const std::map<std::string, Binary>& binaryOps() {
  static const std::map<std::string, Binary> m = {
      {"Add", Binary::kAdd}, {"Sub", Binary::kSub}, {"Mul", Binary::kMul}, {"Div", Binary::kDiv},
      {"Mod", Binary::kMod}, {"PRelu", Binary::kPRelu}, {"Equal", Binary::kEqual}, {"Less", Binary::kLess},
      {"LessOrEqual", Binary::kLessOrEqual}, {"Greater", Binary::kGreater}, {"GreaterOrEqual", Binary::kGreaterOrEqual},
      {"And", Binary::kAnd}, {"Or", Binary::kOr}, {"Xor", Binary::kXor}, {"BitwiseAnd", Binary::kBitwiseAnd},
      {"BitwiseOr", Binary::kBitwiseOr}, {"BitwiseXor", Binary::kBitwiseXor}, {"BitShift", Binary::kShiftLeft}};
  return m;
}

class BinaryKernel : public Kernel {
 public:
  explicit BinaryKernel(Binary op) : op_(op) {}
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    auto s = std::make_unique<GeomState>();
    s->geoms.push_back(geomOf(l, {0, 1}));
    state = std::move(s);
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    const void* in[2] = {io.in[0].data, io.in[1].data};
    launchBinary(op_, io.in[0].type, stateGeom(state), in, io.out[0].data, cuda::streamOf(io));
  }

 private:
  Binary op_;
};

bool binarySupports(const LayerDesc& l) {
  auto it = binaryOps().find(l.op);
  if (it == binaryOps().end() || l.inputs.size() != 2 || !allPresent(l) || !layoutsFit(l)) return false;
  if (l.inputs[0].type != l.inputs[1].type || !typeIn(binaryTypes(it->second), l.inputs[0].type)) return false;
  return geomFits(l);
}

std::unique_ptr<Kernel> binaryCreate(const LayerDesc& l) {
  Binary op = binaryOps().at(l.op);
  if (op == Binary::kMod) {
    int64_t f = l.attrs->getInt("fmod", 0);
    if (f != 0 && f != 1) throw Error("layer '" + l.name + "' (Mod): attribute fmod must be 0 or 1");
    if (f == 1) op = Binary::kFmod;
  } else if (op == Binary::kShiftLeft) {
    std::string d = l.attrs->getString("direction", "");
    if (d != "LEFT" && d != "RIGHT") throw Error("layer '" + l.name + "' (BitShift): direction must be 'LEFT' or 'RIGHT'");
    op = d == "LEFT" ? Binary::kShiftLeft : Binary::kShiftRight;
  }
  return std::make_unique<BinaryKernel>(op);
}

// ---------------------------------------------------------------------------------------------
// Pow: a scalar exponent (any numeric type) runs the flat kernel; otherwise the inputs broadcast,
// of one type or of the mixed pairs launchPowMixed handles.

bool isScalarDims(const Dims& d) { return isStatic(d) && volume(d) == 1; }

class PowKernel : public Kernel {
 public:
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    auto s = std::make_unique<GeomState>();
    const bool scalarExp = volume(l.inputs[1].dims) == 1 && volume(l.outputs[0].dims) == volume(l.inputs[0].dims);
    if (!scalarExp) {
      if (l.inputs[0].type != l.inputs[1].type && !powMixedSupported(l.inputs[0].type, l.inputs[1].type))
        throw UnsupportedError("layer '" + l.name + "' (Pow): no CUDA kernel for these base and exponent types");
      s->geoms.push_back(geomOf(l, {0, 1}));
    }
    state = std::move(s);
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    auto* s = dynamic_cast<GeomState*>(state);
    if (!s) throw Error("CUDA Pow: executed without reshape");
    if (s->geoms.empty()) {
      UnaryArgs a;
      a.p1 = io.in[1].data;
      a.t1 = io.in[1].type;
      launchUnary(Unary::kPowScalar, io.in[0].type, io.in[0].data, io.out[0].data, io.in[0].count, a, cuda::streamOf(io));
    } else {
      const void* in[2] = {io.in[0].data, io.in[1].data};
      if (io.in[0].type != io.in[1].type)
        launchPowMixed(io.in[0].type, io.in[1].type, s->geoms[0], in, io.out[0].data, cuda::streamOf(io));
      else
        launchBinary(Binary::kPow, io.in[0].type, s->geoms[0], in, io.out[0].data, cuda::streamOf(io));
    }
  }
};

bool powSupports(const LayerDesc& l) {
  if (l.inputs.size() != 2 || !allPresent(l)) return false;
  if (!typeIn(kNumeric, l.inputs[0].type) || !typeIn(kNumeric, l.inputs[1].type)) return false;
  if (l.inputs[0].type != l.inputs[1].type && !isScalarDims(l.inputs[1].dims) && !powMixedSupported(l.inputs[0].type, l.inputs[1].type))
    return false;
  return geomFits(l);
}

std::unique_ptr<Kernel> powCreate(const LayerDesc&) { return std::make_unique<PowKernel>(); }

// ---------------------------------------------------------------------------------------------
// Variadic Sum / Mean / Max / Min (1 to 4 inputs).

constexpr size_t kMaxVariadic = 4;

Fold foldOf(const std::string& op) {
  if (op == "Sum") return Fold::kSum;
  if (op == "Mean") return Fold::kMean;
  if (op == "Max") return Fold::kMax;
  return Fold::kMin;
}

Binary pairOf(Fold f) {
  switch (f) {
    case Fold::kSum: return Binary::kAdd;
    case Fold::kMean: return Binary::kMean;
    case Fold::kMax: return Binary::kMax;
    case Fold::kMin: return Binary::kMin;
  }
  return Binary::kAdd;
}

class VariadicKernel : public Kernel {
 public:
  explicit VariadicKernel(Fold f) : fold_(f) {}
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    auto s = std::make_unique<GeomState>();
    const size_t n = l.inputs.size();
    const bool onePass = n <= 2 || typeIn(kFloats, l.inputs[0].type);
    if (n == 2) {
      s->geoms.push_back(geomOf(l, {0, 1}));
    } else if (n > 2 && onePass) {
      std::vector<Dims> ins;
      for (size_t i = 0; i < n; ++i) ins.push_back(l.inputs[i].dims);
      s->geoms.push_back(makeGeom(l.outputs[0].dims, ins));
    } else if (n > 2) {  // integer Max/Min: out = op(x0, x1), then out = op(out, xi)
      s->geoms.push_back(geomOf(l, {0, 1}));
      for (size_t i = 2; i < n; ++i) s->geoms.push_back(makeGeom(l.outputs[0].dims, {l.outputs[0].dims, l.inputs[i].dims}));
    }
    if (n == 1 && l.inputs[0].dims != l.outputs[0].dims) throw Error("CUDA " + l.op + ": output shape differs from input");
    state = std::move(s);
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    const size_t n = io.in.size();
    cudaStream_t st = cuda::streamOf(io);
    if (n == 1) return copyAsync(io);  // Sum/Max/Min of one input, Mean x / 1
    const DataType t = io.in[0].type;
    if (n == 2) {
      const void* in[2] = {io.in[0].data, io.in[1].data};
      return launchBinary(pairOf(fold_), t, stateGeom(state), in, io.out[0].data, st);
    }
    if (typeIn(kFloats, t)) {
      const void* in[kMaxVariadic];
      for (size_t i = 0; i < n; ++i) in[i] = io.in[i].data;
      return launchFold(fold_, t, stateGeom(state), in, io.out[0].data, st);
    }
    const void* first[2] = {io.in[0].data, io.in[1].data};
    launchBinary(pairOf(fold_), t, stateGeom(state, 0), first, io.out[0].data, st);
    for (size_t i = 2; i < n; ++i) {
      const void* in[2] = {io.out[0].data, io.in[i].data};
      launchBinary(pairOf(fold_), t, stateGeom(state, i - 1), in, io.out[0].data, st);
    }
  }

 private:
  Fold fold_;
};

bool variadicSupports(const LayerDesc& l) {
  const Fold f = foldOf(l.op);
  const uint32_t set = f == Fold::kSum || f == Fold::kMean ? kFloats : kNumeric;
  if (l.inputs.empty() || l.inputs.size() > kMaxVariadic || !allPresent(l)) return false;
  for (const auto& in : l.inputs)
    if (in.type != l.inputs[0].type || !typeIn(set, in.type)) return false;
  return geomFits(l);
}

std::unique_ptr<Kernel> variadicCreate(const LayerDesc& l) { return std::make_unique<VariadicKernel>(foldOf(l.op)); }

// ---------------------------------------------------------------------------------------------
// Where, Cast / CastLike, Identity.

class WhereKernel : public Kernel {
 public:
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    auto s = std::make_unique<GeomState>();
    s->geoms.push_back(geomOf(l, {0, 1, 2}));
    state = std::move(s);
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    const void* in[3] = {io.in[0].data, io.in[1].data, io.in[2].data};
    launchWhere(elementSize(io.out[0].type), stateGeom(state), in, io.out[0].data, cuda::streamOf(io));
  }
};

bool whereSupports(const LayerDesc& l) {
  return l.inputs.size() == 3 && allPresent(l) && l.inputs[0].type == DataType::kBOOL && l.inputs[1].type == l.inputs[2].type &&
         geomFits(l);
}

std::unique_ptr<Kernel> whereCreate(const LayerDesc&) { return std::make_unique<WhereKernel>(); }

class CastKernel : public Kernel {
 public:
  explicit CastKernel(const LayerDesc& l) : saturate_(l.attrs->getInt("saturate", 1) != 0), rounding_(castRounding(l)) {}
  void execute(const KernelIO& io, KernelState*) const override {
    const DataType from = io.in[0].type, to = io.out[0].type;
    if (isNarrowCast(from, to))
      launchCastNarrow(from, to, io.in[0].data, io.out[0].data, io.in[0].count, saturate_, rounding_, cuda::streamOf(io));
    else
      launchCast(from, to, io.in[0].data, io.out[0].data, io.in[0].count, cuda::streamOf(io));
  }

 private:
  bool saturate_;  // Cast-19+: float8 targets
  E8M0Rounding rounding_;  // Cast-25+: float8e8m0 targets
};

bool castSupports(const LayerDesc& l) {
  const size_t nIn = l.op == "CastLike" ? 2 : 1;
  return l.inputs.size() == nIn && l.present(0) && !l.outputs.empty();
}

std::unique_ptr<Kernel> castCreate(const LayerDesc& l) { return std::make_unique<CastKernel>(l); }

class CopyKernel : public Kernel {
 public:
  void execute(const KernelIO& io, KernelState*) const override { copyAsync(io); }
};

bool identitySupports(const LayerDesc& l) { return l.inputs.size() == 1 && l.present(0); }

std::unique_ptr<Kernel> identityCreate(const LayerDesc&) { return std::make_unique<CopyKernel>(); }

// ---------------------------------------------------------------------------------------------
// PointwiseChain.

ChainOp chainOpOf(const PointwiseStep& s) {
  if (s.isActivation) {
    switch (s.act.kind) {
      case ActKind::kRelu: return ChainOp::kRelu;
      case ActKind::kLeakyRelu: return ChainOp::kLeakyRelu;
      case ActKind::kClip: return ChainOp::kClip;
      case ActKind::kSigmoid: return ChainOp::kSigmoid;
      case ActKind::kTanh: return ChainOp::kTanh;
      case ActKind::kHardSwish: return ChainOp::kHardSwish;
      case ActKind::kHardSigmoid: return ChainOp::kHardSigmoid;
      case ActKind::kGelu: return ChainOp::kGelu;
      case ActKind::kGeluTanh: return ChainOp::kGeluTanh;
      case ActKind::kElu: return ChainOp::kElu;
      case ActKind::kSoftplus: return ChainOp::kSoftplus;
      case ActKind::kSilu: return ChainOp::kSilu;
      case ActKind::kMish: return ChainOp::kMish;
      case ActKind::kNone: break;
    }
    throw Error("CUDA PointwiseChain: activation step without a kind");
  }
  static const std::map<std::string, ChainOp> m = {
      {"Add", ChainOp::kAdd}, {"Sub", ChainOp::kSub}, {"Mul", ChainOp::kMul}, {"Div", ChainOp::kDiv},
      {"Pow", ChainOp::kPow}, {"Max", ChainOp::kMax}, {"Min", ChainOp::kMin}, {"Erf", ChainOp::kErf},
      {"Sqrt", ChainOp::kSqrt}, {"Exp", ChainOp::kExp}, {"Log", ChainOp::kLog}, {"Neg", ChainOp::kNeg},
      {"Abs", ChainOp::kAbs}, {"Reciprocal", ChainOp::kReciprocal}, {"Floor", ChainOp::kFloor}, {"Ceil", ChainOp::kCeil}};
  auto it = m.find(s.op);
  if (it == m.end()) throw UnsupportedError("CUDA PointwiseChain: step '" + s.op + "' is not supported");
  return it->second;
}

class ChainKernel : public Kernel {
 public:
  ChainKernel(const ChainProgram& p, DataType type) : prog_(p), type_(type) {}
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    auto s = std::make_unique<GeomState>();
    std::vector<Dims> ins;
    for (const auto& in : l.inputs) ins.push_back(indexDims(l, in.dims));
    if (l.inputs[0].dims != l.outputs[0].dims) throw Error("CUDA PointwiseChain: x must have the output's shape");
    s->geoms.push_back(makeGeom(indexDims(l, l.outputs[0].dims), ins));
    state = std::move(s);
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    const void* in[kMaxIn] = {};
    for (size_t i = 0; i < io.in.size(); ++i) in[i] = io.in[i].data;
    launchChain(prog_, stateGeom(state), in, io.out[0].data, type_, cuda::streamOf(io));
  }

 private:
  ChainProgram prog_;
  DataType type_;
};

bool chainSupports(const LayerDesc& l) {
  if (l.inputs.empty() || l.inputs.size() > static_cast<size_t>(kMaxIn) || !allPresent(l) || !layoutsFit(l)) return false;
  // One storage type for every input and the output: float32, or a reduced-precision engine's
  // float16/bfloat16 (computed in float32 registers, never through float32 tensors).
  const DataType t = l.outputs[0].type;
  if (t != DataType::kFLOAT && t != DataType::kHALF && t != DataType::kBF16) return false;
  for (const auto& in : l.inputs)
    if (in.type != t) return false;
  if (pointwiseChainLength(*l.attrs) > static_cast<size_t>(kMaxChainSteps)) return false;
  return geomFits(l);
}

std::unique_ptr<Kernel> chainCreate(const LayerDesc& l) {
  PointwiseProgram p = compilePointwise(*l.attrs, l.inputs.size());
  if (p.steps.size() > static_cast<size_t>(kMaxChainSteps))
    throw UnsupportedError("CUDA PointwiseChain: more than " + std::to_string(kMaxChainSteps) + " steps");
  ChainProgram prog;
  prog.nSteps = static_cast<int>(p.steps.size());
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const PointwiseStep& s = p.steps[i];
    ChainStep& c = prog.steps[i];
    c.op = static_cast<int>(chainOpOf(s));
    c.operand = s.operand;
    c.swapped = s.swapped ? 1 : 0;
    c.alpha = s.isActivation ? s.act.alpha : s.alpha;
    c.beta = s.isActivation ? s.act.beta : s.beta;
  }
  return std::make_unique<ChainKernel>(prog, l.outputs[0].type);
}

}  // namespace

namespace cuda {
KernelFactory unaryCuda() { return {unarySupports, unaryCreate}; }
KernelFactory binaryCuda() { return {binarySupports, binaryCreate}; }
KernelFactory powCuda() { return {powSupports, powCreate}; }
KernelFactory variadicCuda() { return {variadicSupports, variadicCreate}; }
KernelFactory whereCuda() { return {whereSupports, whereCreate}; }
KernelFactory castCuda() { return {castSupports, castCreate}; }
KernelFactory identityMemcpy() { return {identitySupports, identityCreate}; }
KernelFactory pointwiseChainCuda() { return {chainSupports, chainCreate}; }
}  // namespace cuda

}  // namespace kiln
