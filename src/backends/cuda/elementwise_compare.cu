// CUDA elementwise family: broadcasting comparisons (bool output), logic and bitwise ops, bit
// shifts, Where (raw elements of any size) and the one-pass variadic Sum/Mean/Max/Min of 3-4 inputs.
#include "backends/cuda/elementwise_functors.cuh"

namespace kiln::cuda::ew {

bool launchBinaryArith(Binary op, DataType t, const Geom& g, const void* const* in, void* out, cudaStream_t s);

namespace {

template <uint32_t Set, bool BoolOut, class F>
void runBinary(DataType t, const Geom& g, const void* const* in, void* out, const F& f, cudaStream_t s) {
  dispatchCudaType<Set>(t, [&](auto tag) {
    using T = decltype(tag);
    using O = std::conditional_t<BoolOut, bool, T>;
    launchBcast<F, 2, T, T, O>(g, in, out, f, s);
  }, "CUDA elementwise");
}

}  // namespace

void launchBinary(Binary op, DataType t, const Geom& g, const void* const* in, void* out, cudaStream_t s) {
  if (g.nIn != 2) throw Error("CUDA elementwise: binary op needs 2 inputs");
  if (!inSet(binaryTypes(op), t)) throw UnsupportedError(std::string("CUDA elementwise: unsupported type ") + toString(t));
  if (g.total == 0) return;
  if (launchBinaryArith(op, t, g, in, out, s)) return;
  constexpr uint32_t kCmp = kNumeric | kBoolSet;
  switch (op) {
    case Binary::kEqual: runBinary<kCmp, true>(t, g, in, out, EqualF{}, s); return;
    case Binary::kLess: runBinary<kCmp, true>(t, g, in, out, LessF{}, s); return;
    case Binary::kLessOrEqual: runBinary<kCmp, true>(t, g, in, out, LessOrEqualF{}, s); return;
    case Binary::kGreater: runBinary<kCmp, true>(t, g, in, out, GreaterF{}, s); return;
    case Binary::kGreaterOrEqual: runBinary<kCmp, true>(t, g, in, out, GreaterOrEqualF{}, s); return;
    case Binary::kAnd: runBinary<kBoolSet, false>(t, g, in, out, AndF{}, s); return;
    case Binary::kOr: runBinary<kBoolSet, false>(t, g, in, out, OrF{}, s); return;
    case Binary::kXor: runBinary<kBoolSet, false>(t, g, in, out, XorF{}, s); return;
    case Binary::kBitwiseAnd: runBinary<kInts, false>(t, g, in, out, BitwiseAndF{}, s); return;
    case Binary::kBitwiseOr: runBinary<kInts, false>(t, g, in, out, BitwiseOrF{}, s); return;
    case Binary::kBitwiseXor: runBinary<kInts, false>(t, g, in, out, BitwiseXorF{}, s); return;
    case Binary::kShiftLeft: runBinary<kInts, false>(t, g, in, out, BitShiftF<true>{}, s); return;
    case Binary::kShiftRight: runBinary<kInts, false>(t, g, in, out, BitShiftF<false>{}, s); return;
    default: break;
  }
  throw Error("CUDA elementwise: unknown binary op");
}

namespace {

template <int N, class F>
void runFold(DataType t, const Geom& g, const void* const* in, void* out, const F& f, cudaStream_t s) {
  dispatchCudaType<kFloats>(t, [&](auto tag) {
    using T = decltype(tag);
    launchBcast<F, N, T, T, T>(g, in, out, f, s);
  }, "CUDA elementwise");
}

template <int N>
void foldN(Fold op, DataType t, const Geom& g, const void* const* in, void* out, cudaStream_t s) {
  switch (op) {
    case Fold::kSum: runFold<N>(t, g, in, out, FoldF<AddF, false>{}, s); return;
    case Fold::kMean: runFold<N>(t, g, in, out, FoldF<AddF, true>{}, s); return;
    case Fold::kMax: runFold<N>(t, g, in, out, FoldF<MaxF, false>{}, s); return;
    case Fold::kMin: runFold<N>(t, g, in, out, FoldF<MinF, false>{}, s); return;
  }
}

}  // namespace

void launchFold(Fold op, DataType t, const Geom& g, const void* const* in, void* out, cudaStream_t s) {
  if (!inSet(kFloats, t)) throw UnsupportedError(std::string("CUDA elementwise: unsupported type ") + toString(t));
  if (g.total == 0) return;
  if (g.nIn == 3) foldN<3>(op, t, g, in, out, s);
  else if (g.nIn == 4) foldN<4>(op, t, g, in, out, s);
  else throw Error("CUDA elementwise: one-pass fold takes 3 or 4 inputs");
}

void launchWhere(size_t elemSize, const Geom& g, const void* const* in, void* out, cudaStream_t s) {
  if (g.nIn != 3) throw Error("CUDA elementwise: Where needs 3 inputs");
  if (g.total == 0) return;
  switch (elemSize) {
    case 1: launchBcast<WhereF, 3, bool, uint8_t, uint8_t>(g, in, out, WhereF{}, s); return;
    case 2: launchBcast<WhereF, 3, bool, uint16_t, uint16_t>(g, in, out, WhereF{}, s); return;
    case 4: launchBcast<WhereF, 3, bool, uint32_t, uint32_t>(g, in, out, WhereF{}, s); return;
    case 8: launchBcast<WhereF, 3, bool, uint64_t, uint64_t>(g, in, out, WhereF{}, s); return;
    default: throw UnsupportedError("CUDA Where: unsupported element size");
  }
}

}  // namespace kiln::cuda::ew
