// "pointwise_avx2": 1x1 convolution (stride 1, no padding, group 1) on plain NCHW, as the product
// Y[M, P] = W[M, C] x X[C, P] per image (P = H*W), without packing or reordering X: row c of X is
// already contiguous over the pixels. ShuffleNet's 58 / 116 / 232 / 464 channels are no multiple of
// the 8-channel block, so their 1x1 convs stay plain, and oneDNN's blocked tactic reordered X and Y
// around every one of them (the plain one runs its gemm convolution).
// Register block: 6 output channels x 16 pixels (12 accumulators); W is packed once at create time
// as [M/6][C][6] (zero rows pad the last block), so the 6 broadcasts of a step are contiguous. A
// task walks its pixel blocks in the outer loop and every channel block inside, so the C x 16 block
// of X it reads stays in L1 across the output channels. Bias is the accumulators' start value; the
// residual is added and the fused activation applied (in registers for Relu / Clip / LeakyRelu, else
// on the stored 16 pixels while they are in L1) before the store.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "backends/cpu/conv_cpu_common.h"
#include "backends/cpu/elementwise_simd.h"
#include "backends/cpu/gemm.h"
#include "core/thread_pool.h"

namespace kiln::cpu {

namespace {

constexpr int64_t kMr = 6;   // output channels per register block
constexpr int64_t kNr = 16;  // pixels per register block (two vectors)

//! Mask of the first n (0..8) lanes.
inline __m256i firstLanes(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}


struct Args {
  const float* w;     // packed [M/6][C][6]
  const float* bias;  // [M] or null
  const float* x;     // [C][P] of one image
  const float* res;   // [M][P] or null
  float* y;           // [M][P]
  int64_t M, C, P;
  Activation act;
};

//! One 6 x 16 block: output channels m0.. (rows < M stored), pixels p0.. (n <= 16 of them).
template <bool kFull>
inline void block(const Args& a, int64_t mb, int64_t p0, int64_t n) {
  const int64_t m0 = mb * kMr, rows = std::min(kMr, a.M - m0);
  __m256 acc[kMr][2];
  for (int r = 0; r < kMr; ++r) {
    const __m256 b = _mm256_set1_ps(a.bias && r < rows ? a.bias[m0 + r] : 0.f);
    acc[r][0] = b;
    acc[r][1] = b;
  }
  const __m256i m0mask = kFull ? _mm256_set1_epi32(-1) : firstLanes(std::min<int64_t>(n, 8));
  const __m256i m1mask = kFull ? _mm256_set1_epi32(-1) : firstLanes(std::max<int64_t>(n - 8, 0));
  const float* w = a.w + mb * a.C * kMr;
  const float* x = a.x + p0;
  for (int64_t c = 0; c < a.C; ++c, w += kMr, x += a.P) {
    const __m256 x0 = kFull ? _mm256_loadu_ps(x) : _mm256_maskload_ps(x, m0mask);
    const __m256 x1 = kFull ? _mm256_loadu_ps(x + 8) : _mm256_maskload_ps(x + 8, m1mask);
#pragma GCC unroll 6
    for (int r = 0; r < kMr; ++r) {
      const __m256 wv = _mm256_broadcast_ss(w + r);
      acc[r][0] = _mm256_fmadd_ps(wv, x0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(wv, x1, acc[r][1]);
    }
  }
  // Spilled once with constant indices: a runtime row index into acc would make the compiler keep
  // the accumulators in memory inside the loop above.
  alignas(32) float out[kMr][kNr];
#pragma GCC unroll 6
  for (int r = 0; r < kMr; ++r) {
    _mm256_store_ps(out[r], acc[r][0]);
    _mm256_store_ps(out[r] + 8, acc[r][1]);
  }
  const bool reg = simd::isRegisterActivation(a.act.kind);
  for (int r = 0; r < rows; ++r) {
    float* y = a.y + (m0 + r) * a.P + p0;
    const float* res = a.res ? a.res + (m0 + r) * a.P + p0 : nullptr;
    __m256 v0 = _mm256_load_ps(out[r]), v1 = _mm256_load_ps(out[r] + 8);
    if (res) {
      v0 = _mm256_add_ps(v0, kFull ? _mm256_loadu_ps(res) : _mm256_maskload_ps(res, m0mask));
      v1 = _mm256_add_ps(v1, kFull ? _mm256_loadu_ps(res + 8) : _mm256_maskload_ps(res + 8, m1mask));
    }
    if (reg) {
      v0 = simd::activateInRegister(v0, a.act);
      v1 = simd::activateInRegister(v1, a.act);
    }
    if (kFull) {
      _mm256_storeu_ps(y, v0);
      _mm256_storeu_ps(y + 8, v1);
    } else {
      _mm256_maskstore_ps(y, m0mask, v0);
      _mm256_maskstore_ps(y + 8, m1mask, v1);
    }
    if (!reg) applyActivationAvx2(a.act, y, n);
  }
}

class PointwiseKernel : public ResolvedConvKernel {
 public:
  explicit PointwiseKernel(const LayerDesc& l) : k_(convConstants(l)) {
    const Dims& wd = k_.weights.dims();
    M_ = wd[0];
    C_ = wd[1];
    const int64_t blocks = (M_ + kMr - 1) / kMr;
    packed_.assign(static_cast<size_t>(blocks * C_ * kMr), 0.f);
    const float* w = k_.weights.as<float>();
    for (int64_t m = 0; m < M_; ++m)
      for (int64_t c = 0; c < C_; ++c) packed_[static_cast<size_t>(((m / kMr) * C_ + c) * kMr + m % kMr)] = w[m * C_ + c];
  }

  void execute(const KernelIO& io, KernelState* state) const override {
    const ConvProblem& p = problemOf(state);
    const int64_t P = p.win.outSize();
    const int64_t mBlocks = (M_ + kMr - 1) / kMr, pBlocks = (P + kNr - 1) / kNr;
    // Tasks: runs of pixel blocks x runs of channel blocks, about 4 per thread, pixel runs first
    // (a task then reads its X block once for all of its output channels).
    const int64_t want = int64_t(io.pool->size()) * 4;
    const int64_t pRuns = std::min(pBlocks, want);
    const int64_t mRuns = std::min(mBlocks, std::max<int64_t>(1, want / pRuns));
    const int64_t pPer = (pBlocks + pRuns - 1) / pRuns, mPer = (mBlocks + mRuns - 1) / mRuns;
    const float* x = io.in[0].as<const float>();
    const float* res = residualOf(io);
    float* y = io.out[0].as<float>();
    for (int64_t n = 0; n < p.batch; ++n) {
      Args a{packed_.data(), k_.biasData(), x + n * C_ * P, res ? res + n * M_ * P : nullptr, y + n * M_ * P, M_, C_, P, k_.act};
      io.pool->parallelFor(pRuns * mRuns, 1, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
          const int64_t pb0 = (t / mRuns) * pPer, pb1 = std::min(pBlocks, pb0 + pPer);
          const int64_t mb0 = (t % mRuns) * mPer, mb1 = std::min(mBlocks, mb0 + mPer);
          for (int64_t pb = pb0; pb < pb1; ++pb) {
            const int64_t p0 = pb * kNr, cnt = std::min(kNr, P - p0);
            for (int64_t mb = mb0; mb < mb1; ++mb) {
              if (cnt == kNr) block<true>(a, mb, p0, cnt);
              else block<false>(a, mb, p0, cnt);
            }
          }
        }
      });
    }
  }

 private:
  ConvConstants k_;
  int64_t M_ = 0, C_ = 0;
  std::vector<float> packed_;
};

bool supportsPointwise(const LayerDesc& l) {
  if (!isPlainFloatConv(l) || l.inputs[0].dims.size() != 4 || l.attrs->getInt("group", 1) != 1) return false;
  const Dims& w = l.inputs[1].dims;
  if (w[2] != 1 || w[3] != 1) return false;
  for (int64_t s : l.attrs->getInts("strides", {1, 1}))
    if (s != 1) return false;
  for (int64_t p : l.attrs->getInts("pads", {0, 0, 0, 0}))
    if (p != 0) return false;
  const std::string pad = l.attrs->getString("auto_pad", "NOTSET");
  return pad == "NOTSET" || pad == "VALID" || pad == "SAME_UPPER" || pad == "SAME_LOWER";  // 1x1 s1: no padding either way
}

std::unique_ptr<Kernel> createPointwise(const LayerDesc& l) { return std::make_unique<PointwiseKernel>(l); }

}  // namespace

KernelFactory pointwiseConvAvx2() { return {supportsPointwise, createPointwise}; }

}  // namespace kiln::cpu
