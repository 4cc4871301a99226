// Op definition for AffineGrid (opset 20): the sampling grid of an affine transform, GridSample's
// companion. theta (N, 2, 3) for 2-D or (N, 3, 4) for 3-D; size (a value input) = (N, C, H, W) or
// (N, C, D, H, W). grid[n, (d,) h, w] = theta[n] @ (x_w, y_h, (z_d,) 1), the base coordinates in
// [-1, 1]: with align_corners, -1 + 2 i / (size - 1) (the extreme pixels' centres; -1 for a size
// of 1), without, -1 + (2 i + 1) / size (the pixels' centres). Output (N, H, W, 2) or
// (N, D, H, W, 3). Reference kernel in float32 / float64.
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

void inferAffineGrid(LayerDesc& l) {
  requireInputs(l, 2, 2);
  const Dims &theta = l.inputs[0].dims, &size = l.inputs[1].dims;
  if (!isFloat(l.inputs[0].type)) opError(l, std::string("theta must be a float type, got ") + toString(l.inputs[0].type));
  if (l.inputs[1].type != DataType::kINT64) opError(l, "size must be int64");
  if (theta.size() != 3) opError(l, "theta must be rank 3, (N, 2, 3) or (N, 3, 4), got " + toString(theta));
  if (size.size() != 1) opError(l, "size must be rank 1, got " + toString(size));
  int64_t spatial = size[0] >= 0 ? size[0] - 2 : (theta[1] >= 0 ? theta[1] : -1);
  if (spatial < 0) opError(l, "the number of spatial axes must be known when building (size's length or theta's shape)");
  if (spatial != 2 && spatial != 3) opError(l, "only 2-D and 3-D grids exist, size has " + std::to_string(spatial + 2) + " values");
  if ((theta[1] >= 0 && theta[1] != spatial) || (theta[2] >= 0 && theta[2] != spatial + 1))
    opError(l, "theta " + toString(theta) + " does not match a " + std::to_string(spatial) + "-D size");
  Dims out(static_cast<size_t>(spatial) + 2, -1);
  out[0] = theta[0];
  out.back() = spatial;
  const HostTensor& v = l.inputs[1].value;
  if (v.valid()) {
    if (theta[0] >= 0 && v.getInt(0) != theta[0]) opError(l, "size's N differs from theta's batch");
    for (int64_t k = 0; k < spatial; ++k) {
      out[1 + k] = v.getInt(2 + k);
      if (out[1 + k] < 0) opError(l, "size values must not be negative");
    }
    out[0] = v.getInt(0);
  }
  setOutput(l, 0, l.inputs[0].type, out);
}

void refAffineGrid(const LayerDesc& l, const KernelIO& io) {
  const bool align = l.attrs->getInt("align_corners", 0) != 0;
  const Dims& out = io.out[0].dims;
  const int64_t n = out[0], s = static_cast<int64_t>(out.size()) - 2;  // spatial axes
  // sizes in x, y, z order (the grid's last axis): W, H (, D)
  int64_t extent[3] = {1, 1, 1};
  for (int64_t k = 0; k < s; ++k) extent[k] = out[s - k];
  int64_t points = 1;
  for (int64_t k = 0; k < s; ++k) points *= extent[k];
  auto base = [align](int64_t i, int64_t size) {
    if (align) return size > 1 ? -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(size - 1) : -1.0;
    return -1.0 + (2.0 * static_cast<double>(i) + 1.0) / static_cast<double>(size);
  };
  dispatchType<kRefFloatTypes>(io.in[0].type, [&](auto tag) {
    using T = decltype(tag);
    const T* theta = io.in[0].as<const T>();
    T* grid = io.out[0].as<T>();
    for (int64_t b = 0; b < n; ++b) {
      const T* th = theta + b * s * (s + 1);
      for (int64_t p = 0; p < points; ++p) {
        double c[4] = {0, 0, 0, 1};  // x, y, (z,) 1
        for (int64_t q = p, k = 0; k < s; ++k) c[k] = base(q % extent[k], extent[k]), q /= extent[k];
        c[s] = 1.0;
        for (int64_t r = 0; r < s; ++r) {
          double acc = 0;
          for (int64_t k = 0; k <= s; ++k) acc += static_cast<double>(th[r * (s + 1) + k]) * c[k];
          grid[(b * points + p) * s + r] = static_cast<T>(acc);
        }
      }
    }
  }, "AffineGrid");
}

}  // namespace

void registerAffineGridOps(OpRegistry& r) {
  OpDef d;
  d.name = "AffineGrid";
  d.infer = inferAffineGrid;
  d.ref = refAffineGrid;
  d.valueInputs = {1};
  d.minOpset = 20;
  r.add(d);
}

}  // namespace kiln
