// "grouped_blocked_avx2": 2-D grouped convolution whose groups have k = 1, 2, 4 or 8 input and as
// many output channels (ResNeXt's first stage: 32 groups of 4; RegNet's narrow groups; depthwise
// convs of any window), exchanging X / Y (and R) in the blocked layouts nChw8c / nChw16c
// (conv_layout.h). oneDNN's AVX2 JIT has no blocked kernel for groups narrower than its block:
// it runs gemm on plain NCHW with reorders around it (6 ms for ResNeXt-50's 56x56 3x3 layer of
// groups of 4 on two cores here, where its blocked JIT takes 1 ms for the next stage's groups of 8).
//
// One AVX2 vector holds 8 consecutive output channels: 8 / k whole groups, whose inputs are the
// same 8 channels of X (C == M). Lane l of output needs input (l / k) * k + j for j < k: each
// input row of the 8 channels is expanded once into k vectors per pixel, vector j holding each
// lane's j-th group input (an in-half shuffle for k = 2, 4; a broadcast for k = 8), with the
// zero padding written around it. Every one of the R x S taps then reads that row with plain
// loads: a tap costs k loads and k FMAs per 8 outputs, no shuffle and no bounds check. The
// expanded rows are cached per task, so consecutive output rows reuse R - stride of them.
// kTile output pixels of a row are accumulated in registers.
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "backends/cpu/conv_cpu_common.h"
#include "backends/cpu/elementwise_simd.h"
#include "core/thread_pool.h"
#include "ops/conv_layout.h"
#include "ops/fused_attrs.h"

namespace kiln::cpu {

namespace {

constexpr int64_t kLanes = 8;
constexpr int kTile = 8;  // output pixels accumulated at once (8 accumulators + a weight vector)

//! Where the 8-channel chunk `chunk` of image n, row h, column w lies in a blocked tensor.
struct BlockedView {
  int64_t block, channels, height, width;
  int64_t offset(int64_t n, int64_t chunk, int64_t h, int64_t w) const {
    const int64_t c0 = chunk * kLanes;
    return ((n * (channels / block) + c0 / block) * height + h) * width * block + w * block + c0 % block;
  }
};

struct Geometry {
  int64_t H, W, OH, OW, R, S, strideH, strideW, dilH, dilW, padT, padL, block;
  int64_t paddedWidth;  // expanded row pixels: the left padding, W, and whatever full tiles read past it
};

//! The j-th input of each lane's group, from the 8 channels xv (at px) of one pixel.
template <int kK, int kJ>
inline __m256 groupInput(__m256 xv, const float* px) {
  if constexpr (kK == 1) return xv;
  else if constexpr (kK == 8) return _mm256_broadcast_ss(px + kJ);    // one group spans the vector
  else if constexpr (kK == 4) return _mm256_permute_ps(xv, kJ * 0x55);  // [j, j, j, j] per 128-bit half
  else return _mm256_permute_ps(xv, kJ == 0 ? 0xA0 : 0xF5);            // [j, j, 2+j, 2+j] per half
}

template <int kK, int kJ = 0>
inline void expandPixel(__m256 xv, const float* px, float* dst) {
  if constexpr (kJ < kK) {
    _mm256_storeu_ps(dst + kJ * kLanes, groupInput<kK, kJ>(xv, px));
    expandPixel<kK, kJ + 1>(xv, px, dst);
  }
}

//! Expanded input rows of one 8-channel chunk, cached by row index in (R - 1) * dilation + 1
//! slots: the rows one output row reads are consecutive within that span, so they never share a
//! slot, and the next output row finds the rows it shares with this one still there.
template <int kK>
class ExpandedRows {
 public:
  ExpandedRows(const Geometry& g, const float* x) : g_(g), x_(x), slots_((g.R - 1) * g.dilH + 1) {
    const size_t floats = static_cast<size_t>(slots_ * g.paddedWidth * kK * kLanes);
    thread_local std::vector<float> buffer;
    if (buffer.size() < floats) buffer.resize(floats);
    data_ = buffer.data();
    held_.assign(static_cast<size_t>(slots_), -1);
  }

  //! Row iy (0 <= iy < H), expanded: pixel column px (padded coordinates) at px * k * 8.
  const float* row(int64_t iy) {
    const int64_t slot = iy % slots_;
    float* dst = data_ + slot * g_.paddedWidth * kK * kLanes;
    if (held_[slot] == iy) return dst;
    held_[slot] = iy;
    const float* src = x_ + iy * g_.W * g_.block;
    const __m256 zero = _mm256_setzero_ps();
    for (int64_t px = 0; px < g_.paddedWidth; ++px) {
      const int64_t ix = px - g_.padL;
      float* d = dst + px * kK * kLanes;
      if (ix < 0 || ix >= g_.W) {
        for (int j = 0; j < kK; ++j) _mm256_storeu_ps(d + j * kLanes, zero);
      } else {
        const float* p = src + ix * g_.block;
        expandPixel<kK>(_mm256_loadu_ps(p), p, d);
      }
    }
    return dst;
  }

 private:
  const Geometry& g_;
  const float* x_;  // the chunk's (n, chunk, 0, 0)
  int64_t slots_;
  float* data_;
  std::vector<int64_t> held_;
};

//! One output row of one chunk: kTile pixels at a time, then bias, residual, activation, store.
template <int kK>
void convRow(const float* const* rows, const float* w, __m256 bias, const float* res, float* y, const Geometry& g,
             const Activation& act) {
  const bool inRegister = simd::isRegisterActivation(act.kind);
  const int64_t pixelStep = g.strideW * kK * kLanes;  // floats between consecutive outputs' inputs
  for (int64_t ox = 0; ox < g.OW; ox += kTile) {
    __m256 acc[kTile];
    for (int p = 0; p < kTile; ++p) acc[p] = bias;
    for (int64_t r = 0; r < g.R; ++r) {
      if (!rows[r]) continue;  // a padding row contributes nothing
      for (int64_t s = 0; s < g.S; ++s) {
        const float* in = rows[r] + (ox * g.strideW + s * g.dilW) * kK * kLanes;
        const float* ws = w + (r * g.S + s) * kK * kLanes;
#pragma GCC unroll 8
        for (int j = 0; j < kK; ++j) {
          const __m256 wv = _mm256_loadu_ps(ws + j * kLanes);
#pragma GCC unroll 8
          for (int p = 0; p < kTile; ++p) acc[p] = _mm256_fmadd_ps(_mm256_loadu_ps(in + p * pixelStep + j * kLanes), wv, acc[p]);
        }
      }
    }
    // acc is indexed by constants only (a runtime index would keep it in memory): the epilogue
    // reads the stored tile, n pixels of it.
    alignas(32) float tile[kTile * kLanes];
#pragma GCC unroll 8
    for (int p = 0; p < kTile; ++p) _mm256_store_ps(tile + p * kLanes, acc[p]);
    const int64_t n = std::min<int64_t>(kTile, g.OW - ox);
    float* yt = y + ox * g.block;
    const float* rt = res ? res + ox * g.block : nullptr;
    for (int64_t p = 0; p < n; ++p) {
      __m256 v = _mm256_load_ps(tile + p * kLanes);
      if (rt) v = _mm256_add_ps(v, _mm256_loadu_ps(rt + p * g.block));
      if (inRegister) v = simd::activateInRegister(v, act);
      _mm256_store_ps(tile + p * kLanes, v);
    }
    if (!inRegister) applyActivationAvx2(act, tile, n * kLanes);
    for (int64_t p = 0; p < n; ++p) _mm256_storeu_ps(yt + p * g.block, _mm256_load_ps(tile + p * kLanes));
  }
}

//! Output rows [oy0, oy1) of chunk q of image n.
template <int kK>
void convRows(const Geometry& g, const float* x, const float* w, __m256 bias, const float* res, float* y, int64_t oy0,
              int64_t oy1, const Activation& act) {
  ExpandedRows<kK> rows(g, x);
  std::vector<const float*> rowPtrs(static_cast<size_t>(g.R));
  const int64_t rowFloats = g.OW * g.block;
  for (int64_t oy = oy0; oy < oy1; ++oy) {
    for (int64_t r = 0; r < g.R; ++r) {
      const int64_t iy = oy * g.strideH - g.padT + r * g.dilH;
      rowPtrs[static_cast<size_t>(r)] = iy >= 0 && iy < g.H ? rows.row(iy) : nullptr;
    }
    convRow<kK>(rowPtrs.data(), w, bias, res ? res + oy * rowFloats : nullptr, y + oy * rowFloats, g, act);
  }
}

class GroupedBlockedKernel : public ResolvedConvKernel {
 public:
  explicit GroupedBlockedKernel(const LayerDesc& l) : k_(convConstants(l)), block_(inLayoutBlock(l)) {
    const Dims& wd = k_.weights.dims();
    m_ = wd[0], cpg_ = wd[1], r_ = wd[2], s_ = wd[3];
    // [M, k, R, S] -> per 8-channel chunk q: [R][S][k][8 lanes] (lane l: output channel 8q + l).
    const float* w = k_.weights.as<float>();
    packed_.resize(static_cast<size_t>(m_ * cpg_ * r_ * s_));
    for (int64_t q = 0; q < m_ / kLanes; ++q)
      for (int64_t r = 0; r < r_; ++r)
        for (int64_t s = 0; s < s_; ++s)
          for (int64_t j = 0; j < cpg_; ++j)
            for (int64_t lane = 0; lane < kLanes; ++lane)
              packed_[static_cast<size_t>((((q * r_ + r) * s_ + s) * cpg_ + j) * kLanes + lane)] =
                  w[((q * kLanes + lane) * cpg_ + j) * r_ * s_ + r * s_ + s];
    bias_.assign(static_cast<size_t>(m_), 0.f);
    if (const float* b = k_.biasData()) std::copy(b, b + m_, bias_.begin());
  }

  void execute(const KernelIO& io, KernelState* state) const override {
    const ConvProblem& p = problemOf(state);
    const Window3& w = p.win;
    Geometry g{w.in[1], w.in[2], w.out[1], w.out[2], r_, s_, w.stride[1], w.stride[2], w.dilation[1], w.dilation[2],
               w.padBegin[1], w.padBegin[2], block_, 0};
    // Full tiles read up to input pixel (tiles * kTile - 1) * stride + (S - 1) * dilation (padded coordinates).
    const int64_t tiles = (g.OW + kTile - 1) / kTile;
    g.paddedWidth = std::max(g.W + g.padL, (tiles * kTile - 1) * g.strideW + (g.S - 1) * g.dilW + 1);
    const BlockedView xv{block_, p.inChannels, g.H, g.W}, yv{block_, m_, g.OH, g.OW};
    const float* x = io.in[0].as<const float>();
    const float* res = residualOf(io);
    float* y = io.out[0].as<float>();
    // Tasks: bands of output rows of one (image, chunk); a band reuses its expanded input rows.
    const int64_t chunks = m_ / kLanes, bandRows = std::max<int64_t>(1, std::min<int64_t>(g.OH, 8));
    const int64_t bands = (g.OH + bandRows - 1) / bandRows, tasks = p.batch * chunks * bands;
    io.pool->parallelFor(tasks, 1, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const int64_t band = t % bands, q = (t / bands) % chunks, n = t / (bands * chunks);
        const int64_t oy0 = band * bandRows, oy1 = std::min(g.OH, oy0 + bandRows);
        const float* xc = x + xv.offset(n, q, 0, 0);
        const float* wq = packed_.data() + q * r_ * s_ * cpg_ * kLanes;
        const __m256 bias = _mm256_loadu_ps(bias_.data() + q * kLanes);
        const int64_t yo = yv.offset(n, q, 0, 0);
        const float* rq = res ? res + yo : nullptr;
        switch (cpg_) {
          case 1: convRows<1>(g, xc, wq, bias, rq, y + yo, oy0, oy1, k_.act); break;
          case 2: convRows<2>(g, xc, wq, bias, rq, y + yo, oy0, oy1, k_.act); break;
          case 4: convRows<4>(g, xc, wq, bias, rq, y + yo, oy0, oy1, k_.act); break;
          default: convRows<8>(g, xc, wq, bias, rq, y + yo, oy0, oy1, k_.act); break;
        }
      }
    });
  }

 private:
  ConvConstants k_;
  int64_t block_, m_ = 0, cpg_ = 0, r_ = 0, s_ = 0;
  std::vector<float> packed_, bias_;
};

bool supportsGroupedBlocked(const LayerDesc& l) {
  if (!isFloatConv(l) || l.inputs[0].dims.size() != 4) return false;
  const int64_t block = inLayoutBlock(l);
  if ((block != 8 && block != 16) || outLayoutBlock(l) != block) return false;
  const Dims& w = l.inputs[1].dims;
  const int64_t c = l.inputs[0].dims[1], group = l.attrs->getInt("group", 1);
  const int64_t k = w[1];
  if (group < 2 || w[0] != c || k * group != c || (k != 1 && k != 2 && k != 4 && k != 8)) return false;
  if (c % block != 0 || w[2] < 1 || w[3] < 1) return false;
  const auto strides = l.attrs->getInts("strides", {1, 1}), dilations = l.attrs->getInts("dilations", {1, 1});
  return strides.size() == 2 && dilations.size() == 2 && strides[0] >= 1 && strides[1] >= 1 && dilations[0] >= 1 &&
         dilations[1] >= 1;
}

std::unique_ptr<Kernel> createGroupedBlocked(const LayerDesc& l) { return std::make_unique<GroupedBlockedKernel>(l); }

}  // namespace

KernelFactory groupedBlockedConvAvx2() { return {supportsGroupedBlocked, createGroupedBlocked}; }

}  // namespace kiln::cpu
