// Op definitions (shape inference + naive reference kernels + ONNX normalization): elementwise family.
// Unary math/activations, broadcasting binary arithmetic/comparison/logic, variadic Max/Min/Sum/Mean,
// Clip, Where, Pow. Cast/CastLike live in elementwise_cast.cpp (Identity is in shape.cpp).
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>

#include "ops/activation.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

void registerElementwiseCastOps(OpRegistry& r);  // elementwise_cast.cpp
void registerSwishOps(OpRegistry& r);            // swish.cpp

namespace {

// ---------------------------------------------------------------------------------------------
// Type sets (bit i = DataType i) and dispatch restricted to a set known at compile time.

constexpr uint32_t bit(DataType t) { return 1u << static_cast<unsigned>(t); }
constexpr uint32_t kHalfBf16 = bit(DataType::kHALF) | bit(DataType::kBF16);
constexpr uint32_t kFloats = bit(DataType::kFLOAT) | bit(DataType::kDOUBLE) | kHalfBf16;
constexpr uint32_t kSigned = bit(DataType::kINT8) | bit(DataType::kINT16) | bit(DataType::kINT32) | bit(DataType::kINT64);
constexpr uint32_t kUnsigned = bit(DataType::kUINT8) | bit(DataType::kUINT16) | bit(DataType::kUINT32) | bit(DataType::kUINT64);
constexpr uint32_t kInts = kSigned | kUnsigned;
constexpr uint32_t kNumeric = kFloats | kInts;
constexpr uint32_t kBoolSet = bit(DataType::kBOOL);

//! Calls f(T{}) for t when t is in Set; only the types of Set are instantiated (never the 2-byte
//! floats: the builder casts them to float32 for the reference kernels).
template <uint32_t Set, typename F>
void dispatchTypes(DataType t, F&& f) {
  dispatchType<Set & ~kHalfBf16>(t, f, [&] { throw Error(std::string("elementwise kernel: unsupported data type ") + toString(t)); });
}


void requireType(const LayerDesc& l, size_t i, uint32_t set) {
  DataType t = l.inputs[i].type;
  if ((set & bit(t)) == 0) opError(l, "input " + std::to_string(i) + " has type " + toString(t) + ", which this op does not accept");
}

void requireSameType(const LayerDesc& l, size_t i, size_t j) {
  if (l.inputs[i].type != l.inputs[j].type)
    opError(l, "inputs " + std::to_string(i) + " and " + std::to_string(j) + " have different types (" +
                   toString(l.inputs[i].type) + " vs " + toString(l.inputs[j].type) + ")");
}

// ---------------------------------------------------------------------------------------------
// Broadcast iteration and half/bf16 promotion shared by the reference kernels.

//! Calls f(outIndex, offsets) for every element of `out` (row-major), where offsets[k] indexes
//! input k broadcast (numpy rules) to `out`.
template <size_t N, typename F>
void forEachBroadcast(const Dims& out, const std::array<const Dims*, N>& in, F&& f) {
  int64_t total = volume(out);
  if (total == 0) return;
  std::array<int64_t, N> off{};
  size_t r = out.size();
  if (r == 0) {
    f(int64_t(0), off);
    return;
  }
  std::array<std::vector<int64_t>, N> st;
  for (size_t k = 0; k < N; ++k) st[k] = broadcastStrides(*in[k], out);
  std::vector<int64_t> idx(r, 0);
  std::array<int64_t, N> base{};
  int64_t inner = out[r - 1];
  for (int64_t o = 0; o < total; o += inner) {
    off = base;
    for (int64_t j = 0; j < inner; ++j) {
      f(o + j, off);
      for (size_t k = 0; k < N; ++k) off[k] += st[k][r - 1];
    }
    for (size_t d = r - 1; d-- > 0;) {  // advance the outer index with carry
      ++idx[d];
      for (size_t k = 0; k < N; ++k) base[k] += st[k][d];
      if (idx[d] < out[d]) break;
      for (size_t k = 0; k < N; ++k) base[k] -= st[k][d] * out[d];
      idx[d] = 0;
    }
  }
}

//! Runs a float32 kernel on half/bf16 buffers by widening them (host folding of half graphs; the
//! builder normally inserts Casts so kernels never see these types).
template <RefFn Inner>
void promotedRef(const LayerDesc& l, const KernelIO& io) {
  bool any = false;
  for (auto& v : io.in) any = any || (v.data && isHalfType(v.type));
  for (auto& v : io.out) any = any || isHalfType(v.type);
  if (!any) return Inner(l, io);
  KernelIO wide = io;
  std::vector<HostTensor> temps;
  auto widen = [&](TensorView& v) {
    temps.emplace_back(DataType::kFLOAT, Dims{v.count});
    v.data = temps.back().data();
    v.type = DataType::kFLOAT;
  };
  for (size_t i = 0; i < io.in.size(); ++i)
    if (io.in[i].data && isHalfType(io.in[i].type)) {
      widen(wide.in[i]);
      widenToFloat(io.in[i], wide.in[i].as<float>());
    }
  for (size_t i = 0; i < io.out.size(); ++i)
    if (isHalfType(io.out[i].type)) widen(wide.out[i]);
  Inner(l, wide);
  for (size_t i = 0; i < io.out.size(); ++i)
    if (isHalfType(io.out[i].type)) narrowFromFloat(wide.out[i].as<float>(), io.out[i]);
}

// ---------------------------------------------------------------------------------------------
// Integer arithmetic without undefined behaviour: wraps like numpy's two's complement.

template <typename T>
using WrapT = std::conditional_t<sizeof(T) <= 4, uint32_t, uint64_t>;

template <typename T> T addOf(T a, T b) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<WrapT<T>>(a) + static_cast<WrapT<T>>(b));
  else return a + b;
}
template <typename T> T subOf(T a, T b) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<WrapT<T>>(a) - static_cast<WrapT<T>>(b));
  else return a - b;
}
template <typename T> T mulOf(T a, T b) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<WrapT<T>>(a) * static_cast<WrapT<T>>(b));
  else return a * b;
}
//! Integer division truncates toward zero; x/0 gives 0 and MIN/-1 wraps (numpy), never a trap.
template <typename T> T divOf(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    if (b == 0) return 0;
    if constexpr (std::is_signed_v<T>)
      if (b == -1) return subOf<T>(0, a);
    return static_cast<T>(a / b);
  } else {
    return a / b;
  }
}
template <typename T> T negOf(T x) { return subOf<T>(T(0), x); }
template <typename T> bool isNan(T x) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(x);
  else return false;
}
//! numpy maximum/minimum: NaN propagates.
template <typename T> T maxOf(T a, T b) { return isNan(a) ? a : isNan(b) ? b : (a < b ? b : a); }
template <typename T> T minOf(T a, T b) { return isNan(a) ? a : isNan(b) ? b : (b < a ? b : a); }

//! A double converted to T; out-of-range/NaN become 0 for integer T (no UB).
template <typename T> T fromDouble(double v) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else {
    if (!(v > -0x1p63 && v < 0x1p63)) return T(0);
    return static_cast<T>(static_cast<int64_t>(v));
  }
}

// ---------------------------------------------------------------------------------------------
// Unary ops. Each functor: kTypes (accepted input types), kBoolOut, a constructor that reads and
// validates the attributes, and operator() for every type of kTypes (half/bf16 run as float).

struct UnaryBase {
  static constexpr bool kBoolOut = false;
};

#define KILN_EW_SIMPLE_UNARY(NAME, TYPES, EXPR)                   \
  struct NAME : UnaryBase {                                       \
    static constexpr uint32_t kTypes = TYPES;                     \
    explicit NAME(const Attributes&) {}                           \
    template <typename T> T operator()(T x) const { return EXPR; } \
  };

KILN_EW_SIMPLE_UNARY(ReluOp, kFloats | kSigned, x > T(0) ? x : T(0))
KILN_EW_SIMPLE_UNARY(SigmoidOp, kFloats, T(1) / (T(1) + std::exp(-x)))
KILN_EW_SIMPLE_UNARY(TanhOp, kFloats, std::tanh(x))
KILN_EW_SIMPLE_UNARY(SoftplusOp, kFloats, x > T(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)))
KILN_EW_SIMPLE_UNARY(SoftsignOp, kFloats, x / (T(1) + std::fabs(x)))
KILN_EW_SIMPLE_UNARY(HardSwishOp, kFloats, x * std::fmax(T(0), std::fmin(T(1), x / T(6) + T(0.5))))
KILN_EW_SIMPLE_UNARY(MishOp, kFloats, x * std::tanh(x > T(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x))))
KILN_EW_SIMPLE_UNARY(SqrtOp, kFloats, std::sqrt(x))
KILN_EW_SIMPLE_UNARY(ExpOp, kFloats, std::exp(x))
KILN_EW_SIMPLE_UNARY(LogOp, kFloats, std::log(x))
KILN_EW_SIMPLE_UNARY(ReciprocalOp, kFloats, T(1) / x)
KILN_EW_SIMPLE_UNARY(FloorOp, kFloats, std::floor(x))
KILN_EW_SIMPLE_UNARY(CeilOp, kFloats, std::ceil(x))
KILN_EW_SIMPLE_UNARY(RoundOp, kFloats, std::nearbyint(x))  // half to even (default rounding mode)
KILN_EW_SIMPLE_UNARY(SinOp, kFloats, std::sin(x))
KILN_EW_SIMPLE_UNARY(CosOp, kFloats, std::cos(x))
KILN_EW_SIMPLE_UNARY(TanOp, kFloats, std::tan(x))
KILN_EW_SIMPLE_UNARY(AsinOp, kFloats, std::asin(x))
KILN_EW_SIMPLE_UNARY(AcosOp, kFloats, std::acos(x))
KILN_EW_SIMPLE_UNARY(AtanOp, kFloats, std::atan(x))
KILN_EW_SIMPLE_UNARY(SinhOp, kFloats, std::sinh(x))
KILN_EW_SIMPLE_UNARY(CoshOp, kFloats, std::cosh(x))
KILN_EW_SIMPLE_UNARY(AsinhOp, kFloats, std::asinh(x))
KILN_EW_SIMPLE_UNARY(AcoshOp, kFloats, std::acosh(x))
KILN_EW_SIMPLE_UNARY(AtanhOp, kFloats, std::atanh(x))
KILN_EW_SIMPLE_UNARY(NegOp, kFloats | kSigned, negOf(x))
KILN_EW_SIMPLE_UNARY(NotOp, kBoolSet, !x)
KILN_EW_SIMPLE_UNARY(BitwiseNotOp, kInts, static_cast<T>(~x))
#undef KILN_EW_SIMPLE_UNARY

struct AbsOp : UnaryBase {
  static constexpr uint32_t kTypes = kNumeric;
  explicit AbsOp(const Attributes&) {}
  template <typename T> T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) return std::fabs(x);
    else if constexpr (std::is_signed_v<T>) return x < 0 ? negOf(x) : x;
    else return x;
  }
};

struct SignOp : UnaryBase {
  static constexpr uint32_t kTypes = kNumeric;
  explicit SignOp(const Attributes&) {}
  template <typename T> T operator()(T x) const {
    if (isNan(x)) return x;
    return x > T(0) ? T(1) : (x < T(0) ? static_cast<T>(-1) : T(0));
  }
};

struct ErfOp : UnaryBase {
  static constexpr uint32_t kTypes = kNumeric;
  explicit ErfOp(const Attributes&) {}
  template <typename T> T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) return std::erf(x);
    else return fromDouble<T>(std::erf(static_cast<double>(x)));
  }
};

struct LeakyReluOp : UnaryBase {
  static constexpr uint32_t kTypes = kFloats;
  float alpha;
  explicit LeakyReluOp(const Attributes& a) : alpha(a.getFloat("alpha", 0.01f)) {}
  template <typename T> T operator()(T x) const { return x >= T(0) ? x : T(alpha) * x; }
};

struct EluOp : UnaryBase {
  static constexpr uint32_t kTypes = kFloats;
  float alpha;
  explicit EluOp(const Attributes& a) : alpha(a.getFloat("alpha", 1.f)) {}
  template <typename T> T operator()(T x) const { return x >= T(0) ? x : T(alpha) * std::expm1(x); }
};

struct SeluOp : UnaryBase {
  static constexpr uint32_t kTypes = kFloats;
  float alpha, gamma;
  explicit SeluOp(const Attributes& a)
      : alpha(a.getFloat("alpha", 1.67326319217681884765625f)), gamma(a.getFloat("gamma", 1.05070102214813232421875f)) {}
  template <typename T> T operator()(T x) const { return T(gamma) * (x > T(0) ? x : T(alpha) * std::expm1(x)); }
};

struct CeluOp : UnaryBase {
  static constexpr uint32_t kTypes = kFloats;
  float alpha;
  explicit CeluOp(const Attributes& a) : alpha(a.getFloat("alpha", 1.f)) {
    if (alpha == 0.f) throw Error("Celu: alpha must not be 0");
  }
  template <typename T> T operator()(T x) const { return x > T(0) ? x : T(alpha) * std::expm1(x / T(alpha)); }
};

struct HardSigmoidOp : UnaryBase {
  static constexpr uint32_t kTypes = kFloats;
  float alpha, beta;
  explicit HardSigmoidOp(const Attributes& a) : alpha(a.getFloat("alpha", 0.2f)), beta(a.getFloat("beta", 0.5f)) {}
  template <typename T> T operator()(T x) const { return std::fmax(T(0), std::fmin(T(1), T(alpha) * x + T(beta))); }
};

struct ThresholdedReluOp : UnaryBase {
  static constexpr uint32_t kTypes = kFloats;
  float alpha;
  explicit ThresholdedReluOp(const Attributes& a) : alpha(a.getFloat("alpha", 1.f)) {}
  template <typename T> T operator()(T x) const { return x > T(alpha) ? x : T(0); }
};

struct GeluOp : UnaryBase {
  static constexpr uint32_t kTypes = kFloats;
  bool tanhApprox;
  explicit GeluOp(const Attributes& a) {
    std::string m = a.getString("approximate", "none");
    if (m != "none" && m != "tanh") throw Error("Gelu: attribute approximate must be 'none' or 'tanh', got '" + m + "'");
    tanhApprox = m == "tanh";
  }
  template <typename T> T operator()(T x) const {
    if (tanhApprox) return T(0.5) * x * (T(1) + std::tanh(T(kGeluTanhScale) * (x + T(kGeluTanhCubic) * x * x * x)));
    // 1 + erf(x/sqrt2) == erfc(-x/sqrt2), without cancellation for negative x.
    return T(0.5) * x * std::erfc(-x * T(kGeluErfScale));
  }
};

struct ShrinkOp : UnaryBase {
  static constexpr uint32_t kTypes = kNumeric;
  float bias, lambd;
  explicit ShrinkOp(const Attributes& a) : bias(a.getFloat("bias", 0.f)), lambd(a.getFloat("lambd", 0.5f)) {}
  template <typename T> T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) {
      return x < -T(lambd) ? x + T(bias) : (x > T(lambd) ? x - T(bias) : T(0));
    } else {
      double v = static_cast<double>(x);
      return fromDouble<T>(v < -lambd ? v + bias : (v > lambd ? v - bias : 0.0));
    }
  }
};

struct IsNaNOp {
  static constexpr bool kBoolOut = true;
  static constexpr uint32_t kTypes = kFloats;
  explicit IsNaNOp(const Attributes&) {}
  template <typename T> bool operator()(T x) const { return std::isnan(x); }
};

struct IsInfOp {
  static constexpr bool kBoolOut = true;
  static constexpr uint32_t kTypes = kFloats;
  bool neg, pos;
  explicit IsInfOp(const Attributes& a) : neg(a.getInt("detect_negative", 1) != 0), pos(a.getInt("detect_positive", 1) != 0) {}
  template <typename T> bool operator()(T x) const { return std::isinf(x) && ((x > 0 && pos) || (x < 0 && neg)); }
};

template <typename Op>
void unaryInfer(LayerDesc& l) {
  requireInputs(l, 1, 1);
  requireType(l, 0, Op::kTypes);
  Op op(*l.attrs);  // validates the attributes
  (void)op;
  setOutput(l, 0, Op::kBoolOut ? DataType::kBOOL : l.inputs[0].type, l.inputs[0].dims);
}

template <typename Op>
void unaryRef(const LayerDesc& l, const KernelIO& io) {
  Op op(*l.attrs);
  dispatchTypes<Op::kTypes & ~kHalfBf16>(io.in[0].type, [&](auto tag) {
    using T = decltype(tag);
    using R = decltype(op(T{}));
    const T* x = io.in[0].as<T>();
    R* y = io.out[0].as<R>();
    for (int64_t i = 0; i < io.in[0].count; ++i) y[i] = op(x[i]);
  });
}

// ---------------------------------------------------------------------------------------------
// Binary ops (multidirectional broadcasting, both inputs of one type).

struct BinaryBase {
  static constexpr bool kBoolOut = false;
};

#define KILN_EW_SIMPLE_BINARY(NAME, TYPES, BOOLOUT, EXPR)                    \
  struct NAME {                                                              \
    static constexpr uint32_t kTypes = TYPES;                                \
    static constexpr bool kBoolOut = BOOLOUT;                                \
    explicit NAME(const Attributes&) {}                                      \
    template <typename T> auto operator()(T a, T b) const { return EXPR; }   \
  };

KILN_EW_SIMPLE_BINARY(AddOp, kNumeric, false, addOf(a, b))
KILN_EW_SIMPLE_BINARY(SubOp, kNumeric, false, subOf(a, b))
KILN_EW_SIMPLE_BINARY(MulOp, kNumeric, false, mulOf(a, b))
KILN_EW_SIMPLE_BINARY(DivOp, kNumeric, false, divOf(a, b))
KILN_EW_SIMPLE_BINARY(PReluOp, kFloats | kSigned | kUnsigned, false, a < T(0) ? mulOf(a, b) : a)
KILN_EW_SIMPLE_BINARY(EqualOp, kNumeric | kBoolSet, true, a == b)
KILN_EW_SIMPLE_BINARY(LessOp, kNumeric | kBoolSet, true, a < b)
KILN_EW_SIMPLE_BINARY(LessOrEqualOp, kNumeric | kBoolSet, true, a <= b)
KILN_EW_SIMPLE_BINARY(GreaterOp, kNumeric | kBoolSet, true, a > b)
KILN_EW_SIMPLE_BINARY(GreaterOrEqualOp, kNumeric | kBoolSet, true, a >= b)
KILN_EW_SIMPLE_BINARY(AndOp, kBoolSet, false, static_cast<bool>(a && b))
KILN_EW_SIMPLE_BINARY(OrOp, kBoolSet, false, static_cast<bool>(a || b))
KILN_EW_SIMPLE_BINARY(XorOp, kBoolSet, false, static_cast<bool>(a != b))
KILN_EW_SIMPLE_BINARY(BitwiseAndOp, kInts, false, static_cast<T>(a & b))
KILN_EW_SIMPLE_BINARY(BitwiseOrOp, kInts, false, static_cast<T>(a | b))
KILN_EW_SIMPLE_BINARY(BitwiseXorOp, kInts, false, static_cast<T>(a ^ b))
#undef KILN_EW_SIMPLE_BINARY

struct ModOp {
  static constexpr uint32_t kTypes = kNumeric;
  static constexpr bool kBoolOut = false;
  bool fmodSemantics;
  explicit ModOp(const Attributes& a) {
    int64_t f = a.getInt("fmod", 0);
    if (f != 0 && f != 1) throw Error("Mod: attribute fmod must be 0 or 1, got " + std::to_string(f));
    fmodSemantics = f == 1;
  }
  template <typename T> T operator()(T a, T b) const {
    T r;
    if constexpr (std::is_floating_point_v<T>) {
      r = std::fmod(a, b);
    } else {
      if (b == 0) return T(0);
      if constexpr (std::is_signed_v<T>)
        if (b == -1) return T(0);
      r = static_cast<T>(a % b);
    }
    // fmod=0: the result takes the divisor's sign (Python / numpy.mod).
    if (!fmodSemantics && r != T(0) && ((r < T(0)) != (b < T(0)))) r = static_cast<T>(r + b);
    return r;
  }
};

//! Unsigned and (opset 28) signed integers. Shifts outside [0, bits) give 0, or -1 for a
//! right shift of a negative value; a signed right shift is arithmetic.
struct BitShiftOp {
  static constexpr uint32_t kTypes = kInts;
  static constexpr bool kBoolOut = false;
  bool left;
  explicit BitShiftOp(const Attributes& a) {
    std::string d = a.getString("direction", "");
    if (d != "LEFT" && d != "RIGHT") throw Error("BitShift: attribute direction must be 'LEFT' or 'RIGHT', got '" + d + "'");
    left = d == "LEFT";
  }
  template <typename T> T operator()(T a, T b) const {
    constexpr T kBits = static_cast<T>(sizeof(T) * 8);
    bool outOfRange = b >= kBits;
    if constexpr (std::is_signed_v<T>) outOfRange = outOfRange || b < 0;
    if (outOfRange) return !left && a < T(0) ? static_cast<T>(-1) : T(0);
    if (left) return static_cast<T>(static_cast<WrapT<T>>(a) << b);
    return static_cast<T>(a >> b);  // arithmetic for signed T (C++20)
  }
};

template <typename Op>
void binaryInfer(LayerDesc& l) {
  requireInputs(l, 2, 2);
  requireType(l, 0, Op::kTypes);
  requireSameType(l, 0, 1);
  Op op(*l.attrs);
  (void)op;
  Dims d = broadcastDims(l, l.inputs[0].dims, l.inputs[1].dims);
  setOutput(l, 0, Op::kBoolOut ? DataType::kBOOL : l.inputs[0].type, d);
}

template <typename Op>
void binaryRef(const LayerDesc& l, const KernelIO& io) {
  Op op(*l.attrs);
  dispatchTypes<Op::kTypes & ~kHalfBf16>(io.in[0].type, [&](auto tag) {
    using T = decltype(tag);
    using R = decltype(op(T{}, T{}));
    const T* a = io.in[0].as<T>();
    const T* b = io.in[1].as<T>();
    R* y = io.out[0].as<R>();
    forEachBroadcast<2>(io.out[0].dims, {&io.in[0].dims, &io.in[1].dims},
                        [&](int64_t o, const std::array<int64_t, 2>& off) { y[o] = op(a[off[0]], b[off[1]]); });
  });
}

// ---------------------------------------------------------------------------------------------
// Pow: base and exponent may have different types.

template <typename T> T intPow(T base, int64_t e) {
  if (e < 0) {  // truncated 1/base^|e|
    if constexpr (std::is_signed_v<T>)
      if (base == -1) return (e & 1) ? T(-1) : T(1);
    return base == 1 ? T(1) : T(0);
  }
  T r = 1;
  while (e) {
    if (e & 1) r = mulOf(r, base);
    base = mulOf(base, base);
    e >>= 1;
  }
  return r;
}

void powInfer(LayerDesc& l) {
  requireInputs(l, 2, 2);
  requireType(l, 0, kNumeric);
  requireType(l, 1, kNumeric);
  setOutput(l, 0, l.inputs[0].type, broadcastDims(l, l.inputs[0].dims, l.inputs[1].dims));
}

void powRef(const LayerDesc&, const KernelIO& io) {
  constexpr uint32_t kSet = kNumeric & ~kHalfBf16;
  dispatchTypes<kSet>(io.in[0].type, [&](auto btag) {
    dispatchTypes<kSet>(io.in[1].type, [&](auto etag) {
      using B = decltype(btag);
      using E = decltype(etag);
      const B* x = io.in[0].as<B>();
      const E* p = io.in[1].as<E>();
      B* y = io.out[0].as<B>();
      forEachBroadcast<2>(io.out[0].dims, {&io.in[0].dims, &io.in[1].dims}, [&](int64_t o, const std::array<int64_t, 2>& off) {
        if constexpr (std::is_integral_v<B> && std::is_integral_v<E>) {
          E e = p[off[1]];
          y[o] = intPow<B>(x[off[0]], static_cast<uint64_t>(e) > uint64_t(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(e));
        } else {
          y[o] = fromDouble<B>(std::pow(static_cast<double>(x[off[0]]), static_cast<double>(p[off[1]])));
        }
      });
    });
  });
}

// ---------------------------------------------------------------------------------------------
// Variadic Max / Min / Sum / Mean.

struct MaxFold { static constexpr uint32_t kTypes = kNumeric; static constexpr bool kMean = false;
  template <typename T> T operator()(T a, T b) const { return maxOf(a, b); } };
struct MinFold { static constexpr uint32_t kTypes = kNumeric; static constexpr bool kMean = false;
  template <typename T> T operator()(T a, T b) const { return minOf(a, b); } };
struct SumFold { static constexpr uint32_t kTypes = kFloats; static constexpr bool kMean = false;
  template <typename T> T operator()(T a, T b) const { return a + b; } };
struct MeanFold { static constexpr uint32_t kTypes = kFloats; static constexpr bool kMean = true;
  template <typename T> T operator()(T a, T b) const { return a + b; } };

template <typename Op>
void variadicInfer(LayerDesc& l) {
  requireInputs(l, 1, l.inputs.size() ? l.inputs.size() : 1);
  Dims d = l.inputs[0].dims;
  for (size_t i = 0; i < l.inputs.size(); ++i) {
    if (!l.present(i)) opError(l, "input " + std::to_string(i) + " is missing");
    requireType(l, i, Op::kTypes);
    requireSameType(l, 0, i);
    d = broadcastDims(l, d, l.inputs[i].dims);
  }
  setOutput(l, 0, l.inputs[0].type, d);
}

template <typename Op>
void variadicRef(const LayerDesc&, const KernelIO& io) {
  Op op;
  dispatchTypes<Op::kTypes & ~kHalfBf16>(io.out[0].type, [&](auto tag) {
    using T = decltype(tag);
    T* y = io.out[0].as<T>();
    const Dims& d = io.out[0].dims;
    const T* x0 = io.in[0].as<T>();
    forEachBroadcast<1>(d, {&io.in[0].dims}, [&](int64_t o, const std::array<int64_t, 1>& off) { y[o] = x0[off[0]]; });
    for (size_t k = 1; k < io.in.size(); ++k) {
      const T* xk = io.in[k].as<T>();
      forEachBroadcast<1>(d, {&io.in[k].dims}, [&](int64_t o, const std::array<int64_t, 1>& off) { y[o] = op(y[o], xk[off[0]]); });
    }
    if constexpr (Op::kMean) {
      T n = static_cast<T>(io.in.size());
      for (int64_t i = 0; i < io.out[0].count; ++i) y[i] /= n;
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Clip(x, min?, max?): bounds are scalars; they are read in whatever numeric type they have.

void clipInfer(LayerDesc& l) {
  requireInputs(l, 1, 3);
  requireType(l, 0, kNumeric);
  for (size_t i = 1; i < l.inputs.size(); ++i) {
    if (!l.present(i)) continue;
    requireType(l, i, kNumeric);
    const Dims& d = l.inputs[i].dims;
    if (isStatic(d) && volume(d) != 1) opError(l, "min/max must be scalars, got dims " + toString(d));
  }
  setOutput(l, 0, l.inputs[0].type, l.inputs[0].dims);
}

template <typename T>
T readScalar(const TensorView& v, T fallback) {
  if (!v.data) return fallback;
  if (v.count != 1) throw Error("Clip: min/max must hold exactly one element");
  T r{};
  dispatchTypes<kNumeric & ~kHalfBf16>(v.type, [&](auto tag) {
    using S = decltype(tag);
    S s = v.as<S>()[0];
    if constexpr (std::is_same_v<S, T>) r = s;
    else r = fromDouble<T>(static_cast<double>(s));
  });
  return r;
}

void clipRef(const LayerDesc&, const KernelIO& io) {
  dispatchTypes<kNumeric & ~kHalfBf16>(io.in[0].type, [&](auto tag) {
    using T = decltype(tag);
    T lo = readScalar<T>(io.in.size() > 1 ? io.in[1] : TensorView{}, std::numeric_limits<T>::lowest());
    T hi = readScalar<T>(io.in.size() > 2 ? io.in[2] : TensorView{}, std::numeric_limits<T>::max());
    const T* x = io.in[0].as<T>();
    T* y = io.out[0].as<T>();
    for (int64_t i = 0; i < io.in[0].count; ++i) {
      T v = x[i] < lo ? lo : x[i];  // NaN passes through, like numpy.clip
      y[i] = v > hi ? hi : v;
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Where(cond, X, Y): X/Y of any type (raw elements).

void whereInfer(LayerDesc& l) {
  requireInputs(l, 3, 3);
  if (l.inputs[0].type != DataType::kBOOL) opError(l, std::string("condition must be bool, got ") + toString(l.inputs[0].type));
  requireSameType(l, 1, 2);
  Dims d = broadcastDims(l, broadcastDims(l, l.inputs[0].dims, l.inputs[1].dims), l.inputs[2].dims);
  setOutput(l, 0, l.inputs[1].type, d);
}

template <typename E>
void whereTyped(const KernelIO& io) {
  const uint8_t* c = io.in[0].as<uint8_t>();
  const E* x = io.in[1].as<E>();
  const E* yv = io.in[2].as<E>();
  E* out = io.out[0].as<E>();
  forEachBroadcast<3>(io.out[0].dims, {&io.in[0].dims, &io.in[1].dims, &io.in[2].dims},
                      [&](int64_t o, const std::array<int64_t, 3>& off) { out[o] = c[off[0]] ? x[off[1]] : yv[off[2]]; });
}

void whereRef(const LayerDesc&, const KernelIO& io) {
  switch (elementSize(io.out[0].type)) {
    case 1: whereTyped<uint8_t>(io); break;
    case 2: whereTyped<uint16_t>(io); break;
    case 4: whereTyped<uint32_t>(io); break;
    case 8: whereTyped<uint64_t>(io); break;
    default: throw Error("Where: unsupported element size");
  }
}

// ---------------------------------------------------------------------------------------------
// ONNX normalization of older opsets.

//! Opset-1 ops carry the meaningless `consumed_inputs` attribute.
void dropLegacyAttrs(Network&, Layer& layer, int) { layer.attrs.erase("consumed_inputs"); }

void appendOnesToSecondInput(Network& net, Layer& layer, int64_t trailing);

//! Whether a and b broadcast numpy-style.
bool broadcastable(const Dims& a, const Dims& b) {
  for (size_t k = 1; k <= std::min(a.size(), b.size()); ++k) {
    const int64_t x = a[a.size() - k], y = b[b.size() - k];
    if (x != y && x != 1 && y != 1) return false;
  }
  return true;
}

//! Binary ops before opset 7 broadcast B onto A only with broadcast=1, aligned at `axis`
//! (default: suffix, which numpy broadcasting already does). A non-suffix axis becomes a
//! reshape of B with trailing 1s.
void normalizeLegacyBroadcast(Network& net, Layer& layer, int opset) {
  layer.attrs.erase("consumed_inputs");
  if (opset >= 7) return;
  bool broadcast = layer.attrs.getInt("broadcast", 0) != 0;
  bool hasAxis = layer.attrs.has("axis");
  int64_t axis = layer.attrs.getInt("axis", 0);
  layer.attrs.erase("broadcast");
  layer.attrs.erase("axis");
  if (!broadcast || !hasAxis || layer.inputs.size() != 2 || !layer.inputs[0] || !layer.inputs[1]) return;
  Tensor* a = layer.inputs[0];
  Tensor* b = layer.inputs[1];
  std::string where = "layer '" + layer.name + "' (" + layer.op + "-" + std::to_string(opset) + ")";
  if (!a->dimsKnown || !b->dimsKnown)
    throw UnsupportedError(where + ": legacy broadcast with axis needs the input ranks at import time");
  int64_t ra = static_cast<int64_t>(a->dims.size()), rb = static_cast<int64_t>(b->dims.size());
  if (axis < 0) axis += ra;
  if (axis < 0 || axis + rb > ra) throw Error(where + ": broadcast axis " + std::to_string(axis) + " out of range");
  appendOnesToSecondInput(net, layer, ra - axis - rb);
}

//! PRelu whose 1-D slope of d elements does not broadcast with X numpy-style (legacy models:
//! x [N, C, L] with a per-channel slope [C]): as the ONNX reference evaluator does, the slope
//! applies along the one dimension of X of size d (needs the ranks known at import: pre-opset-7
//! models are inferred while importing, graph inputs always are).
void normalizePRelu(Network& net, Layer& layer, int opset) {
  normalizeLegacyBroadcast(net, layer, opset);
  if (layer.inputs.size() != 2 || !layer.inputs[0] || !layer.inputs[1]) return;
  const Tensor* x = layer.inputs[0];
  const Tensor* slope = layer.inputs[1];
  if (!x->dimsKnown || !slope->dimsKnown || slope->dims.size() != 1 || !isStatic(x->dims) || !isStatic(slope->dims)) return;
  if (broadcastable(x->dims, slope->dims)) return;
  const int64_t d = slope->dims[0];
  int64_t at = -1, found = 0;
  for (size_t k = 0; k < x->dims.size(); ++k)
    if (x->dims[k] == d) at = static_cast<int64_t>(k), ++found;
  if (found != 1) return;  // shape inference reports the broadcast error
  appendOnesToSecondInput(net, layer, static_cast<int64_t>(x->dims.size()) - 1 - at);
}

//! Input 1 of `layer` with `trailing` dims of 1 appended (a reshaped constant, or a Reshape layer).
void appendOnesToSecondInput(Network& net, Layer& layer, int64_t trailing) {
  if (trailing == 0) return;
  Tensor* b = layer.inputs[1];
  const int64_t rb = static_cast<int64_t>(b->dims.size());
  Dims nd = b->dims;
  nd.insert(nd.end(), static_cast<size_t>(trailing), 1);
  if (b->isConstant()) {
    layer.inputs[1] = net.addConstant(b->name + "_bcast", b->value.reshaped(nd));
    return;
  }
  // Reshape's 0 copies the input dim, so unknown dims of B are fine.
  HostTensor shape(DataType::kINT64, {static_cast<int64_t>(nd.size())});
  for (int64_t i = 0; i < static_cast<int64_t>(nd.size()); ++i) shape.as<int64_t>()[i] = i < rb ? 0 : 1;
  Layer* r = net.addLayer("Reshape", {b, net.addConstant(b->name + "_bcast_shape", shape)}, 1, {}, layer.name + "_bcast");
  layer.inputs[1] = r->outputs[0];
}

//! Clip before opset 11 has float attributes min/max instead of inputs.
void normalizeClip(Network& net, Layer& layer, int opset) {
  layer.attrs.erase("consumed_inputs");
  if (opset >= 11) return;
  auto bound = [&](const char* name) -> Tensor* {
    if (!layer.attrs.has(name)) return nullptr;
    HostTensor v(DataType::kFLOAT, {});
    *v.as<float>() = layer.attrs.getFloat(name, 0.f);
    layer.attrs.erase(name);
    return net.addConstant(layer.name + "_" + name, v);
  };
  Tensor* lo = bound("min");
  Tensor* hi = bound("max");
  layer.inputs.resize(1);
  if (lo || hi) layer.inputs.push_back(lo);
  if (hi) layer.inputs.push_back(hi);
}

// ---------------------------------------------------------------------------------------------
// Registration.

void add(OpRegistry& r, const char* name, InferFn infer, RefFn ref, int minOpset = 1,
         void (*normalize)(Network&, Layer&, int) = dropLegacyAttrs) {
  OpDef d;
  d.name = name;
  d.infer = infer;
  d.ref = ref;
  d.minOpset = minOpset;
  d.normalize = normalize;
  r.add(d);
}

template <typename Op> void addUnary(OpRegistry& r, const char* name, int minOpset = 1) {
  add(r, name, unaryInfer<Op>, promotedRef<unaryRef<Op>>, minOpset);
}
template <typename Op> void addBinary(OpRegistry& r, const char* name, int minOpset = 1) {
  add(r, name, binaryInfer<Op>, promotedRef<binaryRef<Op>>, minOpset, normalizeLegacyBroadcast);
}
template <typename Op> void addVariadic(OpRegistry& r, const char* name) {
  add(r, name, variadicInfer<Op>, promotedRef<variadicRef<Op>>);
}

}  // namespace

void registerElementwiseOps(OpRegistry& r) {
  addUnary<ReluOp>(r, "Relu");
  addUnary<LeakyReluOp>(r, "LeakyRelu");
  addUnary<EluOp>(r, "Elu");
  addUnary<SeluOp>(r, "Selu");
  addUnary<SigmoidOp>(r, "Sigmoid");
  addUnary<HardSigmoidOp>(r, "HardSigmoid");
  addUnary<HardSwishOp>(r, "HardSwish", 14);
  addUnary<TanhOp>(r, "Tanh");
  addUnary<SoftplusOp>(r, "Softplus");
  addUnary<SoftsignOp>(r, "Softsign");
  addUnary<GeluOp>(r, "Gelu", 20);
  addUnary<ErfOp>(r, "Erf", 9);
  addUnary<SqrtOp>(r, "Sqrt");
  addUnary<ExpOp>(r, "Exp");
  addUnary<LogOp>(r, "Log");
  addUnary<NegOp>(r, "Neg");
  addUnary<AbsOp>(r, "Abs");
  addUnary<ReciprocalOp>(r, "Reciprocal");
  addUnary<FloorOp>(r, "Floor");
  addUnary<CeilOp>(r, "Ceil");
  addUnary<RoundOp>(r, "Round", 11);
  addUnary<SignOp>(r, "Sign", 9);
  addUnary<NotOp>(r, "Not");
  addUnary<BitwiseNotOp>(r, "BitwiseNot", 18);
  addUnary<SinOp>(r, "Sin", 7);
  addUnary<CosOp>(r, "Cos", 7);
  addUnary<TanOp>(r, "Tan", 7);
  addUnary<AsinOp>(r, "Asin", 7);
  addUnary<AcosOp>(r, "Acos", 7);
  addUnary<AtanOp>(r, "Atan", 7);
  addUnary<SinhOp>(r, "Sinh", 9);
  addUnary<CoshOp>(r, "Cosh", 9);
  addUnary<AsinhOp>(r, "Asinh", 9);
  addUnary<AcoshOp>(r, "Acosh", 9);
  addUnary<AtanhOp>(r, "Atanh", 9);
  addUnary<IsNaNOp>(r, "IsNaN", 9);
  addUnary<IsInfOp>(r, "IsInf", 10);
  addUnary<CeluOp>(r, "Celu", 12);
  addUnary<ThresholdedReluOp>(r, "ThresholdedRelu", 10);
  addUnary<MishOp>(r, "Mish", 18);
  addUnary<ShrinkOp>(r, "Shrink", 9);

  addBinary<AddOp>(r, "Add");
  addBinary<SubOp>(r, "Sub");
  addBinary<MulOp>(r, "Mul");
  addBinary<DivOp>(r, "Div");
  add(r, "PRelu", binaryInfer<PReluOp>, promotedRef<binaryRef<PReluOp>>, 1, normalizePRelu);
  addBinary<ModOp>(r, "Mod", 10);
  addBinary<BitShiftOp>(r, "BitShift", 11);
  addBinary<EqualOp>(r, "Equal");
  addBinary<LessOp>(r, "Less");
  addBinary<LessOrEqualOp>(r, "LessOrEqual", 12);
  addBinary<GreaterOp>(r, "Greater");
  addBinary<GreaterOrEqualOp>(r, "GreaterOrEqual", 12);
  addBinary<AndOp>(r, "And");
  addBinary<OrOp>(r, "Or");
  addBinary<XorOp>(r, "Xor");
  addBinary<BitwiseAndOp>(r, "BitwiseAnd", 18);
  addBinary<BitwiseOrOp>(r, "BitwiseOr", 18);
  addBinary<BitwiseXorOp>(r, "BitwiseXor", 18);
  add(r, "Pow", powInfer, promotedRef<powRef>, 1, normalizeLegacyBroadcast);

  addVariadic<MaxFold>(r, "Max");
  addVariadic<MinFold>(r, "Min");
  addVariadic<SumFold>(r, "Sum");
  addVariadic<MeanFold>(r, "Mean");

  add(r, "Clip", clipInfer, promotedRef<clipRef>, 1, normalizeClip);

  OpDef where;
  where.name = "Where";
  where.infer = whereInfer;
  where.ref = whereRef;
  where.anyType = true;
  where.minOpset = 9;
  r.add(where);

  registerElementwiseCastOps(r);
  registerSwishOps(r);
}

}  // namespace kiln
