// Op definition (shape inference + reference kernel): GridSample (opsets 16 and 20; 1-3 spatial
// axes; linear / nearest / cubic; zeros / border / reflection padding; align_corners). The
// per-point sampling lives in ops/grid_sample.h, shared with the CUDA kernel.
#include "ops/grid_sample.h"

#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

GridSampleGeom gridSampleGeom(const LayerDesc& l, const Dims& x) {
  GridSampleGeom G;
  G.spatial = static_cast<int>(x.size()) - 2;
  for (int k = 0; k < G.spatial; ++k) G.in[3 - G.spatial + k] = x[2 + k];
  const std::string mode = l.attrs->getString("mode", "linear");
  if (mode == "linear" || mode == "bilinear") G.mode = GridMode::kLinear;
  else if (mode == "nearest") G.mode = GridMode::kNearest;
  else if (mode == "cubic" || mode == "bicubic") G.mode = GridMode::kCubic;
  else opError(l, "mode must be linear, nearest or cubic, got '" + mode + "'");
  const std::string pad = l.attrs->getString("padding_mode", "zeros");
  if (pad == "zeros") G.pad = GridPad::kZeros;
  else if (pad == "border") G.pad = GridPad::kBorder;
  else if (pad == "reflection") G.pad = GridPad::kReflection;
  else opError(l, "padding_mode must be zeros, border or reflection, got '" + pad + "'");
  G.alignCorners = l.attrs->getInt("align_corners", 0) != 0;
  return G;
}

namespace {

void inferGridSample(LayerDesc& l) {
  requireInputs(l, 2, 2);
  const Dims &x = l.inputs[0].dims, &g = l.inputs[1].dims;
  if (x.size() < 3 || x.size() > 5) opError(l, "X must have 1 to 3 spatial axes, got " + toString(x));
  if (!isFloat(l.inputs[0].type) || !isFloat(l.inputs[1].type)) opError(l, "X and grid must be floating-point tensors");
  if (g.size() != x.size()) opError(l, "grid must have X's rank, got " + toString(g));
  const int64_t s = static_cast<int64_t>(x.size()) - 2;
  if (g.back() >= 0 && g.back() != s) opError(l, "grid's last dimension must be " + std::to_string(s) + ", got " + toString(g));
  if (x[0] >= 0 && g[0] >= 0 && x[0] != g[0]) opError(l, "X and grid have different batch sizes");
  gridSampleGeom(l, x);
  Dims out{x[0] >= 0 ? x[0] : g[0], x[1]};
  out.insert(out.end(), g.begin() + 1, g.end() - 1);
  setOutput(l, 0, l.inputs[0].type, out);
}

void refGridSample(const LayerDesc& l, const KernelIO& io) {
  const Dims& x = io.in[0].dims;
  const GridSampleGeom G = gridSampleGeom(l, x);
  const int s = G.spatial;
  const int64_t n = x[0], c = x[1], inPlane = volume(Dims(x.begin() + 2, x.end()));
  const int64_t outPlane = c == 0 || n == 0 ? 0 : io.out[0].count / (n * c);
  auto run = [&](auto xt, auto gt) {
    using TX = decltype(xt);
    using TG = decltype(gt);
    const TX* X = io.in[0].as<const TX>();
    const TG* grid = io.in[1].as<const TG>();
    TX* Y = io.out[0].as<TX>();
    for (int64_t b = 0; b < n; ++b)
      for (int64_t p = 0; p < outPlane; ++p) {
        double g[3];
        for (int k = 0; k < s; ++k) g[k] = static_cast<double>(grid[(b * outPlane + p) * s + k]);
        for (int64_t ch = 0; ch < c; ++ch) {
          const TX* plane = X + (b * c + ch) * inPlane;
          Y[(b * c + ch) * outPlane + p] =
              static_cast<TX>(gridSampleOne(G, g, [plane](int64_t i) { return static_cast<double>(plane[i]); }));
        }
      }
  };
  auto withGrid = [&](auto xt) {
    if (io.in[1].type == DataType::kDOUBLE) run(xt, double{});
    else if (io.in[1].type == DataType::kFLOAT) run(xt, float{});
    else throw UnsupportedError("GridSample: grid type " + std::string(toString(io.in[1].type)) + " on the CPU");
  };
  if (io.in[0].type == DataType::kDOUBLE) withGrid(double{});
  else if (io.in[0].type == DataType::kFLOAT) withGrid(float{});
  else throw UnsupportedError("GridSample: X type " + std::string(toString(io.in[0].type)) + " on the CPU");
}

}  // namespace

void registerGridSampleOps(OpRegistry& r) {
  OpDef d;
  d.name = "GridSample";
  d.infer = inferGridSample;
  d.ref = refGridSample;
  d.minOpset = 16;
  r.add(d);
}

}  // namespace kiln
