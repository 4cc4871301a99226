// RoiAlign's value at one output element, shared by the CPU reference (ops/detection.cpp) and the
// CUDA kernel (backends/cuda/roi_align_cuda.cu): ONNX Runtime's sampling step for step. The roi is
// scaled (and shifted by half a pixel in "half_pixel" mode; "output_half_pixel", opset 10's only mode,
// also makes it at least 1x1), each bin is sampled on a grid of sampling_ratio (or ceil(roi / bins))
// points per axis, each point interpolated bilinearly (points more than a pixel outside the map
// count as 0), and the bin is their mean ("avg") or the largest weighted corner ("max").
#pragma once
#include <cmath>
#include <cstdint>

#include "core/host_device.h"

namespace kiln {

struct RoiAlignGeom {
  bool max = false, halfPixel = true;
  int64_t oh = 1, ow = 1, sampling = 0;
  float scale = 1.f;
  int64_t h = 1, w = 1;  //!< the feature map's spatial dims
};

struct LayerDesc;
//! The attributes of a RoiAlign layer over X of dims x [N, C, H, W], validated (ops/detection.cpp).
RoiAlignGeom roiAlignGeom(const LayerDesc& l, const int64_t* x);

//! The bin (ph, pw) of the roi r = {x1, y1, x2, y2} (in input coordinates); at(j) reads the plane's
//! element j (row-major h x w).
template <typename At>
KILN_HOST_DEVICE double roiAlignOne(const RoiAlignGeom& g, const double r[4], int64_t ph, int64_t pw, At at) {
  const double offset = g.halfPixel ? 0.5 : 0.0;
  const double x0 = r[0] * g.scale - offset, y0 = r[1] * g.scale - offset;
  double rw = r[2] * g.scale - offset - x0, rh = r[3] * g.scale - offset - y0;
  if (!g.halfPixel) {
    rw = rw > 1.0 ? rw : 1.0;
    rh = rh > 1.0 ? rh : 1.0;
  }
  const double bh = rh / static_cast<double>(g.oh), bw = rw / static_cast<double>(g.ow);
  const int64_t gh = g.sampling > 0 ? g.sampling : static_cast<int64_t>(ceil(rh / static_cast<double>(g.oh)));
  const int64_t gw = g.sampling > 0 ? g.sampling : static_cast<int64_t>(ceil(rw / static_cast<double>(g.ow)));
  const double count = static_cast<double>(gh * gw > 1 ? gh * gw : 1);
  double acc = 0;
  bool first = true;
  for (int64_t iy = 0; iy < gh; ++iy)
    for (int64_t ix = 0; ix < gw; ++ix) {
      double y = y0 + ph * bh + (iy + 0.5) * bh / static_cast<double>(gh);
      double x = x0 + pw * bw + (ix + 0.5) * bw / static_cast<double>(gw);
      double v = 0;  // a point off the map: weights 0
      if (!(y < -1.0 || y > static_cast<double>(g.h) || x < -1.0 || x > static_cast<double>(g.w))) {
        y = y > 0 ? y : 0;
        x = x > 0 ? x : 0;
        int64_t ylo = static_cast<int64_t>(y), xlo = static_cast<int64_t>(x), yhi, xhi;
        if (ylo >= g.h - 1) {
          ylo = yhi = g.h - 1;
          y = static_cast<double>(ylo);
        } else {
          yhi = ylo + 1;
        }
        if (xlo >= g.w - 1) {
          xlo = xhi = g.w - 1;
          x = static_cast<double>(xlo);
        } else {
          xhi = xlo + 1;
        }
        const double ly = y - ylo, lx = x - xlo, hy = 1 - ly, hx = 1 - lx;
        const double a = hy * hx * at(ylo * g.w + xlo), b = hy * lx * at(ylo * g.w + xhi);
        const double c = ly * hx * at(yhi * g.w + xlo), d = ly * lx * at(yhi * g.w + xhi);
        if (g.max) {
          v = a > b ? a : b;
          v = v > c ? v : c;
          v = v > d ? v : d;
        } else {
          v = a + b + c + d;
        }
      }
      if (g.max) acc = first || v > acc ? v : acc;
      else acc += v;
      first = false;
    }
  return g.max ? acc : acc / count;
}

}  // namespace kiln
