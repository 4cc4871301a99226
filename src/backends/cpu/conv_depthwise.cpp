// "depthwise_avx2": 3x3 depthwise convolution (group == C == M), stride 1 or 2, NCHW, as in
// MobileNetV2. One (n, c) plane per task; each output row accumulates its (up to 3) input rows in
// AVX2 registers, 8 output columns at a time; at the row borders masked loads supply the zero
// padding, so there is no scalar path. Bias, residual and the fused activation (in registers for
// Relu/Clip/LeakyRelu, else on the finished row while it is in L1) are applied before the store.
#include <immintrin.h>

#include <algorithm>

#include "backends/cpu/conv_cpu_common.h"
#include "backends/cpu/elementwise_simd.h"
#include "backends/cpu/gemm.h"
#include "core/thread_pool.h"

namespace kiln::cpu {

namespace {

//! Lanes 0..7 hold a[0], a[2], ..., b[4], b[6]: the even elements of the 16 floats (a, b).
inline __m256 evenLanes(__m256 a, __m256 b) {
  __m256 t = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));  // a0 a2 b0 b2 | a4 a6 b4 b6
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
}
//! The odd elements of the 16 floats (a, b).
inline __m256 oddLanes(__m256 a, __m256 b) {
  __m256 t = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
}

//! Mask of the lanes j with lo <= j < hi.
inline __m256i laneMask(int64_t lo, int64_t hi) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256i geLo = _mm256_cmpgt_epi32(lanes, _mm256_set1_epi32(static_cast<int>(lo) - 1));
  __m256i ltHi = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(hi)), lanes);
  return _mm256_and_si256(geLo, ltHi);
}

//! row[start .. start+8) with out-of-row elements read as 0 (the zero padding). Masked-out lanes
//! are never accessed, so the address may lie outside the row.
inline __m256 loadPadded(const float* row, int64_t start, int64_t width) {
  if (start >= 0 && start + 8 <= width) return _mm256_loadu_ps(row + start);
  if (start + 8 <= 0 || start >= width) return _mm256_setzero_ps();
  return _mm256_maskload_ps(row + start, laneMask(std::max<int64_t>(0, -start), std::min<int64_t>(8, width - start)));
}

struct PlaneArgs {
  const float* x;    // input plane [H, W]
  const float* w9;   // 3x3 taps
  float bias;
  const float* res;  // residual plane or nullptr
  float* y;          // output plane [OH, OW]
};

//! 8 outputs starting at column ox of a row: the sum over `kRows` input rows of their 3 taps.
//! kPadded: the loads may cross the row ends (masked loads supply the zero padding).
template <int kStride, int kRows, bool kPadded>
inline __m256 depthwiseChunk(const float* const* rows, const __m256 (&wv)[3][3], __m256 acc, int64_t start, int64_t W) {
  auto load = [&](const float* row, int64_t at) {
    return kPadded ? loadPadded(row, at, W) : _mm256_loadu_ps(row + at);
  };
#pragma GCC unroll 3
  for (int r = 0; r < kRows; ++r) {
    if (kStride == 1) {
      acc = _mm256_fmadd_ps(wv[r][0], load(rows[r], start), acc);
      acc = _mm256_fmadd_ps(wv[r][1], load(rows[r], start + 1), acc);
      acc = _mm256_fmadd_ps(wv[r][2], load(rows[r], start + 2), acc);
    } else {
      __m256 a = load(rows[r], start), b = load(rows[r], start + 8);
      acc = _mm256_fmadd_ps(wv[r][0], evenLanes(a, b), acc);
      acc = _mm256_fmadd_ps(wv[r][1], oddLanes(a, b), acc);
      // Taps at start + 2 + 2j: the even elements of the 16 floats from start + 2.
      acc = _mm256_fmadd_ps(wv[r][2], evenLanes(load(rows[r], start + 2), load(rows[r], start + 10)), acc);
    }
  }
  return acc;
}

//! One output row, 8 columns per step: border steps use masked loads, the interior plain loads;
//! the last step stores only the columns that exist.
template <int kStride, int kRows>
void depthwiseRow(const float* const* rows, const __m256 (&wv)[3][3], float bias, const float* rr, float* yr, int64_t W,
                  int64_t OW, int64_t pl, const Activation& act) {
  const __m256 vb = _mm256_set1_ps(bias);
  const bool inRegister = simd::isRegisterActivation(act.kind);
  // Furthest element a step reads past its first tap: 8 lanes + 2 taps (stride 1), or 16 floats
  // from start + 2 (stride 2).
  constexpr int64_t kReach = kStride == 1 ? 10 : 18;
  for (int64_t ox = 0; ox < OW; ox += 8) {
    const int64_t start = ox * kStride - pl;
    const bool interior = start >= 0 && start + kReach <= W;
    __m256 acc = interior ? depthwiseChunk<kStride, kRows, false>(rows, wv, vb, start, W)
                          : depthwiseChunk<kStride, kRows, true>(rows, wv, vb, start, W);
    const bool full = ox + 8 <= OW;
    const __m256i mask = full ? _mm256_set1_epi32(-1) : laneMask(0, OW - ox);
    if (rr) acc = _mm256_add_ps(acc, full ? _mm256_loadu_ps(rr + ox) : _mm256_maskload_ps(rr + ox, mask));
    if (inRegister) acc = simd::activateInRegister(acc, act);
    if (full) _mm256_storeu_ps(yr + ox, acc);
    else _mm256_maskstore_ps(yr + ox, mask, acc);
  }
  if (!inRegister) {
    GemmEpilogue ep;
    ep.act = act;
    applyEpilogue(ep, yr, OW, 0, 1, 0, OW);
  }
}

template <int kStride>
void depthwisePlane(const PlaneArgs& a, const Window3& w, const Activation& act) {
  const int64_t H = w.in[1], W = w.in[2], OH = w.out[1], OW = w.out[2];
  const int64_t pt = w.padBegin[1], pl = w.padBegin[2];
  for (int64_t oy = 0; oy < OH; ++oy) {
    const float* rows[3];
    __m256 wv[3][3];
    int nr = 0;
    for (int ky = 0; ky < 3; ++ky) {
      int64_t iy = oy * kStride - pt + ky;
      if (iy < 0 || iy >= H) continue;  // a padding row contributes nothing
      rows[nr] = a.x + iy * W;
      for (int kx = 0; kx < 3; ++kx) wv[nr][kx] = _mm256_set1_ps(a.w9[ky * 3 + kx]);
      ++nr;
    }
    const float* rr = a.res ? a.res + oy * OW : nullptr;
    float* yr = a.y + oy * OW;
    switch (nr) {  // the row count is a template argument so the weights stay in registers
      case 3: depthwiseRow<kStride, 3>(rows, wv, a.bias, rr, yr, W, OW, pl, act); break;
      case 2: depthwiseRow<kStride, 2>(rows, wv, a.bias, rr, yr, W, OW, pl, act); break;
      case 1: depthwiseRow<kStride, 1>(rows, wv, a.bias, rr, yr, W, OW, pl, act); break;
      default: depthwiseRow<kStride, 0>(rows, wv, a.bias, rr, yr, W, OW, pl, act); break;
    }
  }
}

class DepthwiseKernel : public ResolvedConvKernel {
 public:
  explicit DepthwiseKernel(const LayerDesc& l) : k_(convConstants(l)) {}

  void execute(const KernelIO& io, KernelState* state) const override {
    const ConvProblem& p = problemOf(state);
    const Window3& w = p.win;
    const float* x = io.in[0].as<const float>();
    const float* res = residualOf(io);
    float* y = io.out[0].as<float>();
    const float* weights = k_.weights.as<float>();
    const float* bias = k_.biasData();
    const int64_t planes = p.batch * p.outChannels, inSize = w.inSize(), outSize = w.outSize();
    io.pool->parallelFor(planes, 1, [&](int64_t b, int64_t e) {
      for (int64_t plane = b; plane < e; ++plane) {
        const int64_t c = plane % p.outChannels;
        PlaneArgs a{x + plane * inSize, weights + c * 9, bias ? bias[c] : 0.f, res ? res + plane * outSize : nullptr,
                    y + plane * outSize};
        if (w.stride[2] == 1) depthwisePlane<1>(a, w, k_.act);
        else depthwisePlane<2>(a, w, k_.act);
      }
    });
  }

 private:
  ConvConstants k_;
};

bool supportsDepthwise(const LayerDesc& l) {
  if (!isPlainFloatConv(l) || l.inputs[0].dims.size() != 4) return false;
  const Dims& w = l.inputs[1].dims;
  int64_t group = l.attrs->getInt("group", 1);
  int64_t c = l.inputs[0].dims[1];
  if (group != c || w[0] != c || w[1] != 1 || w[2] != 3 || w[3] != 3) return false;
  auto s = l.attrs->getInts("strides", {1, 1});
  auto d = l.attrs->getInts("dilations", {1, 1});
  if (s.size() != 2 || d.size() != 2 || d[0] != 1 || d[1] != 1) return false;
  return s[0] == s[1] && (s[0] == 1 || s[0] == 2);
}

std::unique_ptr<Kernel> createDepthwise(const LayerDesc& l) { return std::make_unique<DepthwiseKernel>(l); }

}  // namespace

KernelFactory depthwiseConvAvx2() { return {supportsDepthwise, createDepthwise}; }

}  // namespace kiln::cpu
