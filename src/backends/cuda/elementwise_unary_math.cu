// CUDA elementwise family: math unary ops, integer/bool unary ops, Clip and Pow with a scalar
// exponent. Flat kernel with 16-byte vector loads and stores; half/bf16 computed in float32.
#include "backends/cuda/elementwise_functors.cuh"

namespace kiln::cuda::ew {

bool launchUnaryActivation(Unary op, DataType t, const void* x, void* y, int64_t n, const UnaryArgs& a, cudaStream_t s);

namespace {

template <uint32_t Set, bool BoolOut, class F>
void runUnary(DataType t, const void* x, void* y, int64_t n, const F& f, cudaStream_t s) {
  dispatchCudaType<Set>(t, [&](auto tag) {
    using S = decltype(tag);
    using O = std::conditional_t<BoolOut, bool, S>;
    launchFlat(static_cast<const S*>(x), static_cast<O*>(y), n, Widened<F, S, O>{f}, s);
  }, "CUDA elementwise");
}

}  // namespace

void launchUnary(Unary op, DataType t, const void* x, void* y, int64_t n, const UnaryArgs& a, cudaStream_t s) {
  if (n <= 0) return;
  if (!inSet(unaryTypes(op), t)) throw UnsupportedError(std::string("CUDA elementwise: unsupported type ") + toString(t));
  if (launchUnaryActivation(op, t, x, y, n, a, s)) return;
  switch (op) {
    case Unary::kErf: runUnary<kNumeric, false>(t, x, y, n, ErfF{}, s); return;
    case Unary::kSqrt: runUnary<kFloats, false>(t, x, y, n, SqrtF{}, s); return;
    case Unary::kExp: runUnary<kFloats, false>(t, x, y, n, ExpF{}, s); return;
    case Unary::kLog: runUnary<kFloats, false>(t, x, y, n, LogF{}, s); return;
    case Unary::kNeg: runUnary<kFloats | kSigned, false>(t, x, y, n, NegF{}, s); return;
    case Unary::kAbs: runUnary<kNumeric, false>(t, x, y, n, AbsF{}, s); return;
    case Unary::kReciprocal: runUnary<kFloats, false>(t, x, y, n, ReciprocalF{}, s); return;
    case Unary::kFloor: runUnary<kFloats, false>(t, x, y, n, FloorF{}, s); return;
    case Unary::kCeil: runUnary<kFloats, false>(t, x, y, n, CeilF{}, s); return;
    case Unary::kRound: runUnary<kFloats, false>(t, x, y, n, RoundF{}, s); return;
    case Unary::kSign: runUnary<kNumeric, false>(t, x, y, n, SignF{}, s); return;
    case Unary::kSin: runUnary<kFloats, false>(t, x, y, n, SinF{}, s); return;
    case Unary::kCos: runUnary<kFloats, false>(t, x, y, n, CosF{}, s); return;
    case Unary::kTan: runUnary<kFloats, false>(t, x, y, n, TanF{}, s); return;
    case Unary::kAsin: runUnary<kFloats, false>(t, x, y, n, AsinF{}, s); return;
    case Unary::kAcos: runUnary<kFloats, false>(t, x, y, n, AcosF{}, s); return;
    case Unary::kAtan: runUnary<kFloats, false>(t, x, y, n, AtanF{}, s); return;
    case Unary::kSinh: runUnary<kFloats, false>(t, x, y, n, SinhF{}, s); return;
    case Unary::kCosh: runUnary<kFloats, false>(t, x, y, n, CoshF{}, s); return;
    case Unary::kAsinh: runUnary<kFloats, false>(t, x, y, n, AsinhF{}, s); return;
    case Unary::kAcosh: runUnary<kFloats, false>(t, x, y, n, AcoshF{}, s); return;
    case Unary::kAtanh: runUnary<kFloats, false>(t, x, y, n, AtanhF{}, s); return;
    case Unary::kIsNaN: runUnary<kFloats, true>(t, x, y, n, IsNaNF{}, s); return;
    case Unary::kIsInf: runUnary<kFloats, true>(t, x, y, n, IsInfF{{}, a.detectNeg, a.detectPos}, s); return;
    case Unary::kNot: runUnary<kBoolSet, false>(t, x, y, n, NotF{}, s); return;
    case Unary::kBitwiseNot: runUnary<kInts, false>(t, x, y, n, BitwiseNotF{}, s); return;
    case Unary::kClip:
      dispatchCudaType<kNumeric>(t, [&](auto tag) {
        using S = decltype(tag);
        ClipF<Cmp<S>> f{a.p1, a.t1, a.p2, a.t2, {}, {}};
        launchFlat(static_cast<const S*>(x), static_cast<S*>(y), n, Widened<ClipF<Cmp<S>>, S, S>{f}, s);
      }, "CUDA elementwise");
      return;
    case Unary::kPowScalar:
      dispatchCudaType<kNumeric>(t, [&](auto tag) {
        using S = decltype(tag);
        PowScalarF<Cmp<S>> f{a.p1, a.t1, 0.0, 0, false};
        launchFlat(static_cast<const S*>(x), static_cast<S*>(y), n, Widened<PowScalarF<Cmp<S>>, S, S>{f}, s);
      }, "CUDA elementwise");
      return;
    default: break;
  }
  throw Error("CUDA elementwise: unknown unary op");
}

}  // namespace kiln::cuda::ew
