// Op definition for MaxRoiPool (opset 1; Fast R-CNN's ROI pooling, in old model-zoo files): for
// each roi [batch_index, x1, y1, x2, y2] (input pixels; times spatial_scale, rounded half away
// from zero, end inclusive), the feature map's channels max-pooled over a pooled_shape grid of
// bins, bin (i, j) covering rows floor(i * h / ph) .. ceil((i + 1) * h / ph) of the roi (bin sizes
// in float32, clamped to the map); an empty bin gives 0. ONNX Runtime computes it so (Caffe's
// ROIPooling). Output [num_rois, C, ph, pw].
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

void inferMaxRoiPool(LayerDesc& l) {
  requireInputs(l, 2, 2);
  const Dims &x = l.inputs[0].dims, &rois = l.inputs[1].dims;
  const DataType t = l.inputs[0].type;
  if (t != DataType::kFLOAT && t != DataType::kDOUBLE) opError(l, std::string("X must be float or double, got ") + toString(t));
  if (l.inputs[1].type != t) opError(l, "rois must have X's type");
  if (x.size() != 4) opError(l, "X must be [N, C, H, W], got " + toString(x));
  if (rois.size() != 2 || (rois[1] >= 0 && rois[1] != 5)) opError(l, "rois must be [num_rois, 5], got " + toString(rois));
  const std::vector<int64_t> pooled = l.attrs->getInts("pooled_shape");
  if (pooled.size() != 2 || pooled[0] < 1 || pooled[1] < 1) opError(l, "pooled_shape must be two positive values");
  const double scale = l.attrs->getFloat("spatial_scale", 1.f);
  if (!std::isfinite(scale)) opError(l, "spatial_scale must be finite");
  setOutput(l, 0, t, {rois[0], x[1], pooled[0], pooled[1]});
}

template <typename T>
void maxRoiPool(const LayerDesc& l, const KernelIO& io) {
  const Dims& xd = io.in[0].dims;
  const int64_t n = xd[0], c = xd[1], h = xd[2], w = xd[3], count = io.in[1].dims[0];
  const std::vector<int64_t> pooled = l.attrs->getInts("pooled_shape");
  const int64_t ph = pooled[0], pw = pooled[1];
  const float scale = l.attrs->getFloat("spatial_scale", 1.f);
  const T* x = io.in[0].as<const T>();
  const T* r = io.in[1].as<const T>();
  T* y = io.out[0].as<T>();
  for (int64_t k = 0; k < count; ++k) {
    const T* roi = r + k * 5;
    const double b = static_cast<double>(roi[0]);
    if (!(b >= 0 && b < static_cast<double>(n)))
      opError(l, "roi " + std::to_string(k) + " has batch index " + std::to_string(b) + ", out of range for " + std::to_string(n) + " images");
    const int64_t batch = static_cast<int64_t>(b);
    auto at = [&](int i) { return static_cast<int64_t>(std::round(static_cast<float>(roi[i]) * scale)); };
    const int64_t x1 = at(1), y1 = at(2), x2 = at(3), y2 = at(4);
    const float binH = static_cast<float>(std::max<int64_t>(y2 - y1 + 1, 1)) / static_cast<float>(ph);
    const float binW = static_cast<float>(std::max<int64_t>(x2 - x1 + 1, 1)) / static_cast<float>(pw);
    for (int64_t ch = 0; ch < c; ++ch) {
      const T* plane = x + (batch * c + ch) * h * w;
      T* out = y + (k * c + ch) * ph * pw;
      for (int64_t i = 0; i < ph; ++i) {
        const int64_t hs = std::clamp(static_cast<int64_t>(std::floor(static_cast<float>(i) * binH)) + y1, int64_t(0), h);
        const int64_t he = std::clamp(static_cast<int64_t>(std::ceil(static_cast<float>(i + 1) * binH)) + y1, int64_t(0), h);
        for (int64_t j = 0; j < pw; ++j) {
          const int64_t ws = std::clamp(static_cast<int64_t>(std::floor(static_cast<float>(j) * binW)) + x1, int64_t(0), w);
          const int64_t we = std::clamp(static_cast<int64_t>(std::ceil(static_cast<float>(j + 1) * binW)) + x1, int64_t(0), w);
          T m = (he <= hs || we <= ws) ? T(0) : std::numeric_limits<T>::lowest();
          for (int64_t yy = hs; yy < he; ++yy)
            for (int64_t xx = ws; xx < we; ++xx) m = std::max(m, plane[yy * w + xx]);
          out[i * pw + j] = m;
        }
      }
    }
  }
}

void refMaxRoiPool(const LayerDesc& l, const KernelIO& io) {
  if (io.in[0].type == DataType::kDOUBLE) maxRoiPool<double>(l, io);
  else maxRoiPool<float>(l, io);
}

}  // namespace

void registerMaxRoiPoolOps(OpRegistry& r) {
  OpDef d;
  d.name = "MaxRoiPool";
  d.infer = inferMaxRoiPool;
  d.ref = refMaxRoiPool;
  r.add(d);
}

}  // namespace kiln
