// Op definitions of the detection family: NonMaxSuppression and RoiAlign (ONNX semantics, as
// ONNX Runtime computes them). Registered from registerDetectionOps.
//
// NonMaxSuppression has a data-dependent output shape [num_selected, 3]: its shape inference
// computes the selection itself once boxes and scores are known (OpDef::inferComputesValues), so
// at run time the context reads them back and the layer is evaluated on the host on every backend
// (greedy NMS is sequential and tiny next to the network that scores the boxes).
// RoiAlign has a static shape [num_rois, C, output_height, output_width]; num_rois usually comes
// from a data-dependent selection upstream.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "ops/op_registry.h"
#include "ops/op_util.h"
#include "ops/roi_align.h"

namespace kiln {

namespace {

// ---------------------------------------------------------------- NonMaxSuppression

//! Element i of a float32/float64 tensor as float (NMS computes in float, as ONNX Runtime).
float floatAt(const TensorView& v, int64_t i) {
  return v.type == DataType::kDOUBLE ? static_cast<float>(v.as<const double>()[i]) : v.as<const float>()[i];
}

//! An optional scalar input (shape [] or [1]); `dflt` when omitted or empty.
double scalarInput(const LayerDesc& l, size_t i, double dflt) {
  if (!l.present(i)) return dflt;
  const HostTensor& v = knownValue(l, i);
  if (v.count() == 0) return dflt;
  if (v.count() != 1) opError(l, "input " + std::to_string(i) + " must hold one value, got shape " + toString(v.dims()));
  TensorView tv{const_cast<void*>(v.data()), v.type(), v.dims(), v.count()};
  switch (v.type()) {
    case DataType::kINT64: return static_cast<double>(tv.as<const int64_t>()[0]);
    case DataType::kINT32: return tv.as<const int32_t>()[0];
    case DataType::kFLOAT: return tv.as<const float>()[0];
    case DataType::kDOUBLE: return tv.as<const double>()[0];
    default: opError(l, "input " + std::to_string(i) + " has unsupported type " + toString(v.type()));
  }
}

struct Box {
  float x0, y0, x1, y1;  // x0 <= x1, y0 <= y1
};

Box boxAt(const TensorView& boxes, int64_t base, bool centerPoint) {
  const float a = floatAt(boxes, base), b = floatAt(boxes, base + 1), c = floatAt(boxes, base + 2), d = floatAt(boxes, base + 3);
  if (centerPoint) return Box{a - c / 2, b - d / 2, a + c / 2, b + d / 2};  // [x_center, y_center, width, height]
  return Box{std::min(b, d), std::min(a, c), std::max(b, d), std::max(a, c)};  // [y1, x1, y2, x2], any diagonal
}

//! Whether `b` overlaps the kept box `a` by more than the threshold (IoU); degenerate boxes suppress nothing.
bool suppresses(const Box& a, const Box& b, float iouThreshold) {
  const float areaA = (a.x1 - a.x0) * (a.y1 - a.y0), areaB = (b.x1 - b.x0) * (b.y1 - b.y0);
  if (areaA <= 0.f || areaB <= 0.f) return false;
  const float w = std::min(a.x1, b.x1) - std::max(a.x0, b.x0), h = std::min(a.y1, b.y1) - std::max(a.y0, b.y0);
  if (w <= 0.f || h <= 0.f) return false;
  const float inter = w * h, uni = areaA + areaB - inter;
  if (uni <= 0.f) return false;
  return inter / uni > iouThreshold;
}

void checkNmsInputs(const LayerDesc& l) {
  requireInputs(l, 2, 5);
  const Dims &b = l.inputs[0].dims, &s = l.inputs[1].dims;
  for (size_t i = 0; i < 2; ++i)
    if (l.inputs[i].type != DataType::kFLOAT && l.inputs[i].type != DataType::kDOUBLE)
      opError(l, std::string("boxes and scores must be float32 or float64, got ") + toString(l.inputs[i].type));
  if (b.size() != 3 || s.size() != 3) opError(l, "boxes must be [batches, boxes, 4] and scores [batches, classes, boxes]");
  if (b[2] >= 0 && b[2] != 4) opError(l, "boxes must have 4 coordinates in their last dim, got " + toString(b));
  if (b[0] >= 0 && s[0] >= 0 && b[0] != s[0]) opError(l, "boxes " + toString(b) + " and scores " + toString(s) + " have different batches");
  if (b[1] >= 0 && s[2] >= 0 && b[1] != s[2]) opError(l, "boxes " + toString(b) + " and scores " + toString(s) + " have different box counts");
  const int64_t center = l.attrs->getInt("center_point_box", 0);
  if (center != 0 && center != 1) opError(l, "center_point_box must be 0 or 1, got " + std::to_string(center));
}

//! Selected [batch, class, box] triples, in batch, class, then selection order.
std::vector<int64_t> selectBoxes(const LayerDesc& l, const TensorView& boxes, const TensorView& scores) {
  const int64_t batches = boxes.dims[0], n = boxes.dims[1], classes = scores.dims[1];
  const double maxOut = scalarInput(l, 2, 0);
  const float iouThreshold = static_cast<float>(scalarInput(l, 3, 0));
  const bool hasScoreThreshold = l.present(4) && knownValue(l, 4).count() > 0;
  const float scoreThreshold = static_cast<float>(scalarInput(l, 4, 0));
  if (iouThreshold < 0.f || iouThreshold > 1.f) opError(l, "iou_threshold must be in [0, 1], got " + std::to_string(iouThreshold));
  const bool center = l.attrs->getInt("center_point_box", 0) == 1;
  const int64_t limit = maxOut <= 0 ? 0 : static_cast<int64_t>(std::min<double>(maxOut, static_cast<double>(n)));
  std::vector<int64_t> out;
  std::vector<std::pair<float, int64_t>> cand;
  std::vector<Box> kept;
  for (int64_t b = 0; b < batches && limit > 0; ++b)
    for (int64_t c = 0; c < classes; ++c) {
      cand.clear();
      for (int64_t i = 0; i < n; ++i) {
        const float s = floatAt(scores, (b * classes + c) * n + i);
        if (!hasScoreThreshold || s > scoreThreshold) cand.emplace_back(s, i);
      }
      // Highest score first; equal scores keep the lower box index first.
      std::stable_sort(cand.begin(), cand.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
      kept.clear();
      for (const auto& [s, i] : cand) {
        if (static_cast<int64_t>(kept.size()) >= limit) break;
        const Box box = boxAt(boxes, (b * n + i) * 4, center);
        bool drop = false;
        for (const Box& k : kept) drop = drop || suppresses(k, box, iouThreshold);
        if (drop) continue;
        kept.push_back(box);
        out.insert(out.end(), {b, c, i});
      }
    }
  return out;
}

void inferNms(LayerDesc& l) {
  checkNmsInputs(l);
  for (size_t i = 0; i < l.inputs.size(); ++i)
    if (l.present(i) && !l.inputs[i].value.valid()) {
      setOutput(l, 0, DataType::kINT64, {-1, 3});  // data-dependent: known once boxes and scores are
      return;
    }
  auto view = [](const HostTensor& t) { return TensorView{const_cast<void*>(t.data()), t.type(), t.dims(), t.count()}; };
  const std::vector<int64_t> sel = selectBoxes(l, view(l.inputs[0].value), view(l.inputs[1].value));
  HostTensor out(DataType::kINT64, {static_cast<int64_t>(sel.size() / 3), 3});
  if (!sel.empty()) std::memcpy(out.data(), sel.data(), sel.size() * sizeof(int64_t));
  setOutput(l, 0, DataType::kINT64, out.dims());
  l.outputs[0].value = out;
}

void refNms(const LayerDesc& l, const KernelIO& io) {
  const std::vector<int64_t> sel = selectBoxes(l, io.in[0], io.in[1]);
  if (io.out[0].count != static_cast<int64_t>(sel.size()))
    throw UnsupportedError("layer '" + l.name + "' (NonMaxSuppression): output shape depends on the scores and was not resolved to it");
  if (!sel.empty()) std::memcpy(io.out[0].data, sel.data(), sel.size() * sizeof(int64_t));
}

// ---------------------------------------------------------------- RoiAlign

void normalizeRoiAlign(Network&, Layer& layer, int opset) {
  // Opset 10 had no coordinate_transformation_mode: it sampled as "output_half_pixel".
  if (opset < 16 && !layer.attrs.has("coordinate_transformation_mode"))
    layer.attrs.set("coordinate_transformation_mode", std::string("output_half_pixel"));
}

void inferRoiAlign(LayerDesc& l) {
  requireInputs(l, 3, 3);
  const Dims &x = l.inputs[0].dims, &rois = l.inputs[1].dims, &idx = l.inputs[2].dims;
  if (x.size() != 4) opError(l, "X must be 4-D [N, C, H, W], got " + toString(x));
  if (rois.size() != 2 || (rois[1] >= 0 && rois[1] != 4)) opError(l, "rois must be [num_rois, 4], got " + toString(rois));
  if (idx.size() != 1) opError(l, "batch_indices must be 1-D, got " + toString(idx));
  if (rois[0] >= 0 && idx[0] >= 0 && rois[0] != idx[0])
    opError(l, "rois " + toString(rois) + " and batch_indices " + toString(idx) + " disagree on the roi count");
  if (l.inputs[2].type != DataType::kINT64 && l.inputs[2].type != DataType::kINT32)
    opError(l, "batch_indices must be int64");
  const RoiAlignGeom g = roiAlignGeom(l, x.data());
  setOutput(l, 0, l.inputs[0].type, {rois[0] >= 0 ? rois[0] : idx[0], x[1], g.oh, g.ow});
}

template <typename T>
void roiAlign(const LayerDesc& l, const KernelIO& io) {
  const Dims& xd = io.in[0].dims;
  const RoiAlignGeom g = roiAlignGeom(l, xd.data());
  const int64_t n = xd[0], c = xd[1], rois = io.in[1].dims[0];
  const T* x = io.in[0].as<const T>();
  const T* r = io.in[1].as<const T>();
  T* y = io.out[0].as<T>();
  auto batchOf = [&](int64_t k) {
    return io.in[2].type == DataType::kINT32 ? io.in[2].as<const int32_t>()[k] : io.in[2].as<const int64_t>()[k];
  };
  for (int64_t k = 0; k < rois; ++k)
    if (batchOf(k) < 0 || batchOf(k) >= n)
      opError(l, "batch index " + std::to_string(batchOf(k)) + " is out of range for " + std::to_string(n) + " images");
  auto range = [&](int64_t begin, int64_t end) {  // over (roi, channel) planes
    for (int64_t kc = begin; kc < end; ++kc) {
      const int64_t k = kc / c, ch = kc % c;
      const double roi[4] = {static_cast<double>(r[k * 4]), static_cast<double>(r[k * 4 + 1]), static_cast<double>(r[k * 4 + 2]),
                             static_cast<double>(r[k * 4 + 3])};
      const T* plane = x + (batchOf(k) * c + ch) * g.h * g.w;
      T* out = y + kc * g.oh * g.ow;
      for (int64_t ph = 0; ph < g.oh; ++ph)
        for (int64_t pw = 0; pw < g.ow; ++pw)
          out[ph * g.ow + pw] = static_cast<T>(roiAlignOne(g, roi, ph, pw, [plane](int64_t j) { return static_cast<double>(plane[j]); }));
    }
  };
  if (io.pool) io.pool->parallelFor(rois * c, 1, range);  // host evaluation has no pool
  else range(0, rois * c);
}

void refRoiAlign(const LayerDesc& l, const KernelIO& io) {
  if (io.in[0].type == DataType::kDOUBLE) roiAlign<double>(l, io);
  else if (io.in[0].type == DataType::kFLOAT) roiAlign<float>(l, io);
  else opError(l, std::string("X must be a float type, got ") + toString(io.in[0].type));
}

}  // namespace

RoiAlignGeom roiAlignGeom(const LayerDesc& l, const int64_t* x) {
  RoiAlignGeom g;
  const std::string mode = l.attrs->getString("mode", "avg");
  if (mode != "avg" && mode != "max") opError(l, "mode must be 'avg' or 'max', got '" + mode + "'");
  g.max = mode == "max";
  const std::string ct = l.attrs->getString("coordinate_transformation_mode", "half_pixel");
  if (ct != "half_pixel" && ct != "output_half_pixel")
    opError(l, "coordinate_transformation_mode must be 'half_pixel' or 'output_half_pixel', got '" + ct + "'");
  g.halfPixel = ct == "half_pixel";
  g.oh = l.attrs->getInt("output_height", 1);
  g.ow = l.attrs->getInt("output_width", 1);
  g.sampling = l.attrs->getInt("sampling_ratio", 0);
  g.scale = l.attrs->getFloat("spatial_scale", 1.f);
  if (g.oh <= 0 || g.ow <= 0) opError(l, "output_height and output_width must be positive");
  if (g.sampling < 0) opError(l, "sampling_ratio must not be negative");
  if (!std::isfinite(g.scale)) opError(l, "spatial_scale must be finite");
  g.h = x[2];
  g.w = x[3];
  return g;
}

void registerDetectionOps(OpRegistry& r) {
  OpDef nms;
  nms.name = "NonMaxSuppression";
  nms.infer = inferNms;
  nms.ref = refNms;
  nms.valueInputs = {0, 1, 2, 3, 4};
  nms.dataDependentShape = true;
  nms.inferComputesValues = true;
  nms.minOpset = 10;
  r.add(nms);

  OpDef roi;
  roi.name = "RoiAlign";
  roi.infer = inferRoiAlign;
  roi.ref = refRoiAlign;
  roi.normalize = normalizeRoiAlign;
  roi.minOpset = 10;
  r.add(roi);
}

}  // namespace kiln
