// CUDA elementwise family: activation-style unary ops (float32 / float16 / bfloat16 / float64,
// half and bf16 computed in float32). Flat kernel with 16-byte vector loads and stores.
#include "backends/cuda/elementwise_functors.cuh"

namespace kiln::cuda::ew {

template <uint32_t Set, bool BoolOut, class F>
static void runUnary(DataType t, const void* x, void* y, int64_t n, const F& f, cudaStream_t s) {
  dispatchCudaType<Set>(t, [&](auto tag) {
    using S = decltype(tag);
    using O = std::conditional_t<BoolOut, bool, S>;
    launchFlat(static_cast<const S*>(x), static_cast<O*>(y), n, Widened<F, S, O>{f}, s);
  }, "CUDA elementwise");
}

//! Activations; returns false for ops handled elsewhere.
bool launchUnaryActivation(Unary op, DataType t, const void* x, void* y, int64_t n, const UnaryArgs& a, cudaStream_t s) {
  switch (op) {
    case Unary::kRelu: runUnary<unaryTypes(Unary::kRelu), false>(t, x, y, n, ReluF{}, s); return true;
    case Unary::kLeakyRelu: runUnary<kFloats, false>(t, x, y, n, LeakyReluF{{}, a.alpha}, s); return true;
    case Unary::kElu: runUnary<kFloats, false>(t, x, y, n, EluF{{}, a.alpha}, s); return true;
    case Unary::kSelu: runUnary<kFloats, false>(t, x, y, n, SeluF{{}, a.alpha, a.gamma}, s); return true;
    case Unary::kCelu: runUnary<kFloats, false>(t, x, y, n, CeluF{{}, a.alpha}, s); return true;
    case Unary::kSigmoid: runUnary<kFloats, false>(t, x, y, n, SigmoidF{}, s); return true;
    case Unary::kHardSigmoid: runUnary<kFloats, false>(t, x, y, n, HardSigmoidF{{}, a.alpha, a.beta}, s); return true;
    case Unary::kHardSwish: runUnary<kFloats, false>(t, x, y, n, HardSwishF{}, s); return true;
    case Unary::kTanh: runUnary<kFloats, false>(t, x, y, n, TanhF{}, s); return true;
    case Unary::kSoftplus: runUnary<kFloats, false>(t, x, y, n, SoftplusF{}, s); return true;
    case Unary::kSoftsign: runUnary<kFloats, false>(t, x, y, n, SoftsignF{}, s); return true;
    case Unary::kGelu: runUnary<kFloats, false>(t, x, y, n, GeluF{}, s); return true;
    case Unary::kGeluTanh: runUnary<kFloats, false>(t, x, y, n, GeluTanhF{}, s); return true;
    case Unary::kMish: runUnary<kFloats, false>(t, x, y, n, MishF{}, s); return true;
    case Unary::kThresholdedRelu: runUnary<kFloats, false>(t, x, y, n, ThresholdedReluF{{}, a.alpha}, s); return true;
    case Unary::kShrink: runUnary<kNumeric, false>(t, x, y, n, ShrinkF{{}, a.beta, a.alpha}, s); return true;
    default: return false;
  }
}

}  // namespace kiln::cuda::ew
