// CUDA elementwise family: per-element functors, on compute types (float for half/bf16). Their
// semantics follow the CPU reference kernels of src/ops/elementwise.cpp exactly (NaN handling,
// integer wrapping, division by zero, shift ranges); GELU's constants from ops/activation.h (the
// float forms: activation_math.cuh).
#pragma once
#include "backends/cuda/activation_math.cuh"
#include "backends/cuda/elementwise_device.cuh"
#include "ops/activation.h"

namespace kiln::cuda::ew {

//! Functors with nothing to read before the loop.
struct NoPrep {
  template <class S> __device__ __forceinline__ void prepare() {}
};

#define KILN_EWF_UNARY(NAME, EXPR)                                                  \
  struct NAME : NoPrep {                                                            \
    template <class T> __device__ __forceinline__ T operator()(T x) const { return EXPR; } \
  };

// ---------------------------------------------------------------------------------------------
// Unary.
KILN_EWF_UNARY(ReluF, x > T(0) ? x : T(0))
KILN_EWF_UNARY(SigmoidF, T(1) / (T(1) + dm::exp(-x)))
KILN_EWF_UNARY(TanhF, dm::tanh(x))
KILN_EWF_UNARY(SoftplusF, x > T(0) ? x + dm::log1p(dm::exp(-x)) : dm::log1p(dm::exp(x)))
KILN_EWF_UNARY(SoftsignF, x / (T(1) + dm::fabs(x)))
KILN_EWF_UNARY(HardSwishF, x * dm::fmax(T(0), dm::fmin(T(1), x / T(6) + T(0.5))))
//! float: the one-exponential form of activation_math.cuh (the same values, a third of the work).
struct MishF : NoPrep {
  template <class T> __device__ __forceinline__ T operator()(T x) const {
    if constexpr (std::is_same_v<T, float>) return mish(x);
    else return x * dm::tanh(x > T(0) ? x + dm::log1p(dm::exp(-x)) : dm::log1p(dm::exp(x)));
  }
};
KILN_EWF_UNARY(GeluF, T(0.5) * x * dm::erfc(-x * T(kGeluErfScale)))
KILN_EWF_UNARY(GeluTanhF, T(0.5) * x * (T(1) + dm::tanh(T(kGeluTanhScale) * (x + T(kGeluTanhCubic) * x * x * x))))
KILN_EWF_UNARY(SqrtF, dm::sqrt(x))
KILN_EWF_UNARY(ExpF, dm::exp(x))
KILN_EWF_UNARY(LogF, dm::log(x))
KILN_EWF_UNARY(ReciprocalF, T(1) / x)
KILN_EWF_UNARY(FloorF, dm::floor(x))
KILN_EWF_UNARY(CeilF, dm::ceil(x))
KILN_EWF_UNARY(RoundF, dm::rint(x))  // half to even
KILN_EWF_UNARY(SinF, dm::sin(x))
KILN_EWF_UNARY(CosF, dm::cos(x))
KILN_EWF_UNARY(TanF, dm::tan(x))
KILN_EWF_UNARY(AsinF, dm::asin(x))
KILN_EWF_UNARY(AcosF, dm::acos(x))
KILN_EWF_UNARY(AtanF, dm::atan(x))
KILN_EWF_UNARY(SinhF, dm::sinh(x))
KILN_EWF_UNARY(CoshF, dm::cosh(x))
KILN_EWF_UNARY(AsinhF, dm::asinh(x))
KILN_EWF_UNARY(AcoshF, dm::acosh(x))
KILN_EWF_UNARY(AtanhF, dm::atanh(x))
KILN_EWF_UNARY(NegF, subW(T(0), x))
KILN_EWF_UNARY(NotF, !x)
KILN_EWF_UNARY(BitwiseNotF, static_cast<T>(~x))
#undef KILN_EWF_UNARY

struct AbsF : NoPrep {
  template <class T> __device__ __forceinline__ T operator()(T x) const {
    if constexpr (kIsFloat<T>) return dm::fabs(x);
    else if constexpr (std::is_signed_v<T>) return x < T(0) ? subW(T(0), x) : x;
    else return x;
  }
};

struct SignF : NoPrep {
  template <class T> __device__ __forceinline__ T operator()(T x) const {
    if constexpr (std::is_unsigned_v<T>) {
      return x > T(0) ? T(1) : T(0);
    } else {
      if (isNaN(x)) return x;
      return x > T(0) ? T(1) : (x < T(0) ? static_cast<T>(-1) : T(0));
    }
  }
};

struct ErfF : NoPrep {
  template <class T> __device__ __forceinline__ T operator()(T x) const {
    if constexpr (kIsFloat<T>) return dm::erf(x);
    else return fromDouble<T>(::erf(static_cast<double>(x)));
  }
};

struct LeakyReluF : NoPrep {
  float alpha;
  template <class T> __device__ __forceinline__ T operator()(T x) const { return x >= T(0) ? x : T(alpha) * x; }
};
struct EluF : NoPrep {
  float alpha;
  template <class T> __device__ __forceinline__ T operator()(T x) const { return x >= T(0) ? x : T(alpha) * dm::expm1(x); }
};
struct SeluF : NoPrep {
  float alpha, gamma;
  template <class T> __device__ __forceinline__ T operator()(T x) const {
    return T(gamma) * (x > T(0) ? x : T(alpha) * dm::expm1(x));
  }
};
struct CeluF : NoPrep {
  float alpha;
  template <class T> __device__ __forceinline__ T operator()(T x) const {
    return x > T(0) ? x : T(alpha) * dm::expm1(x / T(alpha));
  }
};
struct HardSigmoidF : NoPrep {
  float alpha, beta;
  template <class T> __device__ __forceinline__ T operator()(T x) const {
    return dm::fmax(T(0), dm::fmin(T(1), T(alpha) * x + T(beta)));
  }
};
struct ThresholdedReluF : NoPrep {
  float alpha;
  template <class T> __device__ __forceinline__ T operator()(T x) const { return x > T(alpha) ? x : T(0); }
};
struct ShrinkF : NoPrep {
  float bias, lambd;
  template <class T> __device__ __forceinline__ T operator()(T x) const {
    if constexpr (kIsFloat<T>) {
      return x < -T(lambd) ? x + T(bias) : (x > T(lambd) ? x - T(bias) : T(0));
    } else {
      const double v = static_cast<double>(x), l = lambd, b = bias;
      return fromDouble<T>(v < -l ? v + b : (v > l ? v - b : 0.0));
    }
  }
};
struct IsNaNF : NoPrep {
  template <class T> __device__ __forceinline__ bool operator()(T x) const { return x != x; }
};
struct IsInfF : NoPrep {
  bool neg, pos;
  template <class T> __device__ __forceinline__ bool operator()(T x) const {
    return ::isinf(x) && ((x > T(0) && pos) || (x < T(0) && neg));
  }
};

//! Reads a Clip bound as the reference does: same type directly, otherwise through double.
template <class T, class S> __device__ __forceinline__ T readBound(const void* p, DataType t, T fallback) {
  if (!p) return fallback;
  if constexpr (std::is_integral_v<T>) {
    if (t == DataType::kINT64 && std::is_same_v<S, int64_t>) return static_cast<T>(*static_cast<const int64_t*>(p));
    if (t == DataType::kUINT64 && std::is_same_v<S, uint64_t>) return static_cast<T>(*static_cast<const uint64_t*>(p));
  }
  return fromDouble<T>(loadAsDouble(p, t));
}

//! Clip with bounds read from device scalars (T: compute type, S: storage type of x).
template <class T> struct ClipF {
  const void* pLo;
  DataType tLo;
  const void* pHi;
  DataType tHi;
  T lo, hi;
  template <class S> __device__ __forceinline__ void prepare() {
    lo = readBound<T, S>(pLo, tLo, std::numeric_limits<T>::lowest());
    hi = readBound<T, S>(pHi, tHi, std::numeric_limits<T>::max());
  }
  __device__ __forceinline__ T operator()(T x) const {
    T v = x < lo ? lo : x;  // NaN passes through
    return v > hi ? hi : v;
  }
};

//! Integer power as the reference: negative exponents give the truncated 1/base^|e|.
template <class T> __device__ __forceinline__ T intPow(T base, int64_t e) {
  if (e < 0) {
    if constexpr (std::is_signed_v<T>)
      if (base == T(-1)) return (e & 1) ? T(-1) : T(1);
    return base == T(1) ? T(1) : T(0);
  }
  T r = 1;
  while (e) {
    if (e & 1) r = mulW(r, base);
    base = mulW(base, base);
    e >>= 1;
  }
  return r;
}

//! The reference's exponent clamp for integer Pow: values above INT64_MAX as unsigned (which
//! includes every negative exponent) become INT64_MAX.
template <class E> __device__ __forceinline__ int64_t clampExponent(E e) {
  return static_cast<uint64_t>(e) > uint64_t(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(e);
}

//! Pow with one exponent read from a device scalar of any numeric type.
template <class T> struct PowScalarF {
  const void* pExp;
  DataType tExp;
  double e;
  int64_t ei;
  bool intExp;
  template <class S> __device__ __forceinline__ void prepare() {
    intExp = false;
    e = 0;
    ei = 0;
    if constexpr (std::is_integral_v<T>) {
      switch (tExp) {
        case DataType::kINT8: intExp = true; ei = clampExponent(*static_cast<const int8_t*>(pExp)); break;
        case DataType::kINT16: intExp = true; ei = clampExponent(*static_cast<const int16_t*>(pExp)); break;
        case DataType::kINT32: intExp = true; ei = clampExponent(*static_cast<const int32_t*>(pExp)); break;
        case DataType::kINT64: intExp = true; ei = clampExponent(*static_cast<const int64_t*>(pExp)); break;
        case DataType::kUINT8: intExp = true; ei = clampExponent(*static_cast<const uint8_t*>(pExp)); break;
        case DataType::kUINT16: intExp = true; ei = clampExponent(*static_cast<const uint16_t*>(pExp)); break;
        case DataType::kUINT32: intExp = true; ei = clampExponent(*static_cast<const uint32_t*>(pExp)); break;
        case DataType::kUINT64: intExp = true; ei = clampExponent(*static_cast<const uint64_t*>(pExp)); break;
        default: break;
      }
    }
    if (!intExp) e = loadAsDouble(pExp, tExp);
  }
  __device__ __forceinline__ T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) {
      if (intExp) return intPow<T>(x, ei);
      return fromDouble<T>(::pow(static_cast<double>(x), e));
    } else {
      if (e == 2.0) return x * x;
      return dm::pow(x, static_cast<T>(e));
    }
  }
};

// ---------------------------------------------------------------------------------------------
// Binary (both operands of one compute type).

struct AddF {
  template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return addW(a, b); }
};
struct SubF {
  template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return subW(a, b); }
};
struct MulF {
  template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return mulW(a, b); }
};
//! Integer division truncates; x/0 gives 0 and MIN/-1 wraps (numpy), never a trap.
struct DivF {
  template <class T> __device__ __forceinline__ T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      if (b == T(0)) return T(0);
      if constexpr (std::is_signed_v<T>)
        if (b == T(-1)) return subW(T(0), a);
      return static_cast<T>(a / b);
    } else {
      return a / b;
    }
  }
};
template <bool Fmod> struct ModF {
  template <class T> __device__ __forceinline__ T operator()(T a, T b) const {
    T r;
    if constexpr (kIsFloat<T>) {
      r = dm::fmod(a, b);
    } else {
      if (b == T(0)) return T(0);
      if constexpr (std::is_signed_v<T>)
        if (b == T(-1)) return T(0);
      r = static_cast<T>(a % b);
    }
    if constexpr (!std::is_unsigned_v<T>)
      if (!Fmod && r != T(0) && ((r < T(0)) != (b < T(0)))) r = static_cast<T>(r + b);
    return r;
  }
};
struct PowF {
  template <class T> __device__ __forceinline__ T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) return intPow<T>(a, clampExponent(b));
    else return b == T(2) ? a * a : dm::pow(a, b);
  }
};
struct PReluF {
  template <class T> __device__ __forceinline__ T operator()(T a, T b) const {
    if constexpr (std::is_unsigned_v<T>) return a;
    else return a < T(0) ? mulW(a, b) : a;
  }
};
//! numpy maximum/minimum: a NaN operand propagates.
struct MaxF {
  template <class T> __device__ __forceinline__ T operator()(T a, T b) const {
    return isNaN(a) ? a : isNaN(b) ? b : (a < b ? b : a);
  }
};
struct MinF {
  template <class T> __device__ __forceinline__ T operator()(T a, T b) const {
    return isNaN(a) ? a : isNaN(b) ? b : (b < a ? b : a);
  }
};
struct MeanF {
  template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return (a + b) / T(2); }
};
struct EqualF {
  template <class T> __device__ __forceinline__ bool operator()(T a, T b) const { return a == b; }
};
struct LessF {
  template <class T> __device__ __forceinline__ bool operator()(T a, T b) const { return a < b; }
};
struct LessOrEqualF {
  template <class T> __device__ __forceinline__ bool operator()(T a, T b) const { return a <= b; }
};
struct GreaterF {
  template <class T> __device__ __forceinline__ bool operator()(T a, T b) const { return a > b; }
};
struct GreaterOrEqualF {
  template <class T> __device__ __forceinline__ bool operator()(T a, T b) const { return a >= b; }
};
struct AndF {
  template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return static_cast<T>(a && b); }
};
struct OrF {
  template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return static_cast<T>(a || b); }
};
struct XorF {
  template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return static_cast<T>(a != b); }
};
struct BitwiseAndF {
  template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return static_cast<T>(a & b); }
};
struct BitwiseOrF {
  template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return static_cast<T>(a | b); }
};
struct BitwiseXorF {
  template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return static_cast<T>(a ^ b); }
};
//! Shifts outside [0, bits) give 0, or -1 for a right shift of a negative value.
template <bool Left> struct BitShiftF {
  template <class T> __device__ __forceinline__ T operator()(T a, T b) const {
    constexpr T kBits = static_cast<T>(sizeof(T) * 8);
    if constexpr (std::is_signed_v<T>) {
      if (b >= kBits || b < T(0)) return !Left && a < T(0) ? static_cast<T>(-1) : T(0);
    } else {
      if (b >= kBits) return T(0);
    }
    if constexpr (Left) return static_cast<T>(static_cast<WrapT<T>>(a) << b);
    else return static_cast<T>(a >> b);  // arithmetic for signed T
  }
};

// Variadic folds over 3 or 4 inputs, in the reference's order ((x0 op x1) op x2) op x3.
template <class F, bool Mean> struct FoldF {
  F f;
  template <class T> __device__ __forceinline__ T operator()(T a, T b, T c) const {
    T r = f(f(a, b), c);
    if constexpr (Mean) r = r / T(3);
    return r;
  }
  template <class T> __device__ __forceinline__ T operator()(T a, T b, T c, T d) const {
    T r = f(f(f(a, b), c), d);
    if constexpr (Mean) r = r / T(4);
    return r;
  }
};

//! Where on raw elements: cond ? x : y.
struct WhereF {
  template <class T> __device__ __forceinline__ T operator()(bool c, T x, T y) const { return c ? x : y; }
};

}  // namespace kiln::cuda::ew
