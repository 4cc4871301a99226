// Optimized CPU tactics: elementwise family. AVX2 + thread pool kernels for float32 unary
// activations/math and broadcasting binary arithmetic; everything else runs the reference kernel.
#include <immintrin.h>

#include <algorithm>
#include <map>

#include "backends/cpu/cpu_tactics.h"
#include "backends/cpu/elementwise_simd.h"
#include "core/thread_pool.h"
#include "ops/conv_layout.h"
#include "ops/fused_attrs.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

// ---------------------------------------------------------------------------------------------
// Unary kernels.

enum class UKind {
  kRelu, kLeakyRelu, kElu, kSelu, kCelu, kSigmoid, kHardSigmoid, kHardSwish, kTanh, kSoftplus, kSoftsign,
  kGelu, kGeluTanh, kClip, kThresholdedRelu, kMish, kSilu, kAbs, kNeg, kSqrt, kExp, kReciprocal, kFloor, kCeil, kRound
};

struct UParams {
  float alpha = 0.f, beta = 0.f, gamma = 0.f;
};

template <UKind K>
inline __m256 applyVec(__m256 x, const UParams& p) {
  using simd::set1;
  const __m256 zero = _mm256_setzero_ps(), one = set1(1.f);
  if constexpr (K == UKind::kRelu) return _mm256_max_ps(x, zero);
  else if constexpr (K == UKind::kLeakyRelu) return _mm256_blendv_ps(x, _mm256_mul_ps(x, set1(p.alpha)), _mm256_cmp_ps(x, zero, _CMP_LT_OQ));
  else if constexpr (K == UKind::kElu || K == UKind::kSelu) {
    __m256 neg = _mm256_mul_ps(set1(p.alpha), simd::expm1(x));
    __m256 r = _mm256_blendv_ps(x, neg, _mm256_cmp_ps(x, zero, K == UKind::kElu ? _CMP_LT_OQ : _CMP_LE_OQ));
    return K == UKind::kSelu ? _mm256_mul_ps(r, set1(p.gamma)) : r;
  } else if constexpr (K == UKind::kCelu) {
    __m256 neg = _mm256_mul_ps(set1(p.alpha), simd::expm1(_mm256_div_ps(x, set1(p.alpha))));
    return _mm256_blendv_ps(x, neg, _mm256_cmp_ps(x, zero, _CMP_LE_OQ));
  } else if constexpr (K == UKind::kSigmoid) return simd::sigmoid(x);
  else if constexpr (K == UKind::kHardSigmoid) return _mm256_min_ps(one, _mm256_max_ps(zero, _mm256_fmadd_ps(x, set1(p.alpha), set1(p.beta))));
  else if constexpr (K == UKind::kHardSwish)
    return _mm256_mul_ps(x, _mm256_min_ps(one, _mm256_max_ps(zero, _mm256_add_ps(_mm256_div_ps(x, set1(6.f)), set1(0.5f)))));
  else if constexpr (K == UKind::kTanh) return simd::tanh(x);
  else if constexpr (K == UKind::kSoftplus) return simd::softplus(x);
  else if constexpr (K == UKind::kSoftsign) return _mm256_div_ps(x, _mm256_add_ps(one, simd::abs(x)));
  else if constexpr (K == UKind::kGelu) return simd::gelu(x);
  else if constexpr (K == UKind::kGeluTanh) return simd::geluTanh(x);
  else if constexpr (K == UKind::kClip) {
    // Same order as the reference: max with lo first, then min with hi; NaN passes through.
    __m256 v = _mm256_blendv_ps(x, set1(p.alpha), _mm256_cmp_ps(x, set1(p.alpha), _CMP_LT_OQ));
    return _mm256_blendv_ps(v, set1(p.beta), _mm256_cmp_ps(v, set1(p.beta), _CMP_GT_OQ));
  } else if constexpr (K == UKind::kThresholdedRelu) return _mm256_and_ps(x, _mm256_cmp_ps(x, set1(p.alpha), _CMP_GT_OQ));
  else if constexpr (K == UKind::kMish) return _mm256_mul_ps(x, simd::tanh(simd::softplus(x)));
  else if constexpr (K == UKind::kSilu) return _mm256_mul_ps(x, simd::sigmoid(x));
  else if constexpr (K == UKind::kAbs) return simd::abs(x);
  else if constexpr (K == UKind::kNeg) return _mm256_xor_ps(x, set1(-0.f));
  else if constexpr (K == UKind::kSqrt) return _mm256_sqrt_ps(x);
  else if constexpr (K == UKind::kExp) return simd::exp(x);
  else if constexpr (K == UKind::kReciprocal) return _mm256_div_ps(one, x);
  else if constexpr (K == UKind::kFloor) return _mm256_floor_ps(x);
  else if constexpr (K == UKind::kCeil) return _mm256_ceil_ps(x);
  else return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

//! Mask selecting the first n (< 8) lanes.
inline __m256i tailMask(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

template <UKind K>
void unarySpan(const float* x, float* y, int64_t n, const UParams& p) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, applyVec<K>(_mm256_loadu_ps(x + i), p));
  if (i < n) {
    __m256i m = tailMask(n - i);
    _mm256_maskstore_ps(y + i, m, applyVec<K>(_mm256_maskload_ps(x + i, m), p));
  }
}

using UnarySpanFn = void (*)(const float*, float*, int64_t, const UParams&);

UnarySpanFn unarySpanFor(UKind k) {
  switch (k) {
#define KILN_EW_SPAN(K) case UKind::K: return unarySpan<UKind::K>;
    KILN_EW_SPAN(kRelu) KILN_EW_SPAN(kLeakyRelu) KILN_EW_SPAN(kElu) KILN_EW_SPAN(kSelu) KILN_EW_SPAN(kCelu)
    KILN_EW_SPAN(kSigmoid) KILN_EW_SPAN(kHardSigmoid) KILN_EW_SPAN(kHardSwish) KILN_EW_SPAN(kTanh)
    KILN_EW_SPAN(kSoftplus) KILN_EW_SPAN(kSoftsign) KILN_EW_SPAN(kGelu) KILN_EW_SPAN(kGeluTanh) KILN_EW_SPAN(kClip)
    KILN_EW_SPAN(kThresholdedRelu) KILN_EW_SPAN(kMish) KILN_EW_SPAN(kSilu) KILN_EW_SPAN(kAbs) KILN_EW_SPAN(kNeg) KILN_EW_SPAN(kSqrt)
    KILN_EW_SPAN(kExp) KILN_EW_SPAN(kReciprocal) KILN_EW_SPAN(kFloor) KILN_EW_SPAN(kCeil) KILN_EW_SPAN(kRound)
#undef KILN_EW_SPAN
  }
  throw Error("elementwise: unknown unary kind");
}

const std::map<std::string, UKind>& unaryOps() {
  static const std::map<std::string, UKind> m = {
      {"Relu", UKind::kRelu}, {"LeakyRelu", UKind::kLeakyRelu}, {"Elu", UKind::kElu}, {"Selu", UKind::kSelu},
      {"Celu", UKind::kCelu}, {"Sigmoid", UKind::kSigmoid}, {"HardSigmoid", UKind::kHardSigmoid},
      {"HardSwish", UKind::kHardSwish}, {"Tanh", UKind::kTanh}, {"Softplus", UKind::kSoftplus},
      {"Softsign", UKind::kSoftsign}, {"Gelu", UKind::kGelu}, {"Clip", UKind::kClip},
      {"ThresholdedRelu", UKind::kThresholdedRelu}, {"Mish", UKind::kMish}, {"Abs", UKind::kAbs}, {"Neg", UKind::kNeg},
      {"Sqrt", UKind::kSqrt}, {"Exp", UKind::kExp}, {"Reciprocal", UKind::kReciprocal}, {"Floor", UKind::kFloor},
      {"Ceil", UKind::kCeil}, {"Round", UKind::kRound}};
  return m;
}

//! Splits n elements over the pool and applies `fn` span by span (the spans may alias: in place).
void parallelSpans(ThreadPool* pool, const float* x, float* y, int64_t n, UnarySpanFn fn, const UParams& p) {
  constexpr int64_t kGrain = 16384;
  pool->parallelFor(n, kGrain, [&](int64_t b, int64_t e) { fn(x + b, y + b, e - b, p); });
}

class UnaryKernel : public Kernel {
 public:
  UnaryKernel(UKind kind, UParams p) : kind_(kind), params_(p), fn_(unarySpanFor(kind)) {}
  void execute(const KernelIO& io, KernelState*) const override {
    UParams p = params_;
    if (kind_ == UKind::kClip) {  // bounds are inputs: read them per run
      p.alpha = io.in.size() > 1 && io.in[1].data ? io.in[1].as<float>()[0] : -std::numeric_limits<float>::infinity();
      p.beta = io.in.size() > 2 && io.in[2].data ? io.in[2].as<float>()[0] : std::numeric_limits<float>::infinity();
    }
    parallelSpans(io.pool, io.in[0].as<float>(), io.out[0].as<float>(), io.in[0].count, fn_, p);
  }

 private:
  UKind kind_;
  UParams params_;
  UnarySpanFn fn_;
};

bool allFloat32(const LayerDesc& l) {
  for (size_t i = 0; i < l.inputs.size(); ++i)
    if (l.present(i) && l.inputs[i].type != DataType::kFLOAT) return false;
  return !l.inputs.empty() && l.present(0);
}

//! Unary kernels run over the element count: any stored layout, as long as X and Y share it.
bool unarySupports(const LayerDesc& l) {
  return unaryOps().count(l.op) && l.inputs.size() <= (l.op == "Clip" ? 3u : 1u) && allFloat32(l) &&
         (hasPlainLayouts(l) || elementwiseInLayout(l));
}

std::unique_ptr<Kernel> unaryCreate(const LayerDesc& l) {
  UKind k = unaryOps().at(l.op);
  const Attributes& a = *l.attrs;
  UParams p;
  switch (k) {
    case UKind::kLeakyRelu: p.alpha = a.getFloat("alpha", 0.01f); break;
    case UKind::kElu: case UKind::kCelu: case UKind::kThresholdedRelu: p.alpha = a.getFloat("alpha", 1.f); break;
    case UKind::kSelu:
      p.alpha = a.getFloat("alpha", 1.67326319217681884765625f);
      p.gamma = a.getFloat("gamma", 1.05070102214813232421875f);
      break;
    case UKind::kHardSigmoid: p.alpha = a.getFloat("alpha", 0.2f); p.beta = a.getFloat("beta", 0.5f); break;
    case UKind::kGelu: {
      std::string m = a.getString("approximate", "none");
      if (m == "tanh") k = UKind::kGeluTanh;
      else if (m != "none") throw Error("Gelu: attribute approximate must be 'none' or 'tanh', got '" + m + "'");
      break;
    }
    default: break;
  }
  if (k == UKind::kCelu && p.alpha == 0.f) throw Error("Celu: alpha must not be 0");
  return std::make_unique<UnaryKernel>(k, p);
}

// ---------------------------------------------------------------------------------------------
// Binary kernels with broadcasting. Shapes are coalesced at reshape time to rows of an inner
// dimension in which each input is either contiguous (stride 1) or a repeated scalar (stride 0).

enum class BKind { kAdd, kSub, kMul, kDiv, kMax, kMin, kPRelu };

template <BKind K>
inline __m256 binaryVec(__m256 a, __m256 b) {
  if constexpr (K == BKind::kAdd) return _mm256_add_ps(a, b);
  else if constexpr (K == BKind::kSub) return _mm256_sub_ps(a, b);
  else if constexpr (K == BKind::kMul) return _mm256_mul_ps(a, b);
  else if constexpr (K == BKind::kDiv) return _mm256_div_ps(a, b);
  else if constexpr (K == BKind::kMax || K == BKind::kMin) {
    // max_ps/min_ps return the second operand when either is NaN: propagate a NaN a as numpy does.
    __m256 r = K == BKind::kMax ? _mm256_max_ps(a, b) : _mm256_min_ps(a, b);
    return _mm256_blendv_ps(r, a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
  } else return _mm256_blendv_ps(a, _mm256_mul_ps(a, b), _mm256_cmp_ps(a, _mm256_setzero_ps(), _CMP_LT_OQ));
}

template <BKind K, bool ContigA, bool ContigB>
void binarySpan(const float* a, const float* b, float* y, int64_t n) {
  const __m256 sa = _mm256_set1_ps(a[0]), sb = _mm256_set1_ps(b[0]);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 va = ContigA ? _mm256_loadu_ps(a + i) : sa;
    __m256 vb = ContigB ? _mm256_loadu_ps(b + i) : sb;
    _mm256_storeu_ps(y + i, binaryVec<K>(va, vb));
  }
  if (i < n) {
    __m256i m = tailMask(n - i);
    __m256 va = ContigA ? _mm256_maskload_ps(a + i, m) : sa;
    __m256 vb = ContigB ? _mm256_maskload_ps(b + i, m) : sb;
    _mm256_maskstore_ps(y + i, m, binaryVec<K>(va, vb));
  }
}

//! `rows` short rows of `n` elements: row r reads a + r * strideA, b + r * strideB and writes
//! y + r * n. Blocked layouts make such rows: a per-channel operand [1, C, 1, 1] against nChw8c data
//! is one 8-float row repeated over every pixel (strideB 0), which one call per row of 8 made several
//! times slower than the streaming loop (MobileNetV3's squeeze-excitation gates).
template <BKind K, bool ContigA, bool ContigB>
void binaryRows(const float* a, const float* b, float* y, int64_t rows, int64_t n, int64_t strideA, int64_t strideB) {
  if (n == 8) {  // one vector per row: the operand that repeats stays in a register
    const bool fixedA = ContigA && strideA == 0, fixedB = ContigB && strideB == 0;
    const __m256 ra = ContigA ? _mm256_loadu_ps(a) : _mm256_set1_ps(a[0]);
    const __m256 rb = ContigB ? _mm256_loadu_ps(b) : _mm256_set1_ps(b[0]);
    for (int64_t r = 0; r < rows; ++r) {
      __m256 va = fixedA || !ContigA ? (ContigA ? ra : _mm256_set1_ps(a[r * strideA])) : _mm256_loadu_ps(a + r * strideA);
      __m256 vb = fixedB || !ContigB ? (ContigB ? rb : _mm256_set1_ps(b[r * strideB])) : _mm256_loadu_ps(b + r * strideB);
      _mm256_storeu_ps(y + r * 8, binaryVec<K>(va, vb));
    }
    return;
  }
  for (int64_t r = 0; r < rows; ++r) binarySpan<K, ContigA, ContigB>(a + r * strideA, b + r * strideB, y + r * n, n);
}

using BinarySpanFn = void (*)(const float*, const float*, float*, int64_t);
using BinaryRowsFn = void (*)(const float*, const float*, float*, int64_t, int64_t, int64_t, int64_t);

template <BKind K>
BinarySpanFn binarySpanFor(bool contigA, bool contigB) {
  if (contigA) return contigB ? binarySpan<K, true, true> : binarySpan<K, true, false>;
  return contigB ? binarySpan<K, false, true> : binarySpan<K, false, false>;
}

template <BKind K>
BinaryRowsFn binaryRowsFor(bool contigA, bool contigB) {
  if (contigA) return contigB ? binaryRows<K, true, true> : binaryRows<K, true, false>;
  return contigB ? binaryRows<K, false, true> : binaryRows<K, false, false>;
}

BinarySpanFn binarySpanFor(BKind k, bool contigA, bool contigB) {
  switch (k) {
    case BKind::kAdd: return binarySpanFor<BKind::kAdd>(contigA, contigB);
    case BKind::kSub: return binarySpanFor<BKind::kSub>(contigA, contigB);
    case BKind::kMul: return binarySpanFor<BKind::kMul>(contigA, contigB);
    case BKind::kDiv: return binarySpanFor<BKind::kDiv>(contigA, contigB);
    case BKind::kMax: return binarySpanFor<BKind::kMax>(contigA, contigB);
    case BKind::kMin: return binarySpanFor<BKind::kMin>(contigA, contigB);
    case BKind::kPRelu: return binarySpanFor<BKind::kPRelu>(contigA, contigB);
  }
  throw Error("elementwise: unknown binary kind");
}

BinaryRowsFn binaryRowsFor(BKind k, bool contigA, bool contigB) {
  switch (k) {
    case BKind::kAdd: return binaryRowsFor<BKind::kAdd>(contigA, contigB);
    case BKind::kSub: return binaryRowsFor<BKind::kSub>(contigA, contigB);
    case BKind::kMul: return binaryRowsFor<BKind::kMul>(contigA, contigB);
    case BKind::kDiv: return binaryRowsFor<BKind::kDiv>(contigA, contigB);
    case BKind::kMax: return binaryRowsFor<BKind::kMax>(contigA, contigB);
    case BKind::kMin: return binaryRowsFor<BKind::kMin>(contigA, contigB);
    case BKind::kPRelu: return binaryRowsFor<BKind::kPRelu>(contigA, contigB);
  }
  throw Error("elementwise: unknown binary kind");
}

//! Output dims split into outer dims and one inner dim, with per-input strides.
struct BroadcastLayout {
  Dims outer;                         //!< outer dims (row index space)
  std::vector<int64_t> strideA, strideB;  //!< strides of A/B over the outer dims
  int64_t inner = 1;
  bool contigA = true, contigB = true;  //!< inner stride 1 (else 0: repeated scalar)
  int64_t rows = 1;
};

BroadcastLayout coalesce(const Dims& out, const Dims& a, const Dims& b) {
  std::vector<int64_t> sa = broadcastStrides(a, out), sb = broadcastStrides(b, out);
  Dims d;
  std::vector<int64_t> ca, cb;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 1) continue;  // size-1 dims do not move any index
    // Merge into the previous dim when both inputs continue contiguously (or both repeat).
    if (!d.empty() && ca.back() == sa[i] * out[i] && cb.back() == sb[i] * out[i]) {
      d.back() *= out[i];
      ca.back() = sa[i];
      cb.back() = sb[i];
      continue;
    }
    d.push_back(out[i]);
    ca.push_back(sa[i]);
    cb.push_back(sb[i]);
  }
  BroadcastLayout L;
  if (d.empty()) {  // a single element
    L.contigA = L.contigB = false;
    return L;
  }
  L.inner = d.back();
  L.contigA = ca.back() != 0;
  L.contigB = cb.back() != 0;
  L.outer.assign(d.begin(), d.end() - 1);
  L.strideA.assign(ca.begin(), ca.end() - 1);
  L.strideB.assign(cb.begin(), cb.end() - 1);
  L.rows = volume(L.outer);
  return L;
}

class BinaryKernel : public Kernel {
 public:
  explicit BinaryKernel(BKind k) : kind_(k) {}
  struct State : KernelState {
    BroadcastLayout layout;
    BinarySpanFn fn = nullptr;
    // Short rows (inner < kShortRow): the last outer dim is walked inside one call instead.
    BinaryRowsFn rowsFn = nullptr;
    int64_t mid = 1, midStrideA = 0, midStrideB = 0;
  };
  static constexpr int64_t kShortRow = 256;
  size_t reshape(const LayerDesc& c, std::unique_ptr<KernelState>& state) const override {
    auto s = std::make_unique<State>();
    // A layer inside a blocked region (cpu_layout's transparent layers) indexes the stored bytes.
    const int64_t b = outLayoutBlock(c);
    s->layout = coalesce(physicalDims(c.outputs[0].dims, b), physicalDims(c.inputs[0].dims, b), physicalDims(c.inputs[1].dims, b));
    s->fn = binarySpanFor(kind_, s->layout.contigA, s->layout.contigB);
    BroadcastLayout& L = s->layout;
    if (L.inner < kShortRow && !L.outer.empty()) {
      s->rowsFn = binaryRowsFor(kind_, L.contigA, L.contigB);
      s->mid = L.outer.back();
      s->midStrideA = L.strideA.back();
      s->midStrideB = L.strideB.back();
      L.outer.pop_back();
      L.strideA.pop_back();
      L.strideB.pop_back();
      L.rows = volume(L.outer);
    }
    state = std::move(s);
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    const auto& s = *static_cast<const State*>(state);
    const BroadcastLayout& L = s.layout;
    if (io.out[0].count == 0) return;
    const float* a = io.in[0].as<float>();
    const float* b = io.in[1].as<float>();
    float* y = io.out[0].as<float>();
    constexpr int64_t kChunk = 8192;
    if (s.rowsFn) {  // short rows: work items are (outer row, run of the last outer dim)
      const int64_t per = std::max<int64_t>(1, kChunk / std::max<int64_t>(L.inner, 1));
      const int64_t runs = (s.mid + per - 1) / per;
      io.pool->parallelFor(L.rows * runs, std::max<int64_t>(1, 4 / std::max<int64_t>(runs, 1)), [&](int64_t begin, int64_t end) {
        for (int64_t item = begin; item < end; ++item) {
          int64_t row = item / runs, m0 = (item % runs) * per;
          int64_t offA = 0, offB = 0;
          for (size_t d = L.outer.size(), r = row; d-- > 0;) {
            int64_t i = static_cast<int64_t>(r) % L.outer[d];
            r /= L.outer[d];
            offA += i * L.strideA[d];
            offB += i * L.strideB[d];
          }
          const int64_t m = std::min(per, s.mid - m0);
          s.rowsFn(a + offA + m0 * s.midStrideA, b + offB + m0 * s.midStrideB, y + (row * s.mid + m0) * L.inner, m,
                   L.inner, s.midStrideA, s.midStrideB);
        }
      });
      return;
    }
    // Work items: (row, chunk of the inner dim), so one long row is also split across threads.
    int64_t chunks = (L.inner + kChunk - 1) / kChunk;
    int64_t grain = std::max<int64_t>(1, 32768 / std::min(L.inner, kChunk));
    io.pool->parallelFor(L.rows * chunks, grain, [&](int64_t begin, int64_t end) {
      for (int64_t item = begin; item < end; ++item) {
        int64_t row = item / chunks, c0 = (item % chunks) * kChunk;
        int64_t offA = 0, offB = 0;
        for (size_t d = L.outer.size(), r = row; d-- > 0;) {
          int64_t i = static_cast<int64_t>(r) % L.outer[d];
          r /= L.outer[d];
          offA += i * L.strideA[d];
          offB += i * L.strideB[d];
        }
        int64_t n = std::min(kChunk, L.inner - c0);
        s.fn(a + offA + (L.contigA ? c0 : 0), b + offB + (L.contigB ? c0 : 0), y + row * L.inner + c0, n);
      }
    });
  }

 private:
  BKind kind_;
};

const std::map<std::string, BKind>& binaryOps() {
  static const std::map<std::string, BKind> m = {{"Add", BKind::kAdd}, {"Sub", BKind::kSub}, {"Mul", BKind::kMul},
                                                 {"Div", BKind::kDiv}, {"PRelu", BKind::kPRelu}, {"Sum", BKind::kAdd},
                                                 {"Max", BKind::kMax}, {"Min", BKind::kMin}};
  return m;
}

bool binarySupports(const LayerDesc& l) {
  return binaryOps().count(l.op) && l.inputs.size() == 2 && l.present(1) && allFloat32(l) &&
         (hasPlainLayouts(l) || (outLayoutBlock(l) > 1 && elementwiseInLayout(l)));
}

std::unique_ptr<Kernel> binaryCreate(const LayerDesc& l) { return std::make_unique<BinaryKernel>(binaryOps().at(l.op)); }

UKind unaryKindOf(ActKind k) {
  switch (k) {
    case ActKind::kRelu: return UKind::kRelu;
    case ActKind::kLeakyRelu: return UKind::kLeakyRelu;
    case ActKind::kClip: return UKind::kClip;
    case ActKind::kSigmoid: return UKind::kSigmoid;
    case ActKind::kTanh: return UKind::kTanh;
    case ActKind::kHardSwish: return UKind::kHardSwish;
    case ActKind::kHardSigmoid: return UKind::kHardSigmoid;
    case ActKind::kGelu: return UKind::kGelu;
    case ActKind::kGeluTanh: return UKind::kGeluTanh;
    case ActKind::kElu: return UKind::kElu;
    case ActKind::kSoftplus: return UKind::kSoftplus;
    case ActKind::kSilu: return UKind::kSilu;
    case ActKind::kMish: return UKind::kMish;
    case ActKind::kNone: break;
  }
  throw Error("applyActivationAvx2: no activation");
}

}  // namespace

void applyActivationAvx2(const Activation& act, float* data, int64_t n) {
  if (act.kind == ActKind::kNone || n <= 0) return;
  UParams p;
  p.alpha = act.alpha;
  p.beta = act.beta;
  unarySpanFor(unaryKindOf(act.kind))(data, data, n, p);
}

namespace cpu {
KernelFactory unaryAvx2() { return {unarySupports, unaryCreate}; }
KernelFactory binaryAvx2() { return {binarySupports, binaryCreate}; }
}  // namespace cpu

}  // namespace kiln
