// "direct" MaxPool (without the Indices output) / AveragePool, float32, plain NCHW or a blocked
// layout (nChw8c / nChw16c, conv_layout.h: the layer's kiln_layout_in; Y is written in the same
// layout). Each output row is computed in two vectorized passes over a row buffer that carries
// the padding as the reduction's identity (-inf / 0):
//   1. vertical: the input rows under the window (depth x height taps) reduced into the buffer;
//   2. horizontal: each output column reduces its width taps from the buffer, 8 outputs per
//      vector in NCHW (stride 1 or 2; strided windows take the even lanes of two loads), or one
//      channel block per vector in the blocked layouts.
// Per-axis tap ranges and divisors are computed once at reshape, so the loops carry no bounds
// checks or divisions. (The scalar per-output loop this replaces took ~10 ms for ShuffleNetV2's
// 24x112x112 stem pool on one core; ONNX Runtime takes ~0.1 ms.) NaN propagates as in the
// reference: a window holding a NaN yields NaN.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/conv_cpu_common.h"
#include "core/thread_pool.h"
#include "ops/conv_layout.h"
#include "ops/fused_attrs.h"

namespace kiln::cpu {

namespace {

enum class PoolKind { kMax, kAverage, kAverageIncludePad };

//! Taps [lo, hi) of one axis whose input index start + k*d is inside [0, in), and the number of
//! taps inside the explicitly padded range [-padBegin, in + padEnd) (count_include_pad).
struct TapRange {
  int64_t lo, hi, padded, start;
};

TapRange taps(const Window3& w, int a, int64_t o) {
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

//! Lanes 0..7 hold the even elements of the 16 floats (a, b).
inline __m256 evenLanes(__m256 a, __m256 b) {
  __m256 t = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
}

//! The reduction of one pooling kind on 8 lanes. Max keeps a mask of the lanes that saw a NaN
//! (max_ps drops a NaN in its first operand) and ORs it in at the end: all-ones bits are a NaN.
template <PoolKind kKind>
struct Reducer {
  static constexpr bool kMax = kKind == PoolKind::kMax;
  __m256 acc = kMax ? _mm256_set1_ps(-std::numeric_limits<float>::infinity()) : _mm256_setzero_ps();
  __m256 nan = _mm256_setzero_ps();
  void add(__m256 v) {
    if constexpr (kMax) {
      nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
      acc = _mm256_max_ps(acc, v);
    } else {
      acc = _mm256_add_ps(acc, v);
    }
  }
  __m256 result() const { return kMax ? _mm256_or_ps(acc, nan) : acc; }
};

template <PoolKind kKind>
constexpr float identityOf() {
  return kKind == PoolKind::kMax ? -std::numeric_limits<float>::infinity() : 0.f;
}

//! Mask of the lanes j < n.
inline __m256i firstLanes(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

//! What reshape computes once: the window, per-axis taps, and the row buffer's geometry.
struct PoolState : KernelState {
  Window3 win;
  int64_t planes = 0;                // (n, c) planes, or (n, channel block) slabs in a blocked layout
  std::vector<TapRange> tapsD, tapsH, tapsW;
  std::vector<float> colInside, colPadded;  // per output column: width taps inside X / inside the pads
  int64_t lead = 0, bufLen = 0;      // buffer: `lead` identity positions, X's row, identity tail
  bool rowBuffered = false;          // the row buffer fits on the stack (else the scalar path)
};

constexpr int64_t kMaxRowFloats = 16384;  // 64 KiB of stack per worker
constexpr int64_t kMaxRows = 64;           // input rows under one window (depth x height taps)

//! Scalar fallback for rows too wide for the row buffer: one output at a time.
template <PoolKind kKind, int kBlock>
void poolSlabScalar(const float* x, float* y, const PoolState& s) {
  const Window3& w = s.win;
  for (int64_t od = 0; od < w.out[0]; ++od) {
    const TapRange& td = s.tapsD[od];
    for (int64_t oh = 0; oh < w.out[1]; ++oh) {
      const TapRange& th = s.tapsH[oh];
      for (int64_t ow = 0; ow < w.out[2]; ++ow, y += kBlock) {
        const TapRange& tw = s.tapsW[ow];
        for (int j = 0; j < kBlock; ++j) {
          float acc = identityOf<kKind>();
          for (int64_t kd = td.lo; kd < td.hi; ++kd)
            for (int64_t kh = th.lo; kh < th.hi; ++kh) {
              const float* xr = x + (((td.start + kd * w.dilation[0]) * w.in[1] + th.start + kh * w.dilation[1]) * w.in[2] +
                                     tw.start) * kBlock + j;
              for (int64_t kw = tw.lo; kw < tw.hi; ++kw) {
                float v = xr[kw * w.dilation[2] * kBlock];
                if constexpr (kKind == PoolKind::kMax) acc = v > acc || std::isnan(v) ? v : acc;
                else acc += v;
              }
            }
          const int64_t inside = (td.hi - td.lo) * (th.hi - th.lo) * (tw.hi - tw.lo);
          if constexpr (kKind == PoolKind::kMax) {
            y[j] = inside > 0 ? acc : 0.f;
          } else {
            int64_t count = kKind == PoolKind::kAverageIncludePad ? td.padded * th.padded * tw.padded : inside;
            y[j] = count > 0 ? acc / static_cast<float>(count) : 0.f;
          }
        }
      }
    }
  }
}

//! Pass 1: buf[lead*kBlock + i] = the reduction over `rows` of rows[r][i], i < n (n = W*kBlock).
template <PoolKind kKind>
void reduceRows(const float* const* rows, int nRows, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    Reducer<kKind> r;
    for (int k = 0; k < nRows; ++k) r.add(_mm256_loadu_ps(rows[k] + i));
    _mm256_storeu_ps(out + i, r.result());
  }
  if (i < n) {
    const __m256i m = firstLanes(n - i);
    Reducer<kKind> r;
    for (int k = 0; k < nRows; ++k) r.add(_mm256_maskload_ps(rows[k] + i, m));
    _mm256_maskstore_ps(out + i, m, r.result());
  }
}

//! The finished value of 8 outputs: NaN-carrying max (0 where no tap is inside X), or the sum
//! divided by the tap count (0 where it is 0).
template <PoolKind kKind>
inline __m256 finish(const Reducer<kKind>& r, __m256 count) {
  const __m256 some = _mm256_cmp_ps(count, _mm256_setzero_ps(), _CMP_GT_OQ);
  if constexpr (kKind == PoolKind::kMax) return _mm256_and_ps(r.result(), some);
  return _mm256_and_ps(_mm256_div_ps(r.result(), count), some);
}

//! Pass 2, NCHW: output columns [0, OW) from the row buffer, 8 per vector.
template <PoolKind kKind, int kStride>
void reduceColumnsPlain(const float* buf, float* y, const PoolState& s, float rowCount) {
  const Window3& w = s.win;
  const int64_t OW = w.out[2], K = w.kernel[2], d = w.dilation[2];
  const float* counts = kKind == PoolKind::kAverageIncludePad ? s.colPadded.data() : s.colInside.data();
  const __m256 rc = _mm256_set1_ps(rowCount);
  for (int64_t ow = 0; ow < OW; ow += 8) {
    Reducer<kKind> r;
    for (int64_t k = 0; k < K; ++k) {
      const float* p = buf + ow * kStride + k * d;
      if constexpr (kStride == 1) r.add(_mm256_loadu_ps(p));
      else r.add(evenLanes(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)));
    }
    const __m256 v = finish(r, _mm256_mul_ps(rc, _mm256_loadu_ps(counts + ow)));
    if (ow + 8 <= OW) _mm256_storeu_ps(y + ow, v);
    else _mm256_maskstore_ps(y + ow, firstLanes(OW - ow), v);
  }
}

//! Pass 2, NCHW with another stride: one output at a time from the row buffer.
template <PoolKind kKind>
void reduceColumnsStrided(const float* buf, float* y, const PoolState& s, float rowCount) {
  const Window3& w = s.win;
  const float* counts = kKind == PoolKind::kAverageIncludePad ? s.colPadded.data() : s.colInside.data();
  for (int64_t ow = 0; ow < w.out[2]; ++ow) {
    float acc = identityOf<kKind>();
    for (int64_t k = 0; k < w.kernel[2]; ++k) {
      float v = buf[ow * w.stride[2] + k * w.dilation[2]];
      if constexpr (kKind == PoolKind::kMax) acc = v > acc || std::isnan(v) ? v : acc;
      else acc += v;
    }
    const float count = rowCount * counts[ow];
    if constexpr (kKind == PoolKind::kMax) y[ow] = count > 0 ? acc : 0.f;
    else y[ow] = count > 0 ? acc / count : 0.f;
  }
}

//! Pass 2, blocked: each output position reduces kBlock channels, 8 per vector.
template <PoolKind kKind, int kBlock>
void reduceColumnsBlocked(const float* buf, float* y, const PoolState& s, float rowCount) {
  const Window3& w = s.win;
  const int64_t K = w.kernel[2], step = w.dilation[2] * kBlock;
  const float* counts = kKind == PoolKind::kAverageIncludePad ? s.colPadded.data() : s.colInside.data();
  for (int64_t ow = 0; ow < w.out[2]; ++ow, y += kBlock) {
    const float* p = buf + ow * w.stride[2] * kBlock;
    const __m256 count = _mm256_set1_ps(rowCount * counts[ow]);
    for (int j = 0; j < kBlock; j += 8) {
      Reducer<kKind> r;
      for (int64_t k = 0; k < K; ++k) r.add(_mm256_loadu_ps(p + k * step + j));
      _mm256_storeu_ps(y + j, finish(r, count));
    }
  }
}

template <PoolKind kKind, int kBlock>
void poolSlab(const float* x, float* y, const PoolState& s) {
  if (!s.rowBuffered) return poolSlabScalar<kKind, kBlock>(x, y, s);
  const Window3& w = s.win;
  const int64_t rowFloats = w.in[2] * kBlock, outRow = w.out[2] * kBlock;
  alignas(32) float buf[kMaxRowFloats];
  std::fill(buf, buf + s.bufLen * kBlock, identityOf<kKind>());  // the padding, never overwritten
  float* bufRow = buf + s.lead * kBlock;
  const float* rows[kMaxRows];
  for (int64_t od = 0; od < w.out[0]; ++od) {
    const TapRange& td = s.tapsD[od];
    for (int64_t oh = 0; oh < w.out[1]; ++oh, y += outRow) {
      const TapRange& th = s.tapsH[oh];
      int nRows = 0;
      for (int64_t kd = td.lo; kd < td.hi; ++kd)
        for (int64_t kh = th.lo; kh < th.hi; ++kh)
          rows[nRows++] = x + ((td.start + kd * w.dilation[0]) * w.in[1] + th.start + kh * w.dilation[1]) * rowFloats;
      const float rowCount = static_cast<float>(kKind == PoolKind::kAverageIncludePad ? td.padded * th.padded : nRows);
      if (nRows == 0 && kKind != PoolKind::kAverageIncludePad) {  // every tap in the padding
        std::fill(y, y + outRow, 0.f);
        continue;
      }
      reduceRows<kKind>(rows, nRows, bufRow, rowFloats);
      if constexpr (kBlock == 1) {
        if (w.stride[2] == 1) reduceColumnsPlain<kKind, 1>(buf, y, s, rowCount);
        else if (w.stride[2] == 2) reduceColumnsPlain<kKind, 2>(buf, y, s, rowCount);
        else reduceColumnsStrided<kKind>(buf, y, s, rowCount);
      } else {
        reduceColumnsBlocked<kKind, kBlock>(buf, y, s, rowCount);
      }
    }
  }
}

template <PoolKind kKind>
void poolSlabOfBlock(int64_t block, const float* x, float* y, const PoolState& s) {
  if (block == 8) poolSlab<kKind, 8>(x, y, s);
  else if (block == 16) poolSlab<kKind, 16>(x, y, s);
  else poolSlab<kKind, 1>(x, y, s);
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
    const Window3 w = toWindow3(poolWindow(concrete, x, concrete.attrs->getInts("kernel_shape")));
    s->win = w;
    s->planes = x[0] * (x[1] / block_);
    for (int64_t o = 0; o < w.out[0]; ++o) s->tapsD.push_back(taps(w, 0, o));
    for (int64_t o = 0; o < w.out[1]; ++o) s->tapsH.push_back(taps(w, 1, o));
    // Columns rounded up to whole vectors (the plain pass reads counts 8 at a time).
    const int64_t OW = w.out[2], OWr = (OW + 7) / 8 * 8;
    s->colInside.assign(OWr, 0.f);
    s->colPadded.assign(OWr, 0.f);
    for (int64_t o = 0; o < OW; ++o) {
      s->tapsW.push_back(taps(w, 2, o));
      s->colInside[o] = static_cast<float>(s->tapsW[o].hi - s->tapsW[o].lo);
      s->colPadded[o] = static_cast<float>(s->tapsW[o].padded);
    }
    // Buffer position p holds input column p - lead; output column o reads p = o*stride + k*d.
    // The plain pass reads whole vectors past the last output (and 16 floats per stride-2 load).
    s->lead = w.padBegin[2];
    const int64_t lastStart = (block_ == 1 ? OWr - 1 : OW - 1) * w.stride[2];
    const int64_t reach = lastStart + (w.kernel[2] - 1) * w.dilation[2] + 1 + (block_ == 1 ? 16 : 0);
    s->bufLen = std::max(s->lead + w.in[2], reach);
    s->rowBuffered = s->bufLen * block_ <= kMaxRowFloats && w.kernel[0] * w.kernel[1] <= kMaxRows && w.padBegin[2] >= 0;
    state = std::move(s);
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    const auto& s = *static_cast<PoolState*>(state);
    const float* x = io.in[0].as<const float>();
    float* y = io.out[0].as<float>();
    // A plane is one channel, a slab block_ channels: the same strides times block_.
    const int64_t inSize = s.win.inSize() * block_, outSize = s.win.outSize() * block_;
    io.pool->parallelFor(s.planes, 1, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p) {
        switch (kind_) {
          case PoolKind::kMax: poolSlabOfBlock<PoolKind::kMax>(block_, x + p * inSize, y + p * outSize, s); break;
          case PoolKind::kAverage: poolSlabOfBlock<PoolKind::kAverage>(block_, x + p * inSize, y + p * outSize, s); break;
          case PoolKind::kAverageIncludePad:
            poolSlabOfBlock<PoolKind::kAverageIncludePad>(block_, x + p * inSize, y + p * outSize, s);
            break;
        }
      }
    });
  }

 private:
  PoolKind kind_;
  int64_t block_;  // channel block of X and Y (1: plain NCHW)
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

std::unique_ptr<Kernel> createWindowPool(const LayerDesc& l) { return std::make_unique<WindowPoolKernel>(l); }

}  // namespace

KernelFactory windowPool() { return {supportsWindowPool, createWindowPool}; }

}  // namespace kiln::cpu
