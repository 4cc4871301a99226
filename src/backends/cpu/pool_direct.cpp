// Optimized pooling tactics (float32, NCHW):
// - "direct" for MaxPool (without the Indices output) and AveragePool: (n, c) planes in parallel;
//   each window's in-bounds tap ranges are computed once per axis, so the inner loops carry no
//   bounds checks.
// - "avx2" for GlobalAveragePool / GlobalMaxPool: vectorized plane reductions.
// Both also read X in a blocked layout (nChw8c / nChw16c, conv_layout.h) when the layer's
// kiln_layout_in says so: the window pools then write Y in the same layout, the global pools
// write plain [N, C, 1, 1]. Each (n, channel block) slab is then reduced one channel block (a
// vector) at a time.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cpu/conv_cpu_common.h"
#include "backends/cpu/conv_parallel.h"
#include "core/thread_pool.h"
#include "ops/conv_layout.h"
#include "ops/fused_attrs.h"

namespace kiln::cpu {

namespace {

struct PoolState : KernelState {
  Window3 win;
  int64_t planes = 0;  // (n, c) planes, or (n, channel block) slabs in a blocked layout
};

//! Taps [lo, hi) of one axis whose input index start + k*d is inside [0, in), and the number of
//! taps inside the explicitly padded range [-padBegin, in + padEnd) (count_include_pad).
struct TapRange {
  int64_t lo, hi, padded, start;
};

inline TapRange taps(const Window3& w, int a, int64_t o) {
  const int64_t start = o * w.stride[a] - w.padBegin[a], d = w.dilation[a], k = w.kernel[a];
  auto firstAtLeast = [&](int64_t bound) {  // first tap with start + k*d >= bound
    return start >= bound ? 0 : std::min(k, (bound - start + d - 1) / d);
  };
  auto endBelow = [&](int64_t bound) {  // one past the last tap with start + k*d < bound
    return start >= bound ? 0 : std::min(k, (bound - 1 - start) / d + 1);
  };
  TapRange t;
  t.start = start;
  t.lo = firstAtLeast(0);
  t.hi = std::max(t.lo, endBelow(w.in[a]));
  int64_t plo = firstAtLeast(-w.padBegin[a]), phi = endBelow(w.in[a] + w.padEnd[a]);
  t.padded = std::max<int64_t>(0, phi - plo);
  return t;
}

enum class PoolKind { kMax, kAverage, kAverageIncludePad };

template <PoolKind kKind>
void poolPlane(const float* x, float* y, const Window3& w) {
  for (int64_t od = 0; od < w.out[0]; ++od) {
    const TapRange td = taps(w, 0, od);
    for (int64_t oh = 0; oh < w.out[1]; ++oh) {
      const TapRange th = taps(w, 1, oh);
      for (int64_t ow = 0; ow < w.out[2]; ++ow, ++y) {
        const TapRange tw = taps(w, 2, ow);
        float acc = kKind == PoolKind::kMax ? -std::numeric_limits<float>::infinity() : 0.f;
        for (int64_t kd = td.lo; kd < td.hi; ++kd) {
          const float* xd = x + (td.start + kd * w.dilation[0]) * w.in[1] * w.in[2];
          for (int64_t kh = th.lo; kh < th.hi; ++kh) {
            const float* xr = xd + (th.start + kh * w.dilation[1]) * w.in[2] + tw.start;
            for (int64_t kw = tw.lo; kw < tw.hi; ++kw) {
              float v = xr[kw * w.dilation[2]];
              if constexpr (kKind == PoolKind::kMax) acc = v > acc || std::isnan(v) ? v : acc;
              else acc += v;
            }
          }
        }
        const int64_t inside = (td.hi - td.lo) * (th.hi - th.lo) * (tw.hi - tw.lo);
        if constexpr (kKind == PoolKind::kMax) {
          *y = inside > 0 ? acc : 0.f;
        } else {
          int64_t count = kKind == PoolKind::kAverageIncludePad ? td.padded * th.padded * tw.padded : inside;
          *y = count > 0 ? acc / static_cast<float>(count) : 0.f;
        }
      }
    }
  }
}

//! poolPlane for one (n, channel block) slab of a blocked layout: [D][H][W][kBlock] floats, the
//! kBlock channels of a position reduced side by side.
template <PoolKind kKind, int kBlock>
void poolBlockedSlab(const float* x, float* y, const Window3& w) {
  for (int64_t od = 0; od < w.out[0]; ++od) {
    const TapRange td = taps(w, 0, od);
    for (int64_t oh = 0; oh < w.out[1]; ++oh) {
      const TapRange th = taps(w, 1, oh);
      for (int64_t ow = 0; ow < w.out[2]; ++ow, y += kBlock) {
        const TapRange tw = taps(w, 2, ow);
        float acc[kBlock];
        for (int j = 0; j < kBlock; ++j) acc[j] = kKind == PoolKind::kMax ? -std::numeric_limits<float>::infinity() : 0.f;
        for (int64_t kd = td.lo; kd < td.hi; ++kd) {
          const float* xd = x + (td.start + kd * w.dilation[0]) * w.in[1] * w.in[2] * kBlock;
          for (int64_t kh = th.lo; kh < th.hi; ++kh) {
            const float* xr = xd + ((th.start + kh * w.dilation[1]) * w.in[2] + tw.start) * kBlock;
            for (int64_t kw = tw.lo; kw < tw.hi; ++kw) {
              const float* v = xr + kw * w.dilation[2] * kBlock;
              for (int j = 0; j < kBlock; ++j) {
                if constexpr (kKind == PoolKind::kMax) acc[j] = v[j] > acc[j] || std::isnan(v[j]) ? v[j] : acc[j];
                else acc[j] += v[j];
              }
            }
          }
        }
        const int64_t inside = (td.hi - td.lo) * (th.hi - th.lo) * (tw.hi - tw.lo);
        int64_t count = kKind == PoolKind::kAverageIncludePad ? td.padded * th.padded * tw.padded : inside;
        for (int j = 0; j < kBlock; ++j) {
          if constexpr (kKind == PoolKind::kMax) y[j] = inside > 0 ? acc[j] : 0.f;
          else y[j] = count > 0 ? acc[j] / static_cast<float>(count) : 0.f;
        }
      }
    }
  }
}

template <PoolKind kKind>
void poolSlab(int64_t block, const float* x, float* y, const Window3& w) {
  if (block == 8) poolBlockedSlab<kKind, 8>(x, y, w);
  else if (block == 16) poolBlockedSlab<kKind, 16>(x, y, w);
  else poolPlane<kKind>(x, y, w);
}

class WindowPoolKernel : public Kernel {
 public:
  explicit WindowPoolKernel(const LayerDesc& l) : block_(inLayoutBlock(l)) {
    if (block_ < 1) throw Error("layer '" + l.name + "': unknown " + attr::kLayoutIn + " layout");
    if (l.op == "MaxPool") kind_ = PoolKind::kMax;
    else kind_ = l.attrs->getInt("count_include_pad", 0) ? PoolKind::kAverageIncludePad : PoolKind::kAverage;
  }
  size_t reshape(const LayerDesc& concrete, std::unique_ptr<KernelState>& state) const override {
    auto s = std::make_unique<PoolState>();
    const Dims& x = concrete.inputs[0].dims;
    s->win = toWindow3(poolWindow(concrete, x, concrete.attrs->getInts("kernel_shape")));
    s->planes = x[0] * (x[1] / block_);
    state = std::move(s);
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    const auto& s = *static_cast<PoolState*>(state);
    const float* x = io.in[0].as<const float>();
    float* y = io.out[0].as<float>();
    // A plane is one channel, a slab block_ channels: the same strides times block_.
    const int64_t inSize = s.win.inSize() * block_, outSize = s.win.outSize() * block_;
    convParallelFor(io.pool, s.planes, 1, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        switch (kind_) {
          case PoolKind::kMax: poolSlab<PoolKind::kMax>(block_, x + p * inSize, y + p * outSize, s.win); break;
          case PoolKind::kAverage: poolSlab<PoolKind::kAverage>(block_, x + p * inSize, y + p * outSize, s.win); break;
          case PoolKind::kAverageIncludePad:
            poolSlab<PoolKind::kAverageIncludePad>(block_, x + p * inSize, y + p * outSize, s.win);
            break;
        }
      }
    });
  }

 private:
  PoolKind kind_;
  int64_t block_;  // channel block of X and Y (1: plain NCHW)
};

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
      convParallelFor(io.pool, slabs, grain, [&](int64_t b, int64_t e) {
        for (int64_t p = b; p < e; ++p) {
          if (block_ == 8) globalPoolSlab<8>(x + p * s.size * 8, y + p * 8, s.size, max_);
          else globalPoolSlab<16>(x + p * s.size * 16, y + p * 16, s.size, max_);
        }
      });
      return;
    }
    int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(1, s.size));
    convParallelFor(io.pool, s.planes, grain, [&](int64_t b, int64_t e) {
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

bool supportsWindowPool(const LayerDesc& l) {
  if (!isFloatNchw(l) || l.inputs[0].dims.size() > 5 || l.outputs.size() != 1 || !l.attrs->has("kernel_shape"))
    return false;
  if (hasPlainLayouts(l)) return true;
  const int64_t in = inLayoutBlock(l);
  return in == outLayoutBlock(l) && blockable(l, in);
}
bool supportsGlobalPool(const LayerDesc& l) {
  if (!isFloatNchw(l)) return false;
  return hasPlainLayouts(l) || (outLayoutBlock(l) == 1 && blockable(l, inLayoutBlock(l)));
}

std::unique_ptr<Kernel> createWindowPool(const LayerDesc& l) { return std::make_unique<WindowPoolKernel>(l); }
std::unique_ptr<Kernel> createGlobalAverage(const LayerDesc& l) { return std::make_unique<GlobalPoolKernel>(l, false); }
std::unique_ptr<Kernel> createGlobalMax(const LayerDesc& l) { return std::make_unique<GlobalPoolKernel>(l, true); }

}  // namespace

KernelFactory windowPool() { return {supportsWindowPool, createWindowPool}; }
KernelFactory globalAveragePoolAvx2() { return {supportsGlobalPool, createGlobalAverage}; }
KernelFactory globalMaxPoolAvx2() { return {supportsGlobalPool, createGlobalMax}; }

}  // namespace kiln::cpu
