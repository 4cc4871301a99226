// Optimized CPU tactics: resize family.
// "nchw_avx2": nearest / linear resizing of the two spatial axes of an NCHW float32 tensor.
// The sampling taps come from the op definition (ops/resize.cpp), so every coordinate mode
// behaves exactly like the reference; the kernel gathers with AVX2 and splits output rows over
// the thread pool. Layers it cannot run fast at a given shape (N or C resized, wider filters)
// are run by the reference kernel from the same Kernel object.
#include <immintrin.h>

#include <cstring>

#include "backends/cpu/cpu_tactics.h"
#include "core/thread_pool.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"
#include "ops/resize_plan.h"

namespace kiln {

namespace {

//! Taps of one spatial axis, padded to two per output (the second with weight 0 for nearest).
struct SpatialTaps {
  std::vector<int32_t> i0, i1;
  std::vector<float> w0, w1;
};

SpatialTaps packTaps(int count, const std::vector<int64_t>& index, const std::vector<float>& weight, int64_t out) {
  SpatialTaps t;
  t.i0.resize(out);
  t.i1.resize(out);
  t.w0.resize(out);
  t.w1.resize(out);
  for (int64_t o = 0; o < out; ++o) {
    t.i0[o] = static_cast<int32_t>(index[o * count]);
    t.w0[o] = weight[o * count];
    t.i1[o] = count == 2 ? static_cast<int32_t>(index[o * count + 1]) : t.i0[o];
    t.w1[o] = count == 2 ? weight[o * count + 1] : 0.f;
  }
  return t;
}

struct ResizeState : KernelState {
  bool fast = false;
  LayerDesc concrete;  //!< for the reference fallback
  int64_t planes = 0, ih = 0, iw = 0, oh = 0, ow = 0;
  bool nearest = false;
  SpatialTaps rows, cols;
};

//! Axis `ax` is untouched: the same size and output index o reads input index o alone. Linear
//! modes give every axis two taps, so an untouched one has weight 1 on o and 0 on the other tap
//! (counting only one tap per axis left every linear resize on the reference kernel).
bool isIdentityAxis(int count, const std::vector<int64_t>& index, const std::vector<float>& weight, int64_t in,
                    int64_t out) {
  if (in != out) return false;
  for (int64_t o = 0; o < out; ++o) {
    float onSelf = 0.f;
    for (int t = 0; t < count; ++t) {
      const int64_t k = o * count + t;
      if (index[k] == o) onSelf += weight[k];
      else if (weight[k] != 0.f) return false;
    }
    if (onSelf != 1.f) return false;
  }
  return true;
}

class ResizeNchwKernel : public Kernel {
 public:
  explicit ResizeNchwKernel(bool nearest) : nearest_(nearest) {}

  size_t reshape(const LayerDesc& concrete, std::unique_ptr<KernelState>& state) const override {
    auto s = std::make_unique<ResizeState>();
    s->concrete = concrete;
    s->nearest = nearest_;
    const Dims& in = concrete.inputs[0].dims;
    ResizeSamplingPlan plan;
    bool ok = in.size() == 4;
    if (ok) {
      plan = resizeSamplingPlan(concrete);
      ok = !plan.anyOutside;  // extrapolating crops: the reference kernel
    }
    const Dims& out = plan.outDims;
    const std::vector<int>& taps = plan.taps;
    const std::vector<std::vector<int64_t>>& index = plan.index;
    const std::vector<std::vector<float>>& weight = plan.weight;
    ok = ok && isIdentityAxis(taps[0], index[0], weight[0], in[0], out[0]) &&
         isIdentityAxis(taps[1], index[1], weight[1], in[1], out[1]) && taps[2] <= 2 && taps[3] <= 2 &&
         in[3] < (int64_t(1) << 31) && in[2] < (int64_t(1) << 31);
    if (ok) {
      s->fast = true;
      s->planes = in[0] * in[1];
      s->ih = in[2];
      s->iw = in[3];
      s->oh = out[2];
      s->ow = out[3];
      s->rows = packTaps(taps[2], index[2], weight[2], out[2]);
      s->cols = packTaps(taps[3], index[3], weight[3], out[3]);
    }
    state = std::move(s);
    return 0;
  }

  void execute(const KernelIO& io, KernelState* state) const override {
    auto* s = static_cast<ResizeState*>(state);
    if (!s->fast) {
      OpRegistry::instance().find(s->concrete.op)->ref(s->concrete, io);
      return;
    }
    const float* in = io.in[0].as<const float>();
    float* out = io.out[0].as<float>();
    const int64_t rowsTotal = s->planes * s->oh;
    if (rowsTotal == 0 || s->ow == 0) return;
    const int64_t grain = std::max<int64_t>(1, 8192 / s->ow);
    io.pool->parallelFor(rowsTotal, grain, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t plane = r / s->oh, oy = r % s->oh;
        const float* src = in + plane * s->ih * s->iw;
        float* dst = out + r * s->ow;
        if (s->nearest) {
          // Upsampling repeats input rows: copy the previous output row when it reads the same one.
          if (r > begin && oy > 0 && s->rows.i0[oy] == s->rows.i0[oy - 1]) std::memcpy(dst, dst - s->ow, s->ow * sizeof(float));
          else nearestRow(src + s->rows.i0[oy] * s->iw, dst, s->cols, s->ow);
        } else {
          linearRow(src + s->rows.i0[oy] * s->iw, src + s->rows.i1[oy] * s->iw, s->rows.w0[oy], s->rows.w1[oy], dst,
                    s->cols, s->ow);
        }
      }
    });
  }

 private:
  static void nearestRow(const float* row, float* dst, const SpatialTaps& c, int64_t ow) {
    int64_t x = 0;
    for (; x + 8 <= ow; x += 8) {
      __m256i idx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c.i0.data() + x));
      _mm256_storeu_ps(dst + x, _mm256_i32gather_ps(row, idx, 4));
    }
    for (; x < ow; ++x) dst[x] = row[c.i0[x]];
  }

  static void linearRow(const float* r0, const float* r1, float wy0, float wy1, float* dst, const SpatialTaps& c,
                        int64_t ow) {
    const __m256 vy0 = _mm256_set1_ps(wy0), vy1 = _mm256_set1_ps(wy1);
    int64_t x = 0;
    for (; x + 8 <= ow; x += 8) {
      __m256i i0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c.i0.data() + x));
      __m256i i1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c.i1.data() + x));
      __m256 w0 = _mm256_loadu_ps(c.w0.data() + x), w1 = _mm256_loadu_ps(c.w1.data() + x);
      __m256 top = _mm256_fmadd_ps(_mm256_i32gather_ps(r0, i1, 4), w1, _mm256_mul_ps(_mm256_i32gather_ps(r0, i0, 4), w0));
      __m256 bot = _mm256_fmadd_ps(_mm256_i32gather_ps(r1, i1, 4), w1, _mm256_mul_ps(_mm256_i32gather_ps(r1, i0, 4), w0));
      _mm256_storeu_ps(dst + x, _mm256_fmadd_ps(bot, vy1, _mm256_mul_ps(top, vy0)));
    }
    for (; x < ow; ++x) {
      float top = r0[c.i0[x]] * c.w0[x] + r0[c.i1[x]] * c.w1[x];
      float bot = r1[c.i0[x]] * c.w0[x] + r1[c.i1[x]] * c.w1[x];
      dst[x] = top * wy0 + bot * wy1;
    }
  }

  bool nearest_;
};

//! Whether the value of input i is known and its first two entries leave N and C unchanged
//! (`expect` gives the values meaning "unchanged"); true when unknown.
bool keepsBatchAndChannels(const LayerDesc& l, size_t i, double expectN, double expectC) {
  if (!l.present(i) || !l.inputs[i].value.valid() || l.inputs[i].value.count() < 2) return true;
  const HostTensor& v = l.inputs[i].value;
  return (expectN < 0 || v.getDouble(0) == expectN) && (expectC < 0 || v.getDouble(1) == expectC);
}

bool supportsNchw(const LayerDesc& l) {
  if (l.inputs.empty() || l.inputs[0].type != DataType::kFLOAT || l.inputs[0].dims.size() != 4) return false;
  std::string mode = l.attrs->getString("mode", "nearest");
  if (mode != "nearest" && mode != "linear") return false;
  if (l.op == "Upsample") return keepsBatchAndChannels(l, 1, 1.0, 1.0);
  if (l.attrs->getString("coordinate_transformation_mode", "") == "tf_crop_and_resize") return false;
  if (mode == "linear" && l.attrs->getInt("antialias", 0) != 0) return false;
  std::vector<int64_t> axes = l.attrs->getInts("axes");
  if (!axes.empty()) {
    for (int64_t a : axes)
      if (a != 2 && a != 3 && a != -1 && a != -2) return false;
    return true;
  }
  if (l.attrs->getString("keep_aspect_ratio_policy", "stretch") != "stretch") return false;
  const Dims& d = l.inputs[0].dims;
  return keepsBatchAndChannels(l, 2, 1.0, 1.0) &&
         keepsBatchAndChannels(l, 3, static_cast<double>(d[0]), static_cast<double>(d[1]));
}

std::unique_ptr<Kernel> createNchw(const LayerDesc& l) {
  return std::make_unique<ResizeNchwKernel>(l.attrs->getString("mode", "nearest") == "nearest");
}

}  // namespace

namespace cpu {
KernelFactory resizeNchwAvx2() { return {supportsNchw, createNchw}; }
}  // namespace cpu

}  // namespace kiln
