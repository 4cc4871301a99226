// Op definition for DeformConv (opsets 19, 22): deformable 2-D convolution. Kernel tap (a, b) of
// output pixel (i, j) reads X bilinearly at
//   (i * stride_h - pad_top + a * dilation_h + offset_h, j * stride_w - pad_left + b * dilation_w + offset_w)
// (zero outside the image), scaled by the mask (default 1), then the taps are weighted by W as a
// grouped convolution and B added. offset (N, offset_group * kH * kW * 2, oH, oW) holds (dh, dw)
// per tap and offset group, mask (N, offset_group * kH * kW, oH, oW); the input channels split
// into offset_group consecutive sets sharing their offsets. Reference kernel in float32 / float64;
// kiln supports 2 spatial axes (the models that use it).
#include <cmath>
#include <vector>

#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

struct DeformGeom {
  int64_t group = 1, offsetGroup = 1;
  int64_t kernel[2] = {0, 0}, stride[2] = {1, 1}, dilation[2] = {1, 1}, padBegin[2] = {0, 0}, padEnd[2] = {0, 0};
};

DeformGeom deformGeom(const LayerDesc& l) {
  DeformGeom g;
  const Dims &x = l.inputs[0].dims, &w = l.inputs[1].dims;
  if (x.size() != 4) throw UnsupportedError(l.name + " (DeformConv): kiln supports 2 spatial axes, X is " + toString(x));
  if (w.size() != 4) opError(l, "W must be rank 4 (M, C / group, kH, kW), got " + toString(w));
  g.group = l.attrs->getInt("group", 1);
  g.offsetGroup = l.attrs->getInt("offset_group", 1);
  if (g.group < 1 || g.offsetGroup < 1) opError(l, "group and offset_group must be positive");
  auto pair = [&](const char* name, int64_t dflt, size_t count) {
    std::vector<int64_t> v = l.attrs->getInts(name, std::vector<int64_t>(count, dflt));
    if (v.size() != count) opError(l, std::string(name) + " must have " + std::to_string(count) + " values");
    return v;
  };
  std::vector<int64_t> ks = l.attrs->has("kernel_shape") ? pair("kernel_shape", 0, 2) : std::vector<int64_t>{w[2], w[3]};
  const std::vector<int64_t> st = pair("strides", 1, 2), di = pair("dilations", 1, 2), pads = pair("pads", 0, 4);
  for (int a = 0; a < 2; ++a) {
    if (ks[a] < 0 || (w[2 + a] >= 0 && ks[a] != w[2 + a])) opError(l, "kernel_shape must match W's spatial dims");
    g.kernel[a] = ks[a];
    g.stride[a] = st[a];
    g.dilation[a] = di[a];
    g.padBegin[a] = pads[a];
    g.padEnd[a] = pads[2 + a];
    if (st[a] < 1 || di[a] < 1 || pads[a] < 0 || pads[2 + a] < 0) opError(l, "strides and dilations must be positive, pads not negative");
  }
  return g;
}

void inferDeformConv(LayerDesc& l) {
  requireInputs(l, 3, 5);
  const DataType t = l.inputs[0].type;
  if (!isFloat(t)) opError(l, std::string("X must be a float type, got ") + toString(t));
  for (size_t i = 1; i < l.inputs.size(); ++i)
    if (l.present(i) && l.inputs[i].type != t) opError(l, "all inputs must have X's type");
  const DeformGeom g = deformGeom(l);
  const Dims &x = l.inputs[0].dims, &w = l.inputs[1].dims, &off = l.inputs[2].dims;
  if (w[0] >= 0 && w[0] % g.group != 0) opError(l, "W's output channels are not a multiple of group");
  if (x[1] >= 0 && w[1] >= 0 && x[1] != w[1] * g.group) opError(l, "X's channels must be W's dim 1 times group");
  if (x[1] >= 0 && x[1] % g.offsetGroup != 0) opError(l, "X's channels are not a multiple of offset_group");
  Dims out{x[0], w[0], -1, -1};
  for (int a = 0; a < 2; ++a) {
    if (x[2 + a] < 0) continue;
    const int64_t span = (g.kernel[a] - 1) * g.dilation[a] + 1, padded = x[2 + a] + g.padBegin[a] + g.padEnd[a];
    if (padded < span) opError(l, "the kernel is larger than the padded input");
    out[2 + a] = (padded - span) / g.stride[a] + 1;
  }
  const int64_t taps = g.kernel[0] * g.kernel[1];
  if (off.size() != 4 || (off[1] >= 0 && off[1] != g.offsetGroup * taps * 2))
    opError(l, "offset must be (N, offset_group * kH * kW * 2, oH, oW), got " + toString(off));
  for (int a = 0; a < 2; ++a)
    if (off[2 + a] >= 0 && out[2 + a] >= 0 && off[2 + a] != out[2 + a])
      opError(l, "offset's spatial dims " + toString(off) + " differ from the output's " + toString(out));
  if (l.present(3) && (l.inputs[3].dims.size() != 1 || (w[0] >= 0 && l.inputs[3].dims[0] >= 0 && l.inputs[3].dims[0] != w[0])))
    opError(l, "B must be (M), got " + toString(l.inputs[3].dims));
  if (l.present(4)) {
    const Dims& m = l.inputs[4].dims;
    if (m.size() != 4 || (m[1] >= 0 && m[1] != g.offsetGroup * taps)) opError(l, "mask must be (N, offset_group * kH * kW, oH, oW), got " + toString(m));
  }
  setOutput(l, 0, t, out);
}

// Bilinear sample of a (h, w) plane at (y, x); taps outside the plane read zero.
template <typename T>
double bilinear(const T* plane, int64_t h, int64_t w, double y, double x) {
  const double fy = std::floor(y), fx = std::floor(x);
  const int64_t y0 = static_cast<int64_t>(fy), x0 = static_cast<int64_t>(fx);
  const double dy = y - fy, dx = x - fx;
  double v = 0;
  for (int64_t yy = 0; yy < 2; ++yy)
    for (int64_t xx = 0; xx < 2; ++xx) {
      const int64_t r = y0 + yy, c = x0 + xx;
      if (r < 0 || r >= h || c < 0 || c >= w) continue;
      v += (yy ? dy : 1 - dy) * (xx ? dx : 1 - dx) * static_cast<double>(plane[r * w + c]);
    }
  return v;
}

void refDeformConv(const LayerDesc& l, const KernelIO& io) {
  const DeformGeom g = deformGeom(l);
  const Dims &x = io.in[0].dims, &y = io.out[0].dims;
  const int64_t n = x[0], ic = x[1], ih = x[2], iw = x[3], oc = y[1], oh = y[2], ow = y[3];
  const int64_t kh = g.kernel[0], kw = g.kernel[1], taps = kh * kw;
  const int64_t icPerGroup = ic / g.group, ocPerGroup = oc / g.group, icPerOffsetGroup = ic / g.offsetGroup;
  const bool hasBias = io.in.size() > 3 && io.in[3].data, hasMask = io.in.size() > 4 && io.in[4].data;
  dispatchType<kRefFloatTypes>(io.in[0].type, [&](auto tag) {
    using T = decltype(tag);
    const T* X = io.in[0].as<const T>();
    const T* W = io.in[1].as<const T>();
    const T* off = io.in[2].as<const T>();
    const T* bias = hasBias ? io.in[3].as<const T>() : nullptr;
    const T* mask = hasMask ? io.in[4].as<const T>() : nullptr;
    T* Y = io.out[0].as<T>();
    io.pool->parallelFor(n * oh, 1, [&](int64_t begin, int64_t end) {
      // The sampled, masked taps of one output pixel: cols[c * taps + t].
      std::vector<double> cols(static_cast<size_t>(ic * taps));
      for (int64_t ni = begin; ni < end; ++ni) {
        const int64_t b = ni / oh, i = ni % oh;
        for (int64_t j = 0; j < ow; ++j) {
          for (int64_t c = 0; c < ic; ++c) {
            const int64_t og = c / icPerOffsetGroup;
            const T* plane = X + (b * ic + c) * ih * iw;
            for (int64_t t = 0; t < taps; ++t) {
              const int64_t a = t / kw, bb = t % kw, ch = (og * taps + t) * 2;
              const double dy = static_cast<double>(off[((b * g.offsetGroup * taps * 2 + ch) * oh + i) * ow + j]);
              const double dx = static_cast<double>(off[((b * g.offsetGroup * taps * 2 + ch + 1) * oh + i) * ow + j]);
              const double m = mask ? static_cast<double>(mask[((b * g.offsetGroup * taps + og * taps + t) * oh + i) * ow + j]) : 1.0;
              const double py = static_cast<double>(i * g.stride[0] - g.padBegin[0] + a * g.dilation[0]) + dy;
              const double px = static_cast<double>(j * g.stride[1] - g.padBegin[1] + bb * g.dilation[1]) + dx;
              cols[c * taps + t] = m * bilinear(plane, ih, iw, py, px);
            }
          }
          for (int64_t o = 0; o < oc; ++o) {
            const int64_t grp = o / ocPerGroup;
            double acc = bias ? static_cast<double>(bias[o]) : 0.0;
            for (int64_t c = 0; c < icPerGroup; ++c) {
              const T* wk = W + (o * icPerGroup + c) * taps;
              const double* col = &cols[(grp * icPerGroup + c) * taps];
              for (int64_t t = 0; t < taps; ++t) acc += static_cast<double>(wk[t]) * col[t];
            }
            Y[((b * oc + o) * oh + i) * ow + j] = static_cast<T>(acc);
          }
        }
      }
    });
  }, "DeformConv");
}

}  // namespace

void registerDeformConvOps(OpRegistry& r) {
  OpDef d;
  d.name = "DeformConv";
  d.infer = inferDeformConv;
  d.ref = refDeformConv;
  d.minOpset = 19;
  r.add(d);
}

}  // namespace kiln
