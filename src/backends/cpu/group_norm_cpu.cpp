// Optimized CPU tactic: GroupNormalization and InstanceNormalization (float32, plain NCHW...), AVX2
// + FMA, one (n, group) row per work item on the thread pool, with the fused residual and activation
// of fuse_residual + fuse_activation (GroupNorm -> Add -> ReLU in ResNet-GN, -> SiLU in UNets). Statistics in
// two passes (mean, then centred squares) with float lanes folded into double every block, so long
// groups (C/G * H * W in the tens of thousands) keep the reference's accuracy.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "backends/cpu/cpu_tactics.h"
#include "backends/cpu/elementwise_simd.h"
#include "core/thread_pool.h"
#include "ops/fused_attrs.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

constexpr int64_t kFold = 4096;  //!< elements summed in float lanes before folding into double

double laneSum(__m256 v) {
  alignas(32) float f[8];
  _mm256_store_ps(f, v);
  double s = 0;
  for (float x : f) s += x;
  return s;
}

//! Sum of (x[k] - shift) over n floats (shift 0: the plain sum), or of its squares.
template <bool SQUARES>
double sumOf(const float* x, int64_t n, float shift) {
  const __m256 vs = _mm256_set1_ps(shift);
  double total = 0;
  for (int64_t b = 0; b < n; b += kFold) {
    const int64_t e = std::min(n, b + kFold);
    __m256 acc = _mm256_setzero_ps();
    int64_t k = b;
    for (; k + 8 <= e; k += 8) {
      const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + k), vs);
      acc = SQUARES ? _mm256_fmadd_ps(d, d, acc) : _mm256_add_ps(acc, d);
    }
    total += laneSum(acc);
    for (; k < e; ++k) {
      const double d = static_cast<double>(x[k]) - shift;
      total += SQUARES ? d * d : d;
    }
  }
  return total;
}

//! y = x * a + b (+ r, the fused residual, when given).
void affine(const float* x, const float* r, float* y, float a, float b, int64_t n) {
  const __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
  int64_t k = 0;
  if (r) {
    for (; k + 8 <= n; k += 8)
      _mm256_storeu_ps(y + k, _mm256_add_ps(_mm256_fmadd_ps(_mm256_loadu_ps(x + k), va, vb), _mm256_loadu_ps(r + k)));
    for (; k < n; ++k) y[k] = x[k] * a + b + r[k];
    return;
  }
  for (; k + 8 <= n; k += 8) _mm256_storeu_ps(y + k, _mm256_fmadd_ps(_mm256_loadu_ps(x + k), va, vb));
  for (; k < n; ++k) y[k] = x[k] * a + b;
}

bool supportsGroupNorm(const LayerDesc& l) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return false;
  if ((l.op != "GroupNormalization" && l.op != "InstanceNormalization") || l.inputs.size() < 3 || l.inputs.size() > 4 ||
      !hasPlainLayouts(l) || l.outputs.size() != 1 || l.outputs[0].type != DataType::kFLOAT)
    return false;
  if (l.inputs.size() == 4 && l.inputs[3].dims != l.outputs[0].dims) return false;  // the fused residual
  for (size_t i = 0; i < l.inputs.size(); ++i)
    if (!l.present(i) || l.inputs[i].type != DataType::kFLOAT) return false;
  return l.inputs[0].dims.size() >= 2;
}

class GroupNormKernel : public Kernel {
 public:
  explicit GroupNormKernel(const LayerDesc& l)
      : eps_(l.attrs->getFloat("epsilon", 1e-5f)), act_(fusedActivation(*l.attrs)) {}
  struct State : KernelState {
    int64_t n = 0, c = 0, groups = 0, spatial = 0;
    bool perGroupAffine = false;
  };
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const Dims& x = l.inputs[0].dims;
    auto s = std::make_unique<State>();
    s->n = x[0];
    s->c = x[1];
    s->spatial = volume(Dims(x.begin() + 2, x.end()));
    s->groups = l.op == "InstanceNormalization" ? s->c : l.attrs->getInt("num_groups", 0);
    if (s->groups <= 0 || s->c % s->groups != 0) opError(l, "channels must be divisible by num_groups > 0");
    s->perGroupAffine = perGroupAffine(*l.attrs) && volume(l.inputs[1].dims) == s->groups;
    const int64_t params = s->perGroupAffine ? s->groups : s->c;
    if (volume(l.inputs[1].dims) != params || volume(l.inputs[2].dims) != params) opError(l, "scale/bias sizes do not match");
    state = std::move(s);
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    const auto& s = *static_cast<const State*>(state);
    const int64_t perGroup = s.c / s.groups, len = perGroup * s.spatial;
    const float* x = io.in[0].as<float>();
    const float* scale = io.in[1].as<float>();
    const float* bias = io.in[2].as<float>();
    const float* res = io.in.size() > 3 ? io.in[3].as<float>() : nullptr;
    float* y = io.out[0].as<float>();
    if (len == 0) return;
    io.pool->parallelFor(s.n * s.groups, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t row = lo; row < hi; ++row) {
        const float* xr = x + row * len;
        float* yr = y + row * len;
        const double mean = sumOf<false>(xr, len, 0.f) / static_cast<double>(len);
        const double var = sumOf<true>(xr, len, static_cast<float>(mean)) / static_cast<double>(len);
        const double inv = 1.0 / std::sqrt(var + eps_);
        const int64_t g = row % s.groups;
        for (int64_t k = 0; k < perGroup; ++k) {
          const int64_t p = s.perGroupAffine ? g : g * perGroup + k;
          const double a = inv * scale[p];
          affine(xr + k * s.spatial, res ? res + row * len + k * s.spatial : nullptr, yr + k * s.spatial, static_cast<float>(a),
                 static_cast<float>(bias[p] - mean * a), s.spatial);
        }
        applyActivationAvx2(act_, yr, len);
      }
    });
  }

 private:
  float eps_;
  Activation act_;
};

}  // namespace

namespace cpu {
KernelFactory groupNormAvx2() {
  return {supportsGroupNorm, [](const LayerDesc& l) -> std::unique_ptr<Kernel> { return std::make_unique<GroupNormKernel>(l); }};
}
}  // namespace cpu

}  // namespace kiln
