// GridSample's sampling of one output point, shared by the CPU reference (ops/grid_sample.cpp)
// and the CUDA kernel (backends/cuda/grid_sample_cuda.cu) so that both follow the ONNX reference
// evaluator step for step: denormalize (align_corners), nearest rounding (half to even),
// out-of-border clamping / reflection of the coordinate, then separable linear or cubic
// (Keys, a = -0.75) interpolation whose taps read through the padding mode.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/host_device.h"

namespace kiln {

enum class GridMode : int { kLinear = 0, kNearest = 1, kCubic = 2 };
enum class GridPad : int { kZeros = 0, kBorder = 1, kReflection = 2 };

struct GridSampleGeom {
  int spatial = 2;         // 1..3 spatial axes
  int64_t in[3] = {1, 1, 1};  // input spatial dims (D, H, W order; unused leading ones are 1)
  GridMode mode = GridMode::kLinear;
  GridPad pad = GridPad::kZeros;
  bool alignCorners = false;
};

KILN_HOST_DEVICE inline double gsReflect(double x, double lo, double hi) {
  const double range = hi - lo;
  if (x < lo) {
    const double dx = lo - x;
    const int64_t n = static_cast<int64_t>(dx / range);
    const double r = dx - n * range;
    return n % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    const double dx = x - hi;
    const int64_t n = static_cast<int64_t>(dx / range);
    const double r = dx - n * range;
    return n % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}

//! Index i along an axis of size d through the padding mode; -1 for a zero (outside, zeros mode).
KILN_HOST_DEVICE inline int64_t gsTap(int64_t i, int64_t d, GridPad pad, double lo, double hi) {
  if (pad == GridPad::kZeros) return i >= 0 && i < d ? i : -1;
  if (pad == GridPad::kBorder) return i < 0 ? 0 : (i > d - 1 ? d - 1 : i);
  return static_cast<int64_t>(gsReflect(static_cast<double>(i), lo, hi));
}

KILN_HOST_DEVICE inline void gsCubic(double t, double c[4]) {
  const double a = -0.75;
  t = t < 0 ? -t : t;
  c[0] = ((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a;
  c[1] = ((a + 2) * t - (a + 3)) * t * t + 1;
  c[2] = ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1;
  c[3] = ((a * (2 - t) - 5 * a) * (2 - t) + 8 * a) * (2 - t) - 4 * a;
}

//! The value at normalized grid coordinates g[0..spatial) (x = W first, as in the grid tensor) of
//! one input plane read through `at(linear index)`.
template <typename At>
KILN_HOST_DEVICE double gridSampleOne(const GridSampleGeom& G, const double* g, At at) {
  const int s = G.spatial;
  double x[3], lo[3], hi[3];
  int64_t dims[3];
  for (int k = 0; k < s; ++k) {
    const int64_t d = G.in[3 - s + k];
    dims[k] = d;
    const double n = g[s - 1 - k];  // the grid lists W first
    double v = G.alignCorners ? (n + 1) / 2.0 * (d - 1) : ((n + 1) * d - 1) / 2.0;
    v = static_cast<float>(v);  // the reference keeps coordinates in float32
    if (G.mode == GridMode::kNearest) v = static_cast<float>(rint(static_cast<float>(v)));
    lo[k] = G.alignCorners ? 0.0 : -0.5;
    hi[k] = G.alignCorners ? d - 1.0 : d - 0.5;
    if (v < lo[k] || v > hi[k]) {
      if (G.pad == GridPad::kBorder) v = v < 0 ? 0 : (v > d - 1 ? d - 1.0 : v);
      else if (G.pad == GridPad::kReflection) v = static_cast<float>(gsReflect(v, lo[k], hi[k]));
    }
    x[k] = v;
  }
  if (G.mode == GridMode::kNearest) {
    int64_t idx = 0;
    for (int k = 0; k < s; ++k) {
      const int64_t i = gsTap(static_cast<int64_t>(static_cast<int32_t>(x[k])), dims[k], G.pad, lo[k], hi[k]);
      if (i < 0) return 0.0;
      idx = idx * dims[k] + i;
    }
    return at(idx);
  }
  const int taps = G.mode == GridMode::kLinear ? 2 : 4;
  int64_t base[3];
  double w[3][4];
  for (int k = 0; k < s; ++k) {
    const double f = floor(x[k]);
    const double t = x[k] - f;
    base[k] = static_cast<int64_t>(f) - (taps == 4 ? 1 : 0);
    if (taps == 2) {
      w[k][0] = 1 - t;
      w[k][1] = t;
    } else {
      gsCubic(t, w[k]);
    }
  }
  double sum = 0;
  int64_t corners = 1;
  for (int k = 0; k < s; ++k) corners *= taps;
  for (int64_t c = 0; c < corners; ++c) {  // every combination of taps; the last axis varies fastest
    int64_t rem = c, tap[3];
    double weight = 1;
    bool zero = false;
    for (int k = s - 1; k >= 0; --k) {
      const int o = static_cast<int>(rem % taps);
      rem /= taps;
      weight *= w[k][o];
      tap[k] = gsTap(base[k] + o, dims[k], G.pad, lo[k], hi[k]);
      zero = zero || tap[k] < 0;
    }
    if (zero) continue;  // a zeros-padding tap contributes nothing
    int64_t idx = 0;
    for (int k = 0; k < s; ++k) idx = idx * dims[k] + tap[k];
    sum += weight * at(idx);
  }
  return sum;
}

struct LayerDesc;
//! The geometry of a GridSample layer for input dims x (throws kiln::Error on bad attributes).
GridSampleGeom gridSampleGeom(const LayerDesc& l, const std::vector<int64_t>& x);

}  // namespace kiln
