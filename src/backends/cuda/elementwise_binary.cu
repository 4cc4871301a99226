// CUDA elementwise family: broadcasting binary arithmetic (Add, Sub, Mul, Div, Mod, Pow, PRelu,
// Max, Min, Mean of two) over every numeric type; half/bf16 computed in float32.
#include "backends/cuda/elementwise_functors.cuh"

namespace kiln::cuda::ew {

namespace {

template <uint32_t Set, class F>
void runArith(DataType t, const Geom& g, const void* const* in, void* out, const F& f, cudaStream_t s) {
  dispatchCudaType<Set>(t, [&](auto tag) {
    using T = decltype(tag);
    launchBcast<F, 2, T, T, T>(g, in, out, f, s);
  }, "CUDA elementwise");
}

}  // namespace

//! Arithmetic binary ops; returns false for ops handled elsewhere.
bool launchBinaryArith(Binary op, DataType t, const Geom& g, const void* const* in, void* out, cudaStream_t s) {
  switch (op) {
    case Binary::kAdd: runArith<kNumeric>(t, g, in, out, AddF{}, s); return true;
    case Binary::kSub: runArith<kNumeric>(t, g, in, out, SubF{}, s); return true;
    case Binary::kMul: runArith<kNumeric>(t, g, in, out, MulF{}, s); return true;
    case Binary::kDiv: runArith<kNumeric>(t, g, in, out, DivF{}, s); return true;
    case Binary::kMod: runArith<kNumeric>(t, g, in, out, ModF<false>{}, s); return true;
    case Binary::kFmod: runArith<kNumeric>(t, g, in, out, ModF<true>{}, s); return true;
    case Binary::kPow: runArith<kNumeric>(t, g, in, out, PowF{}, s); return true;
    case Binary::kPRelu: runArith<kNumeric>(t, g, in, out, PReluF{}, s); return true;
    case Binary::kMax: runArith<kNumeric>(t, g, in, out, MaxF{}, s); return true;
    case Binary::kMin: runArith<kNumeric>(t, g, in, out, MinF{}, s); return true;
    case Binary::kMean: runArith<kFloats>(t, g, in, out, MeanF{}, s); return true;
    default: return false;
  }
}

namespace {

//! Pow(base A, exponent B) with A != B, returning A (see launchPowMixed).
struct PowMixedF {
  template <class A, class B> __device__ __forceinline__ A operator()(A a, B b) const {
    if constexpr (std::is_integral_v<A> && std::is_integral_v<B>) return intPow<A>(a, clampExponent(b));
    else if constexpr (std::is_integral_v<A>) return fromDouble<A>(::pow(static_cast<double>(a), static_cast<double>(b)));
    else return static_cast<A>(::pow(static_cast<double>(a), static_cast<double>(b)));
  }
};

constexpr uint32_t kPowBases = bit(DataType::kFLOAT) | bit(DataType::kHALF) | bit(DataType::kBF16) | bit(DataType::kDOUBLE) | bit(DataType::kINT32) |
                               bit(DataType::kINT64);
constexpr uint32_t kPowExponents = bit(DataType::kFLOAT) | bit(DataType::kDOUBLE) | bit(DataType::kINT32) | bit(DataType::kINT64) |
                                   bit(DataType::kUINT32) | bit(DataType::kUINT64);

}  // namespace

bool powMixedSupported(DataType base, DataType exponent) {
  return base != exponent && (kPowBases & bit(base)) != 0 && (kPowExponents & bit(exponent)) != 0;
}

void launchPowMixed(DataType base, DataType exponent, const Geom& g, const void* const* in, void* out, cudaStream_t s) {
  if (!powMixedSupported(base, exponent))
    throw UnsupportedError(std::string("CUDA Pow: no kernel for base ") + toString(base) + " and exponent " + toString(exponent));
  dispatchCudaType<kPowBases>(base, [&](auto a) {
    dispatchCudaType<kPowExponents>(exponent, [&](auto b) {
      using A = decltype(a);
      using B = decltype(b);
      if constexpr (!std::is_same_v<A, B>) launchBcast<PowMixedF, 2, A, B, A>(g, in, out, PowMixedF{}, s);
    }, "CUDA elementwise");
  }, "CUDA elementwise");
}

}  // namespace kiln::cuda::ew
