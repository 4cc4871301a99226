// Optimized CPU tactics: normalization family (AVX2 + FMA, multi-threaded).
//  - Softmax / LogSoftmax over the last axis (or a legacy coerced-2D block), float32.
//  - LayerNormalization over trailing dims with a per-element scale/bias (the BERT/GPT-2 path), and
//    RMSNormalization the same way without the mean and bias (T5, LLaMA, Qwen).
//  - BatchNormalization in inference mode, per channel (NCHW), folded to y = a[c] * x + b[c].
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cpu/cpu_tactics.h"
#include "backends/cpu/softmax_row.h"
#include "core/thread_pool.h"
#include "ops/fp8_matmul.h"
#include "ops/fused_attrs.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

bool cpuHasAvx2Fma() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

//! Lane mask selecting the first n (0..8) lanes.
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

float horizontalMax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

//! e^x for 8 floats: x = n ln2 + r with |r| <= ln2/2, e^r by a degree-6 polynomial (relative
//! error ~1e-7), 2^n built in the exponent bits. Inputs are clamped to the normal float range,
//! so e^x for x < -87.3 is ~1e-38 instead of 0 (negligible in a softmax sum).
__m256 exp8(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
  __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);  // ln2 split in two parts
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.f / 720);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.f));
  __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

//! Splits `n` rows over the pool so that a chunk has at least ~16K elements.
void forRows(const KernelIO& io, int64_t rows, int64_t rowLength, const std::function<void(int64_t, int64_t)>& fn) {
  int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(rowLength, 1));
  io.pool->parallelFor(rows, grain, fn);
}

int64_t product(const Dims& d, size_t from, size_t to) { return volume(Dims(d.begin() + from, d.begin() + to)); }

bool allFloat32(const LayerDesc& l) {
  for (size_t i = 0; i < l.inputs.size(); ++i)
    if (l.present(i) && l.inputs[i].type != DataType::kFLOAT) return false;
  return true;
}

// ---------------------------------------------------------------------------------------------
// Softmax / LogSoftmax

}  // namespace

namespace cpu {
void softmaxRowAvx2(const float* x, float* y, int64_t n, bool logOutput) {
  const __m256 negInf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 vmax = negInf;
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(x + k));
  const int64_t tail = n - k;
  const __m256i tailMask = firstLanes(tail);
  if (tail) vmax = _mm256_max_ps(vmax, _mm256_blendv_ps(negInf, _mm256_maskload_ps(x + k, tailMask), _mm256_castsi256_ps(tailMask)));
  const __m256 mx = _mm256_set1_ps(horizontalMax(vmax));

  __m256 vsum = _mm256_setzero_ps();
  for (k = 0; k + 8 <= n; k += 8) {
    __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + k), mx));
    if (!logOutput) _mm256_storeu_ps(y + k, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  if (tail) {
    __m256 e = _mm256_and_ps(exp8(_mm256_sub_ps(_mm256_maskload_ps(x + k, tailMask), mx)), _mm256_castsi256_ps(tailMask));
    if (!logOutput) _mm256_maskstore_ps(y + k, tailMask, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  const float sum = horizontalSum(vsum);

  if (logOutput) {
    const __m256 shift = _mm256_add_ps(mx, _mm256_set1_ps(std::log(sum)));
    for (k = 0; k + 8 <= n; k += 8) _mm256_storeu_ps(y + k, _mm256_sub_ps(_mm256_loadu_ps(x + k), shift));
    if (tail) _mm256_maskstore_ps(y + k, tailMask, _mm256_sub_ps(_mm256_maskload_ps(x + k, tailMask), shift));
  } else {
    const __m256 inv = _mm256_set1_ps(1.f / sum);
    for (k = 0; k + 8 <= n; k += 8) _mm256_storeu_ps(y + k, _mm256_mul_ps(_mm256_loadu_ps(y + k), inv));
    if (tail) _mm256_maskstore_ps(y + k, tailMask, _mm256_mul_ps(_mm256_maskload_ps(y + k, tailMask), inv));
  }
}
}  // namespace cpu

namespace {

bool softmaxCoerced(const LayerDesc& l) { return coercedTo2d(*l.attrs); }

//! The first dim of the normalized block (which always extends to the last dim here).
int64_t softmaxBlockStart(const LayerDesc& l, int64_t rank) {
  int64_t axis = l.attrs->getInt("axis", -1);
  if (softmaxCoerced(l) && axis == rank) return rank;
  return normalizeAxis(l, axis, rank);
}

bool supportsSoftmax(const LayerDesc& l) {
  if (!cpuHasAvx2Fma() || l.inputs.size() != 1 || !allFloat32(l)) return false;
  int64_t rank = static_cast<int64_t>(l.inputs[0].dims.size());
  if (rank == 0) return false;
  int64_t axis = l.attrs->getInt("axis", -1);
  if (axis < -rank || axis >= rank) return false;
  // The normalized elements must be contiguous: the last axis, or a coerced trailing block.
  return softmaxCoerced(l) || axis == -1 || axis == rank - 1;
}

class SoftmaxKernel : public Kernel {
 public:
  explicit SoftmaxKernel(bool logOutput) : log_(logOutput) {}
  struct State : KernelState {
    int64_t rows = 0, length = 0;
  };
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const Dims& x = l.inputs[0].dims;
    int64_t start = softmaxBlockStart(l, static_cast<int64_t>(x.size()));
    auto s = std::make_unique<State>();
    s->rows = product(x, 0, start);
    s->length = product(x, start, x.size());
    state = std::move(s);
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    auto* s = static_cast<State*>(state);
    const float* x = io.in[0].as<float>();
    float* y = io.out[0].as<float>();
    const int64_t len = s->length;
    forRows(io, s->rows, len, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) cpu::softmaxRowAvx2(x + r * len, y + r * len, len, log_);
    });
  }

 private:
  bool log_;
};

// ---------------------------------------------------------------------------------------------
// LayerNormalization over the trailing block [axis, rank), scale/bias of exactly that block.

//! Whether `p` (scale or bias), broadcast to X, is exactly one value per element of the block:
//! no broadcasting inside the block, only over the leading dims.
bool coversBlock(const Dims& p, const Dims& x, int64_t axis) {
  const int64_t rank = static_cast<int64_t>(x.size()), offset = rank - static_cast<int64_t>(p.size());
  if (offset < 0) return false;
  for (int64_t i = axis; i < offset; ++i)  // block dims missing from p: broadcast unless 1
    if (x[i] != 1) return false;
  for (int64_t i = offset; i < rank; ++i) {
    int64_t pd = p[i - offset];
    if (pd < 0) return false;
    if (i < axis ? pd != 1 : (pd == 1 && x[i] != 1)) return false;
  }
  return true;
}

int64_t layerNormAxis(const LayerDesc& l) {
  return normalizeAxis(l, l.attrs->getInt("axis", -1), static_cast<int64_t>(l.inputs[0].dims.size()));
}

bool supportsLayerNorm(const LayerDesc& l) {
  if (!cpuHasAvx2Fma() || l.inputs.size() < 2 || !allFloat32(l)) return false;
  if (fp8CodesOutput(*l.attrs) >= 0) return false;  // float8 codes (FP8 fusion): the reference
  if (l.op == "RMSNormalization" && (l.present(2) || l.outputs.size() > 1)) return false;  // no bias, Y only
  if (l.attrs->getInt("stash_type", 1) != 1) return false;
  if (hasSkipInput(*l.attrs)) return false;  // skip LayerNorm: the reference kernel
  const Dims& x = l.inputs[0].dims;
  if (x.empty()) return false;
  int64_t axis = l.attrs->getInt("axis", -1), rank = static_cast<int64_t>(x.size());
  if (axis < -rank || axis >= rank) return false;
  axis = axis < 0 ? axis + rank : axis;
  if (!coversBlock(l.inputs[1].dims, x, axis)) return false;
  return !l.present(2) || coversBlock(l.inputs[2].dims, x, axis);
}

class LayerNormKernel : public Kernel {
 public:
  struct State : KernelState {
    int64_t rows = 0, cols = 0;
  };
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const Dims& x = l.inputs[0].dims;
    int64_t axis = layerNormAxis(l);
    auto s = std::make_unique<State>();
    s->rows = product(x, 0, axis);
    s->cols = product(x, axis, x.size());
    if (volume(l.inputs[1].dims) != s->cols || (l.present(2) && volume(l.inputs[2].dims) != s->cols))
      opError(l, "scale/B do not match the normalized dims " + toString(x) + " from axis " + std::to_string(axis));
    state = std::move(s);
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    auto* s = static_cast<State*>(state);
    const int64_t cols = s->cols;
    const float* x = io.in[0].as<float>();
    const float* scale = io.in[1].as<float>();
    const float* bias = io.in.size() > 2 ? io.in[2].as<float>() : nullptr;
    float* y = io.out[0].as<float>();
    float* meanOut = io.out.size() > 1 ? io.out[1].as<float>() : nullptr;
    float* invOut = io.out.size() > 2 ? io.out[2].as<float>() : nullptr;
    forRows(io, s->rows, cols, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        float mean, inv;
        normalizeRow(x + r * cols, y + r * cols, cols, scale, bias, mean, inv);
        if (meanOut) meanOut[r] = mean;
        if (invOut) invOut[r] = inv;
      }
    });
  }
  //! rms: RMSNormalization (no mean: the statistic is the mean of squares, no bias).
  LayerNormKernel(float epsilon, bool rms) : epsilon_(epsilon), rms_(rms) {}

 private:
  void normalizeRow(const float* x, float* y, int64_t n, const float* scale, const float* bias, float& meanOut,
                    float& invOut) const {
    const int64_t tail = n % 8, body = n - tail;
    const __m256i mask = firstLanes(tail);
    float mean = 0.f;
    if (!rms_) {
      __m256 acc = _mm256_setzero_ps();
      for (int64_t k = 0; k < body; k += 8) acc = _mm256_add_ps(acc, _mm256_loadu_ps(x + k));
      if (tail) acc = _mm256_add_ps(acc, _mm256_maskload_ps(x + body, mask));
      mean = horizontalSum(acc) / static_cast<float>(n);
    }
    const __m256 vmean = _mm256_set1_ps(mean);
    // Variance from the centred values (two passes: no cancellation for large means); for RMS the
    // mean is 0 and this is the mean of squares.
    __m256 sq = _mm256_setzero_ps();
    for (int64_t k = 0; k < body; k += 8) {
      __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + k), vmean);
      sq = _mm256_fmadd_ps(d, d, sq);
    }
    if (tail) {
      __m256 d = _mm256_and_ps(_mm256_sub_ps(_mm256_maskload_ps(x + body, mask), vmean), _mm256_castsi256_ps(mask));
      sq = _mm256_fmadd_ps(d, d, sq);
    }
    const float inv = 1.f / std::sqrt(horizontalSum(sq) / static_cast<float>(n) + epsilon_);
    const __m256 vinv = _mm256_set1_ps(inv);
    auto one = [&](__m256 xv, __m256 sv, __m256 bv) {
      return _mm256_fmadd_ps(_mm256_mul_ps(_mm256_sub_ps(xv, vmean), vinv), sv, bv);
    };
    for (int64_t k = 0; k < body; k += 8) {
      __m256 bv = bias ? _mm256_loadu_ps(bias + k) : _mm256_setzero_ps();
      _mm256_storeu_ps(y + k, one(_mm256_loadu_ps(x + k), _mm256_loadu_ps(scale + k), bv));
    }
    if (tail) {
      __m256 bv = bias ? _mm256_maskload_ps(bias + body, mask) : _mm256_setzero_ps();
      _mm256_maskstore_ps(y + body, mask,
                          one(_mm256_maskload_ps(x + body, mask), _mm256_maskload_ps(scale + body, mask), bv));
    }
    meanOut = mean;
    invOut = inv;
  }
  float epsilon_;
  bool rms_;
};

// ---------------------------------------------------------------------------------------------
// BatchNormalization (inference): y = a[c] * x + b[c], a = scale / sqrt(var + eps), b = B - mean * a.

bool supportsBatchNorm(const LayerDesc& l) {
  if (!cpuHasAvx2Fma() || l.inputs.size() != 5 || !allFloat32(l)) return false;
  if (l.attrs->getInt("training_mode", 0) != 0 || perActivationBatchNorm(*l.attrs)) return false;
  return l.inputs[0].dims.size() >= 2;
}

void foldBatchNorm(const float* scale, const float* bias, const float* mean, const float* var, int64_t c, float eps,
                   float* a, float* b) {
  for (int64_t k = 0; k < c; ++k) {
    a[k] = scale[k] / std::sqrt(var[k] + eps);
    b[k] = bias[k] - mean[k] * a[k];
  }
}

class BatchNormKernel : public Kernel {
 public:
  explicit BatchNormKernel(const LayerDesc& l) : epsilon_(l.attrs->getFloat("epsilon", 1e-5f)) {
    bool constant = true;
    for (size_t i = 1; i < 5; ++i) constant = constant && l.inputs[i].value.valid();
    if (!constant) return;  // folded per execution into the workspace
    int64_t c = l.inputs[1].value.count();
    for (size_t i = 2; i < 5; ++i)
      if (l.inputs[i].value.count() != c) opError(l, "scale/B/mean/var sizes differ");
    a_.resize(c);
    b_.resize(c);
    foldBatchNorm(l.inputs[1].value.as<float>(), l.inputs[2].value.as<float>(), l.inputs[3].value.as<float>(),
                  l.inputs[4].value.as<float>(), c, epsilon_, a_.data(), b_.data());
  }
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>&) const override {
    const int64_t c = l.inputs[0].dims[1];
    if (!a_.empty()) {
      if (static_cast<int64_t>(a_.size()) != c) opError(l, "channel count differs from the folded parameters");
      return 0;
    }
    return static_cast<size_t>(2 * c) * sizeof(float);
  }
  void execute(const KernelIO& io, KernelState*) const override {
    const Dims& x = io.in[0].dims;
    const int64_t n = x[0], c = x[1], spatial = product(x, 2, x.size());
    const float* a = a_.data();
    const float* b = b_.data();
    if (a_.empty()) {
      float* ws = static_cast<float*>(io.workspace);
      foldBatchNorm(io.in[1].as<float>(), io.in[2].as<float>(), io.in[3].as<float>(), io.in[4].as<float>(), c,
                    epsilon_, ws, ws + c);
      a = ws;
      b = ws + c;
    }
    const float* in = io.in[0].as<float>();
    float* out = io.out[0].as<float>();
    if (spatial == 1) {  // (N, C): vectorize over channels
      forRows(io, n, c, [&](int64_t lo, int64_t hi) {
        for (int64_t r = lo; r < hi; ++r) affineVector(in + r * c, out + r * c, a, b, c);
      });
      return;
    }
    forRows(io, n * c, spatial, [&](int64_t lo, int64_t hi) {
      for (int64_t p = lo; p < hi; ++p) affinePlane(in + p * spatial, out + p * spatial, a[p % c], b[p % c], spatial);
    });
  }

 private:
  static void affinePlane(const float* x, float* y, float a, float b, int64_t n) {
    const __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
    int64_t k = 0;
    for (; k + 8 <= n; k += 8) _mm256_storeu_ps(y + k, _mm256_fmadd_ps(_mm256_loadu_ps(x + k), va, vb));
    if (k < n) {
      __m256i m = firstLanes(n - k);
      _mm256_maskstore_ps(y + k, m, _mm256_fmadd_ps(_mm256_maskload_ps(x + k, m), va, vb));
    }
  }
  static void affineVector(const float* x, float* y, const float* a, const float* b, int64_t n) {
    int64_t k = 0;
    for (; k + 8 <= n; k += 8)
      _mm256_storeu_ps(y + k, _mm256_fmadd_ps(_mm256_loadu_ps(x + k), _mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k)));
    for (; k < n; ++k) y[k] = x[k] * a[k] + b[k];
  }
  float epsilon_;
  std::vector<float> a_, b_;
};

}  // namespace

namespace cpu {
KernelFactory softmaxAvx2() {
  return {supportsSoftmax, [](const LayerDesc&) -> std::unique_ptr<Kernel> { return std::make_unique<SoftmaxKernel>(false); }};
}
KernelFactory logSoftmaxAvx2() {
  return {supportsSoftmax, [](const LayerDesc&) -> std::unique_ptr<Kernel> { return std::make_unique<SoftmaxKernel>(true); }};
}
KernelFactory layerNormAvx2() {
  return {supportsLayerNorm, [](const LayerDesc& l) -> std::unique_ptr<Kernel> {
            return std::make_unique<LayerNormKernel>(l.attrs->getFloat("epsilon", 1e-5f), l.op == "RMSNormalization");
          }};
}
KernelFactory batchNormAvx2() {
  return {supportsBatchNorm, [](const LayerDesc& l) -> std::unique_ptr<Kernel> { return std::make_unique<BatchNormKernel>(l); }};
}
}  // namespace cpu

}  // namespace kiln
