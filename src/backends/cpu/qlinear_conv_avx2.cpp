// "q_linear_conv_int_avx2": QLinearConv on AVX2 CPUs without VNNI, exact, at the speed of
// vpmaddubsw. oneDNN's int8 convolutions there run no faster than its float32 ones, while
// vpmaddubsw (32 u8 x s8 products, summed in pairs to int16) followed by vpmaddwd with ones (pairs
// of those to int32) can do twice the multiply-adds of an FMA per instruction. The int16 pair sums
// are exact only for weights in [-64, 64] (2 * 255 * 64 = 32640): implicit INT8 quantizes to
// [-63, 63] there (Backend::int8WeightLimit). A layer with wider weights (a Q/DQ model's full int8
// range) is split, W = Wh + Wl with Wh = floor(W / 2) and Wl = ceil(W / 2), both in [-64, 64], each
// k twice in the reduction (twice the work, still exact; oneDNN's int8 tactic refuses such weights
// there and the reference kernel is ~100x slower).
//
// The convolution is one GEMM per image, Y[m][p] = sum_k W[m][k] * X'[k][p] with k = (c, ky, kx)
// and X' the im2col of the u8 source (padding holds x_zero_point, which the zero-point term below
// cancels exactly, as ONNX defines padding). X' is packed once per image in 16-pixel tiles,
// [tile][k/4][16 pixels][4 k], so that one 32-byte load holds 4 consecutive k of 8 pixels; W is
// packed at build as [m][k/4][4 k] (K padded with zero weights) and each 4-byte group broadcast.
// A micro-tile is 4 output channels x 16 pixels (8 int32 accumulators). Then
//   acc = sum_k W x' - x_zero_point * sum_k W + bias   (= sum (x - x_zero_point) W + bias, exact)
// and the epilogue of QLinearParams::output in the same float operations (round half to even,
// y_zero_point, saturation; Relu), 8 pixels at a time. s8 sources are read as u8 (x ^ 0x80,
// x_zero_point + 128: the same differences). Groups == 1, 2-D, NCHW.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/cpu_tactics.h"
#include "backends/cpu/int8_pair_sums.h"
#include "core/thread_pool.h"
#include "ops/conv_geometry.h"
#include "ops/fused_attrs.h"
#include "ops/op_util.h"
#include "ops/qlinear.h"

namespace kiln::cpu {

namespace {

constexpr int kTile = 16;       // pixels per packed tile (two 8-lane vectors)
constexpr int kChannels = 4;    // output channels per micro-tile

int64_t roundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

struct Geometry {
  int64_t C = 0, H = 0, W = 0, M = 0, OH = 0, OW = 0, KH = 0, KW = 0, SH = 1, SW = 1, PT = 0, PL = 0, DH = 1, DW = 1;
  int64_t K = 0, K4 = 0, P = 0, tiles = 0;
};

class QConvAvx2 : public Kernel {
 public:
  explicit QConvAvx2(const LayerDesc& l)
      : q_(readQLinearParams(l, constantInputViews(l), l.inputs[kQW].dims[0], 1)),
        signedX_(l.inputs[kQX].type == DataType::kINT8),
        yType_(l.outputs[0].type) {
    const HostTensor& w = l.inputs[kQW].value;
    M_ = w.dims()[0];
    K_ = w.count() / M_;
    const int8_t* wp = w.as<int8_t>();
    split_ = !weightsPairSafe(w);
    K4_ = roundUp(split_ ? 2 * K_ : K_, 4) / 4;
    Mpad_ = roundUp(M_, kChannels);
    if (signedX_) q_.xZero += 128;
    packed_.assign(static_cast<size_t>(Mpad_ * K4_ * 4), 0);
    comp_.assign(static_cast<size_t>(Mpad_), 0);
    mult_.assign(static_cast<size_t>(Mpad_), 0.f);
    for (int64_t m = 0; m < M_; ++m) {
      int32_t sum = 0;
      for (int64_t k = 0; k < K_; ++k) {
        const int8_t v = wp[m * K_ + k];
        if (split_) {
          const auto [hi, lo] = splitWeight(v);
          packed_[m * K4_ * 4 + 2 * k] = hi;
          packed_[m * K4_ * 4 + 2 * k + 1] = lo;
        } else {
          packed_[m * K4_ * 4 + k] = v;
        }
        sum += v;
      }
      comp_[m] = q_.biasAt(m) - q_.xZero * sum;
      const float xw = q_.xs(0) * q_.ws(m);
      mult_[m] = q_.floatOut ? xw : xw / q_.yScale;
    }
    vectorEpilogue_ = q_.act.kind == ActKind::kNone || q_.act.kind == ActKind::kRelu;
  }

  size_t reshape(const LayerDesc& c, std::unique_ptr<KernelState>& state) const override {
    const ConvProblem p = resolveConv(qlinearConvView(c));
    const Window3& w = p.win;
    auto g = std::make_unique<GeometryState>();
    Geometry& G = g->g;
    G.C = p.inChannels, G.H = w.in[1], G.W = w.in[2], G.M = p.outChannels, G.OH = w.out[1], G.OW = w.out[2];
    G.KH = w.kernel[1], G.KW = w.kernel[2], G.SH = w.stride[1], G.SW = w.stride[2], G.PT = w.padBegin[1], G.PL = w.padBegin[2];
    G.DH = w.dilation[1], G.DW = w.dilation[2];
    G.K = G.C * G.KH * G.KW, G.K4 = K4_, G.P = G.OH * G.OW, G.tiles = (G.P + kTile - 1) / kTile;
    if (G.K != K_ || G.M != M_) throw UnsupportedError("q_linear_conv_int_avx2: weights do not match the input");
    g->batch = p.batch;
    // A 1x1, stride 1, unpadded conv reads X's rows as they are; others im2col them first.
    g->direct = G.KH == 1 && G.KW == 1 && G.SH == 1 && G.SW == 1 && G.PT == 0 && G.PL == 0 && G.OH == G.H && G.OW == G.W;
    g->colBytes = g->direct ? 0 : static_cast<size_t>(roundUp(G.K * G.tiles * kTile, 64));
    const size_t bytes = g->colBytes + static_cast<size_t>(G.tiles * G.K4 * kTile * 4);
    state = std::move(g);
    return bytes;
  }

  void execute(const KernelIO& io, KernelState* state) const override {
    const auto& s = *static_cast<GeometryState*>(state);
    const Geometry& G = s.g;
    auto* col = static_cast<uint8_t*>(io.workspace);
    uint8_t* pack = col + s.colBytes;
    const auto* x = static_cast<const uint8_t*>(io.in[kQX].data);
    // Pixel tiles in chunks whose packed panel stays in L2 while every channel group reads it.
    const int64_t chunk = std::max<int64_t>(1, (256 << 10) / (G.K4 * kTile * 4)), groups = Mpad_ / kChannels;
    for (int64_t n = 0; n < s.batch; ++n) {
      const uint8_t* img = x + n * G.C * G.H * G.W;
      if (!s.direct) im2col(G, img, col, io.pool);
      interleave(G, s.direct ? img : col, s.direct ? G.P : G.tiles * kTile, pack, io.pool);
      for (int64_t t0 = 0; t0 < G.tiles; t0 += chunk) {
        const int64_t t1 = std::min(G.tiles, t0 + chunk);
        io.pool->parallelFor(groups, 1, [&](int64_t b, int64_t e) {
          for (int64_t mg = b; mg < e; ++mg)
            for (int64_t t = t0; t < t1; ++t) tile(G, pack, mg * kChannels, t, io.out[0].data, n);
        });
      }
    }
  }

 private:
  struct GeometryState : KernelState {
    Geometry g;
    int64_t batch = 0;
    bool direct = false;
    size_t colBytes = 0;
  };

  //! X' rows [k][tiles * 16] (raw source bytes; padding = x_zero_point as the source type has it).
  void im2col(const Geometry& G, const uint8_t* x, uint8_t* col, ThreadPool* pool) const {
    const auto pad = static_cast<uint8_t>(signedX_ ? q_.xZero - 128 : q_.xZero);
    const int64_t ppad = G.tiles * kTile;
    pool->parallelFor(G.K, 4, [&](int64_t b, int64_t e) {
      for (int64_t k = b; k < e; ++k) {
        const int64_t c = k / (G.KH * G.KW), ky = k / G.KW % G.KH, kx = k % G.KW;
        const uint8_t* plane = x + c * G.H * G.W;
        uint8_t* row = col + k * ppad;
        for (int64_t oy = 0; oy < G.OH; ++oy) {
          uint8_t* d = row + oy * G.OW;
          const int64_t iy = oy * G.SH - G.PT + ky * G.DH;
          if (iy < 0 || iy >= G.H) {
            std::memset(d, pad, static_cast<size_t>(G.OW));
            continue;
          }
          const uint8_t* src = plane + iy * G.W;
          const int64_t ix0 = kx * G.DW - G.PL;
          // Valid outputs: 0 <= ix0 + ox * SW < W.
          const int64_t lo = std::clamp<int64_t>(ix0 >= 0 ? 0 : (-ix0 + G.SW - 1) / G.SW, 0, G.OW);
          const int64_t hi = std::clamp<int64_t>(G.W - ix0 <= 0 ? 0 : (G.W - ix0 + G.SW - 1) / G.SW, lo, G.OW);
          std::memset(d, pad, static_cast<size_t>(lo));
          if (G.SW == 1) std::memcpy(d + lo, src + ix0 + lo, static_cast<size_t>(hi - lo));
          else
            for (int64_t ox = lo; ox < hi; ++ox) d[ox] = src[ix0 + ox * G.SW];
          std::memset(d + hi, pad, static_cast<size_t>(G.OW - hi));
        }
        std::memset(row + G.P, pad, static_cast<size_t>(ppad - G.P));
      }
    });
  }

  //! Rows [k][stride] of source bytes -> [tile][k4][16 pixels][4 k] (s8 flipped to u8; split_: row
  //! k at packed k 2k and 2k + 1). Rows past K read zeros (their weights are 0); pixels past P in
  //! the last tile, when the rows are X's own (stride P), are copied through a padded row so
  //! nothing past X is read.
  void interleave(const Geometry& G, const uint8_t* rows, int64_t stride, uint8_t* pack, ThreadPool* pool) const {
    const __m128i flip = _mm_set1_epi8(signedX_ ? static_cast<char>(0x80) : 0);
    alignas(16) static const uint8_t zeros[kTile] = {};
    pool->parallelFor(G.tiles, 4, [&](int64_t b, int64_t e) {
      alignas(16) uint8_t tail[4][kTile];
      for (int64_t t = b; t < e; ++t) {
        const int64_t p0 = t * kTile;
        const bool partial = p0 + kTile > stride;
        uint8_t* dst = pack + t * G.K4 * kTile * 4;
        for (int64_t k4 = 0; k4 < G.K4; ++k4) {
          __m128i r[4];
          for (int j = 0; j < 4; ++j) {
            const int64_t kk = k4 * 4 + j, k = split_ ? kk / 2 : kk;  // split: each row twice
            const uint8_t* src = k < G.K ? rows + k * stride + p0 : zeros;
            if (partial && k < G.K) {
              std::memset(tail[j], 0, kTile);
              std::memcpy(tail[j], src, static_cast<size_t>(stride - p0));
              src = tail[j];
            }
            r[j] = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)), k < G.K ? flip : _mm_setzero_si128());
          }
          const __m128i ab0 = _mm_unpacklo_epi8(r[0], r[1]), ab1 = _mm_unpackhi_epi8(r[0], r[1]);
          const __m128i cd0 = _mm_unpacklo_epi8(r[2], r[3]), cd1 = _mm_unpackhi_epi8(r[2], r[3]);
          auto* d = reinterpret_cast<__m128i*>(dst + k4 * kTile * 4);
          _mm_storeu_si128(d + 0, _mm_unpacklo_epi16(ab0, cd0));
          _mm_storeu_si128(d + 1, _mm_unpackhi_epi16(ab0, cd0));
          _mm_storeu_si128(d + 2, _mm_unpacklo_epi16(ab1, cd1));
          _mm_storeu_si128(d + 3, _mm_unpackhi_epi16(ab1, cd1));
        }
      }
    });
  }

  static __m256i broadcast4(const int8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
  }

  void tile(const Geometry& G, const uint8_t* pack, int64_t m0, int64_t t, void* out, int64_t n) const {
    // Named accumulators (an array of them makes GCC spill to the stack on every step).
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
    const uint8_t* a = pack + t * G.K4 * kTile * 4;
    const int8_t* w0 = packed_.data() + m0 * K4_ * 4;
    const int8_t *w1 = w0 + K4_ * 4, *w2 = w1 + K4_ * 4, *w3 = w2 + K4_ * 4;
#define KILN_QCONV_STEP(c0, c1, w)                                                        \
  {                                                                                        \
    const __m256i b = broadcast4(w + k4 * 4);                                              \
    c0 = _mm256_add_epi32(c0, _mm256_madd_epi16(_mm256_maddubs_epi16(x0, b), ones));       \
    c1 = _mm256_add_epi32(c1, _mm256_madd_epi16(_mm256_maddubs_epi16(x1, b), ones));       \
  }
    for (int64_t k4 = 0; k4 < G.K4; ++k4) {
      const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + k4 * 64));
      const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + k4 * 64 + 32));
      KILN_QCONV_STEP(c00, c01, w0)
      KILN_QCONV_STEP(c10, c11, w1)
      KILN_QCONV_STEP(c20, c21, w2)
      KILN_QCONV_STEP(c30, c31, w3)
    }
#undef KILN_QCONV_STEP
    const __m256i acc[kChannels][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}};
    for (int i = 0; i < kChannels; ++i) {
      const int64_t m = m0 + i;
      if (m >= M_) break;
      for (int h = 0; h < 2; ++h) {
        const int64_t p0 = t * kTile + h * 8;
        if (p0 >= G.P) break;
        store(acc[i][h], m, (n * M_ + m) * G.P + p0, std::min<int64_t>(8, G.P - p0), out);
      }
    }
  }

  //! acc + comp -> the output type, `count` pixels from element `at`.
  void store(__m256i acc, int64_t m, int64_t at, int64_t count, void* out) const {
    alignas(32) int32_t s[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(s), _mm256_add_epi32(acc, _mm256_set1_epi32(comp_[m])));
    if (!vectorEpilogue_) {
      for (int64_t i = 0; i < count; ++i) write(out, at + i, q_.output(s[i], 0, m));
      return;
    }
    __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(s))), _mm256_set1_ps(mult_[m]));
    if (q_.act.kind == ActKind::kRelu) v = _mm256_max_ps(v, _mm256_setzero_ps());
    alignas(32) float f[8];
    if (q_.floatOut) {
      _mm256_store_ps(f, v);
      std::memcpy(static_cast<float*>(out) + at, f, static_cast<size_t>(count) * sizeof(float));
      return;
    }
    v = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v = _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(static_cast<float>(q_.lo - q_.yZero))), _mm256_set1_ps(static_cast<float>(q_.hi - q_.yZero)));
    _mm256_store_si256(reinterpret_cast<__m256i*>(s), _mm256_add_epi32(_mm256_cvtps_epi32(v), _mm256_set1_epi32(q_.yZero)));
    if (yType_ == DataType::kUINT8)
      for (int64_t i = 0; i < count; ++i) static_cast<uint8_t*>(out)[at + i] = static_cast<uint8_t>(s[i]);
    else
      for (int64_t i = 0; i < count; ++i) static_cast<int8_t*>(out)[at + i] = static_cast<int8_t>(s[i]);
  }

  void write(void* out, int64_t i, float v) const {
    if (q_.floatOut) static_cast<float*>(out)[i] = v;
    else if (yType_ == DataType::kUINT8) static_cast<uint8_t*>(out)[i] = static_cast<uint8_t>(v);
    else static_cast<int8_t*>(out)[i] = static_cast<int8_t>(v);
  }

  QLinearParams q_;
  bool signedX_;
  DataType yType_;
  int64_t M_ = 0, K_ = 0, K4_ = 0, Mpad_ = 0;
  bool split_ = false;           // each k twice: W = floor(W / 2) + ceil(W / 2)
  std::vector<int8_t> packed_;   // [Mpad][K4][4]
  std::vector<int32_t> comp_;    // bias - x_zero_point * sum_k W[m][k]
  std::vector<float> mult_;      // xs * ws[m] (/ ys): the epilogue's factor, as QLinearParams::output forms it
  bool vectorEpilogue_ = false;
};

bool supportsQConvAvx2(const LayerDesc& l) {
  if (!__builtin_cpu_supports("avx2") || !hasPlainLayouts(l) || l.present(kQR)) return false;  // residual: the reference
  if (l.inputs.size() <= kQWScale || l.inputs[kQX].dims.size() != 4 || !l.inputs[kQW].value.valid() ||
      l.inputs[kQW].type != DataType::kINT8 || l.inputs[kQW].dims.size() != 4 || !qlinearScalarsConstant(l))
    return false;
  if (l.attrs->getInt("group", 1) != 1) return false;
  const HostTensor& w = l.inputs[kQW].value;
  // The result stays in int32 (vector adds wrap, so only the final value must fit):
  // |sum (x - x_zero_point) w| <= 16384 * 255 * 128 < 2^29, |bias| < 2^30.
  if (w.count() / std::max<int64_t>(1, w.dims()[0]) > 16384) return false;
  try {
    const QLinearParams q = readQLinearParams(l, constantInputViews(l), w.dims()[0], 1);
    if (q.xScale.size() != 1) return false;
    for (int32_t b : q.bias)
      if (b >= (1 << 30) || b <= -(1 << 30)) return false;
    for (int32_t z : q.wZero)
      if (z != 0) return false;
  } catch (const Error&) {
    return false;
  }
  return true;
}

std::unique_ptr<Kernel> createQConvAvx2(const LayerDesc& l) { return std::make_unique<QConvAvx2>(l); }

}  // namespace

KernelFactory qlinearConvAvx2() { return {supportsQConvAvx2, createQConvAvx2}; }

}  // namespace kiln::cpu
