// GlobalAveragePool / GlobalMaxPool ("avx2", float32): vectorized plane reductions. X may also be
// in a blocked layout (nChw8c / nChw16c, conv_layout.h) when the layer's kiln_layout_in says so;
// each (n, channel block) slab is then reduced one channel block (a vector) at a time, and Y is
// written plain [N, C, 1, 1]. (The window pools are in pool_window.cpp.)
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cpu/conv_cpu_common.h"
#include "core/thread_pool.h"
#include "ops/conv_layout.h"
#include "ops/fused_attrs.h"

namespace kiln::cpu {

namespace {

float horizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

float horizontalMax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

float planeMean(const float* p, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + i + 8));
  }
  float s = horizontalSum(_mm256_add_ps(a0, a1));
  for (; i < n; ++i) s += p[i];
  return n > 0 ? s / static_cast<float>(n) : 0.f;
}

float planeMax(const float* p, int64_t n) {
  if (n <= 0) return 0.f;
  float m = p[0];
  int64_t i = 0;
  bool nan = false;
  if (n >= 8) {
    __m256 v = _mm256_loadu_ps(p), unordered = _mm256_setzero_ps();
    for (i = 0; i + 8 <= n; i += 8) {
      __m256 x = _mm256_loadu_ps(p + i);
      unordered = _mm256_or_ps(unordered, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
      v = _mm256_max_ps(v, x);
    }
    nan = _mm256_movemask_ps(unordered) != 0;
    m = horizontalMax(v);
  }
  for (; i < n; ++i) {
    nan = nan || std::isnan(p[i]);
    m = p[i] > m ? p[i] : m;
  }
  return nan ? std::numeric_limits<float>::quiet_NaN() : m;
}

//! Global pooling of one (n, channel block) slab [size][kBlock] into its kBlock plain outputs.
template <int kBlock>
void globalPoolSlab(const float* x, float* y, int64_t size, bool max) {
  float acc[kBlock];
  bool nan[kBlock] = {};
  for (int j = 0; j < kBlock; ++j) acc[j] = max ? -std::numeric_limits<float>::infinity() : 0.f;
  for (int64_t i = 0; i < size; ++i, x += kBlock)
    for (int j = 0; j < kBlock; ++j) {
      if (max) {
        nan[j] = nan[j] || std::isnan(x[j]);
        acc[j] = x[j] > acc[j] ? x[j] : acc[j];
      } else {
        acc[j] += x[j];
      }
    }
  for (int j = 0; j < kBlock; ++j) {
    if (size <= 0) y[j] = 0.f;
    else if (max) y[j] = nan[j] ? std::numeric_limits<float>::quiet_NaN() : acc[j];
    else y[j] = acc[j] / static_cast<float>(size);
  }
}

class GlobalPoolKernel : public Kernel {
 public:
  GlobalPoolKernel(const LayerDesc& l, bool max) : max_(max), block_(inLayoutBlock(l)) {
    if (block_ < 1) throw Error("layer '" + l.name + "': unknown " + attr::kLayoutIn + " layout");
  }
  struct State : KernelState {
    int64_t planes = 0, size = 0;
  };
  size_t reshape(const LayerDesc& concrete, std::unique_ptr<KernelState>& state) const override {
    auto s = std::make_unique<State>();
    const Dims& x = concrete.inputs[0].dims;
    s->planes = x[0] * x[1];
    s->size = s->planes == 0 ? 0 : volume(x) / s->planes;
    state = std::move(s);
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    const auto& s = *static_cast<State*>(state);
    const float* x = io.in[0].as<const float>();
    float* y = io.out[0].as<float>();
    if (block_ > 1) {  // slabs of block_ channels; Y is plain [N, C, 1, 1]
      const int64_t slabs = s.planes / block_;
      int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(1, s.size * block_));
      io.pool->parallelFor(slabs, grain, [&](int64_t b, int64_t e) {
        for (int64_t p = b; p < e; ++p) {
          if (block_ == 8) globalPoolSlab<8>(x + p * s.size * 8, y + p * 8, s.size, max_);
          else globalPoolSlab<16>(x + p * s.size * 16, y + p * 16, s.size, max_);
        }
      });
      return;
    }
    int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(1, s.size));
    io.pool->parallelFor(s.planes, grain, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) y[p] = max_ ? planeMax(x + p * s.size, s.size) : planeMean(x + p * s.size, s.size);
    });
  }

 private:
  bool max_;
  int64_t block_;  // channel block of X (1: plain NCHW)
};

bool isFloatNchw(const LayerDesc& l) {
  return l.inputs.size() == 1 && l.present(0) && l.inputs[0].type == DataType::kFLOAT && l.inputs[0].dims.size() >= 3;
}

//! A 4-D X whose known channel count is a multiple of `block` (8 or 16).
bool blockable(const LayerDesc& l, int64_t block) {
  const Dims& x = l.inputs[0].dims;
  return (block == 8 || block == 16) && x.size() == 4 && x[1] > 0 && x[1] % block == 0;
}

bool supportsGlobalPool(const LayerDesc& l) {
  if (!isFloatNchw(l)) return false;
  return hasPlainLayouts(l) || (outLayoutBlock(l) == 1 && blockable(l, inLayoutBlock(l)));
}

std::unique_ptr<Kernel> createGlobalAverage(const LayerDesc& l) { return std::make_unique<GlobalPoolKernel>(l, false); }
std::unique_ptr<Kernel> createGlobalMax(const LayerDesc& l) { return std::make_unique<GlobalPoolKernel>(l, true); }

}  // namespace

KernelFactory globalAveragePoolAvx2() { return {supportsGlobalPool, createGlobalAverage}; }
KernelFactory globalMaxPoolAvx2() { return {supportsGlobalPool, createGlobalMax}; }

}  // namespace kiln::cpu
