// Optimized CPU tactics: reduction family (AVX2, multi-threaded).
// ReduceSum / ReduceMean of float32 over one contiguous run of axes (e.g. the last axis, or H,W
// of NCHW). The input is viewed as [outer, reduced, inner]:
//  - inner == 1: each output is the sum of a contiguous row (vector accumulators);
//  - inner > 1: each output row is the sum of `reduced` contiguous rows of length `inner`.
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "backends/cpu/cpu_tactics.h"
#include "core/thread_pool.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

__m256i firstLanes(int64_t n) {
  alignas(32) static const int32_t bits[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bits + 8 - n));
}

float horizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

//! The reduced axes as a sorted list, when known at build time; `all` when every dim is reduced.
struct ConstantAxes {
  bool known = false;
  bool noop = false;
  std::vector<int64_t> axes;  //!< normalized, sorted; empty means all dims
};

ConstantAxes constantAxes(const LayerDesc& l) {
  ConstantAxes c;
  const int64_t rank = static_cast<int64_t>(l.inputs[0].dims.size());
  if (l.present(1)) {
    if (!l.inputs[1].value.valid()) return c;
    for (int64_t a : l.inputs[1].value.toInts()) {
      if (a < -rank || a >= rank) return c;  // invalid: left to the reference kernel's error
      c.axes.push_back(a < 0 ? a + rank : a);
    }
  }
  std::sort(c.axes.begin(), c.axes.end());
  if (std::adjacent_find(c.axes.begin(), c.axes.end()) != c.axes.end()) return c;
  c.noop = c.axes.empty() && l.attrs->getInt("noop_with_empty_axes", 0) != 0;
  c.known = true;
  return c;
}

bool supportsReduce(const LayerDesc& l) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || l.inputs.empty() || l.inputs[0].type != DataType::kFLOAT) return false;
  ConstantAxes c = constantAxes(l);
  if (!c.known || c.noop) return false;
  for (size_t i = 1; i < c.axes.size(); ++i)  // one contiguous run of axes
    if (c.axes[i] != c.axes[i - 1] + 1) return false;
  return true;
}

class ReduceSumKernel : public Kernel {
 public:
  ReduceSumKernel(const LayerDesc& l, bool mean) : axes_(constantAxes(l).axes), mean_(mean) {}
  struct State : KernelState {
    int64_t outer = 1, reduced = 1, inner = 1;
  };
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const Dims& x = l.inputs[0].dims;
    auto s = std::make_unique<State>();
    const size_t first = axes_.empty() ? 0 : static_cast<size_t>(axes_.front());
    const size_t last = axes_.empty() ? x.size() : static_cast<size_t>(axes_.back()) + 1;
    s->outer = volume(Dims(x.begin(), x.begin() + first));
    s->reduced = volume(Dims(x.begin() + first, x.begin() + last));
    s->inner = volume(Dims(x.begin() + last, x.end()));
    state = std::move(s);
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    const auto* s = static_cast<const State*>(state);
    // Mean of an empty set is 0 * inf = NaN, as the spec's 0/0.
    const float factor = mean_ ? 1.f / static_cast<float>(s->reduced) : 1.f;
    if (s->inner == 1) sumRows(io, *s, factor);
    else sumColumns(io, *s, factor);
  }

 private:
  static void sumRows(const KernelIO& io, const State& s, float factor) {
    const float* x = io.in[0].as<float>();
    float* y = io.out[0].as<float>();
    const int64_t n = s.reduced;
    io.pool->parallelFor(s.outer, std::max<int64_t>(1, 32768 / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const float* row = x + r * n;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;  // independent chains
        int64_t k = 0;
        for (; k + 32 <= n; k += 32) {
          a0 = _mm256_add_ps(a0, _mm256_loadu_ps(row + k));
          a1 = _mm256_add_ps(a1, _mm256_loadu_ps(row + k + 8));
          a2 = _mm256_add_ps(a2, _mm256_loadu_ps(row + k + 16));
          a3 = _mm256_add_ps(a3, _mm256_loadu_ps(row + k + 24));
        }
        for (; k + 8 <= n; k += 8) a0 = _mm256_add_ps(a0, _mm256_loadu_ps(row + k));
        if (k < n) a1 = _mm256_add_ps(a1, _mm256_maskload_ps(row + k, firstLanes(n - k)));
        y[r] = horizontalSum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3))) * factor;
      }
    });
  }

  //! Output row o is the sum of rows x[o, r, :]; the inner dim is split in cache-sized blocks.
  static void sumColumns(const KernelIO& io, const State& s, float factor) {
    constexpr int64_t kBlock = 512;
    const float* x = io.in[0].as<float>();
    float* y = io.out[0].as<float>();
    const int64_t inner = s.inner, reduced = s.reduced;
    const int64_t blocks = (inner + kBlock - 1) / kBlock;
    const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(reduced * std::min(inner, kBlock), 1));
    io.pool->parallelFor(s.outer * blocks, grain, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const int64_t o = t / blocks, j0 = t % blocks * kBlock, j1 = std::min(inner, j0 + kBlock);
        float* dst = y + o * inner;
        std::fill(dst + j0, dst + j1, 0.f);
        for (int64_t r = 0; r < reduced; ++r) {
          const float* src = x + (o * reduced + r) * inner;
          int64_t j = j0;
          for (; j + 8 <= j1; j += 8)
            _mm256_storeu_ps(dst + j, _mm256_add_ps(_mm256_loadu_ps(dst + j), _mm256_loadu_ps(src + j)));
          for (; j < j1; ++j) dst[j] += src[j];
        }
        const __m256 f = _mm256_set1_ps(factor);
        int64_t j = j0;
        for (; j + 8 <= j1; j += 8) _mm256_storeu_ps(dst + j, _mm256_mul_ps(_mm256_loadu_ps(dst + j), f));
        for (; j < j1; ++j) dst[j] *= factor;
      }
    });
  }

  std::vector<int64_t> axes_;
  bool mean_;
};

}  // namespace

namespace cpu {
KernelFactory reduceSumAvx2() {
  return {supportsReduce, [](const LayerDesc& l) -> std::unique_ptr<Kernel> { return std::make_unique<ReduceSumKernel>(l, false); }};
}
KernelFactory reduceMeanAvx2() {
  return {supportsReduce, [](const LayerDesc& l) -> std::unique_ptr<Kernel> { return std::make_unique<ReduceSumKernel>(l, true); }};
}
}  // namespace cpu

}  // namespace kiln
